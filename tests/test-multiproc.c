/* SPDX-License-Identifier: MIT */
/*
 * Many takers, one segment, the real clock: PROCS processes (forked with the
 * handle already open) x THREADS threads x PER_THREAD IDs, while this process
 * switches the segment to a new worker every few ms.  Every ID is kept and
 * checked: no duplicate, strictly increasing within each thread, and each
 * decodes to a worker that was published.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "barrier.h"
#include "helpers.h"
#include "snowid.h"

#define PROCS 2
#define THREADS 2
#define PER_THREAD 1000000
#define TOTAL ((size_t)PROCS * THREADS * PER_THREAD)
#define BATCH 64

static const char *inst;
static uint64_t *ids;          /* shared with the children */
static _Atomic uint32_t *done; /* children finished */
static snowid *handle;

struct worker_arg {
        unsigned slot;
};

static void *taker(void *p)
{
        unsigned slot = ((struct worker_arg *)p)->slot;
        uint64_t *out = ids + (size_t)slot * PER_THREAD;
        /* even slots take one at a time, odd ones in batches */
        for (size_t i = 0; i < PER_THREAD;) {
                int r;
                if (slot % 2 == 0 || PER_THREAD - i < BATCH)
                        r = snowid_next(handle, &out[i]), i += r == 0;
                else
                        r = snowid_next_batch(handle, &out[i], BATCH), i += r == 0 ? BATCH : 0;
                if (r < 0 && r != -EAGAIN)
                        return (void *)(intptr_t)r;
        }
        return NULL;
}

static int child(unsigned proc)
{
        pthread_t t[THREADS];
        struct worker_arg args[THREADS];
        for (unsigned i = 0; i < THREADS; i++) {
                args[i].slot = proc * THREADS + i;
                if (pthread_create(&t[i], NULL, taker, &args[i]) != 0)
                        return 20;
        }
        int status = 0;
        for (unsigned i = 0; i < THREADS; i++) {
                void *ret;
                pthread_join(t[i], &ret);
                if (ret)
                        status = 21;
        }
        atomic_fetch_add(done, 1);
        return status;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static void test_many_takers(void **state)
{
        (void)state;
        struct shm_pub *pub;
        inst = test_instance("multiproc");
        (void)inst;
        assert_int_equal(test_pub_open(inst, &pub), 0);

        snowid_layout l;
        snowid_layout_default(&l);
        int64_t offset = shm_offset_for_wall(l.epoch_ms);
        uint64_t now_ms = (uint64_t)((shm_monotonic_ns() + offset) / 1000000);
        uint32_t worker = 1;
        struct shm_publication p = test_publication(worker, now_ms, now_ms + 600000, offset);
        assert_int_equal(shm_pub_switch(pub, &p), 0);

        ids = mmap(NULL, TOTAL * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        done = mmap(NULL, sizeof(*done), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_ptr_not_equal(ids, MAP_FAILED);
        assert_ptr_not_equal(done, MAP_FAILED);
        assert_int_equal(snowid_open(inst, &handle), 0);
        snowid_set_max_wait(handle, 5000000);
        /* the handle is open; the switches below need no socket */
        test_pub_stop_server(pub);

        pid_t pids[PROCS];
        for (unsigned i = 0; i < PROCS; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0)
                        _exit(child(i));
        }
        /* switch workers while they run: 1, 2, 3, ... each fresh */
        while (atomic_load(done) < PROCS) {
                /* a child that died fails the test, never hangs it */
                int status;
                pid_t gone = waitpid(-1, &status, WNOHANG);
                if (gone > 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
                        fail_msg("child %d failed (status %d)", (int)gone, status);
                for (unsigned i = 0; gone > 0 && i < PROCS; i++)
                        if (pids[i] == gone)
                                pids[i] = 0; /* reaped: it exited 0 */
                struct timespec ts = {.tv_nsec = 20 * 1000000};
                nanosleep(&ts, NULL);
                if (worker < 1023) {
                        now_ms = (uint64_t)((shm_monotonic_ns() + offset) / 1000000);
                        p = test_publication(++worker, now_ms, now_ms + 600000, offset);
                        p.follow = 1;
                        assert_int_equal(shm_pub_switch(pub, &p), 0);
                }
        }
        for (unsigned i = 0; i < PROCS; i++) {
                int status;
                if (!pids[i])
                        continue;
                assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
        print_message("%zu IDs from %u workers\n", TOTAL, worker);
        assert_true(worker > 2); /* switches really happened during the run */

        for (unsigned t = 0; t < PROCS * THREADS; t++) {
                const uint64_t *out = ids + (size_t)t * PER_THREAD;
                for (size_t i = 1; i < PER_THREAD; i++)
                        if (out[i] <= out[i - 1])
                                fail_msg("thread %u: ID %zu (%llu) <= ID %zu (%llu)", t, i,
                                         (unsigned long long)out[i], i - 1,
                                         (unsigned long long)out[i - 1]);
        }
        for (size_t i = 0; i < TOTAL; i++) {
                snowid_parts parts;
                assert_int_equal(snowid_decode(&l, ids[i], &parts), 0);
                if (parts.worker < 1 || parts.worker > worker)
                        fail_msg("ID %llu has worker %u", (unsigned long long)ids[i], parts.worker);
        }
        qsort(ids, TOTAL, sizeof(uint64_t), cmp_u64);
        size_t dups = 0;
        for (size_t i = 1; i < TOTAL; i++)
                dups += ids[i] == ids[i - 1];
        assert_int_equal(dups, 0);

        snowid_close(handle);
        munmap(ids, TOTAL * sizeof(uint64_t));
        test_pub_close(pub);
        (void)inst;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_many_takers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
