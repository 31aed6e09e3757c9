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
#include "rundir.h"
#include "shm-server.h"

static inline const char *test_instance(const char *what)
{
        static char name[SHM_INSTANCE_MAX + 1];
        snprintf(name, sizeof(name), "test-%s-%d", what, (int)getpid());
        return name;
}

/* A runtime directory of this process's own (rundir.h), $SNOWID_RUNTIME_DIR
 * for its clients. */
static inline const char *test_dir(void)
{
        if (!rundir_path[0])
                setenv("SNOWID_RUNTIME_DIR", rundir("/tmp/snowid-t-XXXXXX"), 1);
        return rundir_path;
}

/* A publisher on instance, with a handshake server for its clients. */
#define TEST_PUBS_MAX 8
static struct {
        struct shm_pub *pub;
        struct shm_server *srv;
} test_pubs[TEST_PUBS_MAX];

static inline int test_pub_open(const char *instance, struct shm_pub **ret)
{
        int r = shm_pub_open(test_dir(), instance, -1, -1, ret);
        if (r < 0)
                return r;
        for (int i = 0; i < TEST_PUBS_MAX; i++)
                if (!test_pubs[i].pub) {
                        r = shm_server_start(*ret, test_dir(), instance, NULL, NULL,
                                             &test_pubs[i].srv);
                        if (r < 0)
                                abort();
                        test_pubs[i].pub = *ret;
                        return 0;
                }
        abort();
}

/* Stops p's handshake server (and its thread): before a fork whose children
 * start threads, which ThreadSanitizer cannot follow after a multi-threaded
 * fork.  Handles already open go on without it. */
static inline void test_pub_stop_server(struct shm_pub *p)
{
        for (int i = 0; i < TEST_PUBS_MAX; i++)
                if (p && test_pubs[i].pub == p)
                        test_pubs[i].srv = shm_server_stop(test_pubs[i].srv);
}

static inline struct shm_pub *test_pub_close(struct shm_pub *p)
{
        for (int i = 0; i < TEST_PUBS_MAX; i++)
                if (p && test_pubs[i].pub == p) {
                        test_pubs[i].srv = shm_server_stop(test_pubs[i].srv);
                        test_pubs[i].pub = NULL;
                }
        return shm_pub_close(p);
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
