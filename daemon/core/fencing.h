/* SPDX-License-Identifier: MIT */
/*
 * What `snowid fence` decides from its read of the cluster, as a pure core
 * (docs/fences.md rules 6 and 7): whether it may fence at all, and if so
 * the new fence's claims_above and era.
 *
 * The fence is safe only over every fence made before it.  The store holds
 * the last one unless it was restored (it answers as another cluster than
 * its fence names) or lost its fence: then only a witness a halted daemon
 * left, or the operator's --lost-lead, says what came after, and without
 * either the core refuses (rule7_fence_refuses()).  Otherwise it claims
 * above every deadline any host may have published: this host's clock
 * bound with the largest lead a fence may have left running (the stored
 * fence's, a witness's, --lost-lead), every witness's deadline, the stored
 * fence's claims_above, the floor and every mark (rule6_fence_above()).
 *
 * Like clock_decide(), one call takes the readings and returns the
 * decision; its driver (cli/fence.c) reads the store, parses what it read
 * (the fence, the witnesses' JSON), words the decision and writes the fence.
 * The core reads no clock and allocates nothing.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster-ident.h"

struct fencing_settings {
        uint64_t epoch_ms;
        unsigned time_bits, window_s, mark_step_s, slew_us_per_s;
        uint64_t ahead_ms;    /* --ahead: how far any host's ID time may run past this clock */
        int64_t lost_lead_ms; /* --lost-lead; -1: not given */
};

/* A witness as its JSON read: -1 where a field is missing or not a
 * number.  Whether it counts is the core's (fencing_witness_valid()). */
struct fencing_witness {
        int64_t era, claims_above, deadline;
};

/* What the store read, parsed. */
struct fencing_read {
        uint64_t cluster_id; /* the answer's (0: the store names none) */
        /* the stored fence; NULL: none there, or not valid (it is replaced) */
        const struct cluster_ident *fence;
        bool floor_present;
        uint64_t floor;   /* the stored floor (not valid: as none) */
        uint64_t highest; /* the highest mark */
        size_t n_witnesses;
        const struct fencing_witness *witnesses;
};

enum fencing_verdict {
        FENCING_WRITE,            /* a new fence: claims above `above`, era after `era` */
        FENCING_REFUSE_FENCELESS, /* no valid fence (or one of no era), and no witness nor
                                     --lost-lead */
        FENCING_REFUSE_REPLACED,  /* its fence names another cluster than it answers as: likewise */
};

struct fencing_decision {
        enum fencing_verdict verdict;
        uint64_t above; /* the new fence's claims_above (and the floor put) */
        uint64_t era;   /* the latest era any daemon may know: the new one comes after it */
        uint64_t bound; /* the clock bound with the largest lead left (rule6_fence_lead()) */
        /* the leads counted: the stored fence's, the witnesses' largest, --lost-lead's */
        uint64_t lead_left, witness_lead_left, lost_lead;
        unsigned witnesses, current; /* valid witnesses; of them, knowing the stored fence */
        uint64_t witness_deadline;   /* the highest deadline a witness published */
        /* how far the floor, a mark or a witness's deadline ran past the bound
         * (a host's clock ran ahead once), ms */
        uint64_t far_ahead_ms;
        /* the stored fence was written on this same cluster ID: a restore
         * onto it could not be told by every daemon */
        bool same_cluster;
};

/* Whether a witness counts: every field there, its times within the
 * layout's time bits, and its era not over a day past wall_unix_ms. */
bool fencing_witness_valid(const struct fencing_settings *set, uint64_t wall_unix_ms,
                           const struct fencing_witness *w);

/* The decision, at wall_unix_ms on this host's clock. */
void fencing_decide(const struct fencing_settings *set, uint64_t wall_unix_ms,
                    const struct fencing_read *rd, struct fencing_decision *d);

/* The lead a fence made with these settings and no earlier lead gives
 * (ahead + window + mark step): what to pass as --lost-lead for one. */
uint64_t fencing_own_lead_ms(const struct fencing_settings *set);
