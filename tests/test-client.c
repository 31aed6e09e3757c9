/* SPDX-License-Identifier: MIT */
/*
 * The client algorithm against a fake clock: libsnowid is built a second
 * time for this test with snowid_fake_monotonic_ns() as its clock.  A hook
 * can run inside the Nth clock read, which lands between the client's first
 * read of gen and its atomic operation: that is how a switch "in the middle
 * of a call" is made to happen on demand.
 */
#include <errno.h>
#include <stdint.h>

#include "barrier.h"
#include "helpers.h"
#include "snowid.h"

#define MS INT64_C(1000000)
#define T UINT64_C(1000000) /* ID time (ms) at which each test starts */

static _Atomic int64_t fake_ns;
static int64_t fake_step;
static int hook_countdown;
static void (*hook)(void);

int64_t snowid_fake_monotonic_ns(void);
int64_t snowid_fake_monotonic_ns(void)
{
        if (hook && --hook_countdown == 0) {
                void (*h)(void) = hook;
                hook = NULL;
                h();
        }
        return atomic_fetch_add(&fake_ns, fake_step);
}

static void arm(void (*h)(void), int at_read)
{
        hook = h;
        hook_countdown = at_read;
}

static const char *inst;
static struct shm_pub *pub;
static snowid *cli;
static snowid_layout layout;

static int setup(void **state)
{
        (void)state;
        inst = test_instance("client");
        (void)inst;
        atomic_store(&fake_ns, (int64_t)T * MS);
        fake_step = 0;
        hook = NULL;
        assert_int_equal(test_pub_open(inst, &pub), 0);
        struct shm_publication p = test_publication(5, T, T + 10000, 0);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        assert_int_equal(snowid_open(inst, &cli), 0);
        assert_int_equal(snowid_get_layout(cli, &layout), 0);
        /* a frozen fake clock never ends a wait: tests that wait say so */
        snowid_set_max_wait(cli, 0);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        cli = snowid_close(cli);
        pub = test_pub_close(pub);
        (void)inst;
        return 0;
}

static snowid_parts parts(uint64_t id)
{
        snowid_parts p;
        assert_int_equal(snowid_decode(&layout, id, &p), 0);
        return p;
}

static uint64_t line_state(uint64_t gen)
{
        return READ_ONCE(pub->ctr->line[shm_line_index(gen)].state);
}

static void test_basic(void **state)
{
        (void)state;
        uint64_t a, b;
        assert_int_equal(snowid_next(cli, &a), 0);
        assert_int_equal(snowid_next(cli, &b), 0);
        assert_true(b > a);
        assert_int_equal(parts(a).worker, 5);
        assert_int_equal(parts(a).time_ms, T);
        assert_int_equal(parts(a).sequence, 0);
        assert_int_equal(parts(b).sequence, 1);
        assert_int_equal(parts(a).unix_ms, SNOWID_EPOCH_DEFAULT_MS + T);
}

static void test_sequence_carries(void **state)
{
        (void)state;
        static uint64_t ids[4096];
        uint64_t prev = 0, id = 7;
        snowid_set_max_wait(cli, 0);
        /* ms T, seq 0..4095 in one batch */
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0);
        for (unsigned i = 0; i < 4096; i++) {
                assert_int_equal(parts(ids[i]).time_ms, T);
                assert_int_equal(parts(ids[i]).sequence, i);
                assert_true(ids[i] > prev);
                prev = ids[i];
        }
        /* the next 4,096 carry into T+1, within the lead bound of 1 ms */
        for (unsigned i = 0; i < 4096; i++) {
                assert_int_equal(snowid_next(cli, &id), 0);
                assert_int_equal(parts(id).time_ms, T + 1);
                assert_int_equal(parts(id).sequence, i);
                assert_true(id > prev);
                prev = id;
        }
        /* T+2 would be 2 ms ahead of the clock: no wait allowed, so -EAGAIN */
        assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        assert_int_equal(id, prev);
        assert_true(READ_ONCE(pub->ctr->stats.eagain) >= 1);
        atomic_fetch_add(&fake_ns, MS);
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(parts(id).time_ms, T + 2);
        assert_true(id > prev);
}

static void test_refusal_takes_nothing(void **state)
{
        (void)state;
        static uint64_t ids[4096];
        uint64_t id;
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0); /* T+1: at the lead bound */
        uint64_t line = line_state(READ_ONCE(pub->ctl->gen));
        /* a caller that never waits, in a tight loop, must not push the
         * shared counter ahead of the clock for everyone else */
        for (int i = 0; i < 100000; i++)
                assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        assert_int_equal(line_state(READ_ONCE(pub->ctl->gen)), line);
        /* past the deadline, likewise */
        atomic_store(&fake_ns, (int64_t)(T + 20000) * MS);
        line = line_state(READ_ONCE(pub->ctl->gen));
        for (int i = 0; i < 1000; i++)
                assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        assert_true(line_state(READ_ONCE(pub->ctl->gen)) >> 12 <= T + 20000);
}

static void test_batch_carries_across_ms(void **state)
{
        (void)state;
        static uint64_t ids[100];
        uint64_t id;
        for (unsigned i = 0; i < 4050; i++)
                assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 100), 0);
        for (unsigned i = 0; i < 100; i++) {
                snowid_parts p = parts(ids[i]);
                assert_int_equal(p.time_ms, i < 46 ? T : T + 1);
                assert_int_equal(p.sequence, i < 46 ? 4050 + i : i - 46);
                assert_int_equal(p.worker, 5);
                if (i)
                        assert_true(ids[i] > ids[i - 1]);
        }
}

static void test_batch_bounds(void **state)
{
        (void)state;
        uint64_t ids[4] = {1, 2, 3, 4};
        static uint64_t big[4097];
        assert_int_equal(snowid_next_batch(cli, ids, 0), -EINVAL);
        assert_int_equal(snowid_next_batch(cli, big, 4097), -EINVAL);
        assert_int_equal(snowid_next_batch(cli, NULL, 1), -EINVAL);
        assert_int_equal(snowid_next_batch(NULL, ids, 1), -EINVAL);
        assert_int_equal(snowid_next(NULL, ids), -EINVAL);
        assert_int_equal(snowid_next(cli, NULL), -EINVAL);
        assert_int_equal(snowid_set_max_wait(NULL, 1), -EINVAL);
        assert_int_equal(snowid_get_layout(cli, NULL), -EINVAL);
        assert_int_equal(snowid_get_status(NULL, NULL), -EINVAL);
        assert_int_equal(ids[0], 1);
        assert_int_equal(snowid_next_batch(cli, big, 4096), 0);
}

static void test_waits_for_the_clock(void **state)
{
        (void)state;
        static uint64_t ids[4096];
        uint64_t id;
        fake_step = MS / 20; /* each clock read moves 50 us */
        snowid_set_max_wait(cli, 10000);
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0);
        int64_t before = atomic_load(&fake_ns);
        /* T+2 is taken at once, then waited for until ID time reaches T+1 */
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(parts(id).time_ms, T + 2);
        assert_true(atomic_load(&fake_ns) >= (int64_t)(T + 1) * MS);
        assert_true(atomic_load(&fake_ns) > before);
        assert_true(READ_ONCE(pub->ctr->stats.waits_ceiling) >= 1);
}

static void test_wait_budget(void **state)
{
        (void)state;
        uint64_t id = 0;
        fake_step = MS / 100; /* 10 us a read */
        snowid_set_max_wait(cli, 2000);
        /* the deadline is behind the clock: nothing may be issued */
        atomic_store(&fake_ns, (int64_t)(T + 20000) * MS);
        int64_t before = atomic_load(&fake_ns);
        assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        int64_t waited = atomic_load(&fake_ns) - before;
        assert_true(waited >= 2 * MS);
        assert_true(waited < 3 * MS);
        assert_int_equal(id, 0);
        assert_true(READ_ONCE(pub->ctr->stats.waits_deadline) >= 1);
}

static void test_deadline(void **state)
{
        (void)state;
        uint64_t id;
        static uint64_t ids[200];
        snowid_set_max_wait(cli, 0);
        atomic_store(&fake_ns, (int64_t)(T + 10001) * MS);
        assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        assert_int_equal(shm_pub_extend(pub, T + 10001), 0);
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(parts(id).time_ms, T + 10001);
        /* a batch whose last value would pass the deadline is refused whole */
        for (unsigned i = 0; i < 4000; i++)
                assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 200), -EAGAIN);
        /* its values are spent (unique, never used), and the counter is past
         * the deadline: later calls are refused without taking anything */
        uint64_t line = line_state(READ_ONCE(pub->ctl->gen));
        assert_int_equal(line >> 12, T + 10002);
        assert_int_equal(snowid_next_batch(cli, ids, 10), -EAGAIN);
        assert_int_equal(line_state(READ_ONCE(pub->ctl->gen)), line);
        assert_int_equal(shm_pub_extend(pub, T + 10002), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 10), 0);
        assert_int_equal(parts(ids[9]).time_ms, T + 10002);
        assert_true(ids[0] > id);
}

static void extend_deadline(void)
{
        assert_int_equal(shm_pub_extend(pub, T + 30000), 0);
}

static void test_waits_for_the_deadline(void **state)
{
        (void)state;
        uint64_t id;
        fake_step = MS / 100;
        snowid_set_max_wait(cli, 50000);
        atomic_store(&fake_ns, (int64_t)(T + 20000) * MS);
        arm(extend_deadline, 5); /* snowidd extends while the client waits */
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_true(parts(id).time_ms >= T + 20000);
        assert_true(parts(id).time_ms <= T + 30000);
}

static uint64_t extend_to;

static void extend_deadline_to(void)
{
        assert_int_equal(shm_pub_extend(pub, extend_to), 0);
}

/* A budget too long to count in ns waits as long as it takes: it must not
 * wrap to a negative budget (set_max_wait's usec * 1000), nor to a deadline
 * in the past (now + budget), and give up at once. */
static void test_huge_wait_budget(void **state)
{
        (void)state;
        static const uint64_t budgets[] = {
                UINT64_MAX,
                UINT64_MAX / 1000,              /* the largest that once fitted in u64 ns */
                (uint64_t)INT64_MAX / 1000 + 1, /* just past INT64_MAX ns: was negative */
                (uint64_t)INT64_MAX / 1000,     /* fits, but now + budget overflows */
                (uint64_t)INT64_MAX / 1000 - 1000 * 1000 * 1000, /* likewise */
        };
        fake_step = MS / 100;
        for (unsigned i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
                uint64_t id, waits = READ_ONCE(pub->ctr->stats.waits_deadline);
                uint64_t eagain = READ_ONCE(pub->ctr->stats.eagain);
                uint64_t t = T + 20000 * (i + 1); /* past the deadline */
                assert_int_equal(snowid_set_max_wait(cli, budgets[i]), 0);
                atomic_store(&fake_ns, (int64_t)t * MS);
                extend_to = t + 10000;
                arm(extend_deadline_to, 50); /* snowidd extends, 0.5 ms into the wait */
                assert_int_equal(snowid_next(cli, &id), 0);
                assert_true(parts(id).time_ms >= t);
                assert_true(parts(id).time_ms <= t + 1);
                assert_int_equal(READ_ONCE(pub->ctr->stats.waits_deadline), waits + 1);
                assert_int_equal(READ_ONCE(pub->ctr->stats.eagain), eagain);
                assert_true(atomic_load(&fake_ns) >= (int64_t)t * MS + MS / 2);
        }
}

static void switch_to_9(void)
{
        struct shm_publication p = test_publication(9, T, T + 1000, 0);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
}

static void test_switch_mid_call(void **state)
{
        (void)state;
        uint64_t id;
        uint64_t old_gen = READ_ONCE(pub->ctl->gen);
        uint64_t dropped = READ_ONCE(pub->ctr->stats.dropped);
        uint64_t old_line = line_state(old_gen);
        /* the switch lands after the client read gen and before its RMW */
        arm(switch_to_9, 1);
        assert_int_equal(snowid_next(cli, &id), 0);
        uint64_t gen = READ_ONCE(pub->ctl->gen);
        assert_int_equal(gen, old_gen + 2);
        assert_int_equal(parts(id).worker, 9);
        assert_int_equal(READ_ONCE(pub->ctr->stats.dropped), dropped + 1);
        /* the dropped value came from the retired line; the live line gave one */
        assert_int_equal(line_state(old_gen), old_line + 1);
        assert_int_equal(line_state(gen), (T << 12) + 1);
}

/* The daemon brings ID time back 500 ms onto a fresh worker (a large clock
 * step back), while a client holds a `now` computed before it. */
static void step_back_switch(void)
{
        struct shm_publication p = test_publication(6, T - 500, T + 1000, -500 * MS);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
}

static void test_sleeper_leaves_new_line_alone(void **state)
{
        (void)state;
        uint64_t id;
        atomic_store(&fake_ns, (int64_t)(T + 5) * MS);
        uint64_t old_gen = READ_ONCE(pub->ctl->gen);
        arm(step_back_switch, 1);
        assert_int_equal(snowid_next(cli, &id), 0);
        uint64_t gen = READ_ONCE(pub->ctl->gen);
        /* the stale CAS moved the retired line to the old `now`, T+5 ... */
        assert_int_equal(line_state(old_gen) >> 12, T + 5);
        /* ... and the live line holds the new start and one value taken */
        assert_int_equal(line_state(gen), ((T - 500 + 5) << 12) + 1);
        assert_int_equal(parts(id).worker, 6);
        assert_int_equal(parts(id).time_ms, T - 500 + 5);
}

static void test_follow_keeps_order(void **state)
{
        (void)state;
        static uint64_t ids[4096];
        uint64_t id;
        fake_step = MS / 20;
        snowid_set_max_wait(cli, 10000);
        assert_int_equal(snowid_next_batch(cli, ids, 4096), 0);
        assert_int_equal(snowid_next_batch(cli, ids, 10), 0); /* counter at T+1 */
        struct shm_publication p = test_publication(2, T, T + 1000, 0);
        p.follow = 1;
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(parts(id).worker, 2);
        assert_int_equal(parts(id).time_ms, T + 2);
        assert_true(id > ids[9]);
}

/* A line is live again 64 switches later with the highest value it ever
 * held.  After a spell of ID time an hour ahead, a switch back onto the wall
 * clock must not land on a line left an hour ahead: every client would wait
 * on it (and the daemon's backstop would switch again, onto the next one). */
static void test_switch_skips_lines_ahead(void **state)
{
        (void)state;
        uint64_t id;
        const uint64_t H = 3600 * 1000;
        for (uint32_t i = 0; i < 10; i++) {
                struct shm_publication p =
                        test_publication(10 + i, T + H, T + H + 1000, (int64_t)H * MS);
                assert_int_equal(shm_pub_switch(pub, &p), 0);
                assert_int_equal(snowid_next(cli, &id), 0);
                assert_int_equal(parts(id).time_ms, T + H);
        }
        for (uint32_t i = 0; i < SHM_LINES - 10; i++) {
                struct shm_publication p = test_publication(100 + i, T, T + 1000, 0);
                assert_int_equal(shm_pub_switch(pub, &p), 0);
        }
        /* the line next in turn is one left an hour ahead */
        uint64_t gen = READ_ONCE(pub->ctl->gen);
        assert_true(line_state(gen + 2) >> 12 >= T + H);
        struct shm_publication p = test_publication(7, T, T + 1000, 0);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        assert_int_equal(snowid_next(cli, &id), 0); /* no wait allowed */
        assert_int_equal(parts(id).worker, 7);
        assert_int_equal(parts(id).time_ms, T);
        assert_true(READ_ONCE(pub->ctl->gen) > gen + 2);
}

static void test_offset_lowered(void **state)
{
        (void)state;
        uint64_t prev, id;
        snowid_set_max_wait(cli, 0);
        assert_int_equal(snowid_next(cli, &prev), 0);
        /* ID time slowed to T-1: the counter is at T, within the lead */
        shm_pub_set_offset(pub, -MS * 6 / 10);
        for (int i = 0; i < 100; i++) {
                assert_int_equal(snowid_next(cli, &id), 0);
                assert_true(id > prev);
                assert_int_equal(parts(id).time_ms, T);
                prev = id;
        }
        /* lowered to T-2: the counter is 2 ms ahead, so it must wait */
        shm_pub_set_offset(pub, -MS * 16 / 10);
        assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        atomic_fetch_add(&fake_ns, MS);
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_true(id > prev);
        assert_int_equal(parts(id).time_ms, T);
}

static void test_odd_generation(void **state)
{
        (void)state;
        uint64_t id = 3;
        snowid_status st = SNOWID_STATUS_INIT;
        snowid_set_max_wait(cli, 0);
        /* a publisher killed in the middle of a switch */
        WRITE_ONCE(pub->ctl->gen, READ_ONCE(pub->ctl->gen) + 1);
        assert_int_equal(snowid_next(cli, &id), -EAGAIN);
        assert_int_equal(id, 3);
        assert_int_equal(snowid_get_status(cli, &st), 0);
        assert_true(st.generation & 1);
        assert_true(READ_ONCE(pub->ctr->stats.waits_switch) >= 1);
        /* the next publisher completes one switch */
        struct shm_publication p = test_publication(7, T, T + 100, 0);
        assert_int_equal(shm_pub_switch(pub, &p), 0);
        assert_false(READ_ONCE(pub->ctl->gen) & 1);
        assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(parts(id).worker, 7);
}

static void test_damaged_control(void **state)
{
        (void)state;
        uint64_t id = 3;
        WRITE_ONCE(pub->ctl->worker, 1024); /* does not fit 10 bits */
        assert_int_equal(snowid_next(cli, &id), -EPROTO);
        WRITE_ONCE(pub->ctl->worker, 5);
        WRITE_ONCE(pub->ctl->seq_bits, 200);
        assert_int_equal(snowid_next(cli, &id), -EPROTO);
        assert_int_equal(id, 3);
        snowid_layout l = {0};
        assert_int_equal(snowid_get_layout(cli, &l), -EPROTO);
        WRITE_ONCE(pub->ctl->seq_bits, 12);
        assert_int_equal(snowid_next(cli, &id), 0);
}

static void test_status(void **state)
{
        (void)state;
        snowid_status st = SNOWID_STATUS_INIT;
        atomic_store(&fake_ns, (int64_t)(T + 250) * MS);
        assert_int_equal(snowid_get_status(cli, &st), 0);
        assert_int_equal(st.worker, 5);
        assert_int_equal(st.state, SNOWID_STATE_LEASED);
        assert_int_equal(st.generation, 2);
        assert_int_equal(st.deadline_ms, T + 10000);
        assert_int_equal(st.deadline_unix_ms, SNOWID_EPOCH_DEFAULT_MS + T + 10000);
        assert_int_equal(st.headroom_ms, 10000 - 250);
        assert_int_equal(st.daemon_pid, getpid());
        shm_pub_set_state(pub, SHM_STATE_NO_LEASE);
        assert_int_equal(snowid_get_status(cli, &st), 0);
        assert_int_equal(st.state, SNOWID_STATE_NO_LEASE);
}

/* SNOWID_1.0's functions, without size (reached by their internal names in
 * this static build; the shared library exports them as @SNOWID_1.0) */
struct status_v1_0 {
        uint32_t worker;
        int state;
        uint64_t generation, deadline_ms, deadline_unix_ms;
        int64_t headroom_ms, offset_ns;
        int32_t daemon_pid;
};
int snowid_get_status_v1_0(snowid *s, struct status_v1_0 *ret);
int snowid_get_host_stats_v1_0(snowid *s, uint64_t ret[6]);

/* The structs that carry their size: the library fills what fits in both
 * its struct and the caller's, says how much, and never writes past it */
static void test_status_sizes(void **state)
{
        (void)state;
        snowid_status full = SNOWID_STATUS_INIT;
        atomic_store(&fake_ns, (int64_t)(T + 250) * MS);
        assert_int_equal(snowid_get_status(cli, &full), 0);
        assert_int_equal(full.size, sizeof(snowid_status));
        assert_true(SNOWID_HAS_FIELD(&full, tsc_clock));
        assert_int_equal(full.tsc_clock, 0);
        WRITE_ONCE(pub->ctl->tsc.span, 1000);
        assert_int_equal(snowid_get_status(cli, &full), 0);
        assert_int_equal(full.tsc_clock, 1);
        WRITE_ONCE(pub->ctl->tsc.span, 0);

        /* a caller built before tsc_clock: the field stays as it was */
        snowid_status older;
        memset(&older, 0x5a, sizeof(older));
        older.size = offsetof(snowid_status, tsc_clock);
        assert_int_equal(snowid_get_status(cli, &older), 0);
        assert_int_equal(older.size, offsetof(snowid_status, tsc_clock));
        assert_false(SNOWID_HAS_FIELD(&older, tsc_clock));
        assert_int_equal(older.worker, 5);
        assert_int_equal(older.daemon_pid, getpid());
        assert_int_equal(older.tsc_clock, 0x5a5a5a5a);

        /* a caller built against a newer header: its tail stays as it was */
        struct {
                snowid_status st;
                unsigned char more[16];
        } newer;
        memset(&newer, 0x5a, sizeof(newer));
        newer.st.size = sizeof(newer);
        assert_int_equal(snowid_get_status(cli, &newer.st), 0);
        assert_int_equal(newer.st.size, sizeof(snowid_status));
        assert_int_equal(newer.st.deadline_ms, full.deadline_ms);
        for (size_t i = 0; i < sizeof(newer.more); i++)
                assert_int_equal(newer.more[i], 0x5a);

        /* too small to hold one field, or not set: refused, nothing written */
        snowid_status bad;
        memset(&bad, 0x5a, sizeof(bad));
        bad.size = sizeof(size_t);
        assert_int_equal(snowid_get_status(cli, &bad), -EINVAL);
        assert_int_equal(bad.worker, 0x5a5a5a5a);
        snowid_host_stats hs = {0};
        assert_int_equal(snowid_get_host_stats(cli, &hs), -EINVAL);
        assert_int_equal(hs.issued, 0);
        hs.size = sizeof(hs);
        assert_int_equal(snowid_get_host_stats(cli, &hs), 0);
        assert_int_equal(hs.size, sizeof(hs));

        /* SNOWID_1.0's versions fill the struct of then, no more */
        struct {
                struct status_v1_0 st;
                unsigned char more[16];
        } v1;
        memset(&v1, 0x5a, sizeof(v1));
        assert_int_equal(snowid_get_status_v1_0(cli, &v1.st), 0);
        assert_int_equal(v1.st.worker, full.worker);
        assert_int_equal(v1.st.generation, full.generation);
        assert_int_equal(v1.st.deadline_unix_ms, full.deadline_unix_ms);
        assert_int_equal(v1.st.daemon_pid, getpid());
        for (size_t i = 0; i < sizeof(v1.more); i++)
                assert_int_equal(v1.more[i], 0x5a);
        struct {
                uint64_t hs[6];
                unsigned char more[16];
        } h1;
        memset(&h1, 0x5a, sizeof(h1));
        assert_int_equal(snowid_get_host_stats_v1_0(cli, h1.hs), 0);
        assert_int_equal(h1.hs[0], hs.issued);
        for (size_t i = 0; i < sizeof(h1.more); i++)
                assert_int_equal(h1.more[i], 0x5a);
}

/* host stats' issued: every value taken, whatever mix of calls took them,
 * counted once each (a whole ms taken by one batch too) */
static void test_issued_counts_every_value(void **state)
{
        (void)state;
        static uint64_t big[4096];
        uint64_t id, taken = 0;
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        /* a whole ms at once, at a fresh ms (the compare-and-swap path) */
        assert_int_equal(snowid_next_batch(cli, big, 4096), 0);
        taken += 4096;
        assert_int_equal(parts(big[4095]).sequence, 4095);
        atomic_store(&fake_ns, (int64_t)(T + 2) * MS);
        assert_int_equal(snowid_next_batch(cli, big, 4096), 0);
        taken += 4096;
        /* then single IDs, and a batch across the end of a ms */
        atomic_store(&fake_ns, (int64_t)(T + 5) * MS);
        for (unsigned i = 0; i < 4000; i++)
                assert_int_equal(snowid_next(cli, &id), 0);
        assert_int_equal(snowid_next_batch(cli, big, 200), 0);
        taken += 4200;
        assert_int_equal(snowid_get_host_stats(cli, &hs), 0);
        assert_int_equal(hs.issued, taken);
        /* the clock moves on: the open ms closes with what was taken */
        atomic_store(&fake_ns, (int64_t)(T + 9) * MS);
        assert_int_equal(snowid_next(cli, &id), 0);
        taken++;
        assert_int_equal(snowid_get_host_stats(cli, &hs), 0);
        assert_int_equal(hs.issued, taken);
}

int main(void)
{
#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        const struct CMUnitTest tests[] = {
                T_(test_basic),
                T_(test_sequence_carries),
                T_(test_refusal_takes_nothing),
                T_(test_batch_carries_across_ms),
                T_(test_batch_bounds),
                T_(test_waits_for_the_clock),
                T_(test_wait_budget),
                T_(test_deadline),
                T_(test_waits_for_the_deadline),
                T_(test_huge_wait_budget),
                T_(test_switch_mid_call),
                T_(test_sleeper_leaves_new_line_alone),
                T_(test_follow_keeps_order),
                T_(test_switch_skips_lines_ahead),
                T_(test_offset_lowered),
                T_(test_odd_generation),
                T_(test_damaged_control),
                T_(test_status),
                T_(test_status_sizes),
                T_(test_issued_counts_every_value),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
