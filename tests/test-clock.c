/* SPDX-License-Identifier: MIT */
/*
 * The clock policy (daemon/clock/clock.c): a table of scenarios, each a starting
 * lead and a sequence of steps (ticks, wall clock steps, switches), with the
 * actions, flags and leads expected; and extreme inputs for UBSan.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "clock.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)
#define TICK (100 * MS)
#define SLEW (100 * 1000) /* the default 1000 us/s, per 100 ms tick */
#define ANY INT64_MIN     /* in an expectation: not checked */
#define NO_COUNTER INT64_MIN

enum { F_FWD = 1, F_BACK = 2, F_STOP = 4 };

enum step_kind {
        END,    /* the steps end */
        TICKS,  /* `ticks` ticks of 100 ms: both clocks advance */
        SWITCH, /* publish(): clock_chose() at start = wall + start_ahead_ms */
        RAISE,  /* a restart keeps an offset `raise_ns` ahead of the wall clock */
};

struct step {
        enum step_kind kind;
        int64_t jump_ns;        /* TICKS: the wall clock steps by this before the first tick */
        int ticks;              /* TICKS: how many */
        bool cannot_move;       /* TICKS: can_move is false */
        int64_t counter;        /* TICKS: the counter's ms minus ID time's ms, or NO_COUNTER */
        int64_t start_ahead_ms; /* SWITCH */
        bool fresh;             /* SWITCH */
        int64_t raise_ns;       /* RAISE */
        /* expected: on every tick of the step */
        enum clock_action action;
        unsigned flags;
        /* expected after the step: ID time minus the wall clock, the chosen part
         * (ANY: not checked) */
        int64_t lead_ns, chosen_ns;
};

struct scenario {
        const char *name;
        int64_t lead_ns, chosen_ns; /* at the start */
        struct step steps[8];
};

/* Defaults, then the row's own fields: overriding an initializer is the point. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#else
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
#define STEP(k, ...)                                                                               \
        {                                                                                          \
                .kind = k, .ticks = 1, .counter = NO_COUNTER, .lead_ns = ANY, .chosen_ns = ANY,    \
                __VA_ARGS__                                                                        \
        }
#define T(...) STEP(TICKS, __VA_ARGS__)
#define SW(...) STEP(SWITCH, __VA_ARGS__)
#define RS(...) STEP(RAISE, __VA_ARGS__)

/* One row per scenario, one line per step: kept out of clang-format. */
/* clang-format off */
static const struct scenario scenarios[] = {
        {"on the wall clock: nothing to do", 0, 0,
         {T(.ticks = 50, .action = CLOCK_KEEP, .lead_ns = 0, .chosen_ns = 0)}},
        {"forward step: ID time follows at once", 0, 0,
         {T(.jump_ns = 5 * S, .action = CLOCK_FOLLOW, .flags = F_FWD, .lead_ns = 0),
          T(.ticks = 10, .action = CLOCK_KEEP, .lead_ns = 0)}},
        {"a forward drift under 1 ms follows without a step", 0, 0,
         {T(.jump_ns = MS / 2, .action = CLOCK_FOLLOW, .lead_ns = 0),
          T(.jump_ns = MS, .action = CLOCK_FOLLOW, .lead_ns = 0),
          T(.jump_ns = MS + 1, .action = CLOCK_FOLLOW, .flags = F_FWD, .lead_ns = 0)}},
        {"small step back: slewed to the wall clock, no move", 0, 0,
         {T(.jump_ns = -200 * MS, .action = CLOCK_SLEW, .lead_ns = 200 * MS - SLEW,
            .chosen_ns = 0),
          T(.ticks = 1999, .action = CLOCK_SLEW, .lead_ns = 0),
          T(.ticks = 5, .action = CLOCK_KEEP, .lead_ns = 0)}},
        {"a step back of exactly step_back slews", 0, 0,
         {T(.jump_ns = -S, .action = CLOCK_SLEW, .lead_ns = S - SLEW)}},
        {"large step back: a move, then a fresh number on the wall clock", 0, 0,
         {T(.jump_ns = -S - 1, .action = CLOCK_MOVE, .flags = F_BACK, .lead_ns = S + 1 - SLEW),
          /* the claim under way: the rest slews, no longer over step_back */
          T(.ticks = 3, .cannot_move = true, .action = CLOCK_SLEW, .lead_ns = S + 1 - 4 * SLEW),
          SW(.fresh = true, .start_ahead_ms = -5000, .lead_ns = 0, .chosen_ns = 0),
          T(.ticks = 10, .action = CLOCK_KEEP, .lead_ns = 0)}},
        {"a claim that started 3 s ahead slews back without a move", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.ticks = 30000, .action = CLOCK_SLEW, .lead_ns = 0, .chosen_ns = 0),
          T(.ticks = 5, .action = CLOCK_KEEP, .lead_ns = 0)}},
        {"a fresh number whose start is 3 s ahead: chosen, no move", 2 * S, 0,
         {SW(.fresh = true, .start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.ticks = 100, .action = CLOCK_SLEW, .lead_ns = 3 * S - 100 * SLEW,
            .chosen_ns = 3 * S - 100 * SLEW)}},
        {"a restart that kept the segment's offset slews without a move", 0, 0,
         {RS(.raise_ns = 2 * S, .lead_ns = 2 * S, .chosen_ns = 2 * S),
          T(.ticks = 20000, .action = CLOCK_SLEW, .lead_ns = 0, .chosen_ns = 0)}},
        {"a claim ahead, then a real step back of 2 s: a move", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.ticks = 10, .action = CLOCK_SLEW, .lead_ns = 3 * S - 10 * SLEW),
          T(.jump_ns = -2 * S, .action = CLOCK_MOVE, .flags = F_BACK,
            .lead_ns = 5 * S - 11 * SLEW, .chosen_ns = 3 * S - 10 * SLEW)}},
        {"a claim ahead, then a step back of 0.5 s: slewed, unchosen first", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.jump_ns = -S / 2, .action = CLOCK_SLEW, .lead_ns = 3500 * MS - SLEW,
            .chosen_ns = 3 * S),
          T(.ticks = 4999, .action = CLOCK_SLEW, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.jump_ns = -S, .action = CLOCK_SLEW, .lead_ns = 4 * S - SLEW, .chosen_ns = 3 * S),
          /* unchosen is now 1 s - SLEW: past step_back by 1 ns */
          T(.jump_ns = -SLEW - 1, .action = CLOCK_MOVE, .flags = F_BACK)}},
        {"a step back while a move cannot start: slewed and reported, then moved", 0, 0,
         {T(.jump_ns = -2 * S, .cannot_move = true, .action = CLOCK_SLEW, .flags = F_BACK,
            .lead_ns = 2 * S - SLEW),
          T(.ticks = 20, .cannot_move = true, .action = CLOCK_SLEW, .flags = F_BACK,
            .lead_ns = 2 * S - 21 * SLEW),
          T(.action = CLOCK_MOVE, .flags = F_BACK, .lead_ns = 2 * S - 22 * SLEW)}},
        {"a forward step past a chosen lead: chosen reset", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.jump_ns = 5 * S, .action = CLOCK_FOLLOW, .flags = F_FWD, .lead_ns = 0,
            .chosen_ns = 0),
          T(.jump_ns = -S / 2, .action = CLOCK_SLEW, .lead_ns = S / 2 - SLEW, .chosen_ns = 0)}},
        {"a forward step inside a chosen lead uses it up: a step back then counts", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.jump_ns = S, .action = CLOCK_SLEW, .lead_ns = 2 * S - SLEW,
            .chosen_ns = 2 * S - SLEW),
          T(.jump_ns = -1500 * MS, .action = CLOCK_MOVE, .flags = F_BACK,
            .lead_ns = 3500 * MS - 2 * SLEW, .chosen_ns = 2 * S - SLEW)}},
        {"backstop: a counter over step_back ahead moves", 0, 0,
         {T(.counter = 1000, .action = CLOCK_KEEP),
          T(.counter = 1001, .cannot_move = true, .action = CLOCK_KEEP, .flags = F_STOP),
          T(.counter = 1001, .action = CLOCK_MOVE, .flags = F_STOP, .lead_ns = 0),
          T(.counter = NO_COUNTER, .action = CLOCK_KEEP)}},
        {"backstop with a forward step in the same tick", 0, 0,
         {T(.jump_ns = 5 * S, .counter = 7000, .action = CLOCK_MOVE, .flags = F_FWD | F_STOP,
            .lead_ns = 0),
          T(.jump_ns = 5 * S, .counter = 6000, .action = CLOCK_FOLLOW, .flags = F_FWD,
            .lead_ns = 0)}},
        {"backstop and step back together", 0, 0,
         {T(.jump_ns = -2 * S, .counter = 1500, .action = CLOCK_MOVE, .flags = F_BACK | F_STOP,
            .lead_ns = 2 * S - SLEW)}},
        {"a claim ahead keeps a live counter within step_back: no backstop", 0, 0,
         {SW(.start_ahead_ms = 3000, .lead_ns = 3 * S, .chosen_ns = 3 * S),
          T(.ticks = 100, .counter = 1, .action = CLOCK_SLEW)}},
        {"a switch keeps the pending unchosen lead", 0, 0,
         {T(.jump_ns = -S / 2, .action = CLOCK_SLEW, .lead_ns = S / 2 - SLEW, .chosen_ns = 0),
          SW(.start_ahead_ms = 3500, .lead_ns = 3500 * MS, .chosen_ns = 3 * S + SLEW),
          T(.jump_ns = -S / 2 - 2 * SLEW, .action = CLOCK_MOVE, .flags = F_BACK)}},
        {"a switch whose start is within lead_ms of ID time raises nothing", 0, 0,
         {SW(.start_ahead_ms = 1, .lead_ns = 0, .chosen_ns = 0),
          SW(.start_ahead_ms = 2, .lead_ns = 2 * MS, .chosen_ns = 2 * MS)}},
        {"an inconsistent starting chosen lead is clamped", S / 2, 10 * S,
         {T(.action = CLOCK_SLEW, .lead_ns = S / 2 - SLEW, .chosen_ns = S / 2 - SLEW)}},
        {"a negative starting chosen lead counts as none", 2 * S, -S,
         {T(.action = CLOCK_MOVE, .flags = F_BACK, .lead_ns = 2 * S - SLEW, .chosen_ns = 0)}},
};
/* clang-format on */

static const struct clock_policy policy = {.step_back_ns = S, .slew_ns_per_tick = SLEW};

static int64_t lead_of(const struct clock_state *s, int64_t mono, int64_t wall)
{
        return mono + s->offset_ns - wall;
}

static void run_scenario(const struct scenario *sc)
{
        /* realistic clocks: a host up for an hour, 2025 in a 2020 epoch */
        int64_t mono = 3600 * S, wall = INT64_C(5) * 365 * 86400 * S;
        struct clock_state st = {.offset_ns = wall - mono + sc->lead_ns,
                                 .chosen_ns = sc->chosen_ns};
        int64_t idt_prev = mono + st.offset_ns;

        for (size_t i = 0; i < sizeof(sc->steps) / sizeof(sc->steps[0]); i++) {
                const struct step *sp = &sc->steps[i];
                if (sp->kind == END)
                        break;
                print_message("  step %zu\n", i);
                struct clock_reading r = {.mono_ns = mono, .wall_ns = wall, .counter_ms = -1};
                switch (sp->kind) {
                case SWITCH: {
                        int64_t start = wall / MS + sp->start_ahead_ms;
                        bool follow = clock_chose(&st, &r, (uint64_t)start, 1, sp->fresh);
                        assert_int_equal(follow, !sp->fresh);
                        idt_prev = mono + st.offset_ns;
                        break;
                }
                case RAISE:
                        clock_reset(&st, &r);
                        clock_raise(&st, &r, wall - mono + sp->raise_ns);
                        idt_prev = mono + st.offset_ns;
                        break;
                case END: /* not reached: the loop stops first */
                        break;
                case TICKS:
                        wall += sp->jump_ns;
                        for (int k = 0; k < sp->ticks; k++) {
                                mono += TICK;
                                wall += TICK;
                                int64_t idt = mono + st.offset_ns;
                                r = (struct clock_reading){
                                        .mono_ns = mono,
                                        .wall_ns = wall,
                                        .can_move = !sp->cannot_move,
                                        .counter_ms = sp->counter == NO_COUNTER
                                                              ? -1
                                                              : idt / MS + sp->counter,
                                };
                                struct clock_decision d = clock_decide(&policy, &st, &r);
                                assert_int_equal(d.action, sp->action);
                                assert_int_equal(d.step_forward, !!(sp->flags & F_FWD));
                                assert_int_equal(d.step_back, !!(sp->flags & F_BACK));
                                assert_int_equal(d.backstop, !!(sp->flags & F_STOP));
                                assert_int_equal(d.ahead_ns, lead_of(&st, mono, wall));
                                /* ID time never goes back across ticks; a slew
                                 * takes at most its amount, never past the wall */
                                int64_t next = mono + d.next.offset_ns;
                                assert_true(next >= idt_prev);
                                if (d.ahead_ns >= 0) {
                                        assert_true(d.next.offset_ns <= st.offset_ns);
                                        assert_true(st.offset_ns - d.next.offset_ns <= SLEW);
                                        assert_true(lead_of(&d.next, mono, wall) >= 0);
                                } else {
                                        assert_int_equal(lead_of(&d.next, mono, wall), 0);
                                }
                                int64_t l = lead_of(&d.next, mono, wall);
                                assert_true(d.next.chosen_ns >= 0);
                                assert_true(d.next.chosen_ns <= (l > 0 ? l : 0));
                                assert_true(d.unchosen_ns >= 0);
                                st = d.next;
                                idt_prev = next;
                        }
                        break;
                }
                if (sp->lead_ns != ANY)
                        assert_int_equal(lead_of(&st, mono, wall), sp->lead_ns);
                if (sp->chosen_ns != ANY)
                        assert_int_equal(st.chosen_ns, sp->chosen_ns);
        }
}

static void test_scenario(void **state)
{
        run_scenario(*state);
}

/* ---- extreme inputs: no signed overflow (UBSan), and the invariants hold ---- */

static const int64_t extremes[] = {
        INT64_MIN, INT64_MIN + 1, INT64_MIN / 2, -S,        -1, 0, 1,
        S,         INT64_MAX / 2, INT64_MAX - 1, INT64_MAX,
};
#define N_EXTREMES (sizeof(extremes) / sizeof(extremes[0]))

static void check_extreme(const struct clock_policy *p, const struct clock_state *s,
                          const struct clock_reading *r)
{
        struct clock_decision d = clock_decide(p, s, r);
        assert_true(d.next.chosen_ns >= 0);
        assert_true(d.unchosen_ns >= 0);
        if (d.ahead_ns < 0) {
                assert_int_equal(d.action == CLOCK_FOLLOW || d.action == CLOCK_MOVE, 1);
                assert_true(d.next.offset_ns >= s->offset_ns);
                assert_int_equal(d.step_back, false);
        } else {
                assert_true(d.next.offset_ns <= s->offset_ns);
                assert_int_equal(d.step_forward, false);
        }
        if (d.action == CLOCK_MOVE)
                assert_true(r->can_move && (d.step_back || d.backstop));
        if (r->counter_ms < 0)
                assert_int_equal(d.backstop, false);

        struct clock_state t = *s;
        clock_raise(&t, r, r->counter_ms);
        assert_true(t.offset_ns >= s->offset_ns);
        assert_true(t.chosen_ns >= 0);
        t = *s;
        clock_chose(&t, r, (uint64_t)r->counter_ms, r->wall_ns, r->can_move);
        assert_true(t.chosen_ns >= 0);
        t = *s;
        clock_reset(&t, r);
        assert_int_equal(t.chosen_ns, 0);
}

static void test_extremes(void **state)
{
        (void)state;
        static const struct clock_policy policies[] = {
                {S, SLEW}, {0, 0}, {-1, -1}, {INT64_MAX, INT64_MAX}, {INT64_MIN, INT64_MIN}};
        size_t n = 0;
        for (size_t pi = 0; pi < sizeof(policies) / sizeof(policies[0]); pi++)
                for (size_t a = 0; a < N_EXTREMES; a++)
                        for (size_t b = 0; b < N_EXTREMES; b++)
                                for (size_t c = 0; c < N_EXTREMES; c++)
                                        for (size_t e = 0; e < N_EXTREMES; e++) {
                                                struct clock_state s = {extremes[c], extremes[e]};
                                                struct clock_reading r = {
                                                        .mono_ns = extremes[a],
                                                        .wall_ns = extremes[b],
                                                        .can_move = (a + b + c + e) & 1,
                                                        .counter_ms =
                                                                extremes[(a + c + e) % N_EXTREMES],
                                                };
                                                check_extreme(&policies[pi], &s, &r);
                                                n++;
                                        }
        assert_true(n > 0);
}

/* Saturation where it shows: ID time pinned at the top still follows or slews sanely. */
static void test_saturation(void **state)
{
        (void)state;
        struct clock_state s = {.offset_ns = INT64_MAX, .chosen_ns = INT64_MAX};
        struct clock_reading r = {
                .mono_ns = INT64_MAX, .wall_ns = INT64_MIN, .counter_ms = -1, .can_move = true};
        struct clock_decision d = clock_decide(&policy, &s, &r);
        /* the lead (2^65) does not fit: reported saturated, chosen by the state */
        assert_int_equal(d.ahead_ns, INT64_MAX);
        assert_int_equal(d.action, CLOCK_MOVE);
        assert_true(d.step_back);
        assert_int_equal(d.next.offset_ns, INT64_MAX - SLEW);

        s = (struct clock_state){.offset_ns = INT64_MIN, .chosen_ns = 0};
        r = (struct clock_reading){.mono_ns = 0, .wall_ns = INT64_MAX, .counter_ms = INT64_MAX};
        d = clock_decide(&policy, &s, &r);
        assert_int_equal(d.action, CLOCK_FOLLOW);
        assert_true(d.step_forward);
        assert_int_equal(d.ahead_ns, INT64_MIN);
        assert_int_equal(d.next.offset_ns, INT64_MAX);
        assert_true(d.backstop); /* INT64_MAX ms is far past any ID time */

        /* a reset whose offset cannot be represented saturates */
        r = (struct clock_reading){.mono_ns = INT64_MIN, .wall_ns = INT64_MAX};
        clock_reset(&s, &r);
        assert_int_equal(s.offset_ns, INT64_MAX);
        r = (struct clock_reading){.mono_ns = INT64_MAX, .wall_ns = INT64_MIN};
        clock_reset(&s, &r);
        assert_int_equal(s.offset_ns, INT64_MIN);

        /* a start at UINT64_MAX ms raises the offset as far as it goes */
        r = (struct clock_reading){.mono_ns = 0, .wall_ns = 0};
        clock_reset(&s, &r);
        assert_false(clock_chose(&s, &r, (uint64_t)INT64_MAX, INT64_MAX, true));
        assert_int_equal(s.offset_ns, 0); /* within a lead of INT64_MAX ms */
        assert_true(clock_chose(&s, &r, UINT64_MAX, 1, false));
        assert_int_equal(s.offset_ns, INT64_MAX);
        assert_int_equal(s.chosen_ns, INT64_MAX);
}

/* clock_raise() never lowers the offset and keeps an unchosen lead unchosen. */
static void test_raise(void **state)
{
        (void)state;
        struct clock_reading r = {.mono_ns = 10 * S, .wall_ns = 100 * S};
        struct clock_state s = {.offset_ns = 90 * S + 2 * S, .chosen_ns = S / 2};
        clock_raise(&s, &r, 90 * S);
        assert_int_equal(s.offset_ns, 92 * S);
        assert_int_equal(s.chosen_ns, S / 2);
        clock_raise(&s, &r, 95 * S);
        assert_int_equal(s.offset_ns, 95 * S);
        assert_int_equal(s.chosen_ns, 5 * S - 1500 * MS); /* 1.5 s stays unchosen */
        /* from behind the wall clock: only the lead past it is chosen */
        s = (struct clock_state){.offset_ns = 88 * S, .chosen_ns = 0};
        clock_raise(&s, &r, 91 * S);
        assert_int_equal(s.chosen_ns, S);
}

#define N_SCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

int main(void)
{
        /* one test per scenario, named by its row */
        struct CMUnitTest tests[N_SCENARIOS + 3] = {
                cmocka_unit_test(test_raise),
                cmocka_unit_test(test_saturation),
                cmocka_unit_test(test_extremes),
        };
        for (size_t i = 0; i < N_SCENARIOS; i++)
                tests[3 + i] = (struct CMUnitTest){
                        .name = scenarios[i].name,
                        .test_func = test_scenario,
                        .initial_state = (void *)&scenarios[i],
                };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
