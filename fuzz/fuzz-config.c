/* SPDX-License-Identifier: MIT */
/*
 * The config file and the command line.  Input: the file's text, then two
 * NUL bytes, then flags separated by NUL bytes.  settings_load() must accept
 * or refuse every input with a message, never crash or leak, and what it
 * accepts must pass the checks it promises (bounds between settings).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

enum { MAX_ARGS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const uint8_t *sep = memmem(data, size, "\0\0", 2);
        size_t file_len = sep ? (size_t)(sep - data) : size;
        int fd = memfd_create("snowidd.conf", MFD_CLOEXEC);
        if (fd < 0 || write(fd, data, file_len) != (ssize_t)file_len)
                abort();
        char config[64];
        snprintf(config, sizeof(config), "/proc/self/fd/%d", fd);

        /* argv: snowidd --config FILE, then the flags from the input */
        char *argv[MAX_ARGS + 4] = {"snowidd", "--config", config};
        int argc = 3;
        char *flags = NULL;
        if (sep) {
                size_t n = size - file_len - 2;
                flags = malloc(n + 1);
                memcpy(flags, sep + 2, n);
                flags[n] = 0;
                for (char *p = flags; p <= flags + n && argc < MAX_ARGS; p += strlen(p) + 1)
                        argv[argc++] = p;
        }
        argv[argc] = NULL;

        struct settings s;
        int r = settings_load(&s, &settings_checks_postgres, argc, argv);
        if (r == 0) {
                /* what was accepted holds together */
                if (s.renew_ms * 2 > s.lease_ttl_s * 1000 || s.renew_ms * 2 > s.window_s * 1000 ||
                    s.store_timeout_ms > s.window_s * 1000 || s.n_etcd == 0 || !s.instance ||
                    !s.cluster || snowid_layout_check(&s.layout) < 0)
                        abort();
        }
        settings_free(&s);
        free(flags);
        close(fd);
        return 0;
}
