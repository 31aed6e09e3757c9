/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"
#include "snowid.h"

int shm_instance_valid(const char *instance)
{
        if (!instance)
                return 0;
        size_t n = strlen(instance);
        if (n < 1 || n > SHM_INSTANCE_MAX)
                return 0;
        for (size_t i = 0; i < n; i++) {
                char c = instance[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-'))
                        return 0;
        }
        return 1;
}

const char *shm_instance_pick(const char *instance)
{
        if (!instance) {
                instance = secure_getenv("SNOWID_INSTANCE");
                if (!instance || !*instance)
                        instance = SHM_DEFAULT_INSTANCE;
        }
        return shm_instance_valid(instance) ? instance : NULL;
}

int shm_ctl_check(const struct shm_ctl *ctl, size_t mapped_size)
{
        if (mapped_size < sizeof(*ctl))
                return -EPROTO;
        if (ctl->magic != SHM_MAGIC_CTL || ctl->version != SHM_VERSION || ctl->size != sizeof(*ctl))
                return -EPROTO;
        return 0;
}

int shm_ctr_check(const struct shm_ctr *ctr, size_t mapped_size)
{
        if (mapped_size < sizeof(*ctr))
                return -EPROTO;
        if (ctr->magic != SHM_MAGIC_CTR || ctr->version != SHM_VERSION || ctr->size != sizeof(*ctr))
                return -EPROTO;
        return 0;
}
