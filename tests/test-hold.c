/* SPDX-License-Identifier: MIT */
/*
 * The held number's pure core (daemon/core/hold.c), input by input: the
 * keepalive, the guarded extension and the deadline it publishes, the lease
 * check, the loss.  Answers are made by hand; the same tests built with the
 * mutants of the rules it decides by (and mutant 18, the deadline raised
 * before the store acknowledged the mark) must fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hold.h"
#include "rules.h"

#define NOW UINT64_C(60000000000)
#define TTL_S 10
#define WINDOW_S 10
#define STEP_S 20
#define ID 42
#define LEASE 77

static struct hold k;
static struct hold_view v;
static struct hold_ready out;

static int setup(void **state)
{
        (void)state;
        const struct hold_settings set = {
                .lease_ttl_s = TTL_S, .window_s = WINDOW_S, .mark_step_s = STEP_S};
        hold_init(&k, &set);
        v = (struct hold_view){
                .mono_ms = 1000000, .boot_ms = 2000000, .id_ms = NOW, .time_bits = 41};
        /* claimed at NOW with its mark a window and a step ahead */
        const struct holding g = {.id = ID,
                                  .state = H_HELD,
                                  .lease = LEASE,
                                  .worker = 5,
                                  .start_ms = NOW,
                                  .mark = NOW + (WINDOW_S + STEP_S) * 1000,
                                  .mark_rev = 100,
                                  .lease_until_ms = v.boot_ms + 9000,
                                  .marking = MARK_EXTENDING,
                                  .leasing = LEASE_ASKED};
        hold_step(&k, &v, &(struct hold_in){.kind = HOLD_IN_PUBLISHED, .published = &g}, &out);
        assert_int_equal(out.n, 0);
        return 0;
}

static void step(const struct hold_in *in)
{
        hold_step(&k, &v, in, &out);
}

static int find(enum hold_do what)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == what)
                        return (int)i;
        return -1;
}

static const struct hold_action *only(enum hold_do what)
{
        int i = find(what);
        assert_true(i >= 0);
        for (unsigned j = (unsigned)i + 1; j < out.n; j++)
                assert_int_not_equal(out.a[j].what, what);
        return &out.a[i];
}

static void tick(void)
{
        step(&(struct hold_in){.kind = HOLD_IN_TICK});
}

/* Time moves on until the mark is within the window: an extension is sent. */
static uint64_t extension_due(void)
{
        v.id_ms = k.cur.mark - WINDOW_S * 1000 + 1;
        v.mono_ms += 1000;
        tick();
        assert_true(find(HOLD_DO_EXTEND) >= 0);
        assert_int_equal(k.cur.marking, MARK_EXTENDING);
        return k.cur.pending;
}

static void extended(const struct store_extended *e)
{
        step(&(struct hold_in){.kind = HOLD_IN_EXTENDED, .tag = ID, .extended = e});
}

static void kept(int64_t ttl)
{
        step(&(struct hold_in){.kind = HOLD_IN_KEPT, .tag = ID, .ttl_s = ttl});
}

static void test_schedule(void **state)
{
        (void)state;
        /* published: nothing in flight; a keepalive at the first tick, no
         * extension while the mark is more than a window ahead */
        assert_int_equal(k.cur.leasing, LEASE_QUIET);
        assert_int_equal(k.cur.marking, MARK_STILL);
        tick();
        assert_true(find(HOLD_DO_KEEPALIVE) >= 0);
        assert_int_equal(find(HOLD_DO_EXTEND), -1);
        assert_int_equal(k.cur.lease_asked_ms, v.boot_ms);
        /* one keepalive in flight at a time */
        tick();
        assert_int_equal(find(HOLD_DO_KEEPALIVE), -1);
        kept(TTL_S);
        assert_int_equal(k.cur.lease_until_ms, rule5_lease_until(v.boot_ms, TTL_S));
        /* the extension: to now + window + step, once */
        uint64_t asked = extension_due();
        assert_int_equal(asked, v.id_ms + (WINDOW_S + STEP_S) * 1000);
        tick();
        assert_int_equal(find(HOLD_DO_EXTEND), -1);
        /* a number not held is not renewed */
        step(&(struct hold_in){.kind = HOLD_IN_STOP});
        v.mono_ms += 100000;
        tick();
        assert_int_equal(out.n, 0);
}

static void test_deadline(void **state)
{
        (void)state;
        uint64_t asked = extension_due();
        /* no answer: nothing published, and another extension can go */
        extended(&(struct store_extended){.ok = false});
        assert_int_equal(find(HOLD_DO_DEADLINE), -1);
        assert_int_equal(out.a[0].say, HOLD_SAY_EXTEND_FAILED);
        assert_true(k.cur.mark < asked);
        asked = extension_due();
        /* acknowledged: the deadline is the mark asked */
        extended(&(struct store_extended){.ok = true, .succeeded = true, .revision = 130});
        assert_int_equal(only(HOLD_DO_DEADLINE)->a, asked);
        assert_int_equal(k.cur.mark, asked);
        assert_int_equal(k.cur.mark_rev, 130);
        /* an answer for another holding, or a second one: nothing */
        extended(&(struct store_extended){.ok = true, .succeeded = true, .revision = 131});
        assert_int_equal(out.n, 0);
        step(&(struct hold_in){.kind = HOLD_IN_EXTENDED,
                               .tag = ID + 1,
                               .extended =
                                       &(struct store_extended){.ok = true, .succeeded = true}});
        assert_int_equal(out.n, 0);
        /* refused by rule 1 (another fence): nothing published */
        asked = extension_due();
        step(&(struct hold_in){.kind = HOLD_IN_EXTENDED,
                               .tag = ID,
                               .not_current = true,
                               .extended =
                                       &(struct store_extended){.ok = true, .succeeded = true}});
        assert_int_equal(out.n, 0);
        assert_true(k.cur.mark < asked);
        assert_int_equal(k.cur.marking, MARK_STILL);
}

/* The test that would catch a duplicate ID in the holding: whatever the
 * store answers, in whatever order, the deadline published is never above
 * a mark the store acknowledged, and never goes down. */
static void test_deadline_never_above_acked(void **state)
{
        (void)state;
        uint64_t x = 99, acked = k.cur.mark, published = k.cur.mark;
        for (int i = 0; i < 20000 && k.cur.state == H_HELD; i++) {
                x = x * 6364136223846793005u + 1442695040888963407u;
                v.id_ms += (x >> 40) % 3000;
                v.mono_ms += 500;
                v.boot_ms += 500;
                tick();
                for (unsigned j = 0; j < out.n; j++)
                        if (out.a[j].what == HOLD_DO_DEADLINE) {
                                assert_true(k.cur.mark <= acked);
                                assert_true(k.cur.mark >= published);
                                published = k.cur.mark;
                        }
                if (k.cur.leasing == LEASE_ASKED)
                        kept(TTL_S);
                if (k.cur.marking != MARK_EXTENDING)
                        continue;
                uint64_t asked = k.cur.pending;
                struct store_extended e = {.ok = true, .succeeded = true, .revision = 200 + i};
                switch ((x >> 20) % 4) {
                case 0:
                        e.ok = false; /* no answer: it may or may not be applied */
                        break;
                case 1:
                        e.succeeded = false; /* ours, the mark already at or above */
                        e.n = (struct store_number){.held = true,
                                                    .lease = LEASE,
                                                    .value_is = true,
                                                    .marked = true,
                                                    .mark_valid = true,
                                                    .mark = asked + (x >> 50) % 5,
                                                    .mark_rev = k.cur.mark_rev + 1};
                        acked = e.n.mark > acked ? e.n.mark : acked;
                        break;
                default:
                        acked = asked > acked ? asked : acked;
                        break;
                }
                extended(&e);
                for (unsigned j = 0; j < out.n; j++)
                        if (out.a[j].what == HOLD_DO_DEADLINE) {
                                assert_true(k.cur.mark <= acked);
                                assert_true(k.cur.mark >= published);
                                published = k.cur.mark;
                        }
        }
        assert_true(published > NOW + 1000000); /* it did extend, many times */
}

/* A verb not sent: nothing is in flight, nothing is published or lost. */
static void test_unsent(void **state)
{
        (void)state;
        extension_due();
        step(&(struct hold_in){.kind = HOLD_IN_KEPT, .tag = ID, .unsent = true});
        assert_int_equal(out.n, 0);
        assert_int_equal(k.cur.leasing, LEASE_QUIET);
        step(&(struct hold_in){.kind = HOLD_IN_EXTENDED, .tag = ID, .unsent = true});
        assert_int_equal(out.n, 0);
        assert_int_equal(k.cur.marking, MARK_STILL);
        assert_int_equal(k.cur.state, H_HELD);
        v.mono_ms += 100000;
        tick();
        assert_true(find(HOLD_DO_KEEPALIVE) >= 0);
        assert_true(find(HOLD_DO_EXTEND) >= 0);
}

static void test_mark_low(void **state)
{
        (void)state;
        uint64_t asked = extension_due();
        /* ours, the mark absent or below: raised before anything else */
        extended(&(struct store_extended){.ok = true,
                                          .n = {.held = true,
                                                .lease = LEASE,
                                                .value_is = true,
                                                .marked = true,
                                                .mark_valid = true,
                                                .mark = asked - 5000,
                                                .mark_rev = 120}});
        only(HOLD_DO_RAISE);
        assert_int_equal(find(HOLD_DO_DEADLINE), -1);
        assert_int_equal(find(HOLD_DO_LOST), -1);
        assert_int_equal(k.cur.marking, MARK_RAISING);
        v.mono_ms += 1000;
        tick();
        assert_int_equal(find(HOLD_DO_EXTEND), -1);
        /* a raise for another holding changes nothing; its own ends it */
        step(&(struct hold_in){.kind = HOLD_IN_RAISED, .holding = ID + 1});
        assert_int_equal(k.cur.marking, MARK_RAISING);
        step(&(struct hold_in){.kind = HOLD_IN_RAISED, .holding = ID});
        assert_int_equal(k.cur.marking, MARK_STILL);
        tick();
        assert_true(find(HOLD_DO_EXTEND) >= 0);
}

static void test_forgotten(void **state)
{
        (void)state;
        extension_due();
        /* the mark read at a revision below the one acknowledged: restored */
        extended(&(struct store_extended){.ok = true,
                                          .n = {.held = true,
                                                .lease = LEASE,
                                                .value_is = true,
                                                .marked = true,
                                                .mark_valid = true,
                                                .mark = k.cur.mark,
                                                .mark_rev = 90}});
        const struct hold_action *t = only(HOLD_DO_RESTORED);
        assert_int_equal(t->say, HOLD_SAY_AT_EXTENSION);
        assert_int_equal(t->a, 100);
        assert_int_equal(t->b, 90);
        assert_int_equal(find(HOLD_DO_DEADLINE), -1);
}

static void test_not_ours(void **state)
{
        (void)state;
        struct store_extended other = {.ok = true,
                                       .n = {.held = true,
                                             .lease = 999,
                                             .marked = true,
                                             .mark_valid = true,
                                             .mark = NOW,
                                             .mark_rev = 140}};
        /* the lease has time: asked at once (once the keepalive in flight
         * is answered); alive, the key was written over */
        extension_due();
        kept(TTL_S);
        extended(&other);
        only(HOLD_DO_KEEPALIVE);
        assert_int_equal(find(HOLD_DO_LOST), -1);
        kept(TTL_S);
        assert_int_equal(only(HOLD_DO_LOST)->say, HOLD_SAY_WRITTEN_OVER);
        assert_int_equal(k.cur.state, H_LOST);
        /* the lease past its time: lost at once */
        setup(NULL);
        extension_due();
        v.boot_ms = k.cur.lease_until_ms;
        extended(&other);
        assert_int_equal(only(HOLD_DO_LOST)->say, HOLD_SAY_TAKEN);
        /* a lost number is not renewed, nor lost twice */
        tick();
        kept(0);
        assert_int_equal(find(HOLD_DO_LOST), -1);
}

static void test_lease(void **state)
{
        (void)state;
        /* unknown before its TTL could run out: its mark read */
        tick();
        kept(0);
        assert_int_equal(out.a[0].say, HOLD_SAY_UNKNOWN_EARLY);
        assert_int_equal(out.a[0].a, 9000);
        only(HOLD_DO_CHECK);
        assert_int_equal(find(HOLD_DO_LOST), -1);
        assert_int_equal(k.cur.leasing, LEASE_CHECKING);
        /* no keepalive meanwhile */
        v.mono_ms += 100000;
        tick();
        assert_int_equal(find(HOLD_DO_KEEPALIVE), -1);
        /* unknown after it: expired */
        setup(NULL);
        tick();
        v.boot_ms += 9000;
        kept(0);
        assert_int_equal(only(HOLD_DO_LOST)->say, HOLD_SAY_EXPIRED);
        /* no answer: asked again at the next tick */
        setup(NULL);
        tick();
        kept(-1);
        assert_int_equal(out.a[0].say, HOLD_SAY_KEEPALIVE_FAILED);
        tick();
        only(HOLD_DO_KEEPALIVE);
        /* halted as restored: the lease's answers mean nothing */
        v.restored = true;
        kept(0);
        assert_int_equal(out.n, 0);
}

static void checked(const struct store_number *n)
{
        struct store_read rd = {.ok = true, .succeeded = true, .same = 1, .n = *n};
        step(&(struct hold_in){.kind = HOLD_IN_CHECKED, .tag = ID, .read = &rd});
}

static void to_check(void)
{
        tick();
        kept(0);
        only(HOLD_DO_CHECK);
}

static void test_lease_check(void **state)
{
        (void)state;
        struct store_number ours = {.held = true,
                                    .lease = LEASE,
                                    .value_is = true,
                                    .marked = true,
                                    .mark_valid = true,
                                    .mark = k.cur.mark,
                                    .mark_rev = 100};
        /* another holder's claim on it: the store forgot this one's */
        to_check();
        struct store_number n = ours;
        n.lease = 555;
        checked(&n);
        assert_int_equal(only(HOLD_DO_TAKEN_BACK)->b, 1);
        /* its mark below the one acknowledged */
        setup(NULL);
        to_check();
        n = ours;
        n.mark -= 1;
        checked(&n);
        assert_int_equal(only(HOLD_DO_TAKEN_BACK)->a, ours.mark - 1);
        /* its mark at a lower revision than the one acknowledged */
        setup(NULL);
        to_check();
        n = ours;
        n.mark_rev = 99;
        checked(&n);
        assert_int_equal(only(HOLD_DO_RESTORED)->say, HOLD_SAY_AT_LEASE_CHECK);
        /* as written: revoked early, lost */
        setup(NULL);
        to_check();
        checked(&ours);
        assert_int_equal(only(HOLD_DO_LOST)->say, HOLD_SAY_REVOKED_EARLY);
        /* unreadable: read again; not sent: lost */
        setup(NULL);
        to_check();
        n = ours;
        n.malformed = true;
        checked(&n);
        only(HOLD_DO_CHECK);
        step(&(struct hold_in){.kind = HOLD_IN_CHECKED, .tag = ID, .unsent = true});
        assert_int_equal(only(HOLD_DO_LOST)->say, HOLD_SAY_CHECK_UNSENT);
}

static void test_fenced(void **state)
{
        (void)state;
        extension_due();
        step(&(struct hold_in){.kind = HOLD_IN_FENCED});
        assert_int_equal(k.cur.state, H_LOST);
        assert_int_equal(k.cur.lease, 0);
        assert_int_equal(k.cur.mark_rev, 0);
        /* its extension's answer, after: nothing published */
        extended(&(struct store_extended){.ok = true, .succeeded = true, .revision = 300});
        assert_int_equal(out.n, 0);
        assert_true(k.cur.mark < k.cur.pending);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_schedule, setup),
                cmocka_unit_test_setup(test_deadline, setup),
                cmocka_unit_test_setup(test_deadline_never_above_acked, setup),
                cmocka_unit_test_setup(test_unsent, setup),
                cmocka_unit_test_setup(test_mark_low, setup),
                cmocka_unit_test_setup(test_forgotten, setup),
                cmocka_unit_test_setup(test_not_ours, setup),
                cmocka_unit_test_setup(test_lease, setup),
                cmocka_unit_test_setup(test_lease_check, setup),
                cmocka_unit_test_setup(test_fenced, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
