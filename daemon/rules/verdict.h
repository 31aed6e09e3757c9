/* SPDX-License-Identifier: MIT */
/*
 * What a read of the cluster means (daemon/holder/cluster.c acts on it): a
 * pure decision over what the read found and what the daemon knows, in the
 * order of the rules it applies (docs/fences.md rules 5, 6 and 7).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reads.h"

enum cluster_verdict {
        CLUSTER_MALFORMED,   /* the answer does not say: read again */
        CLUSTER_MAKE,        /* never used, and no witness: make it (rule7_may_make) */
        CLUSTER_LAYOUT_LOST, /* no layout, on a cluster used or witnessed (rule 7) */
        CLUSTER_LAYOUT_BAD,  /* a layout that is none: a setting to mend */
        CLUSTER_FENCE_LOST,  /* the fence or the floor absent or damaged */
        CLUSTER_FOREIGN,     /* a fence written on another cluster (rule5_foreign_fence) */
        CLUSTER_FORGOTTEN,   /* this daemon's own acknowledged write gone (rule5_forgotten) */
        CLUSTER_RESTORED,    /* an older fence, a cluster made anew, or a restore seen (rule 6) */
        CLUSTER_GO,          /* the layout and fence to go on with */
};

struct cluster_known {
        const struct cluster_ident *cl; /* the fence known; NULL before the first read */
        bool restore_seen;              /* revisions went back, or a halt for a restore lasts */
        bool halted;                    /* halted for any reason: no own-write check */
        int64_t acked_rev;              /* this daemon's last acknowledged mark write, 0: none */
        uint64_t answer_cluster;        /* the cluster ID the answer came from (0: none) */
};

enum cluster_verdict cluster_verdict(const struct store_cluster *c, const struct cluster_known *k);
