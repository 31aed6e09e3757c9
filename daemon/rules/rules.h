/* SPDX-License-Identifier: MIT */
/*
 * The rules of docs/fences.md, each one pure decision: what the holder and
 * `snowid fence` decide, apart from how they ask the store and what they
 * log.  Nothing here reads a clock, allocates, logs or talks to a store;
 * every input is an argument.
 *
 * model/snowid.pml names each decision by the same name at the step that
 * makes it.  A rule broken on purpose in the model (spin -DMUTANT=k) is
 * broken here by the same number: rules.c built with -DSNOWID_MUTANT=k,
 * which only the rules' tests do (tests/test-rules.c must then fail, as
 * model/check.sh expects the model to).  tests/check-rules.py checks that
 * every name and every mutant is in both.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cluster-ident.h"

/* Whoever records a trace of the decisions (the daemon with SNOWID_TRACE
 * set, docs/testing.md): called with each decision's name, its inputs in
 * the order model/replay.c reads them, and what it gave.  NULL (the
 * default): nothing is noted.  The decisions stay pure either way: a note
 * changes nothing they give.  rule3_mark() is noted only through the claim
 * start it is part of. */
typedef void rules_note_fn(const char *name, unsigned n, const int64_t *in, int64_t result);
extern rules_note_fn *rules_note;

/* ---- rule 3: a claim never trusts an absent mark ---- */

/* Above the floor by this much: floors raised by other hosts' renewals
 * between the scan and the claim do not make the claim fail.  (The
 * replay of the model's runs, model/replay.c, builds the rules with the
 * model's own slack, 0.) */
#ifndef RULE3_FLOOR_SLACK_MS
#define RULE3_FLOOR_SLACK_MS 1000
#endif

/* The mark a number is taken to have: its own (marked), else the floor,
 * which is at or above every deadline ever published, plus the slack. */
uint64_t rule3_mark(bool marked, uint64_t mark, uint64_t floor);

/* A claim of a number whose mark was read as (marked, mark), with the
 * floor read beside it, starts at the latest of: ID time now, the mark,
 * the fence's claims_above, and the last deadline this daemon itself
 * published for the number (own_last, 0: none; a restore may have lost
 * it from the store). */
struct rule3_claim {
        uint64_t now;
        bool marked;
        uint64_t mark, floor;
        uint64_t claims_above;
        uint64_t own_last;
};
uint64_t rule3_claim_start(const struct rule3_claim *c);

/* ---- rule 4: a lost or lowered mark is raised again, never abandoned ---- */

enum rule4_extension {
        RULE4_EXTENDED, /* the mark is at least what was asked: publish it */
        RULE4_NOT_OURS, /* workers/<n> is not this holding's: lost, or the lease tells */
        RULE4_RAISE,    /* ours, the mark absent or below: raised before anything else */
};
/* What a mark extension's answer means: it succeeded, or its failure read
 * workers/<n> (ours: this holding's) and the mark (stored; 0 if absent),
 * asked: the mark it tried to write. */
enum rule4_extension rule4_extension(bool succeeded, bool ours, uint64_t stored, uint64_t asked);

/* Whether a mark read (valid: present and a mark) or written as `stored`
 * confirms a number's last deadline `target`: only then is its lease
 * revoked (a move, a loss, a stop). */
bool rule4_confirmed(bool valid, uint64_t stored, uint64_t target);

/* ---- rule 5: a restore is detected and named ---- */

enum rule5_answer {
        RULE5_AS_SEEN,   /* nothing against it */
        RULE5_WENT_BACK, /* another cluster, or a kv answer below a revision seen */
        RULE5_BEHIND,    /* a lease answer below a revision seen: read the cluster */
};
/* An answer from cluster `cluster` at `revision`, to a request sent when
 * the highest revision seen was rev_at_send, by a daemon that knows the
 * cluster known (0: none yet; a 0 in the answer names none). */
enum rule5_answer rule5_answer(uint64_t known, uint64_t cluster, int64_t rev_at_send,
                               int64_t revision, bool linearizable);

/* A fence that names the cluster it was written on (fence_cluster), read
 * from another: restored or replaced, and not fenced since. */
bool rule5_foreign_fence(uint64_t fence_cluster, uint64_t answer_cluster);

/* The mark of a number this daemon wrote, acknowledged at revision
 * acked_rev (0: none known), now read at mod revision modrev (0: absent):
 * the store forgot the write. */
bool rule5_forgotten(int64_t acked_rev, int64_t modrev);

/* ms on CLOCK_BOOTTIME before which a lease granted or kept alive with
 * ttl_s, asked at asked_ms, cannot have run out (less a tenth of the TTL or
 * a second, for the store's clock); 0: no such time. */
uint64_t rule5_lease_until(uint64_t asked_ms, int64_t ttl_s);

enum rule5_lease {
        RULE5_LEASE_LIVES,
        RULE5_LEASE_EXPIRED,
        RULE5_LEASE_UNKNOWN_EARLY, /* unknown before its time: a restore, or revoked early */
};
/* A keepalive's answer: the TTL left (0: unknown), at boot_ms. */
enum rule5_lease rule5_lease_answer(int64_t ttl_s, uint64_t boot_ms, uint64_t lease_until_ms);

/* A lease unknown early, its number read back: another holder's claim on
 * it (other), or its mark (present) below the acked_mark this daemon's
 * write left: the store forgot this daemon's writes. */
bool rule5_taken_back(bool other, bool present, uint64_t stored, uint64_t acked_mark);

/* ---- rule 6: a new fence is a new cluster history ---- */

enum rule6_fence {
        RULE6_SAME,     /* the fence known, and no restore seen */
        RULE6_ADOPT,    /* a later fence: a new history */
        RULE6_RESTORED, /* an older fence, one made with a cluster made anew, or the known
                           one with a restore seen: halted until a later fence */
};
/* The fence `read` on a cluster whose fence this daemon knows (known; NULL
 * before the first read); restore_seen: revisions went back, or a halt
 * for a restore lasts. */
enum rule6_fence rule6_fence_read(const struct cluster_ident *known,
                                  const struct cluster_ident *read, bool restore_seen);

/* On a new fence, a deadline this daemon published (in the last hour) is
 * raised again if it is above the fence's claims_above. */
bool rule6_reraise(uint64_t published, uint64_t claims_above);

/* How long after a fence no claim starts: a live daemon's longest time to
 * see it and have its raise confirmed (its next transaction, at rest a
 * mark extension up to a mark step and a renewal away; three answers; a
 * second for the clocks of the fencing host and this one). */
uint64_t rule6_settle_ms(unsigned mark_step_s, unsigned renew_ms, unsigned store_timeout_ms);

/* What is left of the settle pause after the fence c for a daemon that
 * first reads it when its wall clock reads wall_ms (unix ms).  A cluster's
 * first fence waits for nothing. */
uint64_t rule6_settle_left_ms(const struct cluster_ident *c, uint64_t wall_ms, uint64_t settle_ms);

/* Every deadline a host may have published, if no host's ID time runs more
 * than ahead_ms past wall_unix_ms (the clock of the host that fences) and a
 * mark runs up to window + mark-step past a host's ID time. */
uint64_t rule6_clock_bound(uint64_t epoch_ms, uint64_t wall_unix_ms, uint64_t ahead_ms,
                           unsigned window_s, unsigned mark_step_s);

/* The lead a fence (era, claims_above) gave the hosts that claimed after
 * it, less what slewing at slew_us_per_s has brought back by now_id_ms (ID
 * time); 0 once slewed away. */
uint64_t rule6_lead_left(uint64_t epoch_ms, uint64_t era, uint64_t claims_above, uint64_t now_id_ms,
                         unsigned slew_us_per_s);

/* What `snowid fence` claims above. */
struct rule6_fence_in {
        uint64_t clock_bound;         /* rule6_clock_bound() with --ahead */
        uint64_t lead_left;           /* what may be left of the stored fence's lead */
        uint64_t witness_lead_left;   /* of the fences witnesses knew: the largest */
        uint64_t witness_deadline;    /* the highest deadline a witness published */
        uint64_t lost_lead;           /* --lost-lead */
        uint64_t stored_above, floor; /* the stored fence's claims_above, the floor */
        uint64_t highest_mark;
};
/* The clock bound and the largest lead that may be left (a lead carries
 * what was left of the ones before it: not their sum). */
uint64_t rule6_fence_lead(const struct rule6_fence_in *in);
/* claims_above: the latest of the bound with its lead, every witness's
 * deadline, and everything stored. */
uint64_t rule6_fence_above(const struct rule6_fence_in *in);

/* ---- rule 7: a lost layout is never re-created, nor a forgotten cluster ---- */

/* A daemon makes the cluster only on a store that never held it (no
 * layout, fence, floor, holder, and every mark 0) and holds no witness. */
bool rule7_may_make(bool never_used, bool witnessed);

/* The claims_above a cluster is made with: the clock bound of `snowid
 * fence`'s default --ahead (the store may have forgotten a cluster whose
 * hosts still run). */
uint64_t rule7_made_above(uint64_t epoch_ms, uint64_t wall_unix_ms, unsigned window_s,
                          unsigned mark_step_s);

/* `snowid fence` refuses a store that answers as another cluster than its
 * fence names, or holds no fence (restored, or a snapshot without it),
 * unless a witness of a fence as new as the stored one is there or the
 * operator gave --lost-lead. */
bool rule7_fence_refuses(bool replaced_or_fenceless, bool witness_current, bool lost_lead_given);
