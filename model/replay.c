/* SPDX-License-Identifier: MIT */
/*
 * Replays decisions on the rules the daemon and `snowid fence` run
 * (daemon/rules/rules.c): a run of model/snowid.pml's, or a trace of a
 * real run.
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
 * --ahead (AHEAD), so model/check.sh builds this program with the rules'
 * constants set to the model's (-DRULE3_FLOOR_SLACK_MS=0
 * -DFENCE_AHEAD_MS=0), and it checks that they are; the model's window W
 * (ms) stands for the daemon's window and mark step (s); a lead the model
 * keeps is not slewed back.
 *
 * A trace of the daemon or `snowid fence` (SNOWID_TRACE, daemon/trace.c)
 * is in the same language, each decision with its inputs as the code had
 * them.  Built as the daemon is (the meson target snowid-replay), this
 * program checks that every decision of the trace is what the rules give:
 * a daemon whose rules were changed is caught at its first decision that
 * differs.  Where the model's shape of a decision differs from the code's,
 * the number of inputs tells them apart.
 *
 * Usage: replay [FILE]    (standard input without FILE)
 * Exit: 0 every decision the same, 1 one differs (the first is printed),
 * 2 a line it cannot read or a constant that is not the build's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
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

static void fence_in(const int64_t *a, struct rule6_fence_in *in)
{
        *in = (struct rule6_fence_in){
                .clock_bound = (uint64_t)a[0],
                .lead_left = (uint64_t)a[1],
                .witness_lead_left = (uint64_t)a[2],
                .witness_deadline = (uint64_t)a[3],
                .lost_lead = (uint64_t)a[4],
                .stored_above = (uint64_t)a[5],
                .floor = (uint64_t)a[6],
                .highest_mark = (uint64_t)a[7],
        };
}

static int64_t d_fence_above(const int64_t *a)
{
        /* clock_bound lead_left witness_lead_left witness_deadline lost_lead
         * stored_above floor highest_mark */
        struct rule6_fence_in in;
        fence_in(a, &in);
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

/* ---- the daemon's and `snowid fence`'s decisions, as daemon/trace.c
 * notes them (where the model's shape differs, or the model makes none) ---- */

static int64_t d_answer_code(const int64_t *a)
{
        /* known cluster rev_at_send revision linearizable */
        return rule5_answer((uint64_t)a[0], (uint64_t)a[1], a[2], a[3], a[4] != 0);
}

static int64_t d_lease_until(const int64_t *a)
{
        /* asked_ms ttl_s */
        return (int64_t)rule5_lease_until((uint64_t)a[0], a[1]);
}

static int64_t d_lease_answer(const int64_t *a)
{
        /* ttl_s boot_ms lease_until_ms = 0 lives, 1 expired, 2 unknown early */
        return rule5_lease_answer(a[0], (uint64_t)a[1], (uint64_t)a[2]);
}

static int64_t d_taken_back(const int64_t *a)
{
        /* other present stored acked_mark */
        return rule5_taken_back(a[0] != 0, a[1] != 0, (uint64_t)a[2], (uint64_t)a[3]);
}

static int64_t d_fence_read(const int64_t *a)
{
        /* known same restore_seen read_era known_era other_token read_first
         * = 0 same, 1 adopt, 2 restored: two fences that compare so */
        struct cluster_ident known = {.fence = "known",
                                      .fence_len = 5,
                                      .token = "a",
                                      .era = (uint64_t)a[4],
                                      .claims_above = 1};
        struct cluster_ident read = {.fence = "read",
                                     .fence_len = 4,
                                     .token = "a",
                                     .era = (uint64_t)a[3],
                                     .claims_above = 1,
                                     .made = a[6] != 0};
        if (a[1]) {
                known.made = read.made;
                read = known;
        } else if (a[5])
                read.token[0] = 'b';
        return rule6_fence_read(a[0] ? &known : NULL, &read, a[2] != 0);
}

static int64_t d_settle_ms(const int64_t *a)
{
        /* mark_step_s renew_ms store_timeout_ms */
        return (int64_t)rule6_settle_ms((unsigned)a[0], (unsigned)a[1], (unsigned)a[2]);
}

static int64_t d_settle_left(const int64_t *a)
{
        /* first era wall_ms settle_ms */
        const struct cluster_ident c = {
                .era = (uint64_t)a[1], .claims_above = 1, .made = a[0] != 0};
        return (int64_t)rule6_settle_left_ms(&c, (uint64_t)a[2], (uint64_t)a[3]);
}

static int64_t d_clock_bound(const int64_t *a)
{
        /* epoch_ms wall_unix_ms ahead_ms window_s mark_step_s */
        return (int64_t)rule6_clock_bound((uint64_t)a[0], (uint64_t)a[1], (uint64_t)a[2],
                                          (unsigned)a[3], (unsigned)a[4]);
}

static int64_t d_lead_left_code(const int64_t *a)
{
        /* epoch_ms era claims_above now_id_ms slew_us_per_s */
        return (int64_t)rule6_lead_left((uint64_t)a[0], (uint64_t)a[1], (uint64_t)a[2],
                                        (uint64_t)a[3], (unsigned)a[4]);
}

static int64_t d_fence_lead(const int64_t *a)
{
        struct rule6_fence_in in;
        fence_in(a, &in);
        return (int64_t)rule6_fence_lead(&in);
}

static int64_t d_made_above_code(const int64_t *a)
{
        /* ahead epoch_ms wall_unix_ms window_s mark_step_s */
        return (int64_t)rule7_made_above((uint64_t)a[1], (uint64_t)a[2], (unsigned)a[3],
                                         (unsigned)a[4]);
}

/* Who notes a decision in this shape: the model, the code, or both. */
enum noter { MODEL, CODE, BOTH };

static const struct decision {
        const char *name;
        unsigned n_args;
        decide_fn decide;
        enum noter by;
} decisions[] = {
        {"rule3_claim_start", 7, d_claim_start, BOTH},
        {"rule4_extension", 4, d_extension, BOTH},
        {"rule4_confirmed", 3, d_confirmed, BOTH},
        {"rule5_answer", 4, d_answer, MODEL},
        {"rule5_answer", 5, d_answer_code, CODE},
        {"rule5_foreign_fence", 2, d_foreign_fence, BOTH},
        {"rule5_forgotten", 2, d_forgotten, BOTH},
        {"rule5_lease_until", 2, d_lease_until, CODE},
        {"rule5_lease_answer", 3, d_lease_answer, CODE},
        {"rule5_taken_back", 4, d_taken_back, CODE},
        {"rule6_fence_read", 7, d_fence_read, CODE},
        {"rule6_reraise", 2, d_reraise, BOTH},
        {"rule6_settle_ms", 3, d_settle_ms, CODE},
        {"rule6_settle_left_ms", 4, d_settle_left, CODE},
        {"rule6_clock_bound", 5, d_clock_bound, CODE},
        {"rule6_lead_left", 1, d_lead_left, MODEL},
        {"rule6_lead_left", 5, d_lead_left_code, CODE},
        {"rule6_fence_lead", 8, d_fence_lead, CODE},
        {"rule6_fence_above", 8, d_fence_above, BOTH},
        {"rule7_fence_refuses", 3, d_fence_refuses, BOTH},
        {"rule7_made_above", 3, d_made_above, MODEL},
        {"rule7_made_above", 5, d_made_above_code, CODE},
        {"rule7_may_make", 2, d_may_make, BOTH},
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
                         "the trace's slack is %" PRId64
                         ", the rules were built with RULE3_FLOOR_SLACK_MS %d",
                         a[0], RULE3_FLOOR_SLACK_MS);
                return bad(lineno, msg);
        }
        if ((d->decide == d_made_above || d->decide == d_made_above_code) &&
            a[0] != FENCE_AHEAD_MS) {
                snprintf(msg, sizeof(msg),
                         "the trace's --ahead is %" PRId64
                         ", the rules were built with FENCE_AHEAD_MS %d",
                         a[0], FENCE_AHEAD_MS);
                return bad(lineno, msg);
        }
        return 0;
}

/* Reads a number from tok into v; 0 if it is one.  Inputs the code holds
 * unsigned are noted as int64_t: the bits go through unchanged. */
static int number(const char *tok, int64_t *v)
{
        char *end;
        errno = 0;
        long long x = tok ? strtoll(tok, &end, 10) : 0;
        if (!tok || errno || *end)
                return -1;
        *v = x;
        return 0;
}

/* Reads "@name a0 a1 ... = r" into d, a, r; 0 if it is one.  The name
 * and the number of inputs say which decision, in which shape. */
static int parse(char *line, unsigned lineno, const struct decision **d, int64_t *a, int64_t *r)
{
        char *save = NULL, *tok = strtok_r(line + 1, " \t\n", &save), *name = tok;
        unsigned n = 0;
        bool known = false;
        while ((tok = strtok_r(NULL, " \t\n", &save)) && strcmp(tok, "=")) {
                if (n == ARGS_MAX || number(tok, &a[n++]))
                        return bad(lineno, "an input not a number, or too many");
        }
        if (!tok || number(strtok_r(NULL, " \t\n", &save), r) || strtok_r(NULL, " \t\n", &save))
                return bad(lineno, "not \"= result\" after the inputs");
        *d = NULL;
        for (unsigned i = 0; name && i < N_DECISIONS; i++) {
                if (strcmp(name, decisions[i].name))
                        continue;
                known = true;
                if (decisions[i].n_args == n)
                        *d = &decisions[i];
        }
        if (!*d)
                return bad(lineno, known ? "not as many inputs as the decision takes"
                                         : "not a decision the rules know");
        return 0;
}

/* ---- the holder's steps in a trace ("!claimed 7 1200 4200"): what it did
 * with the decisions, checked against what fences.md promises of one host.
 * A trace is one host's: its daemons one after another, each beginning
 * with a "# snowidd <pid>" line. ---- */

#define NUMBERS_MAX 4096
#define NO_VALUE INT64_MIN /* a refusal that names no value */

/* A worker number this host claimed. */
struct number {
        int64_t worker;
        bool held;           /* claimed by the daemon now running */
        int64_t start, mark; /* the claim's start; the highest mark acknowledged */
        int64_t published;   /* the highest deadline this host published for it */
};

struct host {
        struct number n[NUMBERS_MAX];
        unsigned count;
        bool decided;         /* the daemon decided a claim start (rule3_claim_start)... */
        int64_t decided_from; /* ...this one, the last */
        bool claiming;        /* a claim of claim_worker from claim_from was sent */
        int64_t claim_worker, claim_from;
        unsigned steps;
};

static struct number *number_of(struct host *h, int64_t worker)
{
        for (unsigned i = 0; i < h->count; i++)
                if (h->n[i].worker == worker)
                        return &h->n[i];
        if (h->count == NUMBERS_MAX)
                return NULL;
        h->n[h->count] = (struct number){.worker = worker};
        return &h->n[h->count++];
}

/* A daemon started: it holds nothing yet, whatever the one before held. */
static void daemon_started(struct host *h)
{
        for (unsigned i = 0; i < h->count; i++)
                h->n[i].held = false;
        h->decided = h->claiming = false;
}

/* 0: the step is one fences.md allows; 1: it is not (said); 2: unreadable. */
static int step(struct host *h, char *line, unsigned lineno)
{
        static const struct {
                const char *name;
                unsigned n;
        } kinds[] = {{"claimed", 3}, {"marked", 2},   {"publish", 3},
                     {"extend", 2},  {"claiming", 2}, {"dropped", 1}};
        const unsigned n_kinds = sizeof(kinds) / sizeof(kinds[0]);
        char *save = NULL, *name = strtok_r(line + 1, " \t\n", &save), *tok;
        int64_t v[3] = {0};
        unsigned n = 0, kind = 0;
        while ((tok = strtok_r(NULL, " \t\n", &save)))
                if (n == 3 || number(tok, &v[n++]))
                        return bad(lineno, "a step's value not a number, or too many");
        while (kind < n_kinds && (!name || strcmp(name, kinds[kind].name)))
                kind++;
        if (kind == n_kinds || n != kinds[kind].n)
                return bad(lineno, "not a step the holder takes, or not its values");
        /* a claim sent takes no slot: only one acknowledged does */
        struct number spare = {.worker = v[0]}, *x = kind == 4 ? &spare : number_of(h, v[0]);
        if (!x)
                return bad(lineno, "too many worker numbers");
        h->steps++;
        const char *why = NULL;
        int64_t was = 0;
        switch (kind) {
        case 0: /* claimed W START MARK */
                if (!h->claiming)
                        why = "a claim acknowledged that was not sent", was = NO_VALUE;
                else if (v[0] != h->claim_worker)
                        why = "a claim acknowledged of another number than was sent",
                        was = h->claim_worker;
                else if (v[1] != h->claim_from)
                        why = "the claim does not start where it was sent from",
                        was = h->claim_from;
                else if (v[1] <= x->published)
                        why = "the claim starts at or below a deadline this host published for the "
                              "number",
                        was = x->published;
                else if (v[2] < v[1])
                        why = "the claim's mark is below its start", was = v[1];
                h->claiming = false;
                x->held = true;
                x->start = v[1];
                x->mark = v[2];
                break;
        case 1: /* marked W MARK */
                if (!x->held)
                        why = "a mark acknowledged for a number not claimed", was = NO_VALUE;
                else if (v[1] > x->mark)
                        x->mark = v[1];
                break;
        case 2: /* publish W START DEADLINE */
                if (!x->held)
                        why = "a number published that was not claimed", was = NO_VALUE;
                else if (v[1] != x->start)
                        why = "published from another start than claimed", was = x->start;
                else if (v[2] > x->mark)
                        why = "a deadline above the mark the store acknowledged", was = x->mark;
                break;
        case 3: /* extend W DEADLINE */
                if (!x->held)
                        why = "a deadline extended for a number not claimed", was = NO_VALUE;
                else if (v[1] > x->mark)
                        why = "a deadline above the mark the store acknowledged", was = x->mark;
                break;
        case 4: /* claiming W START: sent from the start rule 3 gave */
                if (!h->decided)
                        why = "a claim sent with no claim start decided (rule 3)", was = NO_VALUE;
                else if (v[1] != h->decided_from)
                        why = "the claim does not start where rule3_claim_start said",
                        was = h->decided_from;
                h->decided = false;
                h->claiming = true;
                h->claim_worker = v[0];
                h->claim_from = v[1];
                break;
        case 5: /* dropped W */
                if (!x->held)
                        why = "a number dropped that was not held", was = NO_VALUE;
                x->held = false;
                break;
        }
        if (why) {
                printf("step %u (line %u), %s %" PRId64 ":", h->steps, lineno, kinds[kind].name,
                       v[0]);
                for (unsigned i = 1; i < n; i++)
                        printf(" %" PRId64, v[i]);
                printf(": %s", why);
                if (was != NO_VALUE)
                        printf(" (%" PRId64 ")", was);
                printf("\n");
                return 1;
        }
        if ((kind == 2 || kind == 3) && v[n - 1] > x->published)
                x->published = v[n - 1];
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
        static struct host host;
        while (fgets(line, sizeof(line), in)) {
                lineno++;
                /* a last line cut short (a trace whose writer stopped) is
                 * not read as a shorter number */
                if (!strchr(line, '\n'))
                        return bad(lineno, feof(in) ? "cut short: no end of line" : "too long");
                if (!strncmp(line, "# snowidd ", 10))
                        daemon_started(&host);
                if (line[0] == '!') {
                        int e = step(&host, line, lineno);
                        if (e)
                                return e;
                        continue;
                }
                if (line[0] != '@')
                        continue;
                const struct decision *d;
                int64_t a[ARGS_MAX] = {0}, r = 0;
                int e = parse(line, lineno, &d, a, &r);
                if (!e)
                        e = constants(d, a, lineno);
                if (e)
                        return e;
                seen++;
                counts[d - decisions]++;
                if (d->decide == d_claim_start) {
                        host.decided = true;
                        host.decided_from = r;
                }
                int64_t c = d->decide(a);
                if (c != r) {
                        printf("decision %u (line %u), %s:", seen, lineno, d->name);
                        for (unsigned i = 0; i < d->n_args; i++)
                                printf(" %" PRId64, a[i]);
                        printf(": the trace took %" PRId64 ", the rules give %" PRId64 "\n", r, c);
                        return 1;
                }
        }
        printf("%u decisions, each the same:", seen);
        for (unsigned i = 0; i < N_DECISIONS; i++)
                if (counts[i])
                        printf(" %s %u", decisions[i].name, counts[i]);
        if (host.steps)
                printf("; %u steps of the holder, each allowed", host.steps);
        printf("\n");
        return 0;
}
