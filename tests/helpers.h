/* SPDX-License-Identifier: MIT */
/* Shared by the tests: a private instance name and a publisher on it. */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "publish.h"

static inline const char *test_instance(const char *what)
{
        static char name[SHM_INSTANCE_MAX + 1];
        snprintf(name, sizeof(name), "test-%s-%d", what, (int)getpid());
        return name;
}

static inline struct shm_publication test_publication(uint32_t worker, uint64_t start_ms,
                                                      uint64_t deadline, int64_t offset_ns)
{
        struct shm_publication p = {
                .worker = worker,
                .start_ms = start_ms,
                .deadline = deadline,
                .offset_ns = offset_ns,
                .lead_ms = 1,
        };
        snowid_layout_default(&p.layout);
        return p;
}
