/* SPDX-License-Identifier: MIT */
/* What a read of the cluster means (verdict.h). */
#include "rules.h"
#include "verdict.h"

static bool never_used(const struct store_cluster *c)
{
        return c->fence == 0 && c->floor == 0 && !c->held && c->marks_zero;
}

enum cluster_verdict cluster_verdict(const struct store_cluster *c, const struct cluster_known *k)
{
        if (c->malformed)
                return CLUSTER_MALFORMED;
        if (c->layout == 0)
                return !k->cl && rule7_may_make(never_used(c), c->witnessed) ? CLUSTER_MAKE
                                                                             : CLUSTER_LAYOUT_LOST;
        if (c->layout < 0)
                return CLUSTER_LAYOUT_BAD;
        /* a damaged floor fences nothing: as if lost */
        if (c->fence != 1 || c->floor != 1)
                return CLUSTER_FENCE_LOST;
        if (rule5_foreign_fence(c->c.cluster_id, k->answer_cluster))
                return CLUSTER_FOREIGN;
        if (!k->halted && k->acked_rev && c->own_read &&
            rule5_forgotten(k->acked_rev, c->own_mark_rev))
                return CLUSTER_FORGOTTEN;
        if (k->cl && rule6_fence_read(k->cl, &c->c, k->restore_seen) == RULE6_RESTORED)
                return CLUSTER_RESTORED;
        return CLUSTER_GO;
}

struct answer_verdict answer_verdict(const struct answer_seen *a)
{
        if (a->refused)
                return (struct answer_verdict){.skip = true};
        bool watching = a->layout_ready && !a->halted;
        return (struct answer_verdict){
                .reachable = a->answered && a->status < 500,
                /* a kv answer that went back is acted on by its handler
                 * (cluster_ok); a lease answer is acted on nowhere else */
                .halt_restored = a->went_back && !a->kv && watching,
                /* a member that lags, or a restore: a linearizable read of
                 * the cluster and of this daemon's own mark tells which */
                .check_cluster = a->behind && watching && !(a->went_back && !a->kv),
                .full = a->nospace,
        };
}
