/* SPDX-License-Identifier: MIT */
/*
 * The rules of docs/fences.md (daemon/rules/rules.c), case by case: each
 * decision at its edges, and for each mutant the model has (spin
 * -DMUTANT=k), a case that the same mutant of the rules (-DSNOWID_MUTANT=k,
 * built by tests/meson.build as test-rules-mutant-k) gets wrong, so that
 * every such build fails here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "choose.h"
#include "rules.h"
#include "schedule.h"
#include "verdict.h"

#define NOW UINT64_C(60000000000)

static uint64_t start(bool marked, uint64_t mark, uint64_t floor, uint64_t above, uint64_t own)
{
        const struct rule3_claim c = {.now = NOW,
                                      .marked = marked,
                                      .mark = mark,
                                      .floor = floor,
                                      .claims_above = above,
                                      .own_last = own};
        return rule3_claim_start(&c);
}

/* Rule 3; mutants 3 (the mark), 4 (the floor), 5 (claims_above), 6 (own). */
static void test_rule3(void **state)
{
        (void)state;
        /* everything behind the clock: now */
        assert_int_equal(start(true, NOW - 5000, NOW - 1000, NOW - 9000, NOW - 7000), NOW);
        /* the mark ahead: just above it */
        assert_int_equal(start(true, NOW + 4000, 0, 0, 0), NOW + 4001);
        assert_int_equal(start(true, NOW, 0, 0, 0), NOW + 1);
        /* a marked number: the floor is not its mark */
        assert_int_equal(start(true, 10, NOW + 9000, 0, 0), NOW);
        /* no mark: above the floor with slack, never 0 */
        assert_int_equal(rule3_mark(false, 0, NOW), NOW + RULE3_FLOOR_SLACK_MS);
        assert_int_equal(rule3_mark(true, 77, NOW), 77);
        assert_int_equal(start(false, 0, NOW + 3000, 0, 0), NOW + 3001 + RULE3_FLOOR_SLACK_MS);
        assert_int_equal(start(false, 0, 0, 0, 0) > 0, true);
        /* claims_above and this daemon's own last deadline */
        assert_int_equal(start(true, 0, 0, NOW + 20000, 0), NOW + 20001);
        assert_int_equal(start(true, 0, 0, 0, NOW + 30000), NOW + 30001);
        assert_int_equal(start(true, NOW + 1, 0, NOW + 2, NOW + 3), NOW + 4);
        /* extremes (UBSan): no overflow at the top of 63 bits */
        assert_true(start(true, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX) > (uint64_t)INT64_MAX);
}

/* Rule 4; mutants 7 (a low mark abandoned, not raised), 8 and 15 (unconfirmed). */
static void test_rule4(void **state)
{
        (void)state;
        assert_int_equal(rule4_extension(true, true, 0, 100), RULE4_EXTENDED);
        assert_int_equal(rule4_extension(false, false, 100, 100), RULE4_NOT_OURS);
        assert_int_equal(rule4_extension(false, false, 0, 100), RULE4_NOT_OURS);
        /* ours, the mark absent (0) or below what was asked: raised */
        assert_int_equal(rule4_extension(false, true, 0, 100), RULE4_RAISE);
        assert_int_equal(rule4_extension(false, true, 99, 100), RULE4_RAISE);
        /* ours, already at or above it (another extension got there) */
        assert_int_equal(rule4_extension(false, true, 100, 100), RULE4_EXTENDED);
        assert_int_equal(rule4_extension(false, true, 150, 100), RULE4_EXTENDED);

        assert_true(rule4_confirmed(true, 10, 10));
        assert_true(rule4_confirmed(true, 11, 10));
        assert_false(rule4_confirmed(true, 9, 10));
        assert_false(rule4_confirmed(false, 0, 10));  /* absent */
        assert_false(rule4_confirmed(false, 50, 10)); /* damaged */
}

/* Rule 5; mutants 9 (revisions), 12 (cluster IDs), 13 (forgotten writes),
 * 14 (a lease unknown early). */
static void test_rule5(void **state)
{
        (void)state;
        assert_int_equal(rule5_answer(7, 7, 10, 10, true), RULE5_AS_SEEN);
        assert_int_equal(rule5_answer(7, 7, 10, 11, true), RULE5_AS_SEEN);
        assert_int_equal(rule5_answer(7, 7, 10, 9, true), RULE5_WENT_BACK);
        assert_int_equal(rule5_answer(7, 7, 10, 9, false), RULE5_BEHIND);
        assert_int_equal(rule5_answer(7, 8, 10, 50, true), RULE5_WENT_BACK);
        assert_int_equal(rule5_answer(7, 8, 10, 50, false), RULE5_WENT_BACK);
        /* no cluster known yet, or none in the answer */
        assert_int_equal(rule5_answer(0, 8, 0, 50, false), RULE5_AS_SEEN);
        assert_int_equal(rule5_answer(7, 0, 0, 50, true), RULE5_AS_SEEN);

        assert_true(rule5_foreign_fence(7, 8));
        assert_false(rule5_foreign_fence(7, 7));
        assert_false(rule5_foreign_fence(0, 8)); /* a fence that names none */
        assert_false(rule5_foreign_fence(7, 0));

        assert_true(rule5_forgotten(10, 9));
        assert_false(rule5_forgotten(10, 10));
        assert_false(rule5_forgotten(10, 11)); /* written since, by this daemon or another */
        assert_false(rule5_forgotten(0, 9));   /* no write of it acknowledged */
        assert_false(rule5_forgotten(10, 0));  /* absent: a deletion, which rule 4 raises */

        /* a 10 s lease asked at 1000: a second of margin */
        assert_int_equal(rule5_lease_until(1000, 10), 10000);
        /* a 60 s lease: a tenth */
        assert_int_equal(rule5_lease_until(1000, 60), 1000 + 54000);
        assert_int_equal(rule5_lease_until(1000, 1), 0);
        assert_int_equal(rule5_lease_until(1000, 0), 0);
        assert_int_equal(rule5_lease_until(1000, -3), 0);

        assert_int_equal(rule5_lease_answer(5, 100, 200), RULE5_LEASE_LIVES);
        assert_int_equal(rule5_lease_answer(0, 100, 200), RULE5_LEASE_UNKNOWN_EARLY);
        assert_int_equal(rule5_lease_answer(-1, 199, 200), RULE5_LEASE_UNKNOWN_EARLY);
        assert_int_equal(rule5_lease_answer(0, 200, 200), RULE5_LEASE_EXPIRED);
        assert_int_equal(rule5_lease_answer(0, 100, 0), RULE5_LEASE_EXPIRED);

        assert_true(rule5_taken_back(true, true, 100, 100));
        assert_true(rule5_taken_back(false, true, 99, 100));
        assert_false(rule5_taken_back(false, true, 100, 100));
        assert_false(rule5_taken_back(false, false, 0, 100)); /* absent: deleted, not forgotten */
}

static struct cluster_ident fence(const char *token, uint64_t era, uint64_t above, bool made)
{
        struct cluster_ident c = {.era = era, .claims_above = above, .made = made};
        strncpy(c.token, token, sizeof(c.token) - 1);
        c.fence_len = (size_t)snprintf(c.fence, sizeof(c.fence), "{%s,%llu,%llu,%d}", token,
                                       (unsigned long long)era, (unsigned long long)above, made);
        return c;
}

/* Rule 6: fences read; mutants 10 (re-raise), 11 (settle), 16 and 17
 * (the fence's bound and lead), 25 (witnesses). */
static void test_rule6(void **state)
{
        (void)state;
        struct cluster_ident known = fence("aa", 1000, 50, false);
        struct cluster_ident same = known, later = fence("bb", 2000, 60, false),
                             older = fence("cc", 900, 60, false),
                             same_era = fence("dd", 1000, 60, false),
                             made = fence("ee", 3000, 70, true),
                             first = fence("ff", 3000, 0, false);
        assert_int_equal(rule6_fence_read(NULL, &made, false), RULE6_ADOPT);
        assert_int_equal(rule6_fence_read(&known, &same, false), RULE6_SAME);
        assert_int_equal(rule6_fence_read(&known, &same, true), RULE6_RESTORED);
        assert_int_equal(rule6_fence_read(&known, &later, false), RULE6_ADOPT);
        assert_int_equal(rule6_fence_read(&known, &later, true), RULE6_ADOPT);
        assert_int_equal(rule6_fence_read(&known, &older, false), RULE6_RESTORED);
        assert_int_equal(rule6_fence_read(&known, &same_era, false), RULE6_ADOPT);
        assert_int_equal(rule6_fence_read(&known, &made, false), RULE6_RESTORED);
        assert_int_equal(rule6_fence_read(&known, &first, false), RULE6_RESTORED);

        assert_true(rule6_reraise(101, 100));
        assert_false(rule6_reraise(100, 100));

        /* mark-step 5 s, renew 1 s, store-timeout 2 s: 5 + 1 + 3 x 2 + 1 */
        const uint64_t settle = rule6_settle_ms(5, 1000, 2000), era = 1800000000000;
        assert_int_equal(settle, 13000);
        struct cluster_ident c = fence("aa", era, 5, false);
        assert_int_equal(rule6_settle_left_ms(&c, era, settle), settle);
        assert_int_equal(rule6_settle_left_ms(&c, era + 4000, settle), 9000);
        assert_int_equal(rule6_settle_left_ms(&c, era + settle - 1, settle), 1);
        assert_int_equal(rule6_settle_left_ms(&c, era + settle, settle), 0);
        assert_int_equal(rule6_settle_left_ms(&c, era - 2000, settle),
                         settle);       /* its clock ahead */
        c = fence("aa", era, 0, false); /* claims_above 0: an earlier snowid's first */
        assert_int_equal(rule6_settle_left_ms(&c, era, settle), 0);
        c = fence("aa", era, 5, true); /* made with the cluster */
        assert_int_equal(rule6_settle_left_ms(&c, era, settle), 0);
        c = fence("aa", 0, 5, false);
        assert_int_equal(rule6_settle_left_ms(&c, era, settle), 0);

        /* the clock bound: ID time (wall less epoch) + ahead + window + step */
        assert_int_equal(rule6_clock_bound(1000, 61000, 60000, 3, 5), 60000 + 60000 + 8000);
        assert_int_equal(rule6_clock_bound(1000, 500, 60000, 3, 5), 60000 + 8000);

        /* a fence at era 100 s (ID time) that claimed above 175 s: a 75 s
         * lead, slewed back at 1000 us/s: 1 ms per second since */
        assert_int_equal(rule6_lead_left(0, 100000, 175000, 100000, 1000), 75000);
        assert_int_equal(rule6_lead_left(0, 100000, 175000, 110000, 1000), 74990);
        assert_int_equal(rule6_lead_left(0, 100000, 175000, 100000 + 75000000, 1000), 0);
        assert_int_equal(rule6_lead_left(0, 100000, 90000, 100000, 1000), 0);
        assert_int_equal(rule6_lead_left(0, 0, 175000, 100000, 1000), 0);
        assert_int_equal(rule6_lead_left(50000, 150000, 175000, 100000, 1000), 75000);

        struct rule6_fence_in in = {.clock_bound = 100000,
                                    .lead_left = 75000,
                                    .witness_lead_left = 20000,
                                    .lost_lead = 30000,
                                    .floor = 90000,
                                    .highest_mark = 95000,
                                    .stored_above = 80000};
        /* the largest lead, not the sum */
        assert_int_equal(rule6_fence_lead(&in), 175000);
        assert_int_equal(rule6_fence_above(&in), 175000);
        in.witness_lead_left = 90000;
        assert_int_equal(rule6_fence_above(&in), 190000);
        in.witness_deadline = 250000;
        assert_int_equal(rule6_fence_above(&in), 250000);
        /* what is stored, when it is higher */
        in = (struct rule6_fence_in){.clock_bound = 100000, .highest_mark = 300000};
        assert_int_equal(rule6_fence_above(&in), 300000);
        in = (struct rule6_fence_in){.clock_bound = 100000, .floor = 310000};
        assert_int_equal(rule6_fence_above(&in), 310000);
        in = (struct rule6_fence_in){.clock_bound = 100000, .stored_above = 320000};
        assert_int_equal(rule6_fence_above(&in), 320000);
}

/* Rule 7; mutants 23 (a cluster made at 0), 24 (despite a witness), 26
 * (the fence does not refuse). */
static void test_rule7(void **state)
{
        (void)state;
        assert_true(rule7_may_make(true, false));
        assert_false(rule7_may_make(true, true));
        assert_false(rule7_may_make(false, false));
        assert_false(rule7_may_make(false, true));

        assert_int_equal(rule7_made_above(1000, 61000, 3, 5), 60000 + FENCE_AHEAD_MS + 8000);

        assert_true(rule7_fence_refuses(true, false, false));
        assert_false(rule7_fence_refuses(true, true, false));
        assert_false(rule7_fence_refuses(true, false, true));
        assert_false(rule7_fence_refuses(false, false, false));
}

/* ---- which number to claim (choose.c) ---- */

static uint64_t draw_first(void *state, uint64_t n)
{
        (void)state;
        (void)n;
        return 0; /* the last candidate seen wins */
}

static uint64_t draw_never(void *state, uint64_t n)
{
        (void)state;
        return n - 1 > 0 ? 1 : 0; /* the first candidate alone wins */
}

static struct choice choose(struct store_number *nums, uint64_t first, uint64_t last,
                            int32_t prefer, bool handing_over, bool fresh, bool sampled,
                            uint64_t (*draw)(void *, uint64_t))
{
        const struct choose_in in = {.numbers = nums,
                                     .first = first,
                                     .last = last,
                                     .floor = NOW - 50000,
                                     .now = NOW,
                                     .claims_above = NOW - 60000,
                                     .prefer = prefer,
                                     .prefer_handing_over = handing_over,
                                     .fresh = fresh,
                                     .sampled = sampled,
                                     .lead_ms = 15000,
                                     .step_ms = 5000,
                                     .draw = draw};
        return claim_choose(&in);
}

static void marked(struct store_number *x, uint64_t mark)
{
        *x = (struct store_number){.marked = true, .mark_valid = true, .mark = mark, .mark_rev = 9};
}

static void test_choose(void **state)
{
        (void)state;
        struct store_number n[8];
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW - 1000 * (uint64_t)(i + 1));
        /* free and behind the clock: any; never a held one or a damaged mark */
        n[7].held = true;
        n[6].mark_valid = false;
        struct choice c = choose(n, 0, 7, -1, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_equal(c.worker, 5);
        assert_false(c.ahead);
        assert_int_equal(c.mark, NOW - 6000);
        c = choose(n, 0, 7, -1, false, false, false, draw_never);
        assert_int_equal(c.worker, 0);
        /* the range only */
        c = choose(n, 2, 3, -1, false, false, false, draw_first);
        assert_int_equal(c.worker, 3);
        /* a number without a mark counts as above the floor: behind the
         * clock here (the floor is 50 s back) */
        n[3] = (struct store_number){0};
        c = choose(n, 3, 3, -1, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_equal(c.mark, NOW - 50000 + RULE3_FLOOR_SLACK_MS);
        /* the preferred number, over any other, when free and not ahead */
        c = choose(n, 0, 7, 1, false, false, false, draw_first);
        assert_int_equal(c.worker, 1);
        /* not when fresh, nor when unmarked */
        c = choose(n, 0, 7, 1, false, true, false, draw_first);
        assert_int_equal(c.worker, 5);
        c = choose(n, 0, 7, 3, false, false, false, draw_first);
        assert_int_equal(c.worker, 5);
        /* still this host's, handing over: wait for it */
        n[1].held = true;
        c = choose(n, 0, 7, 1, true, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_WAIT);
        assert_int_equal(c.worker, 1);
        /* every free mark ahead */
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW + 5000 + 300 * (uint64_t)i);
        n[0].held = true;
        /* a sample, every free number ahead by no more than a live
         * holder's mark leads: claimed from as it is (the spread over the
         * sample's own numbers), not read in full */
        c = choose(n, 0, 7, -1, false, false, true, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_true(c.ahead);
        assert_int_equal(c.worker, 4);
        /* further ahead than that, or a fresh number wanted: read them all */
        for (int i = 1; i < 8; i++)
                marked(&n[i], NOW + 15001 + 300 * (uint64_t)i);
        c = choose(n, 0, 7, -1, false, false, true, draw_first);
        assert_int_equal(c.kind, CHOOSE_SCAN_ALL);
        /* ... unless no start can be lower anyway: the fence's claims_above */
        struct choose_in fenced = {.numbers = n,
                                   .first = 0,
                                   .last = 7,
                                   .now = NOW,
                                   .claims_above = NOW + 15300,
                                   .prefer = -1,
                                   .sampled = true,
                                   .lead_ms = 15000,
                                   .draw = draw_never};
        c = claim_choose(&fenced);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_equal(c.worker, 1);
        fenced.claims_above = NOW + 15299;
        assert_int_equal(claim_choose(&fenced).kind, CHOOSE_SCAN_ALL);
        /* numbers never marked, at a floor within the lead: the sample may
         * have missed the few behind the clock, so every number is read */
        struct store_number fresh[8];
        for (int i = 0; i < 8; i++)
                fresh[i] = (struct store_number){0};
        fresh[0].held = true;
        struct choose_in unmarked = {.numbers = fresh,
                                     .first = 0,
                                     .last = 7,
                                     .floor = NOW + 5000,
                                     .now = NOW,
                                     .prefer = -1,
                                     .sampled = true,
                                     .lead_ms = 15000,
                                     .draw = draw_never};
        assert_int_equal(claim_choose(&unmarked).kind, CHOOSE_SCAN_ALL);
        unmarked.sampled = false;
        assert_int_equal(claim_choose(&unmarked).kind, CHOOSE_CLAIM);
        for (int i = 1; i < 8; i++)
                marked(&n[i], NOW + 5000 + 300 * (uint64_t)i);
        c = choose(n, 0, 7, -1, false, true, true, draw_first);
        assert_int_equal(c.kind, CHOOSE_SCAN_ALL);
        c = choose(n, 0, 7, -1, false, true, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_NONE_FRESH);
        c = choose(n, 0, 7, -1, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_true(c.ahead);
        /* within the spread of the lowest free mark (number 1's) */
        assert_int_equal(c.worker, 4);
        assert_int_equal(c.mark, NOW + 5000 + 1200);
        c = choose(n, 0, 7, -1, false, false, false, draw_never);
        assert_int_equal(c.worker, 1);
        /* the spread: the lowest free mark and those within 1 s of it */
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW + 9000);
        marked(&n[2], NOW + 5000);
        marked(&n[5], NOW + 6000);
        marked(&n[6], NOW + 6001);
        c = choose(n, 0, 7, -1, false, false, false, draw_first);
        assert_int_equal(c.worker, 5);
        /* a mark at the clock is not behind it */
        marked(&n[3], NOW);
        c = choose(n, 3, 3, -1, false, false, false, draw_first);
        assert_true(c.ahead);
        /* the preferred number: taken when its claim would start no further
         * ahead of the lowest start any claim could have (here the clock's)
         * than a live holder's mark leads it (15 s), even with numbers
         * behind the clock free (in a full space, others' numbers, slower
         * to restart); never, further */
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW - 1000);
        marked(&n[4], NOW + 15001);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_not_equal(c.worker, 4);
        assert_true(c.mark < NOW); /* one behind the clock */
        assert_false(c.ahead);
        marked(&n[4], NOW + 15000);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 4);
        assert_int_equal(c.mark, NOW + 15000);
        assert_false(c.ahead); /* numbers behind the clock are free */
        marked(&n[4], NOW + 5001);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 4);
        /* every free mark ahead (a fleet restarted at once): within a mark
         * step of the lowest, where the draw would pick another */
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW + 2000 + 100 * (uint64_t)i);
        marked(&n[4], NOW + 7000);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_equal(c.worker, 4);
        assert_true(c.ahead);
        c = choose(n, 0, 7, 4, false, false, true, draw_first); /* its sample, too */
        assert_int_equal(c.worker, 4);
        /* further above the lowest, but no further ahead than a live
         * holder's mark leads the clock (15 s): still its own */
        marked(&n[4], NOW + 15000);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 4);
        assert_true(c.ahead);
        c = choose(n, 0, 7, 4, false, false, true, draw_first); /* its sample, too */
        assert_int_equal(c.worker, 4);
        marked(&n[4], NOW + 15001); /* further: any other */
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 7);
        /* after a fence far ahead (claims above NOW + 30 s), counted from
         * the lowest start a claim can have, the fence's */
        marked(&n[4], NOW + 45000);
        struct choose_in ahead = {.numbers = n,
                                  .first = 0,
                                  .last = 7,
                                  .floor = NOW - 50000,
                                  .now = NOW,
                                  .claims_above = NOW + 30000,
                                  .prefer = 4,
                                  .lead_ms = 15000,
                                  .step_ms = 5000,
                                  .draw = draw_first};
        assert_int_equal(claim_choose(&ahead).worker, 4);
        marked(&n[4], NOW + 45002);
        assert_int_equal(claim_choose(&ahead).worker, 7);
        /* with a number behind the clock free, the clock's lead is the
         * bound, not the fence's (claims_above behind the clock) */
        marked(&n[4], NOW + 15001);
        marked(&n[2], NOW - 1000);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 2);
        marked(&n[4], NOW + 14000);
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 4);
        marked(&n[2], NOW + 2200);
        marked(&n[4], NOW + 2400);
        n[4].held = true; /* taken: any other */
        c = choose(n, 0, 7, 4, false, false, false, draw_first);
        assert_int_equal(c.worker, 7);
        /* a sample whose lowest is further ahead than a live holder's
         * mark: every number read first, for a better one */
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW + 15001 + 100 * (uint64_t)i);
        c = choose(n, 0, 7, 4, false, false, true, draw_first);
        assert_int_equal(c.kind, CHOOSE_SCAN_ALL);
        for (int i = 0; i < 8; i++)
                marked(&n[i], NOW - 1000);
        marked(&n[4], NOW + 3000);
        /* with no step: only behind what the fence claims above anyway */
        const struct choose_in above = {.numbers = n,
                                        .first = 0,
                                        .last = 7,
                                        .now = NOW,
                                        .claims_above = NOW + 5000,
                                        .prefer = 4,
                                        .draw = draw_never};
        assert_int_equal(claim_choose(&above).worker, 4);
        /* handing over, but free again, or outside the range: no wait */
        c = choose(n, 0, 7, 1, true, false, false, draw_never);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        assert_int_equal(c.worker, 1);
        n[6].held = true;
        c = choose(n, 0, 5, 6, true, false, false, draw_never);
        assert_int_equal(c.kind, CHOOSE_CLAIM);
        /* nothing free: a sample reads every number first; a fresh number
         * waits as any other */
        for (int i = 0; i < 8; i++)
                n[i].held = true;
        c = choose(n, 0, 7, -1, false, false, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_ALL_TAKEN);
        c = choose(n, 0, 7, -1, false, false, true, draw_first);
        assert_int_equal(c.kind, CHOOSE_SCAN_ALL);
        c = choose(n, 0, 7, -1, false, true, false, draw_first);
        assert_int_equal(c.kind, CHOOSE_ALL_TAKEN);
}

/* ---- what a read of the cluster means (verdict.c) ---- */

static void test_verdict(void **state)
{
        (void)state;
        struct cluster_ident known = fence("aa", 1000, 50, false);
        struct store_cluster none = {.ok = true, .marks_zero = true};
        struct cluster_known first = {0}, k = {.cl = &known, .answer_cluster = 7};
        /* never used, nothing known: made; a witness, a holder, a mark above
         * 0 or a fence key: not */
        assert_int_equal(cluster_verdict(&none, &first), CLUSTER_MAKE);
        struct store_cluster c = none;
        c.witnessed = true;
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_LAYOUT_LOST);
        c = none, c.held = true;
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_LAYOUT_LOST);
        c = none, c.marks_zero = false;
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_LAYOUT_LOST);
        c = none, c.fence = -1;
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_LAYOUT_LOST);
        c = none, c.floor = -1; /* a damaged floor is not an absent one */
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_LAYOUT_LOST);
        /* a daemon that knew the cluster never makes it */
        assert_int_equal(cluster_verdict(&none, &k), CLUSTER_LAYOUT_LOST);
        c = none, c.malformed = true;
        assert_int_equal(cluster_verdict(&c, &first), CLUSTER_MALFORMED);
        /* the layout there */
        struct store_cluster ok = {.ok = true, .layout = 1, .fence = 1, .floor = 1, .c = known};
        assert_int_equal(cluster_verdict(&ok, &k), CLUSTER_GO);
        assert_int_equal(cluster_verdict(&ok, &first), CLUSTER_GO);
        c = ok, c.layout = -1;
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_LAYOUT_BAD);
        c = ok, c.fence = 0;
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_FENCE_LOST);
        c = ok, c.floor = -1; /* damaged: as if lost */
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_FENCE_LOST);
        /* a fence written on another cluster */
        c = ok, c.c.cluster_id = 8;
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_FOREIGN);
        c.c.cluster_id = 7;
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_GO);
        /* this daemon's own write forgotten; not looked for while halted */
        struct cluster_known acked = k;
        acked.acked_rev = 30;
        c = ok, c.own_read = true, c.own_mark_rev = 20;
        assert_int_equal(cluster_verdict(&c, &acked), CLUSTER_FORGOTTEN);
        acked.halted = true;
        assert_int_equal(cluster_verdict(&c, &acked), CLUSTER_GO);
        c.own_mark_rev = 31;
        acked.halted = false;
        assert_int_equal(cluster_verdict(&c, &acked), CLUSTER_GO);
        c.own_mark_rev = 20, c.own_read = false; /* not read: nothing to go by */
        assert_int_equal(cluster_verdict(&c, &acked), CLUSTER_GO);
        /* the fence: the known one after a restore, an older one, a later one */
        struct cluster_known restored = k;
        restored.restore_seen = true;
        assert_int_equal(cluster_verdict(&ok, &restored), CLUSTER_RESTORED);
        c = ok, c.c = fence("bb", 900, 60, false);
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_RESTORED);
        c.c = fence("bb", 2000, 60, false);
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_GO);
        assert_int_equal(cluster_verdict(&c, &restored), CLUSTER_GO);
        c.c = fence("bb", 2000, 60, true); /* made anew */
        assert_int_equal(cluster_verdict(&c, &k), CLUSTER_RESTORED);
}

/* ---- when a held number is renewed (schedule.c) ---- */

static void test_schedule(void **state)
{
        (void)state;
        /* window 3 s, mark-step 5 s, TTL 10 s; the deadline 6 s ahead */
        const struct renew_in rest = {.now = NOW,
                                      .mark = NOW + 6000,
                                      .window_ms = 3000,
                                      .step_ms = 5000,
                                      .time_bits = 41,
                                      .mono = 50000,
                                      .keepalive_next = 49000,
                                      .ttl_ms = 10000};
        struct renew_plan p = renew_decide(&rest);
        /* headroom above the window: the mark is left as it is */
        assert_false(p.extend);
        assert_true(p.keepalive);
        assert_int_equal(p.keepalive_next, 50000 + 3333);
        /* the headroom below the window: extended to now + window + step */
        struct renew_in in = rest;
        in.mark = NOW + 2999;
        p = renew_decide(&in);
        assert_true(p.extend);
        assert_int_equal(p.extend_to, NOW + 8000);
        in.mark = NOW + 3000;
        assert_false(renew_decide(&in).extend);
        /* one extension at a time; none while raising or halted */
        in.mark = NOW;
        in.extend_busy = true;
        assert_false(renew_decide(&in).extend);
        in.extend_busy = false, in.raising = true;
        assert_false(renew_decide(&in).extend);
        in.raising = false, in.halted = true;
        assert_false(renew_decide(&in).extend);
        assert_true(renew_decide(&in).keepalive); /* the lease is kept while halted */
        /* a mark past the layout's time bits is never written */
        in.halted = false, in.time_bits = 20;
        assert_false(renew_decide(&in).extend);
        /* keepalives: a third of the TTL apart, one at a time, none while the
         * lease's loss is read; at once when asked */
        in = rest;
        in.keepalive_next = 50001;
        p = renew_decide(&in);
        assert_false(p.keepalive);
        assert_int_equal(p.keepalive_next, 50001);
        in.keepalive_now = true;
        assert_true(renew_decide(&in).keepalive);
        in.keepalive_busy = true;
        assert_false(renew_decide(&in).keepalive);
        in.keepalive_busy = false, in.lease_checking = true;
        assert_false(renew_decide(&in).keepalive);
}

static void test_answer(void **state)
{
        (void)state;
        const struct answer_seen ok = {.answered = true, .status = 200, .layout_ready = true};
        struct answer_verdict v = answer_verdict(&ok);
        assert_true(v.reachable);
        assert_false(v.halt_restored || v.check_cluster || v.full || v.skip);
        struct answer_seen a = ok;
        a.status = 503;
        assert_false(answer_verdict(&a).reachable);
        a = ok, a.answered = false, a.status = 0;
        assert_false(answer_verdict(&a).reachable);
        /* a refusal says nothing else */
        a = ok, a.refused = true, a.went_back = true, a.nospace = true;
        v = answer_verdict(&a);
        assert_true(v.skip);
        assert_false(v.halt_restored || v.full);
        /* a lease answer from another history halts; a kv answer is its
         * handler's; nothing before the cluster is read, or while halted */
        a = ok, a.went_back = true;
        assert_true(answer_verdict(&a).halt_restored);
        a.kv = true;
        assert_false(answer_verdict(&a).halt_restored);
        a = ok, a.went_back = true, a.layout_ready = false;
        assert_false(answer_verdict(&a).halt_restored);
        a = ok, a.went_back = true, a.halted = true;
        assert_false(answer_verdict(&a).halt_restored);
        /* a lease answer that lags: the cluster read; not when halting on it */
        a = ok, a.behind = true;
        assert_true(answer_verdict(&a).check_cluster);
        a.went_back = true;
        v = answer_verdict(&a);
        assert_true(v.halt_restored);
        assert_false(v.check_cluster);
        a = ok, a.behind = true, a.halted = true;
        assert_false(answer_verdict(&a).check_cluster);
        a = ok, a.nospace = true;
        assert_true(answer_verdict(&a).full);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rule3),   cmocka_unit_test(test_rule4),
                cmocka_unit_test(test_rule5),   cmocka_unit_test(test_rule6),
                cmocka_unit_test(test_rule7),   cmocka_unit_test(test_choose),
                cmocka_unit_test(test_verdict), cmocka_unit_test(test_schedule),
                cmocka_unit_test(test_answer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
