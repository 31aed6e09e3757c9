/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock (shm/tsc.h, daemon/clock/tsc-cal.c, clock_ns() in
 * libclient/internal.h).  This machine's kernel may or may not choose the
 * TSC (--tsc-clock auto); these tests force it on, as --tsc-clock on does,
 * and say so.
 *
 *  - the line's arithmetic at its edges;
 *  - every fallback to the vDSO, forced: off, behind the base, past the
 *    span, a sum that would overflow, a line being rewritten, SNOWID_NO_TSC,
 *    prctl(PR_SET_TSC, PR_TSC_SIGSEGV);
 *  - a line far ahead: -EAGAIN at the deadline, and no duplicate;
 *  - IDs from two processes while the line is recalibrated every ms;
 *  - the calibrator's line tracked against CLOCK_MONOTONIC (largest error);
 *  - a simulation of rate changes: NTP's slew, chrony's fastest, a
 *    migration to a host whose TSC runs at another rate.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "helpers.h"
#include "internal.h"
#include "tsc-clock.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)

static struct shm_pub *pub;
static const char *inst;
static int64_t offset;

static int64_t mono(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

static void nap(int64_t ns)
{
        struct timespec ts = {.tv_sec = ns / S, .tv_nsec = ns % S};
        nanosleep(&ts, NULL);
}

/* A rough line through two readings 50 ms apart: good to well under a ms
 * over a second, which is all the fallback tests need. */
static struct tsc_line rough_line(int64_t ahead_ns)
{
        struct tsc_sample a, b;
        tsc_sample_read(&a, 8);
        nap(50 * MS);
        tsc_sample_read(&b, 8);
        struct tsc_line l = {
                .base = b.tsc,
                .span = UINT64_C(1) << 50,
                .mult = (uint64_t)(((unsigned __int128)(b.mono_ns - a.mono_ns) << 32) /
                                   (b.tsc - a.tsc)),
                .shift = 32,
                .ns = b.mono_ns + ahead_ns,
        };
        return l;
}

static int setup(void **state)
{
        (void)state;
        if (!SHM_HAVE_TSC)
                return 0;
        inst = test_instance("tsc");
        if (test_pub_open(inst, &pub) < 0)
                return -1;
        snowid_layout l;
        snowid_layout_default(&l);
        offset = shm_offset_for_wall(l.epoch_ms);
        uint64_t now_ms = (uint64_t)((shm_monotonic_ns() + offset) / MS);
        struct shm_publication p = test_publication(1, now_ms, now_ms + 3600 * 1000, offset);
        return shm_pub_switch(pub, &p);
}

static int teardown(void **state)
{
        (void)state;
        pub = test_pub_close(pub);
        return 0;
}

#define NEED_TSC()                                                                                 \
        do {                                                                                       \
                if (!SHM_HAVE_TSC)                                                                 \
                        skip();                                                                    \
        } while (0)

static void test_line_edges(void **state)
{
        (void)state;
        int64_t ns = -1;
        struct tsc_line l = {
                .base = 1000, .span = 100, .mult = UINT64_C(1) << 32, .shift = 32, .ns = 5000};
        assert_true(tsc_line_ns(&l, 1000, &ns));
        assert_int_equal(ns, 5000);
        assert_true(tsc_line_ns(&l, 1099, &ns));
        assert_int_equal(ns, 5099);
        assert_false(tsc_line_ns(&l, 1100, &ns)); /* past the span */
        assert_false(tsc_line_ns(&l, 999, &ns));  /* behind the base */
        assert_false(tsc_line_ns(&l, 0, &ns));
        l.span = 0; /* off */
        assert_false(tsc_line_ns(&l, 1000, &ns));
        /* overflow: never a negative or wrapped time */
        l = (struct tsc_line){
                .base = 0, .span = UINT64_MAX, .mult = UINT64_MAX, .shift = 32, .ns = 0};
        assert_false(tsc_line_ns(&l, UINT64_MAX - 1, &ns));
        l = (struct tsc_line){
                .base = 0, .span = 10, .mult = UINT64_C(1) << 32, .shift = 32, .ns = INT64_MAX - 3};
        assert_true(tsc_line_ns(&l, 3, &ns));
        assert_int_equal(ns, INT64_MAX);
        assert_false(tsc_line_ns(&l, 4, &ns));
        l.ns = -1; /* a negative time is no CLOCK_MONOTONIC */
        assert_false(tsc_line_ns(&l, 0, &ns));
        /* the product just under and just over what 63 bits keep */
        l = (struct tsc_line){
                .base = 0, .span = UINT64_MAX, .mult = UINT64_MAX, .shift = 32, .ns = 0};
        assert_true(tsc_line_ns(&l, UINT64_C(1) << 31, &ns));
        assert_false(tsc_line_ns(&l, UINT64_C(1) << 32, &ns));
        /* any other shift is not a line this library reads */
        l = (struct tsc_line){.base = 0, .span = 10, .mult = 8, .shift = 3, .ns = 0};
        assert_false(tsc_line_ns(&l, 2, &ns));
}

/* Which clock clock_ns() read: the line is 10 s ahead, the vDSO is not. */
static int reads_line(void)
{
        int64_t before = mono(), t = clock_ns(pub->ctl), after = mono();
        if (t >= before + 9 * S && t <= after + 11 * S)
                return 1;
        assert_true(t >= before && t <= after);
        return 0;
}

static void open_handle(void)
{
        snowid *s;
        /* libsnowid decides at each open whether this process allows the TSC */
        assert_int_equal(snowid_open(inst, &s), 0);
        snowid_close(s);
}

static void test_fallbacks(void **state)
{
        (void)state;
        NEED_TSC();
        open_handle();
        assert_int_equal(READ_ONCE(snowid_tsc_allowed), 1);
        struct tsc_line good = rough_line(10 * S), l;

        shm_pub_set_tsc(pub, &good);
        assert_true(reads_line());

        shm_pub_set_tsc(pub, NULL); /* off */
        assert_false(reads_line());
        assert_int_equal(READ_ONCE(pub->ctl->tsc.span), 0);

        l = good;
        l.base = tsc_read() + (UINT64_C(1) << 40); /* behind its base */
        shm_pub_set_tsc(pub, &l);
        assert_false(reads_line());

        l = good;
        l.span = tsc_read() - l.base - 1; /* stale: past its span */
        shm_pub_set_tsc(pub, &l);
        assert_false(reads_line());

        l = good;
        l.ns = INT64_MAX - 1000; /* would overflow */
        shm_pub_set_tsc(pub, &l);
        assert_false(reads_line());

        shm_pub_set_tsc(pub, &good);
        assert_true(reads_line());
        /* a line being rewritten (seq odd): the vDSO, not half a line */
        uint32_t seq = READ_ONCE(pub->ctl->tsc.seq);
        WRITE_ONCE(pub->ctl->tsc.seq, seq + 1);
        assert_false(reads_line());
        WRITE_ONCE(pub->ctl->tsc.seq, seq + 2);
        assert_true(reads_line());

        /* the process refuses it */
        setenv("SNOWID_NO_TSC", "1", 1);
        open_handle();
        assert_int_equal(READ_ONCE(snowid_tsc_allowed), 0);
        assert_false(reads_line());
        setenv("SNOWID_NO_TSC", "0", 1); /* 0 is "allow" */
        open_handle();
        assert_true(reads_line());
        unsetenv("SNOWID_NO_TSC");
        open_handle();
        assert_true(reads_line());

        /* RDTSC made to fault: a client that still read it would die of
         * SIGSEGV (the line is on) */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) < 0)
                        _exit(3);
                snowid *c;
                uint64_t id;
                if (snowid_open(inst, &c) < 0)
                        _exit(4);
                if (snowid_thread_tsc != -1) /* -1: system calls, not even the vDSO */
                        _exit(5);
                for (int i = 0; i < 1000; i++)
                        if (snowid_next(c, &id) < 0)
                                _exit(6);
                snowid_close(c);
                _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        shm_pub_set_tsc(pub, NULL);
}

/* ---- a line far ahead, and IDs from two processes ---- */

#define PROCS 2
#define MAX_IDS 400000

struct shared {
        _Atomic int phase; /* set by the parent; -1: stop */
        _Atomic uint64_t tries[PROCS][4];
        _Atomic uint64_t eagain[PROCS][4];
        _Atomic uint64_t n[PROCS];
        uint64_t ids[PROCS][MAX_IDS];
};

static struct shared *sh;

static int child(unsigned me, int64_t max_wait_us)
{
        snowid *s;
        if (snowid_open(inst, &s) < 0)
                return 10;
        snowid_set_max_wait(s, (uint64_t)max_wait_us);
        uint64_t last = 0;
        int phase;
        while ((phase = atomic_load(&sh->phase)) >= 0) {
                uint64_t id;
                int r = snowid_next(s, &id);
                atomic_fetch_add(&sh->tries[me][phase], 1);
                if (r == -EAGAIN) {
                        atomic_fetch_add(&sh->eagain[me][phase], 1);
                        continue;
                }
                if (r < 0)
                        return 11;
                if (id <= last)
                        return 12; /* one process's IDs only grow */
                last = id;
                uint64_t k = atomic_load(&sh->n[me]);
                if (k < MAX_IDS) {
                        sh->ids[me][k] = id;
                        atomic_store(&sh->n[me], k + 1);
                }
        }
        snowid_close(s);
        return 0;
}

static void start_children(pid_t pids[PROCS], int64_t max_wait_us)
{
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_ptr_not_equal(sh, MAP_FAILED);
        for (unsigned i = 0; i < PROCS; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0)
                        _exit(child(i, max_wait_us));
        }
}

/* Waits until every child has tried at least n times in this phase. */
static void wait_tries(int phase, uint64_t n)
{
        for (int64_t end = mono() + 60 * S;;) {
                unsigned ok = 0;
                for (unsigned i = 0; i < PROCS; i++)
                        ok += atomic_load(&sh->tries[i][phase]) >= n;
                if (ok == PROCS)
                        return;
                assert_true(mono() < end);
                nap(MS / 10);
        }
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Stops the children, checks they exited 0, and returns every ID sorted. */
static size_t stop_children(pid_t pids[PROCS], uint64_t **ret)
{
        atomic_store(&sh->phase, -1);
        for (unsigned i = 0; i < PROCS; i++) {
                int status;
                assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
        size_t total = 0;
        for (unsigned i = 0; i < PROCS; i++)
                total += atomic_load(&sh->n[i]);
        uint64_t *all = malloc((total + 1) * sizeof(*all));
        assert_non_null(all);
        size_t k = 0;
        for (unsigned i = 0; i < PROCS; i++)
                for (uint64_t j = 0; j < atomic_load(&sh->n[i]); j++)
                        all[k++] = sh->ids[i][j];
        qsort(all, total, sizeof(*all), cmp_u64);
        for (size_t i = 1; i < total; i++)
                if (all[i] == all[i - 1])
                        fail_msg("ID %" PRIu64 " twice", all[i]);
        *ret = all;
        return total;
}

static uint64_t id_ms(uint64_t id)
{
        snowid_parts p;
        snowid_layout l;
        snowid_layout_default(&l);
        assert_int_equal(snowid_decode(&l, id, &p), 0);
        return p.time_ms;
}

static void test_far_ahead(void **state)
{
        (void)state;
        NEED_TSC();
        open_handle(); /* this process allows the TSC: so will the children */
        /* a fresh worker whose deadline is 60 s on */
        uint64_t now_ms = (uint64_t)((shm_monotonic_ns() + offset) / MS);
        uint64_t deadline = now_ms + 60000;
        struct shm_publication p = test_publication(7, now_ms, deadline, offset);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        /* phase 0: the line 3 s ahead, inside the deadline: IDs from then */
        struct tsc_line ahead3 = rough_line(3 * S), ahead60 = ahead3;
        ahead60.ns += 117 * S; /* 120 s ahead: past the deadline */
        shm_pub_set_tsc(pub, &ahead3);
        pid_t pids[PROCS];
        start_children(pids, 1000);
        wait_tries(0, 2000);
        /* phase 1: off, back on the vDSO: the counter is 3 s ahead of it,
         * past the lead: -EAGAIN */
        shm_pub_set_tsc(pub, NULL);
        uint64_t issued_before_off = atomic_load(&sh->n[0]) + atomic_load(&sh->n[1]);
        atomic_store(&sh->phase, 1);
        wait_tries(1, 50);
        /* phase 2: far ahead, past the deadline: -EAGAIN, and the counter
         * stays where it was (no one pushes it past the deadline) */
        shm_pub_set_tsc(pub, &ahead60);
        uint64_t line_before =
                READ_ONCE(pub->ctr->line[shm_line_index(READ_ONCE(pub->ctl->gen))].state);
        atomic_store(&sh->phase, 2);
        wait_tries(2, 50);
        uint64_t line_after =
                READ_ONCE(pub->ctr->line[shm_line_index(READ_ONCE(pub->ctl->gen))].state);
        assert_true(line_after == line_before);
        uint64_t *all;
        size_t total = stop_children(pids, &all);
        shm_pub_set_tsc(pub, NULL);

        assert_true(issued_before_off > 0);
        uint64_t real_ms = (uint64_t)((shm_monotonic_ns() + offset) / MS);
        for (size_t i = 0; i < total; i++) {
                uint64_t ms = id_ms(all[i]);
                assert_true(ms <= deadline);        /* never past what the mark covers */
                assert_true(ms + 10000 >= real_ms); /* and from this test's worker */
        }
        /* the IDs of phase 0 came from the line, 3 s ahead */
        assert_true(id_ms(all[total - 1]) >= now_ms + 2500);
        for (unsigned i = 0; i < PROCS; i++) {
                /* a call or two may still finish on the old line's time */
                assert_true(atomic_load(&sh->eagain[i][1]) + 2 >= atomic_load(&sh->tries[i][1]));
                assert_true(atomic_load(&sh->eagain[i][2]) + 2 >= atomic_load(&sh->tries[i][2]));
        }
        print_message("far ahead: %zu IDs, all <= the deadline, 0 duplicates; then -EAGAIN "
                      "(%" PRIu64 " of %" PRIu64 " calls off the line, %" PRIu64 " of %" PRIu64
                      " with the line 120 s ahead, the counter unmoved)\n",
                      total, atomic_load(&sh->eagain[0][1]) + atomic_load(&sh->eagain[1][1]),
                      atomic_load(&sh->tries[0][1]) + atomic_load(&sh->tries[1][1]),
                      atomic_load(&sh->eagain[0][2]) + atomic_load(&sh->eagain[1][2]),
                      atomic_load(&sh->tries[0][2]) + atomic_load(&sh->tries[1][2]));
        free(all);
        munmap(sh, sizeof(*sh));
}

static void test_recalibrating(void **state)
{
        (void)state;
        NEED_TSC();
        open_handle();
        uint64_t now_ms = (uint64_t)((shm_monotonic_ns() + offset) / MS);
        struct shm_publication p = test_publication(8, now_ms, now_ms + 3600 * 1000, offset);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        /* the calibrator at a tick of 1 ms (the daemon's is 100 ms), and
         * off for a tick in every 50 */
        struct tsc_cal cal;
        tsc_cal_init(&cal, MS, MS / 2);
        pid_t pids[PROCS];
        start_children(pids, 1000000);
        unsigned lines = 0, ticks = 0;
        for (int64_t end = mono() + 2 * S; mono() < end; ticks++) {
                struct tsc_sample smp;
                tsc_sample_read(&smp, 8);
                tsc_cal_step(&cal, &smp, ticks % 50 != 0);
                lines += cal.line.span != 0;
                shm_pub_set_tsc(pub, cal.line.span ? &cal.line : NULL);
                nap(MS);
        }
        uint64_t *all;
        size_t total = stop_children(pids, &all);
        shm_pub_set_tsc(pub, NULL);
        print_message("recalibrating every ms: %u lines in %u ticks, %zu IDs from %d processes, "
                      "0 duplicates, each process's increasing\n",
                      lines, ticks, total, PROCS);
        assert_true(total > 1000);
        assert_true(lines >= 10);
        free(all);
        munmap(sh, sizeof(*sh));
}

/* ---- the calibrator's line against CLOCK_MONOTONIC ---- */

static _Atomic int calibrating;
static struct tsc_cal track_cal;

static void *calibrator(void *arg)
{
        (void)arg;
        while (atomic_load(&calibrating)) {
                struct tsc_sample smp;
                tsc_sample_read(&smp, 8);
                tsc_cal_step(&track_cal, &smp, true);
                shm_pub_set_tsc(pub, track_cal.line.span ? &track_cal.line : NULL);
                nap(TSC_TICK_NS);
        }
        return NULL;
}

static void test_tracking(void **state)
{
        (void)state;
        NEED_TSC();
        open_handle();
        tsc_cal_init(&track_cal, TSC_TICK_NS, 200 * 1000);
        atomic_store(&calibrating, 1);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, calibrator, NULL), 0);
        int64_t worst = 0, sum = 0;
        uint64_t n = 0, off = 0;
        for (int64_t end = mono() + 3 * S; mono() < end;) {
                int64_t a = mono(), c = clock_ns(pub->ctl), b = mono();
                if (READ_ONCE(pub->ctl->tsc.span) == 0) {
                        off++;
                        nap(MS / 10);
                        continue;
                }
                if (b - a > 5000)
                        continue; /* preempted in the middle: no reading */
                int64_t err = c - (a + b) / 2;
                if (llabs(err) > llabs(worst))
                        worst = err;
                sum += llabs(err);
                n++;
                nap(MS / 10);
        }
        atomic_store(&calibrating, 0);
        pthread_join(t, NULL);
        shm_pub_set_tsc(pub, NULL);
        print_message("the TSC clock against CLOCK_MONOTONIC over 3 s (forced on): %" PRIu64
                      " readings, largest error %+.3f us, mean |error| %.3f us, "
                      "%" PRIu64 " readings while off, %" PRIu64 " trips; the calibrator saw at "
                      "most %.3f us at its ticks\n",
                      n, (double)worst / 1000, n ? (double)sum / (double)n / 1000 : 0.0, off,
                      track_cal.trips, (double)track_cal.max_error_ns_seen / 1000);
        assert_true(n > 1000);
        if (track_cal.trips == 0)
                assert_true(llabs(worst) <= 200 * 1000 + 5000);
}

/* ---- rate changes, simulated ---- */

struct scenario {
        const char *name;
        double mono_ppm;      /* CLOCK_MONOTONIC's rate change from 5 s to 15 s (a slew) */
        double tsc_ghz_after; /* the TSC's rate from 5 s on (a migration); 0: unchanged */
        int expect_trips;     /* the bound must trip this many times */
};

static void simulate(const struct scenario *sc)
{
        const double ghz = 2.4; /* TSC cycles per ns before any change */
        const int64_t bound = 200 * 1000;
        struct tsc_cal c;
        tsc_cal_init(&c, TSC_TICK_NS, bound);
        /* real time in ns; CLOCK_MONOTONIC and the TSC are integrated over it */
        double mono_ns = 1e12, tsc = 5e15;
        int64_t next_tick = 0;
        double worst = 0, allowed = 0;
        uint64_t on_ms = 0, all_ms = 0;
        unsigned jitter = 12345;
        for (int64_t t = 0; t < 30 * S; t += MS / 10) {
                double mrate = 1.0 + (t >= 5 * S && t < 15 * S ? sc->mono_ppm * 1e-6 : 0);
                double trate = t >= 5 * S && sc->tsc_ghz_after > 0 ? sc->tsc_ghz_after : ghz;
                mono_ns += (double)(MS / 10) * mrate;
                tsc += (double)(MS / 10) * trate;
                if (t >= next_tick) {
                        struct tsc_sample smp = {
                                .tsc = (uint64_t)tsc, .mono_ns = (int64_t)mono_ns, .width = 60};
                        tsc_cal_step(&c, &smp, true);
                        /* the daemon's timer: 100 ms, late by up to 5 ms */
                        jitter = jitter * 1103515245 + 12345;
                        next_tick = t + TSC_TICK_NS + (int64_t)((jitter >> 8) % 5000) * 1000;
                }
                int64_t ns;
                all_ms++;
                if (!tsc_line_ns(&c.line, (uint64_t)tsc, &ns))
                        continue;
                on_ms++;
                double err = fabs((double)ns - mono_ns);
                if (err > worst)
                        worst = err;
        }
        /* what a client may see before the next check catches it: the rate
         * change over a tick (and its lateness), on top of the bound */
        double dr = fabs(sc->mono_ppm) * 1e-6;
        if (sc->tsc_ghz_after > 0)
                dr += fabs(1.0 - ghz / sc->tsc_ghz_after);
        allowed = (double)bound + dr * (double)(TSC_TICK_NS + 5 * MS) * 1.05 + 1000;
        print_message("%-44s largest error %9.1f us (allowed %9.1f us), %" PRIu64
                      " trips, on %5.1f%% of the time\n",
                      sc->name, worst / 1000, allowed / 1000, c.trips,
                      100.0 * (double)on_ms / (double)all_ms);
        assert_true(worst <= allowed);
        assert_int_equal((int)c.trips, sc->expect_trips);
        assert_true(c.line.span != 0); /* on again by the end */
}

static void test_rate_changes(void **state)
{
        (void)state;
        static const struct scenario scs[] = {
                {"steady", 0, 0, 0},
                {"NTP slew, the kernel's fastest (500 ppm)", 500, 0, 0},
                {"NTP slew back (-500 ppm)", -500, 0, 0},
                {"chrony's fastest slew (83,333 ppm)", 83333.333, 0, 2},
                {"migration to a host whose TSC runs at 3.0 GHz", 0, 3.0, 1},
                {"migration to a host whose TSC runs at 2.3 GHz", 0, 2.3, 1},
        };
        for (size_t i = 0; i < sizeof(scs) / sizeof(scs[0]); i++)
                simulate(&scs[i]);
}

/* A clock that trips every time it comes back: off 1 s, 2 s, 4 s... and
 * then an hour each time; and forgiven once it stays on for ten minutes. */
static void test_backoff(void **state)
{
        (void)state;
        struct tsc_cal c;
        tsc_cal_init(&c, TSC_TICK_NS, 200 * 1000);
        double tsc = 1e12;
        int64_t mono = S;
        int64_t offs[16];
        unsigned n = 0;
        for (int64_t i = 0; n < 16 && i < 2000000; i++) {
                mono += TSC_TICK_NS;
                tsc += 2.4 * (double)TSC_TICK_NS;
                /* while on, a jump of 1 ms in the TSC: an error past the bound */
                if (c.line.span != 0)
                        tsc += 2.4e6;
                struct tsc_sample smp = {.tsc = (uint64_t)tsc, .mono_ns = mono, .width = 50};
                if (tsc_cal_step(&c, &smp, true) == TSC_EV_TRIP)
                        offs[n++] = (c.off_until_ns - mono) / S;
        }
        assert_int_equal(n, 16);
        for (unsigned i = 0; i < 16; i++) {
                int64_t want = i < 12 ? INT64_C(1) << i : 3600;
                if (offs[i] != want)
                        fail_msg("trip %u: off for %" PRId64 " s, not %" PRId64 " s", i + 1,
                                 offs[i], want);
        }
        /* the last hour off, then ten minutes on, then a trip: off for 1 s
         * again */
        for (int64_t end = c.off_until_ns + TSC_FORGIVE_NS + S; mono < end;) {
                mono += TSC_TICK_NS;
                tsc += 2.4 * (double)TSC_TICK_NS;
                struct tsc_sample smp = {.tsc = (uint64_t)tsc, .mono_ns = mono, .width = 50};
                tsc_cal_step(&c, &smp, true);
        }
        assert_true(c.line.span != 0);
        mono += TSC_TICK_NS;
        tsc += 2.4 * (double)TSC_TICK_NS + 2.4e6;
        struct tsc_sample smp = {.tsc = (uint64_t)tsc, .mono_ns = mono, .width = 50};
        assert_int_equal(tsc_cal_step(&c, &smp, true), TSC_EV_TRIP);
        assert_int_equal((c.off_until_ns - mono) / S, 1);
        /* a tick that comes too soon (a timer catching up) keeps the line */
        for (int i = 0; i < 40; i++) {
                mono += TSC_TICK_NS;
                tsc += 2.4 * (double)TSC_TICK_NS;
                smp = (struct tsc_sample){.tsc = (uint64_t)tsc, .mono_ns = mono, .width = 50};
                tsc_cal_step(&c, &smp, true);
        }
        assert_true(c.line.span != 0);
        struct tsc_line before = c.line;
        mono += MS;
        tsc += 2.4 * (double)MS;
        smp = (struct tsc_sample){.tsc = (uint64_t)tsc, .mono_ns = mono, .width = 50};
        assert_int_equal(tsc_cal_step(&c, &smp, true), TSC_EV_EARLY);
        assert_memory_equal(&before, &c.line, sizeof(before));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_line_edges), cmocka_unit_test(test_fallbacks),
                cmocka_unit_test(test_far_ahead),  cmocka_unit_test(test_recalibrating),
                cmocka_unit_test(test_tracking),   cmocka_unit_test(test_rate_changes),
                cmocka_unit_test(test_backoff),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
