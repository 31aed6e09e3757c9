/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <time.h>

#include "monotonic.h"
#include "store-refusal.h"

#define HOLD_MIN_MS 1000 /* after a refusal (auth, TLS...), the first wait */
#define HOLD_MAX_MS 30000

bool store_refusal_applies(const struct store_refusal *h, bool is_kv)
{
        return h->until && now_usec() < h->until &&
               (h->problem.err != STORE_ERR_PERMISSION || is_kv);
}

void store_refusal_seen(struct store_refusal *h, enum store_err err, const char *message,
                        const char *endpoint, unsigned members, sd_event *event,
                        const char *timer_name, sd_event_time_handler_t over, void *userdata)
{
        struct store_problem *p = &h->problem;
        uint64_t now = now_usec();
        if (p->err != err)
                p->in_row = 0;
        p->err = err;
        p->in_row++;
        p->members = members;
        p->endpoint = endpoint;
        snprintf(p->message, sizeof(p->message), "%s", message ? message : "no reason given");
        if (now >= h->until) {
                /* a new round of tries: wait longer (calls already under way
                 * fail within the same round) */
                p->hold_ms = p->hold_ms ? p->hold_ms * 2 : HOLD_MIN_MS;
                if (p->hold_ms > HOLD_MAX_MS)
                        p->hold_ms = HOLD_MAX_MS;
                h->until = now + (uint64_t)p->hold_ms * 1000;
                if (!h->timer) {
                        if (sd_event_add_time(event, &h->timer, CLOCK_MONOTONIC, h->until, 1000,
                                              over, userdata) >= 0)
                                sd_event_source_set_description(h->timer, timer_name);
                } else {
                        sd_event_source_set_time(h->timer, h->until);
                        sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
                }
        }
        if (h->cb)
                h->cb(h->cb_userdata, p);
}

bool store_refusal_cleared(struct store_refusal *h, bool is_kv)
{
        if (h->problem.err == STORE_ERR_NONE || (h->problem.err == STORE_ERR_PERMISSION && !is_kv))
                return false;
        h->problem = (struct store_problem){0};
        h->until = 0;
        if (h->timer)
                sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        if (h->cb)
                h->cb(h->cb_userdata, &h->problem);
        return true;
}

void store_refusal_free(struct store_refusal *h)
{
        h->timer = sd_event_source_disable_unref(h->timer);
}
