/* SPDX-License-Identifier: MIT */
/* Which number to claim (choose.h). */
#include "choose.h"
#include "rules.h"

bool choose_free(const struct store_number *x)
{
        return !x->held && (!x->marked || x->mark_valid);
}

/* the mark a number is taken to have: a number without one starts above
 * the floor (rule 3) */
static uint64_t mark_of(const struct choose_in *in, uint64_t n)
{
        const struct store_number *x = &in->numbers[n];
        return rule3_mark(x->mark_rev != 0, x->mark, in->floor);
}

struct choice claim_choose(const struct choose_in *in)
{
        uint64_t past = 0, lowest = UINT64_MAX;
        int64_t pick = -1, low = -1;
        /* free numbers whose mark is behind the clock: one at random, which
         * spreads daemons that start together */
        for (uint64_t n = in->first; n <= in->last; n++) {
                if (!choose_free(&in->numbers[n]))
                        continue;
                uint64_t m = mark_of(in, n);
                if (m < in->now && in->draw(in->draw_state, ++past) == 0)
                        pick = (int64_t)n;
                if (m < lowest)
                        lowest = m, low = (int64_t)n;
        }
        /* the lowest mark as good as any could be (below) */
        uint64_t good = in->now + in->lead_ms;
        if (in->claims_above + 1 > good)
                good = in->claims_above + 1;
        /* the preferred number (the one this daemon published last before a
         * restart, or held when a fence came), when a claim of it would
         * start no further ahead than a live holder's mark leads (lead_ms)
         * the lowest start any claim could have now (the clock, or the
         * fence's claims_above + 1), or within a mark step (step_ms, how
         * far apart live holders' marks lie) of the lowest free mark (of a
         * sample, only one whose lowest is as good as any): a fleet
         * restarted at once takes its own numbers back, whether or not
         * some of them fell behind the clock while others were slow to
         * restart, and no two of its claims meet.  A number behind the
         * clock would start this host nearer the clock, but in a full
         * space it is another's, slower to restart, that then has to
         * search */
        int32_t pref = in->prefer;
        bool in_range = pref >= 0 && (uint64_t)pref >= in->first && (uint64_t)pref <= in->last;
        if (in_range && !choose_free(&in->numbers[pref]) && in->prefer_handing_over)
                return (struct choice){.kind = CHOOSE_WAIT, .worker = (uint32_t)pref};
        if (in_range && !in->fresh && choose_free(&in->numbers[pref]) &&
            in->numbers[pref].mark_rev &&
            (!in->sampled || pick >= 0 ||
             (low >= 0 && lowest <= good && in->numbers[low].mark_rev))) {
                uint64_t least = in->now > in->claims_above ? in->now : in->claims_above + 1;
                uint64_t m = mark_of(in, (uint64_t)pref);
                uint64_t best = lowest > least ? lowest : least;
                uint64_t bound = best + in->step_ms;
                if (least + in->lead_ms > bound)
                        bound = least + in->lead_ms;
                if ((m > least ? m : least) <= bound)
                        return (struct choice){.kind = CHOOSE_CLAIM,
                                               .worker = (uint32_t)pref,
                                               .mark = m,
                                               .ahead = pick < 0};
        }
        if (pick >= 0)
                return (struct choice){.kind = CHOOSE_CLAIM,
                                       .worker = (uint32_t)pick,
                                       .mark = mark_of(in, (uint64_t)pick)};
        /* a sample with every free number ahead: read every number, for
         * one behind the clock, unless the sample's lowest is a mark as
         * good as any could be.  No claim starts below claims_above + 1
         * (rule 3), and a live holder's mark leads the clock by lead_ms, as
         * a number given up a moment ago does: a fleet restarted at once
         * finds every mark so, and each host reading every number there
         * (2^worker-bits keys each) finds nothing better.  A number never
         * marked stands at the floor, which follows the live marks: a
         * sample of those, in a space mostly unused, may have missed the
         * few numbers behind the clock, so every number is read */
        if (in->sampled && (low < 0 || in->fresh || lowest > good || !in->numbers[low].mark_rev))
                return (struct choice){.kind = CHOOSE_SCAN_ALL};
        if (low < 0)
                return (struct choice){.kind = CHOOSE_ALL_TAKEN};
        if (in->fresh)
                return (struct choice){.kind = CHOOSE_NONE_FRESH};
        /* every free mark ahead (a fleet restarted at once): one at random
         * of those near the lowest, not the lowest alone, which would be
         * the one number all of them try (of a sample: its own numbers,
         * which differ from host to host) */
        uint64_t near = 0;
        for (uint64_t n = in->first; n <= in->last; n++)
                if (choose_free(&in->numbers[n]) && mark_of(in, n) <= lowest + CHOOSE_SPREAD_MS &&
                    in->draw(in->draw_state, ++near) == 0)
                        low = (int64_t)n;
        return (struct choice){.kind = CHOOSE_CLAIM,
                               .worker = (uint32_t)low,
                               .mark = mark_of(in, (uint64_t)low),
                               .ahead = true};
}
