/* SPDX-License-Identifier: MIT */
/*
 * A counterexample of the model replayed on the holder's pure cores
 * (daemon/core/): each decision the model notes ("@rule4_confirmed 1 3 4 =
 * 0") that one of the cores makes is made again by driving that core with
 * inputs built from the decision's own (a scan, an extension's answer, a
 * raise's read-back, a fence, a read of the cluster by `snowid fence`), and
 * what the core does is read back as the decision's result: the claim
 * start it sends, whether it publishes the deadline, raises the mark or
 * gives the number up, whether it revokes a lease, writes a mark back, halts
 * on a forgotten write or a foreign fence, or makes the cluster; whether
 * `snowid fence` refuses, and what it claims above.
 *
 * model/replay.c asks the rules each decision; this program asks the
 * code that uses the rules, as the daemon runs it.  model/check.sh builds
 * it with a mutant of the model (the rules and the cores with
 * -DSNOWID_MUTANT=k) and without: the mutant's counterexample must be
 * reproduced by the first (every decision the same) and refused by the
 * second (one differs).
 *
 * Usage: core-replay [FILE]    (standard input without FILE)
 * Exit: 0 every decision a core makes the same, 1 one differs (the first
 * is printed), 2 a line it cannot read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acquire.h"
#include "create.h"
#include "fencing.h"
#include "hold.h"
#include "known.h"
#include "raise.h"
#include "rules.h"

#define ARGS_MAX 8

/* ---- the acquisition: rule3_claim_start ---- */

/* slack now marked mark floor claims_above own = start (own: the last
 * deadline this daemon published + 1, 0: none); the start of the claim
 * the core sends after a scan that read one free number so, -1: none */
static int64_t claim_start(const int64_t *a)
{
        static struct acquire q;
        const struct acq_settings set = {.lease_ttl_s = 10,
                                         .renew_ms = 1000,
                                         .host = "replay",
                                         .instance = "model",
                                         .token = "0",
                                         .pid = 1,
                                         .seed = 1};
        acq_init(&q, &set);
        struct store_number n = {.marked = a[2] != 0,
                                 .mark_valid = a[2] != 0,
                                 .mark = (uint64_t)a[3],
                                 .mark_rev = a[2] != 0};
        const struct published pub = {.worker = 0, .mark = a[6] ? (uint64_t)a[6] - 1 : 0};
        const struct holding cur = {.state = H_NONE, .worker = -1};
        const struct acq_view v = {.mono_ms = 1,
                                   .boot_ms = 1,
                                   .id_ms = (uint64_t)a[1],
                                   .wall_id_ms = (uint64_t)a[1],
                                   .layout_ready = true,
                                   .time_bits = 62,
                                   .claims_above = (uint64_t)a[5],
                                   .cur = &cur,
                                   .published = &pub,
                                   .n_published = a[6] != 0};
        const struct store_scan sc = {.ok = true,
                                      .succeeded = true,
                                      .same = 1,
                                      .floor_read = 1,
                                      .floor = (uint64_t)a[4],
                                      .workers = 1,
                                      .numbers = &n};
        struct acq_ready out;
        acq_step(&q, &v, &(struct acq_in){.kind = ACQ_IN_START}, &out);
        uint64_t id = acq_holding(&q)->id;
        acq_step(&q, &v,
                 &(struct acq_in){.kind = ACQ_IN_GRANTED,
                                  .r = {.tag = id, .answered = true},
                                  .lease = 1,
                                  .ttl_s = 10},
                 &out);
        acq_step(&q, &v,
                 &(struct acq_in){
                         .kind = ACQ_IN_SCANNED, .r = {.tag = id, .answered = true}, .scan = &sc},
                 &out);
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == ACQ_DO_CLAIM)
                        return (int64_t)acq_holding(&q)->start_ms;
        return -1;
}

/* ---- the held number: rule4_extension ---- */

/* succeeded ours stored asked = 0 the deadline published, 1 the number
 * not this holding's (lost, or its lease asked), 2 its mark raised back;
 * the extension to `asked` sent by the core, and answered so */
static int64_t extension(const int64_t *a)
{
        static struct hold k;
        const struct hold_settings set = {.lease_ttl_s = 10};
        hold_init(&k, &set);
        uint64_t asked = (uint64_t)a[3];
        const struct holding g = {.id = 1,
                                  .state = H_HELD,
                                  .lease = 1,
                                  .worker = 0,
                                  .mark = asked ? asked - 1 : 0,
                                  .mark_rev = 1};
        /* window and mark-step 0: the extension asks for the time now */
        const struct hold_view v = {.mono_ms = 1, .boot_ms = 1, .id_ms = asked, .time_bits = 62};
        struct hold_ready out;
        hold_step(&k, &v, &(struct hold_in){.kind = HOLD_IN_PUBLISHED, .published = &g}, &out);
        hold_step(&k, &v, &(struct hold_in){.kind = HOLD_IN_TICK}, &out);
        if (k.cur.marking != MARK_EXTENDING || k.cur.pending != asked)
                return -1;
        const struct store_extended e = {.ok = true,
                                         .succeeded = a[0] != 0,
                                         .revision = 2,
                                         .same = 1,
                                         .n = {.held = true,
                                               .lease = a[1] ? 1 : 2,
                                               .value_is = a[1] != 0,
                                               .marked = true,
                                               .mark_valid = true,
                                               .mark = (uint64_t)a[2],
                                               .mark_rev = 1}};
        hold_step(&k, &v, &(struct hold_in){.kind = HOLD_IN_EXTENDED, .tag = 1, .extended = &e},
                  &out);
        for (unsigned i = 0; i < out.n; i++)
                switch (out.a[i].what) {
                case HOLD_DO_DEADLINE:
                        return 0;
                case HOLD_DO_LOST:
                case HOLD_DO_KEEPALIVE:
                        return 1;
                case HOLD_DO_RAISE:
                        return 2;
                default:
                        break;
                }
        return -1;
}

/* ---- the marks: rule4_confirmed, rule5_forgotten, rule6_reraise ---- */

static bool did(const struct raise_ready *out, enum raise_do what)
{
        for (unsigned i = 0; i < out->n; i++)
                if (out->a[i].what == what)
                        return true;
        return false;
}

/* A raise of number 0 to target (its lease 1 given up once confirmed, its
 * last write acknowledged at acked), answered by a read of the mark. */
static struct raise_ready raised(uint64_t target, int64_t acked, bool valid, uint64_t stored,
                                 int64_t modrev)
{
        static struct raises m;
        raise_init(&m, 10);
        const struct raise_view v = {.mono_ms = 1};
        struct raise_ready out;
        raise_step(&m, &v,
                   &(struct raise_in){
                           .kind = RAISE_IN_RAISE, .mark = target, .lease = 1, .acked_rev = acked},
                   &out);
        const struct store_raised rs = {
                .ok = true,
                .succeeded = true,
                .same = 1,
                .n = {.marked = true, .mark_valid = valid, .mark = stored, .mark_rev = modrev}};
        raise_step(&m, &v,
                   &(struct raise_in){.kind = RAISE_IN_ANSWER, .tag = m.r[0].id, .raised = &rs},
                   &out);
        return out;
}

/* valid stored target = whether the core gives the lease up */
static int64_t confirmed(const int64_t *a)
{
        const struct raise_ready out = raised((uint64_t)a[2], 0, a[0] != 0, (uint64_t)a[1], 1);
        return did(&out, RAISE_DO_REVOKE);
}

/* acked modrev = whether the core halts on a forgotten write */
static int64_t forgotten(const int64_t *a)
{
        const struct raise_ready out = raised(1, a[0], true, 0, a[1]);
        return did(&out, RAISE_DO_RESTORED);
}

/* published claims_above = whether the core raises that deadline again
 * when it adopts a fence of that claims_above */
static int64_t reraise(const int64_t *a)
{
        static struct raises m;
        raise_init(&m, 10);
        struct raise_view v = {.mono_ms = 1};
        struct raise_ready out;
        raise_step(&m, &v, &(struct raise_in){.kind = RAISE_IN_RETIRED, .mark = (uint64_t)a[0]},
                   &out);
        v.claims_above = (uint64_t)a[1];
        raise_step(&m, &v, &(struct raise_in){.kind = RAISE_IN_FENCED}, &out);
        return did(&out, RAISE_DO_SEND);
}

/* ---- the creation: rule7_made_above ---- */

/* ahead x y = claims_above: the model's clock bound of a cluster made anew
 * (with --ahead, at x + y); the claims above of the cluster the creation's
 * core makes, on a store that holds none, its wall clock then at x + y */
static int64_t made_above(const int64_t *a)
{
        static struct create c;
        const struct create_settings set = {.worker_bits = 15, .token = "0", .seed = 1};
        create_init(&c, &set);
        const struct create_view v = {.mono_ms = 1, .wall_ms = (uint64_t)(a[1] + a[2])};
        struct create_ready out;
        create_step(&c, &v, &(struct create_in){.kind = CREATE_IN_MAKE}, &out);
        create_step(&c, &v,
                    &(struct create_in){.kind = CREATE_IN_LOCKED,
                                        .ok = true,
                                        .succeeded = true,
                                        .answered = true,
                                        .creating = 1,
                                        .value = "0 1"},
                    &out);
        create_step(&c, &v, &(struct create_in){.kind = CREATE_IN_MAKE}, &out);
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == CREATE_DO_MAKE)
                        return (int64_t)out.a[i].a;
        return -1;
}

/* ---- what the daemon knows: rule5_foreign_fence, rule7_may_make ---- */

/* What the core of what a daemon knows does with its first read of a
 * cluster: 1 it halts (restored, or the layout lost), 0 it goes on with the
 * layout (its range checked), 2 it makes the cluster, -1 none of these. */
static int64_t first_read(const struct store_cluster *cr, uint64_t answer_cluster)
{
        static struct known k;
        const struct known_settings set = {.lease_ttl_s = 10, .settle_ms = 1, .seed = 1};
        known_init(&k, &set);
        const struct holding cur = {.state = H_NONE, .worker = -1};
        const struct known_view v = {.mono_ms = 1, .wall_ms = 1, .cur = &cur};
        struct known_ready out;
        known_step(&k, &v,
                   &(struct known_in){.kind = KNOWN_IN_CLUSTER,
                                      .cr = cr,
                                      .answered = true,
                                      .status = 200,
                                      .cluster = answer_cluster},
                   &out);
        for (unsigned i = 0; i < out.n; i++) {
                if (out.a[i].what == KNOWN_DO_HALTED)
                        return 1;
                if (out.a[i].what == KNOWN_DO_RANGE)
                        return 0;
                if (out.a[i].what == KNOWN_DO_MAKE)
                        return 2;
        }
        return -1;
}

/* fence_cluster answer_cluster = foreign: whether the core halts on a
 * fence written on fence_cluster read from answer_cluster */
static int64_t foreign_fence(const int64_t *a)
{
        const struct store_cluster cr = {
                .ok = true,
                .layout = 1,
                .l = {.epoch_ms = 1, .time_bits = 41, .worker_bits = 10, .seq_bits = 12},
                .fence = 1,
                .c = {.fence = "f",
                      .fence_len = 1,
                      .era = 1,
                      .claims_above = 1,
                      .cluster_id = (uint64_t)a[0]},
                .floor = 1};
        return first_read(&cr, (uint64_t)a[1]);
}

/* never_used witnessed = make: whether the core makes the cluster on a
 * store that holds none (used: a number held there) */
static int64_t may_make(const int64_t *a)
{
        const struct store_cluster cr = {
                .ok = true, .layout = 0, .held = !a[0], .marks_zero = true, .witnessed = a[1] != 0};
        int64_t r = first_read(&cr, 1);
        return r == 2 ? 1 : r == 1 ? 0 : -1;
}

/* ---- `snowid fence`: rule7_fence_refuses, rule6_fence_above, rule6_lead_left ---- */

/* The model's times are small; the fence's are Unix ms past an epoch.  Every
 * time the fencing core is given is the model's shifted by SHIFT (ID time),
 * so that a stored fence can give any lead the model names (its era is its
 * claims_above less the lead): what the core claims above is then the
 * model's shifted alike, each term of its max being shifted. */
#define FENCE_EPOCH UINT64_C(1735689600000)
#define SHIFT UINT64_C(1000000)

/* The fencing core's settings as the model's: no window or mark step (the
 * model's clock bound is given whole), no slewing, --ahead 1 ms (the clock
 * is set 1 ms back: with --ahead 0 the stored lead is left out). */
static struct fencing_settings fence_settings(int64_t lost_lead_ms)
{
        return (struct fencing_settings){.epoch_ms = FENCE_EPOCH,
                                         .time_bits = 41,
                                         .ahead_ms = 1,
                                         .lost_lead_ms = lost_lead_ms};
}

/* A stored fence, on cluster 1, whose lead is `lead` and claims_above
 * `above` (shifted). */
static struct cluster_ident stored_fence(uint64_t above, uint64_t lead)
{
        return (struct cluster_ident){
                .era = FENCE_EPOCH + above - lead, .claims_above = above, .cluster_id = 1};
}

/* clock_bound lead_left witness_lead_left witness_deadline lost_lead
 * stored_above floor highest_mark = claims_above: what the fencing core
 * claims above, on a store that holds a fence of that lead and claims
 * above (not restored: it fences), a witness of that lead and deadline,
 * the floor and the marks so */
static int64_t fence_above(const int64_t *a)
{
        const struct fencing_settings set = fence_settings(a[4]);
        const struct cluster_ident old = stored_fence((uint64_t)a[5] + SHIFT, (uint64_t)a[1]);
        const struct fencing_witness w = {.era = (int64_t)(FENCE_EPOCH + SHIFT),
                                          .claims_above = (int64_t)SHIFT + a[2],
                                          .deadline = (int64_t)SHIFT + a[3]};
        const struct fencing_read rd = {.cluster_id = 1,
                                        .fence = &old,
                                        .floor_present = true,
                                        .floor = (uint64_t)a[6] + SHIFT,
                                        .highest = (uint64_t)a[7] + SHIFT,
                                        .n_witnesses = a[2] || a[3],
                                        .witnesses = &w};
        struct fencing_decision d;
        fencing_decide(&set, FENCE_EPOCH + (uint64_t)a[0] + SHIFT - 1, &rd, &d);
        return d.verdict == FENCING_WRITE ? (int64_t)(d.above - SHIFT) : -1;
}

/* lead = left: the lead the fencing core counts of a stored fence that gave
 * that lead (nothing slewed) */
static int64_t lead_left(const int64_t *a)
{
        const struct fencing_settings set = fence_settings(-1);
        const struct cluster_ident old = stored_fence(SHIFT, (uint64_t)a[0]);
        const struct fencing_read rd = {.cluster_id = 1, .fence = &old};
        struct fencing_decision d;
        fencing_decide(&set, FENCE_EPOCH + SHIFT, &rd, &d);
        return d.verdict == FENCING_WRITE ? (int64_t)d.lead_left : -1;
}

/* Whether the fencing core refuses the store read (0 or 1). */
static int64_t refused(const struct fencing_settings *set, const struct fencing_read *rd)
{
        struct fencing_decision d;
        fencing_decide(set, FENCE_EPOCH + SHIFT, rd, &d);
        return d.verdict != FENCING_WRITE;
}

/* replaced_or_fenceless witnessed lost_lead_given = refused: whether the
 * fencing core refuses a store with no fence, and one whose fence names
 * another cluster than it answers as (both must agree: -1 if not), or
 * else one intact; with a witness of a fence as new as the stored one or
 * none, and --lost-lead 0 or none */
static int64_t fence_refuses(const int64_t *a)
{
        const struct fencing_settings set = fence_settings(a[2] ? 0 : -1);
        const struct cluster_ident old = stored_fence(SHIFT, 0);
        const struct fencing_witness w = {
                .era = (int64_t)old.era, .claims_above = (int64_t)SHIFT, .deadline = 0};
        struct fencing_read rd = {.cluster_id = 1,
                                  .fence = a[0] ? NULL : &old,
                                  .n_witnesses = a[1] != 0,
                                  .witnesses = &w};
        int64_t r = refused(&set, &rd);
        if (a[0]) {
                rd.fence = &old;
                rd.cluster_id = 2; /* replaced: restored with a new cluster ID */
                if (refused(&set, &rd) != r)
                        return -1;
        }
        return r;
}

struct decision {
        const char *name;
        unsigned n_args;
        int64_t (*make)(const int64_t *a);
        const char *core;
};

static const struct decision decisions[] = {
        {"rule3_claim_start", 7, claim_start, "acquire"},
        {"rule4_extension", 4, extension, "hold"},
        {"rule4_confirmed", 3, confirmed, "raise"},
        {"rule5_forgotten", 2, forgotten, "raise"},
        {"rule6_reraise", 2, reraise, "raise"},
        {"rule7_made_above", 3, made_above, "create"},
        {"rule5_foreign_fence", 2, foreign_fence, "known"},
        {"rule7_may_make", 2, may_make, "known"},
        {"rule7_fence_refuses", 3, fence_refuses, "fencing"},
        {"rule6_fence_above", 8, fence_above, "fencing"},
        {"rule6_lead_left", 1, lead_left, "fencing"},
};
#define N_DECISIONS (sizeof(decisions) / sizeof(decisions[0]))

static int bad(unsigned lineno, const char *why)
{
        fprintf(stderr, "core-replay: line %u: %s\n", lineno, why);
        return 2;
}

int main(int argc, char **argv)
{
        FILE *in = stdin;
        if (argc > 2 || (argc == 2 && !(in = fopen(argv[1], "r")))) {
                fprintf(stderr, argc > 2 ? "usage: core-replay [FILE]\n" : "core-replay: %s: %s\n",
                        argv[1], strerror(errno));
                return 2;
        }
        char line[512];
        unsigned lineno = 0, made = 0, others = 0, counts[N_DECISIONS] = {0};
        while (fgets(line, sizeof(line), in)) {
                lineno++;
                if (line[0] != '@')
                        continue;
                char *save = NULL, *name = strtok_r(line + 1, " \t\n", &save), *tok;
                int64_t a[ARGS_MAX] = {0}, r;
                unsigned n = 0;
                while ((tok = strtok_r(NULL, " \t\n", &save)) && strcmp(tok, "=")) {
                        char *end;
                        if (n == ARGS_MAX)
                                return bad(lineno, "too many inputs");
                        a[n++] = strtoll(tok, &end, 10);
                        if (*end)
                                return bad(lineno, "an input not a number");
                }
                char *end;
                if (!tok || !(tok = strtok_r(NULL, " \t\n", &save)))
                        return bad(lineno, "not \"= result\" after the inputs");
                r = strtoll(tok, &end, 10);
                if (*end)
                        return bad(lineno, "a result not a number");
                const struct decision *d = NULL;
                for (unsigned i = 0; name && i < N_DECISIONS; i++)
                        if (!strcmp(name, decisions[i].name) && decisions[i].n_args == n)
                                d = &decisions[i];
                if (!d) {
                        others++; /* a decision no core makes, or the code's shape */
                        continue;
                }
                if (d->make == claim_start && a[0] != RULE3_FLOOR_SLACK_MS)
                        return bad(lineno, "the trace's slack is not the build's");
                made++;
                counts[d - decisions]++;
                int64_t c = d->make(a);
                if (c != r) {
                        printf("decision %u (line %u), %s through the %s core:", made, lineno,
                               d->name, d->core);
                        for (unsigned i = 0; i < n; i++)
                                printf(" %" PRId64, a[i]);
                        printf(": the model took %" PRId64 ", the core does %" PRId64 "\n", r, c);
                        return 1;
                }
        }
        printf("%u decisions made by the cores, each the same:", made);
        for (unsigned i = 0; i < N_DECISIONS; i++)
                if (counts[i])
                        printf(" %s %u", decisions[i].name, counts[i]);
        printf(" (%u made elsewhere)\n", others);
        return 0;
}
