/* SPDX-License-Identifier: MIT */
/*
 * The rules of docs/fences.md as pure decisions (rules.h).  SNOWID_MUTANT
 * is defined only by the rules' tests: each `#if SNOWID_MUTANT == k` is
 * model/snowid.pml's mutant k, the rule's guard turned off.
 */
#include <string.h>

#include "rules.h"

#ifndef SNOWID_MUTANT
#define SNOWID_MUTANT 0
#endif

rules_note_fn *rules_note;

/* Each decision as rules.h declares it: decided (decide_...), then noted
 * for a trace if one is recorded.  The inputs are noted in the order
 * model/replay.c reads them. */
#define NOTE(name, result, ...)                                                                    \
        do {                                                                                       \
                if (rules_note) {                                                                  \
                        const int64_t in_[] = {__VA_ARGS__};                                       \
                        rules_note(name, sizeof(in_) / sizeof(in_[0]), in_, (int64_t)(result));    \
                }                                                                                  \
        } while (0)

static uint64_t max2(uint64_t a, uint64_t b)
{
        return a > b ? a : b;
}

/* ---- rule 3 ---- */

uint64_t rule3_mark(bool marked, uint64_t mark, uint64_t floor)
{
        if (marked)
                return mark;
#if SNOWID_MUTANT == 4 /* an unmarked number trusted as 0: the floor ignored */
        (void)floor;
        return 0;
#else
        return floor + RULE3_FLOOR_SLACK_MS;
#endif
}

static uint64_t decide_rule3_claim_start(const struct rule3_claim *c)
{
        uint64_t start = max2(c->now, rule3_mark(c->marked, c->mark, c->floor) + 1);
#if SNOWID_MUTANT == 3 /* a marked number starts at now */
        if (c->marked)
                start = c->now;
#endif
#if SNOWID_MUTANT != 5
        start = max2(start, c->claims_above + 1);
#endif
#if SNOWID_MUTANT != 6
        start = max2(start, c->own_last + 1);
#endif
        return start;
}

/* ---- rule 4 ---- */

static enum rule4_extension decide_rule4_extension(bool succeeded, bool ours, uint64_t stored,
                                                   uint64_t asked)
{
        if (succeeded)
                return RULE4_EXTENDED;
        if (!ours)
                return RULE4_NOT_OURS;
#if SNOWID_MUTANT == 7 /* a mark read back absent or low is abandoned, not raised */
        return stored < asked ? RULE4_NOT_OURS : RULE4_EXTENDED;
#else
        return stored < asked ? RULE4_RAISE : RULE4_EXTENDED;
#endif
}

static bool decide_rule4_confirmed(bool valid, uint64_t stored, uint64_t target)
{
#if SNOWID_MUTANT == 8 || SNOWID_MUTANT == 15 /* given up unconfirmed */
        (void)valid;
        (void)stored;
        (void)target;
        return true;
#else
        return valid && stored >= target;
#endif
}

/* ---- rule 5 ---- */

static enum rule5_answer decide_rule5_answer(uint64_t known, uint64_t cluster, int64_t rev_at_send,
                                             int64_t revision, bool linearizable)
{
#if SNOWID_MUTANT != 12
        if (known && cluster && cluster != known)
                return RULE5_WENT_BACK;
#endif
#if SNOWID_MUTANT != 9
        if (revision < rev_at_send)
                return linearizable ? RULE5_WENT_BACK : RULE5_BEHIND;
#endif
        (void)known;
        (void)cluster;
        (void)rev_at_send;
        (void)revision;
        (void)linearizable;
        return RULE5_AS_SEEN;
}

static bool decide_rule5_foreign_fence(uint64_t fence_cluster, uint64_t answer_cluster)
{
#if SNOWID_MUTANT == 12
        (void)fence_cluster;
        (void)answer_cluster;
        return false;
#else
        return fence_cluster && answer_cluster && fence_cluster != answer_cluster;
#endif
}

static bool decide_rule5_forgotten(int64_t acked_rev, int64_t modrev)
{
#if SNOWID_MUTANT == 13
        (void)acked_rev;
        (void)modrev;
        return false;
#else
        return acked_rev && modrev && modrev < acked_rev;
#endif
}

static uint64_t decide_rule5_lease_until(uint64_t asked_ms, int64_t ttl_s)
{
        if (ttl_s <= 0)
                return 0;
        /* the store counts the TTL from when it took the request, after it
         * was sent: a second (or a tenth of the TTL) of margin for its clock */
        uint64_t ttl_ms = (uint64_t)ttl_s * 1000, margin = max2(ttl_ms / 10, 1000);
        return ttl_ms > margin ? asked_ms + ttl_ms - margin : 0;
}

static enum rule5_lease decide_rule5_lease_answer(int64_t ttl_s, uint64_t boot_ms,
                                                  uint64_t lease_until_ms)
{
        if (ttl_s > 0)
                return RULE5_LEASE_LIVES;
#if SNOWID_MUTANT == 14 /* a lease unknown early taken as expired */
        (void)boot_ms;
        (void)lease_until_ms;
        return RULE5_LEASE_EXPIRED;
#else
        return boot_ms < lease_until_ms ? RULE5_LEASE_UNKNOWN_EARLY : RULE5_LEASE_EXPIRED;
#endif
}

static bool decide_rule5_taken_back(bool other, bool present, uint64_t stored, uint64_t acked_mark)
{
        return other || (present && stored < acked_mark);
}

/* ---- rule 6 ---- */

static enum rule6_fence decide_rule6_fence_read(const struct cluster_ident *known,
                                                const struct cluster_ident *read, bool restore_seen)
{
        if (!known)
                return RULE6_ADOPT;
        if (fence_same(known, read))
                return restore_seen ? RULE6_RESTORED : RULE6_SAME;
        /* later, or (a fence made after a restore brought an older one back)
         * the same era with another token */
        bool newer = read->era > known->era ||
                     (read->era == known->era && strcmp(read->token, known->token));
        /* a cluster's first fence to a daemon that knew the cluster: made
         * anew (a wiped prefix, a snapshot without it) */
        return newer && !fence_first(read) ? RULE6_ADOPT : RULE6_RESTORED;
}

static bool decide_rule6_reraise(uint64_t published, uint64_t claims_above)
{
#if SNOWID_MUTANT == 10
        (void)published;
        (void)claims_above;
        return false;
#else
        return published > claims_above;
#endif
}

#define SETTLE_CLOCKS_MS 1000

static uint64_t decide_rule6_settle_ms(unsigned mark_step_s, unsigned renew_ms,
                                       unsigned store_timeout_ms)
{
#if SNOWID_MUTANT == 11
        (void)mark_step_s;
        (void)renew_ms;
        (void)store_timeout_ms;
        return 0;
#else
        return (uint64_t)mark_step_s * 1000 + renew_ms + 3 * (uint64_t)store_timeout_ms +
               SETTLE_CLOCKS_MS;
#endif
}

static uint64_t decide_rule6_settle_left_ms(const struct cluster_ident *c, uint64_t wall_ms,
                                            uint64_t settle_ms)
{
        if (fence_first(c) || !c->era)
                return 0;
        uint64_t age = wall_ms > c->era ? wall_ms - c->era : 0;
        return age < settle_ms ? settle_ms - age : 0;
}

static uint64_t decide_rule6_clock_bound(uint64_t epoch_ms, uint64_t wall_unix_ms,
                                         uint64_t ahead_ms, unsigned window_s, unsigned mark_step_s)
{
        uint64_t id_ms = wall_unix_ms > epoch_ms ? wall_unix_ms - epoch_ms : 0;
        return id_ms + ahead_ms + ((uint64_t)window_s + mark_step_s) * 1000;
}

static uint64_t decide_rule6_lead_left(uint64_t epoch_ms, uint64_t era, uint64_t claims_above,
                                       uint64_t now_id_ms, unsigned slew_us_per_s)
{
#if SNOWID_MUTANT == 17 /* the lead of the fence before not counted */
        (void)epoch_ms;
        (void)era;
        (void)claims_above;
        (void)now_id_ms;
        (void)slew_us_per_s;
        return 0;
#else
        uint64_t era_id = era > epoch_ms ? era - epoch_ms : 0;
        if (!era || claims_above <= era_id)
                return 0;
        uint64_t lead = claims_above - era_id;
        uint64_t since_s = now_id_ms > era_id ? (now_id_ms - era_id) / 1000 : 0;
        uint64_t back = since_s * slew_us_per_s / 1000;
        return back >= lead ? 0 : lead - back;
#endif
}

static uint64_t decide_rule6_fence_lead(const struct rule6_fence_in *in)
{
        uint64_t left = in->lead_left;
#if SNOWID_MUTANT != 25
        left = max2(left, in->witness_lead_left);
#endif
#if SNOWID_MUTANT == 16 /* no clock bound: the floor and the marks alone */
        (void)left;
        return 0;
#else
        return in->clock_bound + max2(in->lost_lead, left);
#endif
}

static uint64_t decide_rule6_fence_above(const struct rule6_fence_in *in)
{
        uint64_t above = decide_rule6_fence_lead(in);
#if SNOWID_MUTANT != 25
        above = max2(above, in->witness_deadline);
#endif
        above = max2(above, in->stored_above);
        above = max2(above, in->floor);
        return max2(above, in->highest_mark);
}

/* ---- rule 7 ---- */

static bool decide_rule7_may_make(bool never_used, bool witnessed)
{
#if SNOWID_MUTANT == 24
        (void)witnessed;
        return never_used;
#else
        return never_used && !witnessed;
#endif
}

static uint64_t decide_rule7_made_above(uint64_t epoch_ms, uint64_t wall_unix_ms, unsigned window_s,
                                        unsigned mark_step_s)
{
#if SNOWID_MUTANT == 23 /* a cluster made anew claims above 0 */
        (void)epoch_ms;
        (void)wall_unix_ms;
        (void)window_s;
        (void)mark_step_s;
        return 0;
#else
        return decide_rule6_clock_bound(epoch_ms, wall_unix_ms, FENCE_AHEAD_MS, window_s,
                                        mark_step_s);
#endif
}

static bool decide_rule7_fence_refuses(bool replaced_or_fenceless, bool witness_current,
                                       bool lost_lead_given)
{
#if SNOWID_MUTANT == 26
        (void)replaced_or_fenceless;
        (void)witness_current;
        (void)lost_lead_given;
        return false;
#else
        return replaced_or_fenceless && !witness_current && !lost_lead_given;
#endif
}

/* ---- each decision, noted ---- */

uint64_t rule3_claim_start(const struct rule3_claim *c)
{
        uint64_t r = decide_rule3_claim_start(c);
        /* own: the last deadline published + 1, 0 for none (as the model) */
        NOTE("rule3_claim_start", r, RULE3_FLOOR_SLACK_MS, c->now, c->marked, c->mark, c->floor,
             c->claims_above, c->own_last ? c->own_last + 1 : 0);
        return r;
}

enum rule4_extension rule4_extension(bool succeeded, bool ours, uint64_t stored, uint64_t asked)
{
        enum rule4_extension r = decide_rule4_extension(succeeded, ours, stored, asked);
        NOTE("rule4_extension", r, succeeded, ours, stored, asked);
        return r;
}

bool rule4_confirmed(bool valid, uint64_t stored, uint64_t target)
{
        bool r = decide_rule4_confirmed(valid, stored, target);
        NOTE("rule4_confirmed", r, valid, stored, target);
        return r;
}

enum rule5_answer rule5_answer(uint64_t known, uint64_t cluster, int64_t rev_at_send,
                               int64_t revision, bool linearizable)
{
        enum rule5_answer r =
                decide_rule5_answer(known, cluster, rev_at_send, revision, linearizable);
        NOTE("rule5_answer", r, known, cluster, rev_at_send, revision, linearizable);
        return r;
}

bool rule5_foreign_fence(uint64_t fence_cluster, uint64_t answer_cluster)
{
        bool r = decide_rule5_foreign_fence(fence_cluster, answer_cluster);
        NOTE("rule5_foreign_fence", r, fence_cluster, answer_cluster);
        return r;
}

bool rule5_forgotten(int64_t acked_rev, int64_t modrev)
{
        bool r = decide_rule5_forgotten(acked_rev, modrev);
        NOTE("rule5_forgotten", r, acked_rev, modrev);
        return r;
}

uint64_t rule5_lease_until(uint64_t asked_ms, int64_t ttl_s)
{
        uint64_t r = decide_rule5_lease_until(asked_ms, ttl_s);
        NOTE("rule5_lease_until", r, asked_ms, ttl_s);
        return r;
}

enum rule5_lease rule5_lease_answer(int64_t ttl_s, uint64_t boot_ms, uint64_t lease_until_ms)
{
        enum rule5_lease r = decide_rule5_lease_answer(ttl_s, boot_ms, lease_until_ms);
        NOTE("rule5_lease_answer", r, ttl_s, boot_ms, lease_until_ms);
        return r;
}

bool rule5_taken_back(bool other, bool present, uint64_t stored, uint64_t acked_mark)
{
        bool r = decide_rule5_taken_back(other, present, stored, acked_mark);
        NOTE("rule5_taken_back", r, other, present, stored, acked_mark);
        return r;
}

enum rule6_fence rule6_fence_read(const struct cluster_ident *known,
                                  const struct cluster_ident *read, bool restore_seen)
{
        enum rule6_fence r = decide_rule6_fence_read(known, read, restore_seen);
        /* the fences as the decision sees them: known at all, the same
         * bytes, their eras, another token, the read one a cluster's first */
        NOTE("rule6_fence_read", r, known != NULL, known && fence_same(known, read), restore_seen,
             read->era, known ? known->era : 0, known && strcmp(read->token, known->token) != 0,
             fence_first(read));
        return r;
}

bool rule6_reraise(uint64_t published, uint64_t claims_above)
{
        bool r = decide_rule6_reraise(published, claims_above);
        NOTE("rule6_reraise", r, published, claims_above);
        return r;
}

uint64_t rule6_settle_ms(unsigned mark_step_s, unsigned renew_ms, unsigned store_timeout_ms)
{
        uint64_t r = decide_rule6_settle_ms(mark_step_s, renew_ms, store_timeout_ms);
        NOTE("rule6_settle_ms", r, mark_step_s, renew_ms, store_timeout_ms);
        return r;
}

uint64_t rule6_settle_left_ms(const struct cluster_ident *c, uint64_t wall_ms, uint64_t settle_ms)
{
        uint64_t r = decide_rule6_settle_left_ms(c, wall_ms, settle_ms);
        NOTE("rule6_settle_left_ms", r, fence_first(c), c->era, wall_ms, settle_ms);
        return r;
}

uint64_t rule6_clock_bound(uint64_t epoch_ms, uint64_t wall_unix_ms, uint64_t ahead_ms,
                           unsigned window_s, unsigned mark_step_s)
{
        uint64_t r =
                decide_rule6_clock_bound(epoch_ms, wall_unix_ms, ahead_ms, window_s, mark_step_s);
        NOTE("rule6_clock_bound", r, epoch_ms, wall_unix_ms, ahead_ms, window_s, mark_step_s);
        return r;
}

uint64_t rule6_lead_left(uint64_t epoch_ms, uint64_t era, uint64_t claims_above, uint64_t now_id_ms,
                         unsigned slew_us_per_s)
{
        uint64_t r = decide_rule6_lead_left(epoch_ms, era, claims_above, now_id_ms, slew_us_per_s);
        NOTE("rule6_lead_left", r, epoch_ms, era, claims_above, now_id_ms, slew_us_per_s);
        return r;
}

#define FENCE_IN(in)                                                                               \
        (in)->clock_bound, (in)->lead_left, (in)->witness_lead_left, (in)->witness_deadline,       \
                (in)->lost_lead, (in)->stored_above, (in)->floor, (in)->highest_mark

uint64_t rule6_fence_lead(const struct rule6_fence_in *in)
{
        uint64_t r = decide_rule6_fence_lead(in);
        NOTE("rule6_fence_lead", r, FENCE_IN(in));
        return r;
}

uint64_t rule6_fence_above(const struct rule6_fence_in *in)
{
        uint64_t r = decide_rule6_fence_above(in);
        NOTE("rule6_fence_above", r, FENCE_IN(in));
        return r;
}

bool rule7_may_make(bool never_used, bool witnessed)
{
        bool r = decide_rule7_may_make(never_used, witnessed);
        NOTE("rule7_may_make", r, never_used, witnessed);
        return r;
}

uint64_t rule7_made_above(uint64_t epoch_ms, uint64_t wall_unix_ms, unsigned window_s,
                          unsigned mark_step_s)
{
        uint64_t r = decide_rule7_made_above(epoch_ms, wall_unix_ms, window_s, mark_step_s);
        NOTE("rule7_made_above", r, FENCE_AHEAD_MS, epoch_ms, wall_unix_ms, window_s, mark_step_s);
        return r;
}

bool rule7_fence_refuses(bool replaced_or_fenceless, bool witness_current, bool lost_lead_given)
{
        bool r =
                decide_rule7_fence_refuses(replaced_or_fenceless, witness_current, lost_lead_given);
        NOTE("rule7_fence_refuses", r, replaced_or_fenceless, witness_current, lost_lead_given);
        return r;
}
