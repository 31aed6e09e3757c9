/* SPDX-License-Identifier: MIT */
/*
 * The clock policy: docs/design.md "Clocks" (the rules: docs/fences.md
 * "Clocks: one policy"), as pure functions (no I/O, no globals, no clock
 * reads).  holder.c reads the clocks, calls these, and acts on the answer.
 *
 * ID time is CLOCK_MONOTONIC plus the published offset.  It may be ahead of
 * the wall clock for two reasons, and only one of them is a step back:
 *
 *  - the daemon put it there (a claim whose start was ahead of the clock, a
 *    restart that kept the segment's offset): the "chosen" lead, which is
 *    slewed away and never moves to a fresh number;
 *  - the wall clock moved back against CLOCK_MONOTONIC: the "unchosen"
 *    lead.  More than step_back of it moves to a fresh number.
 *
 * All arithmetic saturates: any int64 input is defined behaviour.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct clock_policy {
        int64_t step_back_ns;     /* more unchosen lead than this: a fresh number */
        int64_t slew_ns_per_tick; /* how much ID time may slow per call of clock_decide() */
};

struct clock_state {
        int64_t offset_ns; /* ID time minus CLOCK_MONOTONIC, as published */
        int64_t chosen_ns; /* the part of ID time's lead over the wall clock that the
                            * daemon put there itself; 0 <= chosen_ns <= the lead */
};

struct clock_reading {
        int64_t mono_ns;    /* CLOCK_MONOTONIC */
        int64_t wall_ns;    /* CLOCK_REALTIME minus the layout's epoch */
        bool can_move;      /* a move to a fresh number may start now: a number is held,
                             * no acquisition is under way, fresh moves not throttled */
        int64_t counter_ms; /* the live counter's ms (the backstop), or -1 */
};

enum clock_action {
        CLOCK_KEEP,   /* ID time is on the wall clock: nothing to do */
        CLOCK_FOLLOW, /* the wall clock was ahead: ID time raised to it */
        CLOCK_SLEW,   /* ID time was ahead: slowed by at most a tick's slew */
        CLOCK_MOVE,   /* start the move to a fresh number (and publish next, slewed) */
};

struct clock_decision {
        enum clock_action action;
        struct clock_state next;  /* to keep and to publish (offset) whatever the action */
        bool step_forward;        /* the wall clock was more than 1 ms ahead of ID time */
        bool step_back;           /* unchosen lead over step_back (reported every tick
                                   * it lasts, moved on only when can_move) */
        bool backstop;            /* the counter over step_back ahead of ID time (likewise) */
        int64_t ahead_ns;         /* ID time minus the wall clock, before this decision */
        int64_t unchosen_ns;      /* of that, the part from the wall clock's own moves */
        int64_t counter_ahead_ns; /* the counter minus ID time (next), or 0 without one */
};

/* One tick (every 100 ms) or a clock-set event. */
struct clock_decision clock_decide(const struct clock_policy *p, const struct clock_state *s,
                                   const struct clock_reading *r);

/* ID time on the wall clock, no chosen lead: a start, or a fresh number. */
void clock_reset(struct clock_state *s, const struct clock_reading *r);

/* The daemon raises the offset to offset_ns itself (never lowers it): the
 * lead this adds is chosen; the unchosen lead so far stays unchosen (and
 * chosen_ns is brought within the lead).  For a restart that keeps a
 * segment's offset. */
void clock_raise(struct clock_state *s, const struct clock_reading *r, int64_t offset_ns);

/* A switch (publish()) to a number whose counter starts at start_ms.  fresh:
 * ID time first returns to the wall clock (clock_reset()), and the counter
 * must not follow the old one's; else ID time keeps its offset and the
 * counter follows.  Then a start more than lead_ms ahead of ID time raises ID
 * time to it, a chosen lead.  Returns the publication's `follow`. */
bool clock_chose(struct clock_state *s, const struct clock_reading *r, uint64_t start_ms,
                 int64_t lead_ms, bool fresh);
