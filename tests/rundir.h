/* SPDX-License-Identifier: MIT */
/* Shared by the tests and the fuzzers: a runtime directory of the process's
 * own (snowidd's lock and socket live there), mode 0755 as snowidd and its
 * clients want it, emptied and removed at exit. */
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char rundir_path[64];

static inline void rundir_remove(void)
{
        DIR *d = opendir(rundir_path);
        if (!d)
                return;
        for (struct dirent *e; (e = readdir(d));)
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
        rmdir(rundir_path);
}

/* The directory, made at the first call from template (mkdtemp's form, at
 * most 63 bytes); aborts if it cannot be made. */
static inline const char *rundir(const char *template)
{
        if (!rundir_path[0]) {
                snprintf(rundir_path, sizeof(rundir_path), "%s", template);
                if (!mkdtemp(rundir_path) || chmod(rundir_path, 0755) < 0)
                        abort();
                atexit(rundir_remove);
        }
        return rundir_path;
}
