/* SPDX-License-Identifier: MIT */
/*
 * Replays the decisions a run of model/snowid.pml took on the rules the
 * daemon and `snowid fence` run (daemon/rules/rules.c).
 *
 * At each step that makes one of the rules, the model prints a line:
 *
 *     @rule4_confirmed 1 3 4 = 0
 *
 * the decision's name (rules.h), its inputs as the model had them, and what
 * the model decided.  This program reads such lines (others are skipped),
 * asks the C function the same question, and compares.  model/check.sh
 * feeds it spin's counterexample of each mutant, replayed with spin -t:
 * the rules built with the same mutant (-DSNOWID_MUTANT=k) must take every
 * decision the counterexample took, and the rules without it must refuse
 * one of them.  It also feeds it random runs of the model without a
 * mutant, where the rules must agree with every decision.
 *
 * The model's clock is abstract, so some inputs are mapped: the model
 * claims above the floor with its own slack (SLACK) and fences with its own
 * --ahead (AHEAD), so this program is built with the rules' constants set
 * to the model's (-DRULE3_FLOOR_SLACK_MS=0 -DFENCE_AHEAD_MS=0) and checks
 * that they are; the model's window W (ms) stands for the daemon's window
 * and mark step (s); a lead the model keeps is not slewed back.
 *
 * Usage: replay [FILE]    (standard input without FILE)
 * Exit: 0 every decision the same, 1 one differs (the first is printed),
 * 2 a line it cannot read or a constant that is not the model's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

#define ARGS_MAX 8

/* One decision: its inputs a[], what the rules give. */
typedef int64_t (*decide_fn)(const int64_t *a);

static int64_t d_claim_start(const int64_t *a)
{
        /* slack now marked mark floor claims_above own = start, own: the
         * last deadline this daemon published + 1 (0: none) */
        const struct rule3_claim c = {
                .now = (uint64_t)a[1],
                .marked = a[2] != 0,
                .mark = (uint64_t)a[3],
                .floor = (uint64_t)a[4],
                .claims_above = (uint64_t)a[5],
                .own_last = a[6] ? (uint64_t)a[6] - 1 : 0,
        };
        return (int64_t)rule3_claim_start(&c);
}

static int64_t d_extension(const int64_t *a)
{
        /* succeeded ours stored asked = 0 extended, 1 not ours, 2 raise */
        switch (rule4_extension(a[0] != 0, a[1] != 0, (uint64_t)a[2], (uint64_t)a[3])) {
        case RULE4_EXTENDED:
                return 0;
        case RULE4_NOT_OURS:
                return 1;
        case RULE4_RAISE:
                return 2;
        }
        return -1;
}

static int64_t d_confirmed(const int64_t *a)
{
        /* valid stored target */
        return rule4_confirmed(a[0] != 0, (uint64_t)a[1], (uint64_t)a[2]);
}

static int64_t d_answer(const int64_t *a)
{
        /* known cluster rev_at_send revision (the model's answers are all
         * linearizable) = 0 as seen, 1 went back, 2 behind */
        switch (rule5_answer((uint64_t)a[0], (uint64_t)a[1], a[2], a[3], true)) {
        case RULE5_AS_SEEN:
                return 0;
        case RULE5_WENT_BACK:
                return 1;
        case RULE5_BEHIND:
                return 2;
        }
        return -1;
}

static int64_t d_foreign_fence(const int64_t *a)
{
        /* fence_cluster answer_cluster */
        return rule5_foreign_fence((uint64_t)a[0], (uint64_t)a[1]);
}

static int64_t d_forgotten(const int64_t *a)
{
        /* acked_rev modrev */
        return rule5_forgotten(a[0], a[1]);
}

static int64_t d_reraise(const int64_t *a)
{
        /* published claims_above */
        return rule6_reraise((uint64_t)a[0], (uint64_t)a[1]);
}

static int64_t d_lead_left(const int64_t *a)
{
        /* the lead a fence gave, asked for at once (nothing slewed) */
        return (int64_t)rule6_lead_left(0, 1, 1 + (uint64_t)a[0], 1, 0);
}

static int64_t d_fence_above(const int64_t *a)
{
        /* clock_bound lead_left witness_lead_left witness_deadline lost_lead
         * stored_above floor highest_mark */
        const struct rule6_fence_in in = {
                .clock_bound = (uint64_t)a[0],
                .lead_left = (uint64_t)a[1],
                .witness_lead_left = (uint64_t)a[2],
                .witness_deadline = (uint64_t)a[3],
                .lost_lead = (uint64_t)a[4],
                .stored_above = (uint64_t)a[5],
                .floor = (uint64_t)a[6],
                .highest_mark = (uint64_t)a[7],
        };
        return (int64_t)rule6_fence_above(&in);
}

static int64_t d_fence_refuses(const int64_t *a)
{
        /* replaced_or_fenceless witness_current lost_lead_given */
        return rule7_fence_refuses(a[0] != 0, a[1] != 0, a[2] != 0);
}

static int64_t d_made_above(const int64_t *a)
{
        /* ahead wall W: the model's window stands for window + mark step */
        return (int64_t)rule7_made_above(0, (uint64_t)(a[1] + a[2]), 0, 0);
}

static int64_t d_may_make(const int64_t *a)
{
        /* never_used witnessed */
        return rule7_may_make(a[0] != 0, a[1] != 0);
}

static const struct decision {
        const char *name;
        unsigned n_args;
        decide_fn decide;
} decisions[] = {
        {"rule3_claim_start", 7, d_claim_start},
        {"rule4_extension", 4, d_extension},
        {"rule4_confirmed", 3, d_confirmed},
        {"rule5_answer", 4, d_answer},
        {"rule5_foreign_fence", 2, d_foreign_fence},
        {"rule5_forgotten", 2, d_forgotten},
        {"rule6_reraise", 2, d_reraise},
        {"rule6_lead_left", 1, d_lead_left},
        {"rule6_fence_above", 8, d_fence_above},
        {"rule7_fence_refuses", 3, d_fence_refuses},
        {"rule7_made_above", 3, d_made_above},
        {"rule7_may_make", 2, d_may_make},
};
#define N_DECISIONS (sizeof(decisions) / sizeof(decisions[0]))

static int bad(unsigned lineno, const char *what)
{
        fprintf(stderr, "replay: line %u: %s\n", lineno, what);
        return 2;
}

/* The model's constants that the rules were built with; 0: they are. */
static int constants(const struct decision *d, const int64_t *a, unsigned lineno)
{
        char msg[160];
        if (d->decide == d_claim_start && a[0] != RULE3_FLOOR_SLACK_MS) {
                snprintf(msg, sizeof(msg),
                         "the model's SLACK is %" PRId64
                         ", the rules were built with RULE3_FLOOR_SLACK_MS %d",
                         a[0], RULE3_FLOOR_SLACK_MS);
                return bad(lineno, msg);
        }
        if (d->decide == d_made_above && a[0] != FENCE_AHEAD_MS) {
                snprintf(msg, sizeof(msg),
                         "the model's AHEAD is %" PRId64
                         ", the rules were built with FENCE_AHEAD_MS %d",
                         a[0], FENCE_AHEAD_MS);
                return bad(lineno, msg);
        }
        return 0;
}

/* Reads a number from tok into v; 0 if it is one. */
static int number(const char *tok, int64_t *v)
{
        char *end;
        errno = 0;
        long long x = tok ? strtoll(tok, &end, 10) : -1;
        if (!tok || errno || *end || x < 0)
                return -1;
        *v = x;
        return 0;
}

/* Reads "@name a0 a1 ... = r" into d, a, r; 0 if it is one. */
static int parse(char *line, unsigned lineno, const struct decision **d, int64_t *a, int64_t *r)
{
        char *save = NULL, *tok = strtok_r(line + 1, " \t\n", &save);
        *d = NULL;
        for (unsigned i = 0; tok && i < N_DECISIONS; i++)
                if (!strcmp(tok, decisions[i].name))
                        *d = &decisions[i];
        if (!*d)
                return bad(lineno, "not a decision the rules know");
        for (unsigned i = 0; i < (*d)->n_args; i++)
                if (number(strtok_r(NULL, " \t\n", &save), &a[i]))
                        return bad(lineno, "an input missing, or not a number");
        tok = strtok_r(NULL, " \t\n", &save);
        if (!tok || strcmp(tok, "=") || number(strtok_r(NULL, " \t\n", &save), r) ||
            strtok_r(NULL, " \t\n", &save))
                return bad(lineno, "not \"= result\" after the inputs");
        return 0;
}

int main(int argc, char **argv)
{
        FILE *in = stdin;
        if (argc > 2 || (argc == 2 && !(in = fopen(argv[1], "r")))) {
                fprintf(stderr, argc > 2 ? "usage: replay [FILE]\n" : "replay: %s: %s\n", argv[1],
                        strerror(errno));
                return 2;
        }
        char line[512];
        unsigned lineno = 0, seen = 0, counts[N_DECISIONS] = {0};
        while (fgets(line, sizeof(line), in)) {
                lineno++;
                if (line[0] != '@')
                        continue;
                if (!strchr(line, '\n') && !feof(in))
                        return bad(lineno, "too long");
                const struct decision *d;
                int64_t a[ARGS_MAX] = {0}, r = 0;
                int e = parse(line, lineno, &d, a, &r);
                if (!e)
                        e = constants(d, a, lineno);
                if (e)
                        return e;
                seen++;
                counts[d - decisions]++;
                int64_t c = d->decide(a);
                if (c != r) {
                        printf("decision %u (line %u), %s:", seen, lineno, d->name);
                        for (unsigned i = 0; i < d->n_args; i++)
                                printf(" %" PRId64, a[i]);
                        printf(": the model took %" PRId64 ", the rules give %" PRId64 "\n", r, c);
                        return 1;
                }
        }
        printf("%u decisions, each the same:", seen);
        for (unsigned i = 0; i < N_DECISIONS; i++)
                if (counts[i])
                        printf(" %s %u", decisions[i].name, counts[i]);
        printf("\n");
        return 0;
}
