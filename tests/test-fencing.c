/* SPDX-License-Identifier: MIT */
/*
 * `snowid fence`'s decision (daemon/core/fencing.c), case by case: what it
 * claims above (the clock bound with the largest lead left, witnesses'
 * deadlines, the stored fence, the floor, the marks), when it refuses (a
 * store restored, replaced or without a fence, unless a witness or
 * --lost-lead says what came after), which witnesses count, and the era the
 * new fence comes after.  Built with mutants 16, 17, 25 and 26 of the
 * model (the rules it decides by), each must fail (fencing-mutant-k).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fencing.h"

#define EPOCH UINT64_C(1735689600000)
#define WALL (EPOCH + UINT64_C(60000000000)) /* this host's clock, Unix ms */
#define NOW (WALL - EPOCH)                   /* the same, in ID time */
#define CID UINT64_C(4242)                   /* the store's cluster ID */
#define AHEAD UINT64_C(60000)
#define BOUND (NOW + AHEAD + 15000) /* ahead + window 10 s + mark step 5 s */

static struct fencing_settings set;
static struct cluster_ident old;
static struct fencing_read rd;
static struct fencing_witness wit[4];
static struct fencing_decision d;

/* A store that holds a fence made an hour ago on this cluster, which gave
 * no lead (claims above the clock then), and nothing else. */
static int setup(void **state)
{
        (void)state;
        set = (struct fencing_settings){.epoch_ms = EPOCH,
                                        .time_bits = 41,
                                        .window_s = 10,
                                        .mark_step_s = 5,
                                        .slew_us_per_s = 0,
                                        .ahead_ms = AHEAD,
                                        .lost_lead_ms = -1};
        old = (struct cluster_ident){
                .era = WALL - 3600000, .claims_above = NOW - 3600000, .cluster_id = CID};
        memset(wit, 0, sizeof(wit));
        rd = (struct fencing_read){.cluster_id = CID, .fence = &old, .witnesses = wit};
        return 0;
}

static void decide(void)
{
        fencing_decide(&set, WALL, &rd, &d);
}

/* A witness of a fence (era, claims_above) with its highest deadline. */
static void witness(uint64_t era, uint64_t above, uint64_t deadline)
{
        wit[rd.n_witnesses++] = (struct fencing_witness){
                .era = (int64_t)era, .claims_above = (int64_t)above, .deadline = (int64_t)deadline};
}

static void test_clock_bound(void **state)
{
        (void)state;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.above, BOUND);
        assert_int_equal(d.bound, BOUND);
        assert_int_equal(d.era, old.era);
        assert_true(d.same_cluster);
        assert_int_equal(d.far_ahead_ms, 0);
}

static void test_stored_values(void **state)
{
        (void)state;
        /* each of the floor, the highest mark and the stored claims_above,
         * past the bound, is what the fence claims above */
        rd.floor_present = true;
        rd.floor = BOUND + 7;
        decide();
        assert_int_equal(d.above, BOUND + 7);
        assert_int_equal(d.far_ahead_ms, 7);
        rd.highest = BOUND + 9;
        decide();
        assert_int_equal(d.above, BOUND + 9);
        assert_int_equal(d.far_ahead_ms, 9);
        old.claims_above = BOUND + 11;
        old.era = WALL + 86400000; /* its lead is all ahead of the era: none */
        decide();
        assert_int_equal(d.above, BOUND + 11);
        /* a floor not there counts as none */
        setup(NULL);
        rd.floor = BOUND + 7;
        decide();
        assert_int_equal(d.above, BOUND);
}

static void test_previous_lead(void **state)
{
        (void)state;
        /* the last fence, made a minute ago, claimed 75 s past its clock:
         * hosts that claimed after it run that lead still (no slewing) */
        old.era = WALL - 60000;
        old.claims_above = NOW - 60000 + 75000;
        decide();
        assert_int_equal(d.lead_left, 75000);
        assert_int_equal(d.above, BOUND + 75000);
        /* slewing at 1 ms/s brings 60 ms of it back a minute later */
        set.slew_us_per_s = 1000;
        decide();
        assert_int_equal(d.lead_left, 75000 - 60);
        assert_int_equal(d.above, BOUND + 75000 - 60);
        /* --ahead 0 (no restore): the intact marks cover the stored lead */
        set.slew_us_per_s = 0;
        set.ahead_ms = 0;
        decide();
        assert_int_equal(d.lead_left, 0);
        assert_int_equal(d.above, BOUND - AHEAD);
}

static void test_fenceless_refused(void **state)
{
        (void)state;
        rd.fence = NULL;
        decide();
        assert_int_equal(d.verdict, FENCING_REFUSE_FENCELESS);
        /* a fence of no era is as none */
        rd.fence = &old;
        old.era = 0;
        decide();
        assert_int_equal(d.verdict, FENCING_REFUSE_FENCELESS);
        /* --lost-lead 0: the operator says no fence came after */
        set.lost_lead_ms = 0;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.above, BOUND);
}

static void test_replaced_refused(void **state)
{
        (void)state;
        rd.cluster_id = CID + 1;
        decide();
        assert_int_equal(d.verdict, FENCING_REFUSE_REPLACED);
        assert_false(d.same_cluster);
        /* the lost fence's lead, from the operator, on top of the bound */
        set.lost_lead_ms = 90000;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.lost_lead, 90000);
        assert_int_equal(d.above, BOUND + 90000);
        /* a store that names no cluster, or a fence that names none, is not
         * told replaced */
        setup(NULL);
        rd.cluster_id = 0;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        rd.cluster_id = CID + 1;
        old.cluster_id = 0;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_false(d.same_cluster);
}

static void test_witness(void **state)
{
        (void)state;
        /* restored without its last fence; a halted daemon knew a later one
         * (made 10 s ago, with a 75 s lead) and published up to +100 s */
        rd.cluster_id = CID + 1;
        witness(WALL - 10000, NOW - 10000 + 75000, NOW + 100000);
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.witnesses, 1);
        assert_int_equal(d.current, 1);
        assert_int_equal(d.witness_lead_left, 75000);
        assert_int_equal(d.witness_deadline, NOW + 100000);
        assert_int_equal(d.above, BOUND + 75000);
        assert_int_equal(d.era, WALL - 10000);
        /* its deadline counts when it is past the bound with the lead */
        wit[0].deadline = (int64_t)(BOUND + 80000);
        decide();
        assert_int_equal(d.above, BOUND + 80000);
        assert_int_equal(d.far_ahead_ms, 5000);
}

static void test_witness_not_current(void **state)
{
        (void)state;
        /* a witness of a fence older than the stored one shows nothing
         * after it: a replaced store is still refused, but its deadline
         * and lead still count once the operator gives --lost-lead */
        rd.cluster_id = CID + 1;
        witness(old.era - 1000, 0, BOUND + 3);
        decide();
        assert_int_equal(d.verdict, FENCING_REFUSE_REPLACED);
        assert_int_equal(d.witnesses, 1);
        assert_int_equal(d.current, 0);
        set.lost_lead_ms = 0;
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.above, BOUND + 3);
        assert_int_equal(d.era, old.era);
}

static void test_witness_invalid(void **state)
{
        (void)state;
        rd.fence = NULL;
        /* a field missing, a deadline or claims_above past the time bits,
         * an era over a day ahead: none counts, so none lets the fence go */
        witness(WALL, NOW, NOW);
        wit[0].deadline = -1;
        witness(WALL, NOW, UINT64_C(1) << 41);
        witness(WALL, UINT64_C(1) << 41, NOW);
        witness(WALL + 86400001, NOW, NOW);
        for (size_t i = 0; i < rd.n_witnesses; i++)
                assert_false(fencing_witness_valid(&set, WALL, &wit[i]));
        decide();
        assert_int_equal(d.verdict, FENCING_REFUSE_FENCELESS);
        assert_int_equal(d.witnesses, 0);
        /* the same a day ahead at most counts */
        wit[3].era = (int64_t)(WALL + 86400000);
        assert_true(fencing_witness_valid(&set, WALL, &wit[3]));
        decide();
        assert_int_equal(d.verdict, FENCING_WRITE);
        assert_int_equal(d.witnesses, 1);
        assert_int_equal(d.era, WALL + 86400000);
}

static void test_largest_lead(void **state)
{
        (void)state;
        /* the leads are not added: each carries what was left of those
         * before it, so the largest counts */
        old.era = WALL - 60000;
        old.claims_above = NOW - 60000 + 20000;
        witness(WALL - 30000, NOW - 30000 + 50000, 0);
        set.lost_lead_ms = 30000;
        decide();
        assert_int_equal(d.lead_left, 20000);
        assert_int_equal(d.witness_lead_left, 50000);
        assert_int_equal(d.above, BOUND + 50000);
        set.lost_lead_ms = 70000;
        decide();
        assert_int_equal(d.above, BOUND + 70000);
}

static void test_own_lead(void **state)
{
        (void)state;
        assert_int_equal(fencing_own_lead_ms(&set), AHEAD + 15000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_clock_bound, setup),
                cmocka_unit_test_setup(test_stored_values, setup),
                cmocka_unit_test_setup(test_previous_lead, setup),
                cmocka_unit_test_setup(test_fenceless_refused, setup),
                cmocka_unit_test_setup(test_replaced_refused, setup),
                cmocka_unit_test_setup(test_witness, setup),
                cmocka_unit_test_setup(test_witness_not_current, setup),
                cmocka_unit_test_setup(test_witness_invalid, setup),
                cmocka_unit_test_setup(test_largest_lead, setup),
                cmocka_unit_test_setup(test_own_lead, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
