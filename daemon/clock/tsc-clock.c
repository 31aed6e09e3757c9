/* SPDX-License-Identifier: MIT */
/* The TSC clock in the daemon's loop (tsc-clock.h): a tick every 100 ms. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-event.h>

#include "log.h"
#include "publish.h"
#include "tsc-clock.h"

static int64_t clock_ns(clockid_t id)
{
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the daemon's tick ---- */

struct tsc_clock {
        sd_event_source *timer;
        struct shm_pub *pub;
        enum tsc_mode mode;
        struct tsc_cal cal;
        bool allowed;
        bool published_off;
        unsigned ticks;
        int64_t boot_minus_mono; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC: grows across a suspend */
        char why[160];           /* why it is off, when it is */
        void (*on_change)(void *userdata);
        void *on_change_userdata;
};

void tsc_clock_on_change(struct tsc_clock *t, void (*cb)(void *userdata), void *userdata)
{
        t->on_change = cb;
        t->on_change_userdata = userdata;
}

static const char *mode_name(enum tsc_mode m)
{
        return m == TSC_MODE_ON ? "on" : m == TSC_MODE_OFF ? "off" : "auto";
}

static void check_allowed(struct tsc_clock *t)
{
        char why[sizeof(t->why)] = "";
        bool ok;
        if (t->mode == TSC_MODE_OFF) {
                ok = false;
                snprintf(why, sizeof(why), "tsc-clock = off");
        } else if (t->mode == TSC_MODE_ON) {
                ok = SHM_HAVE_TSC;
                if (!ok)
                        snprintf(why, sizeof(why), "no TSC clock on this architecture");
        } else
                ok = tsc_auto_ok(why, sizeof(why));
        if (t->ticks > 0 && ok != t->allowed) {
                if (ok)
                        log_info("The TSC clock may be used again");
                else
                        log_notice("The TSC clock goes off: %s", why);
        } else if (t->ticks == 0 && !ok)
                log_info("The TSC clock is off: %s; clients read the vDSO", why);
        t->allowed = ok;
        if (!ok)
                snprintf(t->why, sizeof(t->why), "%s", why);
}

static void tsc_tick(struct tsc_clock *t)
{
        int64_t bm = clock_ns(CLOCK_BOOTTIME) - clock_ns(CLOCK_MONOTONIC);
        /* a wake from suspend: the TSC may have been reset or kept counting;
         * over 50 ms, so that a preemption between the two reads is not one */
        if (t->ticks > 0 && bm - t->boot_minus_mono > 50000000) {
                log_info("Woke from a suspend: recalibrating the TSC clock");
                tsc_cal_reset(&t->cal);
        }
        t->boot_minus_mono = bm;
        /* the invariant TSC and the clocksource, once a second */
        if (t->ticks % 10 == 0)
                check_allowed(t);

        struct tsc_sample s;
        tsc_sample_read(&s, 8);
        enum tsc_event ev = tsc_cal_step(&t->cal, &s, t->allowed);
        bool on = t->cal.line.span != 0;
        if (on || !t->published_off)
                shm_pub_set_tsc(t->pub, on ? &t->cal.line : NULL);
        t->published_off = !on;
        t->ticks++;
        if (ev != TSC_EV_NONE && ev != TSC_EV_NOISY && ev != TSC_EV_EARLY && t->on_change)
                t->on_change(t->on_change_userdata);

        switch (ev) {
        case TSC_EV_ON:
                log_info("The TSC clock is on (error bound %" PRId64 " us)",
                         t->cal.max_error_ns / 1000);
                break;
        case TSC_EV_TRIP:
                snprintf(t->why, sizeof(t->why), "%+.1f us off CLOCK_MONOTONIC",
                         (double)t->cal.last_error_ns / 1000);
                log_warning("The TSC clock was %+.1f us off CLOCK_MONOTONIC (bound %" PRId64
                            " us): off for %" PRId64 " s; clients read the vDSO",
                            (double)t->cal.last_error_ns / 1000, t->cal.max_error_ns / 1000,
                            (t->cal.off_until_ns - s.mono_ns) / 1000000000);
                break;
        case TSC_EV_LAPSED:
                log_info("The TSC clock's line ran out before it was recalibrated (a stall): "
                         "started again");
                break;
        case TSC_EV_BAD_RATE:
                snprintf(t->why, sizeof(t->why), "the TSC did not keep pace with CLOCK_MONOTONIC");
                log_notice("The TSC did not keep pace with CLOCK_MONOTONIC over the last tick: "
                           "recalibrating");
                break;
        default:
                break;
        }
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct tsc_clock *t = userdata;
        uint64_t now = usec;
        tsc_tick(t);
        /* from now, not from when it was due: after a stall, one tick and
         * not a burst of them catching up */
        sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now);
        sd_event_source_set_time(s, now + (uint64_t)TSC_TICK_NS / 1000);
        return 0;
}

int tsc_clock_start(sd_event *event, const struct settings *cfg, struct shm_pub *pub,
                    struct tsc_clock **ret)
{
        struct tsc_clock *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->pub = pub;
        t->mode = cfg->tsc_mode;
        tsc_cal_init(&t->cal, TSC_TICK_NS, (int64_t)cfg->tsc_max_error_us * 1000);
        /* the first tick now: a line from an earlier daemon goes off at once */
        tsc_tick(t);
        int r = sd_event_add_time_relative(event, &t->timer, CLOCK_MONOTONIC,
                                           (uint64_t)TSC_TICK_NS / 1000, 1000, on_tick, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->timer, SD_EVENT_ON);
        if (r < 0) {
                tsc_clock_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void tsc_clock_free(struct tsc_clock *t)
{
        if (!t)
                return;
        sd_event_source_unref(t->timer);
        free(t);
}

void tsc_clock_stats(const struct tsc_clock *t, struct tsc_stats *ret)
{
        bool on = t && t->cal.line.span != 0;
        *ret = (struct tsc_stats){
                .on = on,
                .mode = t ? mode_name(t->mode) : "off",
                .last_error_ns = t ? t->cal.last_error_ns : 0,
                .max_error_ns = t ? t->cal.max_error_ns_seen : 0,
                .trips = t ? t->cal.trips : 0,
        };
        if (!on)
                snprintf(ret->why_off, sizeof(ret->why_off), "%s",
                         t && t->why[0] ? t->why : "calibrating");
}
