/* SPDX-License-Identifier: MIT */
/*
 * What this daemon knows of the cluster, as a pure core (docs/fences.md
 * rules 1, 5, 6 and 7): the layout and the fence it claims under, whether
 * it halts and why, the witness it leaves while halted, and what a read of
 * the cluster or any answer leads to: going on, halting, reading again,
 * adopting a new fence.  What a read or an answer means is the rules'
 * (cluster_verdict(), answer_verdict()); this core acts on it.
 *
 * As acquire.h: its driver (holder/cluster.c) turns the cluster's reads,
 * every answer's gate and the witness's answers into inputs to
 * known_step(), and does the typed actions it returns, among them inputs
 * to the other cores (a claim dropped, a number given up to its mark, the
 * marks raised again).
 */
#pragma once

/* How long before the cluster is read again after a read that found a
 * halt, or could not be sent */
#define KNOWN_REREAD_MS 1000

#include <stdbool.h>
#include <stdint.h>

#include "holding.h"
#include "verdict.h"

/* Why the daemon extends nothing on this cluster: the state, with the
 * layout known or not (known.layout_ready).  In the model (snowid.pml),
 * every halt but HALT_CHECKING is the label `restored`, and its end with
 * a new fence is `refence`. */
enum halt {
        HALT_NONE,
        HALT_CHECKING,    /* an answer named another fence or layout: reading them */
        HALT_RESTORED,    /* revisions went back or the cluster ID changed */
        HALT_LAYOUT_LOST, /* the layout key is gone */
        HALT_FENCE_LOST,  /* the fence or floor key is gone (or never made) */
};

/* The witness a halted daemon leaves (rule 7). */
enum witness {
        WITNESS_NONE,     /* none left, nothing in flight */
        WITNESS_PUTTING,  /* its put in flight */
        WITNESS_LEFT,     /* the store acknowledged it */
        WITNESS_DELETING, /* the halt ended: its deletion in flight */
};

struct known_settings {
        snowid_layout given; /* the layout given, if layout_given */
        bool layout_given;
        unsigned lease_ttl_s;
        uint64_t settle_ms; /* rule6_settle_ms() of the settings */
        uint64_t seed;
};

struct known_view {
        uint64_t mono_ms;
        uint64_t wall_ms;          /* the wall clock, Unix ms */
        const struct holding *cur; /* the number published */
        uint64_t highest;          /* the highest deadline published in the last hour */
};

/* Why a write this daemon made is known forgotten (rule 5). */
enum forgot {
        FORGOT_MARK,  /* hwm/<worker> at mod revision b, below the a acknowledged */
        FORGOT_CLAIM, /* another holder's claim on a number whose lease had time */
        FORGOT_LOW,   /* hwm/<worker> reads a, below the b acknowledged, its lease unknown */
};

enum known_in_kind {
        KNOWN_IN_READ,        /* read the cluster now */
        KNOWN_IN_CLUSTER,     /* store_read_cluster()'s answer */
        KNOWN_IN_RANGED,      /* the first read's range checked and recorded: go on with it */
        KNOWN_IN_SEEN,        /* any answer, besides its own result */
        KNOWN_IN_GATE,        /* an answer to be acted on (rule 1): ready.current says */
        KNOWN_IN_CHECK,       /* an answer named another fence, layout or floor: read them */
        KNOWN_IN_FORGOTTEN,   /* a write forgotten (rule 5), as another core found */
        KNOWN_IN_WITNESSED,   /* store_witness_put()'s answer */
        KNOWN_IN_UNWITNESSED, /* store_witness_delete()'s answer */
};

struct known_in {
        enum known_in_kind kind;
        bool unsent; /* WITNESSED, UNWITNESSED, READ: the verb could not be sent */
        /* CLUSTER: the read's answer; ok as cr->ok */
        const struct store_cluster *cr;
        bool refused;      /* the store refuses this daemon (said elsewhere) */
        bool answered;     /* an answer came (for the backoff) */
        long status;       /* its status, HTTP's codes whichever store */
        bool went_back;    /* CLUSTER, GATE: revisions went back */
        uint64_t cluster;  /* CLUSTER: the cluster ID the answer came from (0: none) */
        int64_t acked_rev; /* CLUSTER: the revision the held mark's write was
                            * acknowledged at when the read was sent */
        const char *error; /* CLUSTER: why not, for the log */
        /* GATE: the verb's ok, and same (1 the fence and layout compared
         * equal or none compared, 0 another, -1 not known) */
        bool ok;
        int same;
        /* SEEN: what the answer says (answer_seen(); the core adds its own) */
        struct answer_seen seen;
        int64_t revision; /* SEEN, CLUSTER: the answer's revision */
        /* FORGOTTEN: why, the number, and what was read and acknowledged;
         * where, for the log */
        enum forgot forgot;
        int32_t worker;
        int64_t a, b;
        const char *where;
        uint64_t tag; /* WITNESSED: the halt it was sent for */
};

enum known_do {
        KNOWN_DO_READ,   /* store_read_cluster(), with hwm/<worker> (-1: none) acked at a */
        KNOWN_DO_REREAD, /* a read (through the creation's core) in ms */
        KNOWN_DO_MAKE,   /* none there and this daemon may make it: the creation's core */
        KNOWN_DO_RANGE,  /* the first read cr at revision a: check the range, record it, then RANGED
                          */
        KNOWN_DO_FATAL,  /* a setting to mend: stop */
        KNOWN_DO_HALTED, /* halted for why: the acquisition dropped, the segment told (b) */
        KNOWN_DO_DROP,   /* the acquisition under way given up */
        KNOWN_DO_PROTECT,   /* a restore: every mark published raised again */
        KNOWN_DO_WITNESS,   /* store_witness_put() of era a, claims above b, deadline c; tag */
        KNOWN_DO_UNWITNESS, /* store_witness_delete() */
        KNOWN_DO_FIRST,     /* the layout read first (known.layout): the clock starts on it */
        KNOWN_DO_EXPECT,    /* the store's answers are to come from cluster a */
        KNOWN_DO_FORGET,    /* a new fence: the store's history begins again */
        KNOWN_DO_FENCED,    /* the held number given up to its mark (the hold core) */
        KNOWN_DO_DROPPED,   /* the trace: the number given up */
        KNOWN_DO_RETIRED,   /* the number's last deadline a noted as published */
        KNOWN_DO_RAISE,     /* the number's mark raised to a, revoking lease b once confirmed */
        KNOWN_DO_PREFER,    /* claim the number again first */
        KNOWN_DO_RERAISE,   /* every mark published past the new fence raised (rule 6) */
        KNOWN_DO_PAUSE,     /* no claim before monotonic ms a */
        KNOWN_DO_LEASED,    /* the segment: the number held is extended again */
        KNOWN_DO_CLAIM,     /* acquire a number */
        KNOWN_DO_STATUS,    /* the status changed */
        KNOWN_DO_SAY,       /* an event for the log (ev, its arguments) */
};

enum known_ev {
        KNOWN_EV_UNREADABLE,     /* the read failed: error */
        KNOWN_EV_MALFORMED,      /* the read does not say */
        KNOWN_EV_LAYOUT_LOST,    /* a = a witness is there */
        KNOWN_EV_LAYOUT_BAD,     /* text: the layout as stored */
        KNOWN_EV_FENCE_LOST,     /* a: the fence's read (1 valid), b: the floor's */
        KNOWN_EV_FOREIGN,        /* the fence's cluster a, the answer's b */
        KNOWN_EV_RESTORED,       /* a cluster made anew (c = 1) or an older fence: eras a, b */
        KNOWN_EV_RESTORE_SEEN,   /* halted as restored */
        KNOWN_EV_FORGOTTEN,      /* forgot, worker, a, b, where */
        KNOWN_EV_NAMES_OTHER,    /* an answer names another fence or layout */
        KNOWN_EV_LAGGING,        /* a lease answer at revision a lags */
        KNOWN_EV_LAYOUT_DIFFERS, /* layout: the one stored, other: the one in use or given */
        KNOWN_EV_AS_WAS,         /* the halt ends on the cluster as it was */
        KNOWN_EV_NEW_FENCE,      /* claims above a */
        KNOWN_EV_SETTLE_LEFT,    /* the fence made a ms ago: claims in b ms */
        KNOWN_EV_WITNESS_LEFT,   /* the store acknowledged the witness */
};

struct known_action {
        enum known_do what;
        enum known_ev ev;
        enum halt why; /* HALTED */
        enum forgot forgot;
        int32_t worker;
        uint64_t a, b, c, tag;
        int64_t lease;
        const char *text;
        const snowid_layout *layout, *other;
        /* RANGE: the read (valid during the step: a read is never queued)
         * and its revision, a; MAKE: the read (who makes the cluster) */
        const struct store_cluster *cr;
};

#define KNOWN_ACTIONS_MAX 24
struct known_ready {
        unsigned n;
        struct known_action a[KNOWN_ACTIONS_MAX];
        bool current; /* GATE: act on the answer */
        /* SEEN: skip (the store refuses: nothing read), reachable, full */
        bool skip, reachable, full;
};

struct known {
        struct known_settings set;
        enum halt halted;
        /* a restore seen (halted as restored since): lasts until a new
         * fence, whatever other halt a read meanwhile finds */
        bool restored;
        bool layout_ready;
        snowid_layout layout;    /* the layout in use, once layout_ready */
        struct cluster_ident cl; /* the fence claimed under, once layout_ready */
        /* the first read, while its range is checked (RANGE, then RANGED) */
        snowid_layout ranging_layout;
        struct cluster_ident ranging;
        bool ranging_set;
        enum witness witness;
        uint32_t witness_gen; /* the halt a witness's answer is for */
        unsigned backoff_ms;  /* the reads that fail back off */
        uint64_t rng;
};

void known_init(struct known *k, const struct known_settings *set);
/* Why the daemon is halted, as it says it: a restore seen, whatever halt
 * a read found since, until a new fence. */
enum halt known_reason(const struct known *k);
void known_step(struct known *k, const struct known_view *v, const struct known_in *in,
                struct known_ready *out);
