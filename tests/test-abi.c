/* The shared library's versioned symbols: the status calls keep their
 * SNOWID_1.0 versions (the structs of then, without size) beside the
 * SNOWID_1.2 ones that programs built now bind to. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>

#include "snowid.h"

static int check(void *lib, const char *name)
{
        void *v10 = dlvsym(lib, name, "SNOWID_1.0"), *v12 = dlvsym(lib, name, "SNOWID_1.2");
        /* what this program was linked to: the default version */
        void *linked = dlsym(RTLD_DEFAULT, name);
        if (!v10 || !v12 || v10 == v12 || linked != v12) {
                fprintf(stderr, "%s: SNOWID_1.0 %p, SNOWID_1.2 %p, linked %p\n", name, v10, v12,
                        linked);
                return 1;
        }
        return 0;
}

int main(void)
{
        void *lib = dlopen("libsnowid.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (!lib) {
                fprintf(stderr, "libsnowid.so.1 is not loaded: %s\n", dlerror());
                return 1;
        }
        /* a reference, so that the link records the library and these versions */
        int (*status)(snowid *, snowid_status *) = snowid_get_status;
        int (*stats)(snowid *, snowid_host_stats *) = snowid_get_host_stats;
        int r = check(lib, "snowid_get_status") | check(lib, "snowid_get_host_stats");
        /* and the UUID calls have their one version */
        r |= !dlvsym(lib, "snowid_next_uuid7", "SNOWID_1.1");
        r |= !dlvsym(lib, "snowid_next", "SNOWID_1.0");
        r |= dlvsym(lib, "snowid_next", "SNOWID_1.2") != NULL;
        snowid_status st = SNOWID_STATUS_INIT;
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        r |= status(NULL, &st) >= 0 || stats(NULL, &hs) >= 0;
        return r;
}
