/* SPDX-License-Identifier: MIT */
/* The TSC clock's calibration (tsc-clock.h): the policy and the readings,
 * without the loop (tsc-clock.c), so the tests and the bench use it too. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "publish.h"
#include "tsc-clock.h"

#if SHM_HAVE_TSC
#include <cpuid.h>
#endif

typedef unsigned __int128 u128;

#define Q TSC_SHIFT
/* rates outside 10 MHz .. 100 GHz are no TSC's: ns per cycle in Q32 */
#define RATE_MIN ((UINT64_C(1) << Q) / 100)
#define RATE_MAX ((u128)100 << Q)
#define CLOCKSOURCE "/sys/devices/system/clocksource/clocksource0/current_clocksource"

void tsc_cal_init(struct tsc_cal *c, int64_t tick_ns, int64_t max_error_ns)
{
        /* a bound under half a tick keeps every new line rising (rise below) */
        if (max_error_ns > tick_ns / 2)
                max_error_ns = tick_ns / 2;
        *c = (struct tsc_cal){.tick_ns = tick_ns, .max_error_ns = max_error_ns};
}

void tsc_cal_reset(struct tsc_cal *c)
{
        c->have_prev = false;
        c->line = (struct tsc_line){0};
}

static int64_t abs64(int64_t v)
{
        return v < 0 ? (v == INT64_MIN ? INT64_MAX : -v) : v;
}

enum tsc_event tsc_cal_step(struct tsc_cal *c, const struct tsc_sample *s, bool allowed)
{
        bool was_on = c->line.span != 0;
        enum tsc_event ev = TSC_EV_NONE;

        if (!allowed) {
                tsc_cal_reset(c);
                return was_on ? TSC_EV_OFF : TSC_EV_NONE;
        }
        if (!c->have_prev) {
                c->prev = *s;
                c->have_prev = true;
                c->line = (struct tsc_line){0};
                return was_on ? TSC_EV_OFF : TSC_EV_NONE;
        }

        /* the rate over the last tick, ns per cycle (Q32) */
        uint64_t dt = s->tsc - c->prev.tsc;
        int64_t dn = s->mono_ns - c->prev.mono_ns;
        /* a tick too soon after the last reading (a timer catching up after
         * a stall): a rate measured over it would be off by the readings'
         * own error; keep the line in force and the older reading */
        if (dn >= 0 && dn < c->tick_ns / 2)
                return TSC_EV_EARLY;
        u128 rate = dn > 0 && dt > 0 && dt <= INT64_MAX ? ((u128)dn << Q) / dt : 0;
        if (rate < RATE_MIN || rate > RATE_MAX) {
                /* the TSC went back, stood still, or raced: start again */
                c->prev = *s;
                c->line = (struct tsc_line){0};
                return TSC_EV_BAD_RATE;
        }
        /* a reading the daemon was preempted in the middle of: its TSC is
         * uncertain by half its width.  Keep the line in force (good for a
         * few ticks) and the older reading, and try again next tick. */
        if ((u128)s->width * rate >> Q > (u128)c->max_error_ns / 4)
                return TSC_EV_NOISY;

        /* the line in force, checked against CLOCK_MONOTONIC */
        int64_t start = s->mono_ns;
        if (was_on) {
                int64_t v;
                if (!tsc_line_ns(&c->line, s->tsc, &v)) {
                        ev = TSC_EV_LAPSED; /* a stall: start afresh, on the vDSO's time */
                } else {
                        int64_t err = v - s->mono_ns; /* both in [0, INT64_MAX] */
                        c->last_error_ns = err;
                        if (abs64(err) > c->max_error_ns_seen)
                                c->max_error_ns_seen = abs64(err);
                        if (abs64(err) > c->max_error_ns) {
                                /* forgiven: on for ten minutes since it last came back */
                                if (c->trips && s->mono_ns - c->off_until_ns > TSC_FORGIVE_NS)
                                        c->repeats = 0;
                                int64_t off = TSC_BACKOFF_FIRST_NS;
                                for (unsigned i = 0; i < c->repeats && off < TSC_BACKOFF_MAX_NS;
                                     i++)
                                        off *= 2;
                                if (off > TSC_BACKOFF_MAX_NS)
                                        off = TSC_BACKOFF_MAX_NS;
                                c->repeats++;
                                c->trips++;
                                c->last_trip_ns = s->mono_ns;
                                c->off_until_ns = s->mono_ns + off;
                                c->prev = *s;
                                c->line = (struct tsc_line){0};
                                return TSC_EV_TRIP;
                        }
                        start = v; /* no step: the new line starts where this one stands */
                }
        }
        c->prev = *s;
        if (s->mono_ns < c->off_until_ns) {
                c->line = (struct tsc_line){0};
                return TSC_EV_NONE;
        }

        /* the new line: from (s->tsc, start) to CLOCK_MONOTONIC one tick on,
         * that is to (s->tsc + tick_cycles, s->mono_ns + tick_ns) */
        u128 tick_cycles = ((u128)c->tick_ns << Q) / rate;
        int64_t rise = s->mono_ns + c->tick_ns - start; /* > tick / 2: |err| <= tick / 2 */
        if (tick_cycles == 0 || rise <= 0) {
                c->line = (struct tsc_line){0};
                return TSC_EV_BAD_RATE;
        }
        c->line = (struct tsc_line){
                .base = s->tsc,
                .span = (uint64_t)(tick_cycles * TSC_SPAN_TICKS),
                .mult = (uint64_t)(((u128)rise << Q) / tick_cycles),
                .shift = Q,
                .ns = start,
        };
        if (ev == TSC_EV_LAPSED)
                return ev;
        return was_on ? TSC_EV_NONE : TSC_EV_ON;
}

const char *tsc_event_name(enum tsc_event e)
{
        static const char *const names[] = {"none",   "on",       "off",   "trip",
                                            "lapsed", "bad-rate", "noisy", "early"};
        return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "?";
}

/* The daemon's own reads are ordered (LFENCE first): a bracket must not let
 * the CPU move a TSC read past the clock read it brackets. */
static uint64_t tsc_read_ordered(void)
{
#if SHM_HAVE_TSC
        _mm_lfence();
        uint64_t t = __rdtsc();
        _mm_lfence();
        return t;
#else
        return 0;
#endif
}

void tsc_sample_read(struct tsc_sample *s, int n)
{
        s->width = UINT64_MAX;
        for (int i = 0; i < n; i++) {
                uint64_t a = tsc_read_ordered();
                int64_t mono = shm_monotonic_ns();
                uint64_t b = tsc_read_ordered();
                if (b - a < s->width) {
                        s->width = b - a;
                        s->tsc = a + (b - a) / 2;
                        s->mono_ns = mono;
                }
        }
}

int tsc_auto_ok(char *why, size_t len)
{
#if SHM_HAVE_TSC
        unsigned a, b, c, d;
        if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8))) {
                snprintf(why, len, "the CPU's TSC is not invariant");
                return 0;
        }
        char src[64] = "";
        FILE *f = fopen(CLOCKSOURCE, "re");
        if (f) {
                if (!fgets(src, sizeof(src), f))
                        src[0] = 0;
                fclose(f);
        }
        src[strcspn(src, "\n")] = 0;
        if (strcmp(src, "tsc") != 0) {
                snprintf(why, len, "the kernel's clocksource is %s, not tsc",
                         src[0] ? src : "unknown");
                return 0;
        }
        return 1;
#else
        snprintf(why, len, "no TSC clock on this architecture");
        return 0;
#endif
}
