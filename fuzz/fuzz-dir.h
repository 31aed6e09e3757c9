/* SPDX-License-Identifier: MIT */
/* Shared by the fuzzers: a runtime directory of the process's own (the lock
 * and the socket live there), mode 0755 as snowidd and its clients want it,
 * emptied and removed at exit. */
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir_path[64];

static inline void fuzz_dir_remove(void)
{
        DIR *d = opendir(fuzz_dir_path);
        if (!d)
                return;
        for (struct dirent *e; (e = readdir(d));)
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
        rmdir(fuzz_dir_path);
}

static inline const char *fuzz_dir(void)
{
        if (!fuzz_dir_path[0]) {
                snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "/tmp/snowid-fuzz-XXXXXX");
                if (!mkdtemp(fuzz_dir_path) || chmod(fuzz_dir_path, 0755) < 0)
                        abort();
                atexit(fuzz_dir_remove);
        }
        return fuzz_dir_path;
}
