/* SPDX-License-Identifier: MIT */
/*
 * The holder's clocks (docs/design.md "Clocks"): each tick and whenever the
 * wall clock is set, ID time is checked against the wall clock by the pure
 * policy of clock/clock.c; a step forward is followed, a step back or a
 * counter far ahead moves to a fresh number.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "claim.h"
#include "log.h"
#include "renew.h"
#include "steps.h"

void steps_check(struct holder *h)
{
        if (!h->known.layout_ready)
                return;
        const struct clock_policy pol = {
                .step_back_ns = (int64_t)h->cfg->step_back_ms * 1000000,
                .slew_ns_per_tick = (int64_t)h->cfg->slew_us_per_s * CLOCK_TICK_MS,
        };
        struct clock_reading r = holder_clock_read(h);
        struct clock_decision d = clock_decide(&pol, &h->clock, &r);
        if (d.next.offset_ns != h->clock.offset_ns)
                shm_pub_set_offset(h->pub, d.next.offset_ns);
        h->clock = d.next;
        if (d.step_forward) {
                h->stats.steps_forward++;
                log_notice("The wall clock is %" PRId64 " ms ahead of ID time; ID time follows it",
                           -d.ahead_ns / 1000000);
                renew_send(h); /* the deadline catches up at once */
        }
        if (d.action != CLOCK_MOVE)
                return;
        if (d.step_back) {
                h->stats.steps_back++;
                log_notice("The wall clock moved %" PRId64 " ms back against CLOCK_MONOTONIC; "
                           "moving to a fresh worker number",
                           d.unchosen_ns / 1000000);
        } else {
                h->stats.backstops++;
                log_warning("The live counter is %" PRId64 " ms ahead of ID time; moving to a "
                            "fresh worker number",
                            d.counter_ahead_ns / 1000000);
        }
        claim_start(h, true);
}

int steps_on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        shm_pub_heartbeat(h->pub);
        steps_check(h);
        sd_event_source_set_time(s, usec + CLOCK_TICK_MS * 1000);
        return 0;
}

int steps_arm_setclock(int fd)
{
        /* fires (ECANCELED) whenever CLOCK_REALTIME is set; else expires a
         * year from now and is armed again (never at a fixed date) */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct itimerspec its = {.it_value = {.tv_sec = now.tv_sec + 365 * 86400}};
        return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL);
}

int steps_on_setclock(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct holder *h = userdata;
        uint64_t expirations;
        (void)s;
        (void)revents;
        if (read(fd, &expirations, sizeof(expirations)) < 0 && errno == ECANCELED)
                log_info("The wall clock was set");
        steps_arm_setclock(fd);
        steps_check(h);
        return 0;
}
