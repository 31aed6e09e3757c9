/* SPDX-License-Identifier: MIT */
/*
 * `snowid fence`'s decision (fencing.h): the refusal of rule 7 and the
 * claims_above of rule 6, from a read of the cluster.
 */
#include "fencing.h"
#include "rules.h"

#define DAY_MS UINT64_C(86400000)

static uint64_t max2(uint64_t a, uint64_t b)
{
        return a > b ? a : b;
}

static uint64_t wall_id_ms(const struct fencing_settings *set, uint64_t wall_unix_ms)
{
        return wall_unix_ms > set->epoch_ms ? wall_unix_ms - set->epoch_ms : 0;
}

/* What may be left of the lead a fence (era, claims_above) gave the hosts
 * that claimed after it, once slewed at the configured rate. */
static uint64_t lead_left(const struct fencing_settings *set, uint64_t wall_unix_ms, uint64_t era,
                          uint64_t claims_above)
{
        return rule6_lead_left(set->epoch_ms, era, claims_above, wall_id_ms(set, wall_unix_ms),
                               set->slew_us_per_s);
}

uint64_t fencing_own_lead_ms(const struct fencing_settings *set)
{
        return set->ahead_ms + ((uint64_t)set->window_s + set->mark_step_s) * 1000;
}

bool fencing_witness_valid(const struct fencing_settings *set, uint64_t wall_unix_ms,
                           const struct fencing_witness *w)
{
        return w->era >= 0 && w->claims_above >= 0 && w->deadline >= 0 &&
               !((uint64_t)w->deadline >> set->time_bits) &&
               !((uint64_t)w->claims_above >> set->time_bits) &&
               (uint64_t)w->era <= wall_unix_ms + DAY_MS;
}

void fencing_decide(const struct fencing_settings *set, uint64_t wall_unix_ms,
                    const struct fencing_read *rd, struct fencing_decision *d)
{
        const struct cluster_ident none = {0};
        const struct cluster_ident *old = rd->fence ? rd->fence : &none;
        *d = (struct fencing_decision){.verdict = FENCING_WRITE};

        /* what halted daemons wrote down: the fence each knew and its
         * highest deadline.  Only a witness of a fence at least as new as
         * the stored one shows what came after it; one that cannot be read
         * still says a daemon knew the cluster, so the fence is then refused
         * without --lost-lead (it is not counted) */
        uint64_t witness_era = 0;
        for (size_t i = 0; i < rd->n_witnesses; i++) {
                const struct fencing_witness *w = &rd->witnesses[i];
                if (!fencing_witness_valid(set, wall_unix_ms, w))
                        continue;
                d->witnesses++;
                d->current += (uint64_t)w->era >= old->era;
                witness_era = max2(witness_era, (uint64_t)w->era);
                d->witness_deadline = max2(d->witness_deadline, (uint64_t)w->deadline);
                d->witness_lead_left =
                        max2(d->witness_lead_left, lead_left(set, wall_unix_ms, (uint64_t)w->era,
                                                             (uint64_t)w->claims_above));
        }
        d->era = max2(witness_era, old->era);

        /* rule 7: a store restored or replaced (it answers as another
         * cluster than its fence names), or with no fence, may have lost
         * fences made after its snapshot, whose leads hosts still run */
        bool replaced = old->cluster_id && rd->cluster_id && old->cluster_id != rd->cluster_id;
        d->same_cluster = old->cluster_id && old->cluster_id == rd->cluster_id;
        bool fenceless = !rd->fence || !old->era;
        if (rule7_fence_refuses(replaced || fenceless, d->current > 0, set->lost_lead_ms >= 0)) {
                d->verdict = fenceless ? FENCING_REFUSE_FENCELESS : FENCING_REFUSE_REPLACED;
                return;
        }

        /* rule 6: a daemon's mark runs up to window + mark-step ahead of its
         * clock; hosts that claimed after the last fence run its lead ahead
         * too, less what slew-rate has brought back.  --ahead 0 is for a
         * store that was not restored (a deleted layout, fence or floor):
         * its marks are intact and cover the stored fence's lead */
        const struct rule6_fence_in in = {
                .clock_bound = rule6_clock_bound(set->epoch_ms, wall_unix_ms, set->ahead_ms,
                                                 set->window_s, set->mark_step_s),
                .lead_left = set->ahead_ms
                                     ? lead_left(set, wall_unix_ms, old->era, old->claims_above)
                                     : 0,
                .witness_lead_left = d->witness_lead_left,
                .witness_deadline = d->witness_deadline,
                .lost_lead = set->lost_lead_ms > 0 ? (uint64_t)set->lost_lead_ms : 0,
                .stored_above = old->claims_above,
                .floor = rd->floor_present ? rd->floor : 0,
                .highest_mark = rd->highest,
        };
        d->lead_left = in.lead_left;
        d->lost_lead = in.lost_lead;
        d->bound = rule6_fence_lead(&in);
        d->above = rule6_fence_above(&in);
        uint64_t stored = max2(max2(in.floor, in.highest_mark), d->witness_deadline);
        d->far_ahead_ms = stored > d->bound ? stored - d->bound : 0;
}
