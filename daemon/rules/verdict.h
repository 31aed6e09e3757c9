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

/* What any answer says besides its own result (holder_note_answer() acts
 * on it): whether the store is reachable, full, or restored (rule 5). */
struct answer_seen {
        bool refused;      /* the store refuses this daemon (a setting): nothing else is read */
        bool answered;     /* an answer came */
        long status;       /* its status, HTTP's codes whichever store */
        bool kv;           /* a kv answer (acted on by its own handler) or a lease answer */
        bool went_back;    /* another cluster, or revisions below those seen */
        bool behind;       /* a lease answer below a revision seen */
        bool nospace;      /* a write refused: the store is full */
        bool layout_ready; /* the cluster was read */
        bool halted;
};
struct answer_verdict {
        bool reachable;     /* answered, and not a 5xx */
        bool halt_restored; /* a lease answer from another history: halt (rule 5) */
        bool check_cluster; /* a lease answer that lags (not halting): read the cluster */
        bool full;          /* the store says it is full */
        bool skip;          /* refused: says nothing of reachability */
};
struct answer_verdict answer_verdict(const struct answer_seen *a);
