/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock's calibration (docs/clocks.md, "The TSC clock").
 *
 * Every tick snowidd reads the TSC and CLOCK_MONOTONIC together (best of
 * several bracketed readings) and publishes a new line (shm/tsc.h) that
 *
 *  - starts where the line in force stands at that TSC, so the clock never
 *    steps at a recalibration, and
 *  - meets CLOCK_MONOTONIC again one tick later, at the rate measured over
 *    the last tick: an error seen at one tick is gone by the next.
 *
 * Its error against CLOCK_MONOTONIC is checked at each tick before the next
 * line is made; past the bound the clock goes off (clients use the vDSO) for
 * 1 s, then 2 s, 4 s... up to an hour after each repeat, and the run of
 * repeats is forgotten once it has stayed on for ten minutes.
 *
 * tsc_cal_step() is the policy, a pure function of its inputs (the tests and
 * the simulation in tests/test-tsc.c drive it with made-up readings); the
 * rest reads the hardware and runs the tick in the daemon's loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "tsc.h" /* shm/: struct tsc_line */

struct shm_pub;
typedef struct sd_event sd_event;

#define TSC_TICK_NS INT64_C(100000000) /* one recalibration every 100 ms */
#define TSC_SPAN_TICKS 3               /* a line is good for three ticks */
#define TSC_BACKOFF_FIRST_NS INT64_C(1000000000)
#define TSC_BACKOFF_MAX_NS (INT64_C(3600) * 1000000000)
#define TSC_FORGIVE_NS (INT64_C(600) * 1000000000) /* ten minutes without a trip */

/* One pair of readings: the TSC at the middle of a CLOCK_MONOTONIC reading. */
struct tsc_sample {
        uint64_t tsc;
        int64_t mono_ns;
        uint64_t width; /* TSC cycles between the two TSC reads around it */
};

enum tsc_event {
        TSC_EV_NONE,     /* nothing changed in kind: a new line, or still off */
        TSC_EV_ON,       /* the clock went on */
        TSC_EV_OFF,      /* turned off: not allowed any more */
        TSC_EV_TRIP,     /* turned off: its error passed the bound */
        TSC_EV_LAPSED,   /* the line ran out before this tick (a stall): started again */
        TSC_EV_BAD_RATE, /* the TSC did not move with CLOCK_MONOTONIC: off, started again */
        TSC_EV_NOISY,    /* every reading too wide to trust: the line in force kept */
        TSC_EV_EARLY,    /* under half a tick since the last reading: the line kept */
};

struct tsc_cal {
        /* settings */
        int64_t tick_ns;
        int64_t max_error_ns;
        /* state */
        bool have_prev;
        struct tsc_sample prev;
        struct tsc_line line; /* to publish; span 0: off */
        int64_t off_until_ns; /* CLOCK_MONOTONIC: off until then after a trip */
        int64_t last_trip_ns;
        unsigned repeats; /* trips in a row (each doubles the time off) */
        /* figures */
        int64_t last_error_ns; /* the line minus CLOCK_MONOTONIC at the last tick it was on */
        int64_t max_error_ns_seen;
        uint64_t trips;
};

void tsc_cal_init(struct tsc_cal *c, int64_t tick_ns, int64_t max_error_ns);
/* Forgets the rate and turns the line off: a wake from suspend. */
void tsc_cal_reset(struct tsc_cal *c);
/* One tick: s read now; allowed by the mode and the checks. c->line is then
 * what to publish. */
enum tsc_event tsc_cal_step(struct tsc_cal *c, const struct tsc_sample *s, bool allowed);
const char *tsc_event_name(enum tsc_event e);

/* Best of n bracketed readings (the narrowest). */
void tsc_sample_read(struct tsc_sample *s, int n);
/* Whether TSC_MODE_AUTO may use the TSC here: 1, or 0 and why. */
int tsc_auto_ok(char *why, size_t len);

/* The daemon's side: a 100 ms tick of its own in the loop. */
struct tsc_stats {
        bool on;
        const char *mode;      /* "auto", "on", "off" */
        char why_off[160];     /* empty when on */
        int64_t last_error_ns; /* at the last tick it was on */
        int64_t max_error_ns;  /* largest magnitude seen */
        uint64_t trips;
};
struct tsc_clock;
int tsc_clock_start(sd_event *event, const struct settings *cfg, struct shm_pub *pub,
                    struct tsc_clock **ret);
void tsc_clock_free(struct tsc_clock *t);
/* cb runs when the clock goes on or off (for /v1/status and /metrics). */
void tsc_clock_on_change(struct tsc_clock *t, void (*cb)(void *userdata), void *userdata);
void tsc_clock_stats(const struct tsc_clock *t, struct tsc_stats *ret);
