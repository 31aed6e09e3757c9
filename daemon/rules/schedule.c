/* SPDX-License-Identifier: MIT */
/* When a held number is renewed, and to what (schedule.h). */
#include "schedule.h"

struct renew_plan renew_decide(const struct renew_in *in)
{
        struct renew_plan p = {.keepalive_next = in->keepalive_next};
        /* keepalives store nothing: a third of the TTL apart is enough for
         * the lease (a failed one is retried at the next renewal); one in
         * flight at a time, none while the lease's loss is being told */
        if (!in->keepalive_busy && !in->lease_checking &&
            (in->keepalive_now || in->mono >= in->keepalive_next)) {
                p.keepalive = true;
                p.keepalive_next = in->mono + in->ttl_ms / 3;
        }
        /* one extension in flight at a time, so its mark is known; none
         * while a raise or a halt is on */
        uint64_t v = in->now + in->window_ms + in->step_ms;
        if (in->extend_busy || in->raising || in->halted || in->now + in->window_ms <= in->mark ||
            (in->time_bits < 64 && v >> in->time_bits))
                return p;
        p.extend = true;
        p.extend_to = v;
        return p;
}
