/* SPDX-License-Identifier: MIT */
/*
 * The marks' pure core (daemon/core/raise.c), input by input: a mark raised
 * by reading it and putting it back, the lease of a number given up revoked
 * only once its mark is confirmed, the marks published raised again on a
 * fence or a restore.  Answers are made by hand; the same tests built with
 * the mutants of the rules it decides by must fail (raise-mutant-k).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "raise.h"
#include "rules.h"

#define NOW UINT64_C(60000000000)
#define TTL_S 9

static struct raises m;
static struct raise_view v;
static struct holding cur;
static struct raise_ready out;

static int setup(void **state)
{
        (void)state;
        raise_init(&m, TTL_S);
        cur = (struct holding){.state = H_NONE, .worker = -1};
        v = (struct raise_view){.mono_ms = 10000000, .claims_above = NOW - 100000, .cur = &cur};
        return 0;
}

static void step(const struct raise_in *in)
{
        raise_step(&m, &v, in, &out);
}

static int count(enum raise_do what)
{
        int n = 0;
        for (unsigned i = 0; i < out.n; i++)
                n += out.a[i].what == what;
        return n;
}

static const struct raise_action *first(enum raise_do what)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == what)
                        return &out.a[i];
        fail_msg("no action %d", what);
        return NULL;
}

static bool said(enum raise_say s)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == RAISE_DO_SAY && out.a[i].say == s)
                        return true;
        return false;
}

static void raise_to(int32_t worker, uint64_t mark, int64_t lease, uint64_t holding, int64_t acked)
{
        step(&(struct raise_in){.kind = RAISE_IN_RAISE,
                                .worker = worker,
                                .mark = mark,
                                .lease = lease,
                                .for_holding = holding,
                                .acked_rev = acked});
}

static void answer(uint64_t id, const struct store_raised *rs)
{
        step(&(struct raise_in){.kind = RAISE_IN_ANSWER, .tag = id, .raised = rs});
}

static struct store_raised read_as(bool present, uint64_t mark, int64_t modrev)
{
        return (struct store_raised){
                .ok = true,
                .succeeded = true,
                .same = 1,
                .n = {.marked = present, .mark_valid = present, .mark = mark, .mark_rev = modrev}};
}

static void test_confirmed(void **state)
{
        (void)state;
        raise_to(5, NOW, 77, 0, 0);
        const struct raise_action *s = first(RAISE_DO_SEND);
        uint64_t id = s->id;
        assert_int_equal(s->worker, 5);
        assert_int_equal(s->b, 0); /* a read first */
        assert_int_equal(count(RAISE_DO_KEEP_IN), 1);
        assert_true(raise_active(&m));
        assert_true(raise_handing_over(&m, 5));
        assert_false(raise_handing_over(&m, 6));
        /* read at the target: confirmed, the lease revoked */
        struct store_raised rs = read_as(true, NOW, 40);
        answer(id, &rs);
        assert_int_equal(first(RAISE_DO_REVOKE)->lease, 77);
        assert_int_equal(count(RAISE_DO_ENDED), 1);
        assert_false(raise_active(&m));
        /* its answer again: nothing */
        answer(id, &rs);
        assert_int_equal(out.n, 0);
}

static void test_raised_back(void **state)
{
        (void)state;
        raise_to(5, NOW, 77, 42, 0);
        uint64_t id = first(RAISE_DO_SEND)->id;
        /* below: put back comparing the mod revision read */
        struct store_raised rs = read_as(true, NOW - 10, 40);
        answer(id, &rs);
        assert_true(said(RAISE_SAY_READS_LOW));
        assert_int_equal(count(RAISE_DO_REVOKE), 0);
        const struct raise_action *s = first(RAISE_DO_SEND);
        assert_int_equal(s->b, 1);
        assert_int_equal(s->a, NOW);
        assert_int_equal(s->modrev, 40);
        /* the put applied: confirmed; the holding waiting is told */
        answer(id, &(struct store_raised){.ok = true, .succeeded = true, .put = true, .same = 1});
        assert_true(said(RAISE_SAY_RAISED_BACK));
        assert_int_equal(first(RAISE_DO_REVOKE)->lease, 77);
        assert_int_equal(first(RAISE_DO_RAISED)->a, 42);
        /* absent: put comparing mod revision 0 */
        raise_to(6, NOW, 0, 0, 0);
        id = first(RAISE_DO_SEND)->id;
        rs = read_as(false, 0, 0);
        answer(id, &rs);
        assert_int_equal(first(RAISE_DO_SEND)->modrev, 0);
        assert_int_equal(first(RAISE_DO_SEND)->b, 1);
}

/* The test that would catch a duplicate ID at a give-up: whatever the
 * store answers, a raise's lease is revoked only in answer to a read that
 * shows the mark at or above the target, or a put of the target. */
static void test_revoked_only_confirmed(void **state)
{
        (void)state;
        uint64_t x = 7;
        for (int k = 0; k < 3000; k++) {
                setup(NULL);
                raise_to(5, NOW, 77, 0, 0);
                uint64_t id = first(RAISE_DO_SEND)->id;
                for (int i = 0; i < 20 && raise_active(&m); i++) {
                        x = x * 6364136223846793005u + 1442695040888963407u;
                        struct store_raised rs = {.ok = true, .succeeded = true, .same = 1};
                        bool confirms = false;
                        switch ((x >> 33) % 5) {
                        case 0:
                                rs.ok = false; /* no answer */
                                break;
                        case 1:
                                rs.n = (struct store_number){.marked = true,
                                                             .mark_valid = true,
                                                             .mark = NOW - 1 - (x >> 50) % 100,
                                                             .mark_rev = 50};
                                break;
                        case 2:
                                rs.n = (struct store_number){.marked = true,
                                                             .mark_valid = false,
                                                             .mark = NOW + 5,
                                                             .mark_rev = 50};
                                break;
                        case 3:
                                rs.n = (struct store_number){.marked = true,
                                                             .mark_valid = true,
                                                             .mark = NOW + (x >> 50) % 3,
                                                             .mark_rev = 50};
                                confirms = true;
                                break;
                        default:
                                rs.put = (x >> 20) & 1;
                                confirms = rs.put;
                                break;
                        }
                        answer(id, &rs);
                        if (count(RAISE_DO_REVOKE))
                                assert_true(confirms);
                        if (count(RAISE_DO_WAIT))
                                step(&(struct raise_in){.kind = RAISE_IN_TIMER});
                }
        }
}

static void test_forgotten(void **state)
{
        (void)state;
        /* this daemon's write at revision 50, read back at 40: restored;
         * nothing written over it, and the lease not revoked */
        raise_to(5, NOW, 77, 0, 50);
        uint64_t id = first(RAISE_DO_SEND)->id;
        struct store_raised rs = read_as(true, NOW - 10, 40);
        answer(id, &rs);
        const struct raise_action *t = first(RAISE_DO_RESTORED);
        assert_int_equal(t->a, 50);
        assert_int_equal(t->b, 40);
        assert_int_equal(count(RAISE_DO_SEND), 0);
        assert_int_equal(count(RAISE_DO_REVOKE), 0);
        assert_false(raise_active(&m));
        /* merged while waiting: the highest write acknowledged counts */
        setup(NULL);
        struct store_raised none = {.ok = false};
        raise_to(5, NOW, 0, 0, 30);
        id = first(RAISE_DO_SEND)->id;
        answer(id, &none);
        raise_to(5, NOW, 0, 0, 50);
        step(&(struct raise_in){.kind = RAISE_IN_TIMER});
        answer(id, &rs);
        assert_int_equal(count(RAISE_DO_RESTORED), 1);
        /* a fence: the revisions of the old history forgotten */
        setup(NULL);
        raise_to(5, NOW, 0, 0, 50);
        id = first(RAISE_DO_SEND)->id;
        answer(id, &none);
        step(&(struct raise_in){.kind = RAISE_IN_FENCED});
        step(&(struct raise_in){.kind = RAISE_IN_TIMER});
        answer(id, &rs);
        assert_int_equal(count(RAISE_DO_RESTORED), 0);
        assert_true(said(RAISE_SAY_READS_LOW));
}

static void test_rule1(void **state)
{
        (void)state;
        /* another fence, the cluster halted: given up, unconfirmed */
        raise_to(5, NOW, 77, 0, 0);
        uint64_t id = first(RAISE_DO_SEND)->id;
        struct store_raised rs = read_as(true, NOW + 1, 40);
        step(&(struct raise_in){.kind = RAISE_IN_ANSWER,
                                .tag = id,
                                .not_current = true,
                                .halted = true,
                                .raised = &rs});
        assert_int_equal(count(RAISE_DO_REVOKE), 0);
        assert_false(raise_active(&m));
        /* a malformed answer, not halted: again */
        raise_to(5, NOW, 77, 0, 0);
        id = first(RAISE_DO_SEND)->id;
        step(&(struct raise_in){
                .kind = RAISE_IN_ANSWER, .tag = id, .not_current = true, .raised = &rs});
        assert_int_equal(count(RAISE_DO_WAIT), 1);
        step(&(struct raise_in){.kind = RAISE_IN_TIMER});
        assert_int_equal(count(RAISE_DO_SEND), 1);
        /* halted as restored: on against the store as it is, until another
         * fence is found there */
        step(&(struct raise_in){
                .kind = RAISE_IN_ANSWER, .tag = id, .restored = true, .raised = &rs});
        assert_int_equal(count(RAISE_DO_REVOKE), 1);
        raise_to(6, NOW, 78, 0, 0);
        id = first(RAISE_DO_SEND)->id;
        rs = (struct store_raised){.ok = true, .succeeded = false, .same = 0};
        step(&(struct raise_in){
                .kind = RAISE_IN_ANSWER, .tag = id, .restored = true, .raised = &rs});
        assert_int_equal(count(RAISE_DO_REVOKE), 0);
        assert_false(raise_active(&m));
}

static void test_merged(void **state)
{
        (void)state;
        /* one raise per number, to the highest mark; both leases wait */
        raise_to(5, NOW, 77, 0, 0);
        uint64_t id = first(RAISE_DO_SEND)->id;
        raise_to(5, NOW + 500, 78, 0, 0);
        assert_int_equal(count(RAISE_DO_SEND), 0);
        struct store_raised rs = read_as(true, NOW + 100, 40);
        answer(id, &rs);
        assert_int_equal(count(RAISE_DO_REVOKE), 0); /* below the higher mark */
        answer(id, &(struct store_raised){.ok = true, .succeeded = true, .put = true, .same = 1});
        assert_int_equal(count(RAISE_DO_REVOKE), 2);
        /* a put of a mark below one merged in meanwhile confirms nothing:
         * read again */
        raise_to(8, NOW, 81, 0, 0);
        id = first(RAISE_DO_SEND)->id;
        rs = read_as(true, NOW - 1, 40);
        answer(id, &rs);
        assert_int_equal(first(RAISE_DO_SEND)->b, 1); /* the put of NOW in flight */
        raise_to(8, NOW + 900, 82, 0, 0);
        answer(id, &(struct store_raised){.ok = true, .succeeded = true, .put = true, .same = 1});
        assert_int_equal(count(RAISE_DO_REVOKE), 0);
        assert_int_equal(first(RAISE_DO_SEND)->b, 0);
        /* the holding waiting for a raise, named in a merge, is told */
        raise_to(9, NOW, 0, 0, 0);
        id = first(RAISE_DO_SEND)->id;
        raise_to(9, NOW, 0, 42, 0);
        rs = read_as(true, NOW, 40);
        answer(id, &rs);
        assert_int_equal(first(RAISE_DO_RAISED)->a, 42);
        /* a third lease at once is left to expire */
        raise_to(7, NOW, 1, 0, 0);
        raise_to(7, NOW, 2, 0, 0);
        raise_to(7, NOW, 3, 0, 0);
        assert_true(said(RAISE_SAY_THREE_TIMES));
}

static void test_keep(void **state)
{
        (void)state;
        raise_to(5, NOW, 77, 0, 0);
        uint64_t id = first(RAISE_DO_SEND)->id;
        assert_int_equal(first(RAISE_DO_KEEP_IN)->a, TTL_S * 1000 / 3);
        raise_to(6, NOW, 78, 0, 0);
        assert_int_equal(count(RAISE_DO_KEEP_IN), 0); /* armed already */
        raise_to(6, NOW, 79, 0, 0);                   /* a second lease on 6 */
        step(&(struct raise_in){.kind = RAISE_IN_KEEP});
        assert_int_equal(count(RAISE_DO_KEEPALIVE), 3);
        bool kept79 = false;
        for (unsigned i = 0; i < out.n; i++)
                kept79 |= out.a[i].what == RAISE_DO_KEEPALIVE && out.a[i].lease == 79;
        assert_true(kept79);
        assert_int_equal(count(RAISE_DO_KEEP_IN), 1);
        step(&(struct raise_in){.kind = RAISE_IN_KEPT, .tag = id, .ttl_s = 0});
        assert_true(said(RAISE_SAY_LEASE_GONE));
        step(&(struct raise_in){.kind = RAISE_IN_KEPT, .tag = id, .ttl_s = 0});
        assert_false(said(RAISE_SAY_LEASE_GONE));
}

static void test_published(void **state)
{
        (void)state;
        step(&(struct raise_in){.kind = RAISE_IN_RETIRED, .worker = 3, .mark = NOW - 200000});
        step(&(struct raise_in){.kind = RAISE_IN_RETIRED, .worker = 4, .mark = NOW});
        v.mono_ms += 1000;
        step(&(struct raise_in){.kind = RAISE_IN_RETIRED, .worker = 8, .mark = NOW + 7});
        cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 100};
        assert_int_equal(raise_highest(&m, &cur, v.mono_ms), NOW + 100);
        cur.state = H_NONE;
        assert_int_equal(raise_highest(&m, &cur, v.mono_ms), NOW + 7);
        /* a fence: the deadlines past its claims_above raised again */
        step(&(struct raise_in){.kind = RAISE_IN_FENCED});
        assert_int_equal(count(RAISE_DO_SEND), 2);
        assert_true(said(RAISE_SAY_PAST_FENCE));
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == RAISE_DO_SEND)
                        assert_int_not_equal(out.a[i].worker, 3);
        /* an hour on, none */
        setup(NULL);
        step(&(struct raise_in){.kind = RAISE_IN_RETIRED, .worker = 4, .mark = NOW});
        v.mono_ms += PUBLISHED_KEEP_MS;
        step(&(struct raise_in){.kind = RAISE_IN_FENCED});
        assert_int_equal(count(RAISE_DO_SEND), 0);
        /* a restore: the held number's and the hour's */
        setup(NULL);
        step(&(struct raise_in){.kind = RAISE_IN_RETIRED, .worker = 4, .mark = NOW - 500000});
        cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 100};
        step(&(struct raise_in){.kind = RAISE_IN_PROTECT});
        assert_int_equal(count(RAISE_DO_SEND), 2);
}

static void test_too_many(void **state)
{
        (void)state;
        for (int32_t w = 0; w < RAISES_MAX; w++)
                raise_to(w, NOW, 0, 0, 0);
        raise_to(RAISES_MAX, NOW, 99, 42, 0);
        assert_true(said(RAISE_SAY_TOO_MANY));
        assert_int_equal(first(RAISE_DO_REVOKE)->lease, 99);
        assert_int_equal(first(RAISE_DO_RAISED)->a, 42);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_confirmed, setup),
                cmocka_unit_test_setup(test_raised_back, setup),
                cmocka_unit_test_setup(test_revoked_only_confirmed, setup),
                cmocka_unit_test_setup(test_forgotten, setup),
                cmocka_unit_test_setup(test_rule1, setup),
                cmocka_unit_test_setup(test_merged, setup),
                cmocka_unit_test_setup(test_keep, setup),
                cmocka_unit_test_setup(test_published, setup),
                cmocka_unit_test_setup(test_too_many, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
