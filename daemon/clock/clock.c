/* SPDX-License-Identifier: MIT */
/* The clock policy (clock.h): docs/design.md "Clocks", with no I/O. */
#include "clock.h"

/* Sums and differences of int64s are exact in 128 bits; results are
 * saturated back into int64 when stored. */
typedef __int128 wide;

#define NS_PER_MS 1000000

static int64_t sat(wide v)
{
        return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

static wide wmax(wide a, wide b)
{
        return a > b ? a : b;
}

static wide wmin(wide a, wide b)
{
        return a < b ? a : b;
}

/* ID time minus the wall clock, exactly. */
static wide lead(const struct clock_state *s, const struct clock_reading *r)
{
        return (wide)r->mono_ns + s->offset_ns - r->wall_ns;
}

struct clock_decision clock_decide(const struct clock_policy *p, const struct clock_state *s,
                                   const struct clock_reading *r)
{
        wide step_back = wmax(p->step_back_ns, 0), slew = wmax(p->slew_ns_per_tick, 0);
        wide ahead = lead(s, r);
        struct clock_decision d = {.action = CLOCK_KEEP, .next = *s, .ahead_ns = sat(ahead)};

        if (ahead < 0) {
                /* the wall clock is ahead: ID time follows at once; whatever
                 * lead the daemon chose is used up */
                d.action = CLOCK_FOLLOW;
                d.step_forward = -ahead > NS_PER_MS;
                d.next.offset_ns = sat((wide)r->wall_ns - r->mono_ns);
                d.next.chosen_ns = 0;
        } else {
                /* ID time is ahead: the part the daemon did not choose came
                 * from the wall clock moving back against CLOCK_MONOTONIC */
                wide chosen = wmin(wmax(s->chosen_ns, 0), ahead);
                wide unchosen = ahead - chosen;
                d.unchosen_ns = sat(unchosen);
                d.step_back = unchosen > step_back;
                /* slow ID time by at most a tick's slew, never past the wall
                 * clock; the slew takes the unchosen lead first */
                d.next.offset_ns = sat((wide)s->offset_ns - wmin(ahead, slew));
                d.next.chosen_ns = sat(wmin(chosen, wmax(lead(&d.next, r), 0)));
                if (d.next.offset_ns != s->offset_ns)
                        d.action = CLOCK_SLEW;
        }

        /* the backstop: a live counter far ahead of ID time */
        if (r->counter_ms >= 0) {
                wide ctr = (wide)r->counter_ms * NS_PER_MS - ((wide)r->mono_ns + d.next.offset_ns);
                d.counter_ahead_ns = sat(ctr);
                d.backstop = ctr > step_back;
        }

        if ((d.step_back || d.backstop) && r->can_move)
                d.action = CLOCK_MOVE;
        return d;
}

void clock_reset(struct clock_state *s, const struct clock_reading *r)
{
        s->offset_ns = sat((wide)r->wall_ns - r->mono_ns);
        s->chosen_ns = 0;
}

void clock_raise(struct clock_state *s, const struct clock_reading *r, int64_t offset_ns)
{
        wide before = wmax(lead(s, r), 0);
        wide unchosen = before - wmin(wmax(s->chosen_ns, 0), before);
        if (offset_ns > s->offset_ns)
                s->offset_ns = offset_ns;
        wide after = wmax(lead(s, r), 0);
        s->chosen_ns = sat(after - wmin(unchosen, after));
}

bool clock_chose(struct clock_state *s, const struct clock_reading *r, uint64_t start_ms,
                 int64_t lead_ms, bool fresh)
{
        if (fresh)
                clock_reset(s, r);
        wide idt = (wide)r->mono_ns + s->offset_ns;
        wide start = (wide)start_ms * NS_PER_MS;
        bool ahead = start > idt + (wide)wmax(lead_ms, 0) * NS_PER_MS;
        clock_raise(s, r, ahead ? sat(start - r->mono_ns) : s->offset_ns);
        return !fresh;
}
