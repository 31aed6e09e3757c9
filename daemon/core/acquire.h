/* SPDX-License-Identifier: MIT */
/*
 * Acquiring a worker number, as a pure core: grant a lease, scan, claim one
 * number under it, settle a claim whose answer never came, and hand the
 * number over to be published (docs/design.md rules 3, 8 and 9;
 * docs/fences.md rules 1 and 3).
 *
 * The core decides; its driver (holder/claim.c) does every I/O.  Each store
 * answer, timer and order is an input to acq_step(), which returns what to
 * do as typed actions: a verb to send, a wait, a lease to give up, the
 * number to publish, an event to word in the log.  The core reads no clock
 * (the driver's view carries the clocks), sends nothing, allocates nothing,
 * logs nothing, and draws its randomness from a generator seeded once.
 *
 * Its states are the model's (model/snowid.pml, proctype Daemon): each
 * names the label it stands for.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "holding.h"
#include "reads.h"

enum acq_state {
        ACQ_IDLE,        /* no acquisition */
        ACQ_WAIT,        /* new_lease: a lease is asked for when the wait ends */
        ACQ_GRANT,       /* new_lease: the grant in flight */
        ACQ_SCAN,        /* scan: the numbers being read */
        ACQ_SCAN_WAIT,   /* the same, read again under the lease when the wait ends */
        ACQ_CLAIM,       /* claim: send and await */
        ACQ_SETTLE,      /* claim, no answer: reading the number back */
        ACQ_SETTLE_WAIT, /* the same, asked again when the wait ends */
        ACQ_PUBLISH,     /* held: the number handed over to be published */
        ACQ_DONE,        /* ID time ran past the layout: nothing is acquired any more */
};

/* Fixed for the core's life. */
struct acq_settings {
        unsigned lease_ttl_s, renew_ms, window_s, mark_step_s;
        /* workers/<n>'s value names these, and each holding's id */
        const char *host, *instance, *token;
        int pid;
        uint64_t seed; /* the draws' generator (not 0) */
};

/* What the rest of the holder knows at a step, as the core reads it. */
struct acq_view {
        uint64_t mono_ms, boot_ms;  /* CLOCK_MONOTONIC, CLOCK_BOOTTIME */
        uint64_t id_ms, wall_id_ms; /* ID time now; the wall clock's, in the layout's epoch */
        bool layout_ready, halted, stopping;
        uint32_t range_from, range_to; /* the numbers claimed in */
        unsigned worker_bits, time_bits;
        uint64_t claims_above;         /* the fence's (rule 1) */
        uint64_t claims_not_before_ms; /* monotonic: rule 6's pause after a fence */
        bool prefer_handing_over;      /* acq_prefer()'s number is still this host's, old lease */
        const struct holding *cur;     /* the number published (state H_NONE: none) */
        /* the deadlines this daemon published lately, per number */
        const struct published *published;
        unsigned n_published;
};

enum acq_in_kind {
        ACQ_IN_START,       /* claim a number (fresh: its ID time back on the wall clock) */
        ACQ_IN_PREFER,      /* claim this number first (worker), the one held when a fence came */
        ACQ_IN_TIMER,       /* the wait asked for has ended */
        ACQ_IN_GRANTED,     /* store_grant()'s answer */
        ACQ_IN_SCANNED,     /* store_scan()'s */
        ACQ_IN_CLAIMED,     /* store_claim()'s */
        ACQ_IN_READ,        /* store_read_number()'s, the claim read back */
        ACQ_IN_PUBLISHED,   /* the number is in the segment: the acquisition is over */
        ACQ_IN_UNPUBLISHED, /* the number could not be published */
        ACQ_IN_DROP,        /* halted or stopping: the acquisition given up */
};

/* What an answer says that the core reads. */
struct acq_answer {
        uint64_t tag;  /* the holding's id it was sent with */
        bool unsent;   /* the verb could not be sent at all */
        bool answered; /* an answer came */
        long status;
        bool refused; /* the store refuses us (a setting): said by refused.c */
        /* CLAIMED: rule 1 (cluster_ok()) would not act on it, and the
         * cluster is not halted */
        bool not_current;
};

struct acq_in {
        enum acq_in_kind kind;
        struct acq_answer r;
        bool fresh;                          /* START */
        int32_t worker;                      /* PREFER */
        int64_t lease, ttl_s;                /* GRANTED */
        const struct store_scan *scan;       /* SCANNED (NULL with unsent) */
        const struct store_claimed *claimed; /* CLAIMED (idem) */
        const struct store_read *read;       /* READ (idem) */
};

enum acq_do {
        ACQ_DO_GRANT,         /* store_grant() of a lease_ttl_s lease, tag: the holding's id */
        ACQ_DO_SCAN,          /* store_scan(): the holding's sample, or every number */
        ACQ_DO_CLAIM,         /* store_claim() of the holding */
        ACQ_DO_READ,          /* store_read_number() of the holding's number */
        ACQ_DO_WAIT,          /* ACQ_IN_TIMER in ms (one wait at a time: it replaces any) */
        ACQ_DO_REVOKE,        /* the lease given up */
        ACQ_DO_PUBLISH,       /* the holding claimed: publish it, then PUBLISHED or UNPUBLISHED */
        ACQ_DO_CHECK_CLUSTER, /* the answer names another fence, layout or floor: halt, read them */
        ACQ_DO_RESTORED,      /* the store forgot worker's mark written at a, now at b */
        ACQ_DO_RAISE,         /* the published number's mark lowered: raise worker to a */
        ACQ_DO_FRESH_LATER,   /* no fresh number before monotonic ms a */
        ACQ_DO_FATAL,         /* ID time a has run past the layout's time bits */
        ACQ_DO_SAY,           /* an event for the log */
};

/* The events the driver words; their numbers are the action's worker, a, b. */
enum acq_say {
        ACQ_SAY_GRANT_FAILED,  /* not granted (the answer says why) */
        ACQ_SAY_SCAN_FAILED,   /* the numbers could not be read */
        ACQ_SAY_FENCE_CHANGED, /* a scan found another fence, layout or floor */
        ACQ_SAY_MARKS_INVALID, /* numbers a to b: some marks are not marks (skipped) */
        ACQ_SAY_SCAN_ALL,      /* nothing behind the clock among a sampled: reading all */
        ACQ_SAY_NONE_FRESH,    /* no free number behind the wall clock */
        ACQ_SAY_ALL_TAKEN,     /* every number of a to b is taken (said once while it lasts) */
        ACQ_SAY_AHEAD,         /* every free mark ahead: taking worker, a ms ahead */
        ACQ_SAY_CAME_FREE,     /* a number came free after ALL_TAKEN */
        ACQ_SAY_CLAIMED,       /* worker claimed under lease a, mark b */
        ACQ_SAY_NO_ANSWER,     /* the claim of worker got no answer: reading back */
        ACQ_SAY_NOT_CLAIMED,   /* worker could not be claimed (taken, moved, the lease died) */
        ACQ_SAY_APPLIED,       /* the read-back: the claim of worker was applied */
        ACQ_SAY_NOT_APPLIED,   /* the read-back: it was not; claiming again */
};

struct acq_action {
        enum acq_do what;
        enum acq_say say;
        unsigned ms;    /* WAIT */
        int64_t lease;  /* REVOKE */
        int32_t worker; /* RESTORED, RAISE, SAY */
        uint64_t a, b;
};

#define ACQ_ACTIONS_MAX 8
struct acq_ready {
        unsigned n;
        struct acq_action a[ACQ_ACTIONS_MAX];
};

struct acquire {
        struct acq_settings set;
        enum acq_state state;
        struct holding g; /* the holding acquired (id 0 while idle) */
        uint64_t ids;     /* the last holding's id */
        unsigned backoff_ms;
        unsigned lease_claims; /* claims sent under the holding's lease */
        bool said_full;        /* ACQ_SAY_ALL_TAKEN said, not yet CAME_FREE */
        int32_t prefer;        /* ACQ_IN_PREFER's number, until a scan uses it; -1: none */
        uint64_t rng;
};

void acq_init(struct acquire *a, const struct acq_settings *set);
/* One input; out gets what to do, in order. */
void acq_step(struct acquire *a, const struct acq_view *v, const struct acq_in *in,
              struct acq_ready *out);

/* Whether an answer with this tag is for the step the acquisition is at
 * (kind: GRANTED, SCANNED, CLAIMED or READ); one that is not is ignored. */
bool acq_expects(const struct acquire *a, uint64_t tag, enum acq_in_kind kind);
/* Whether nothing is under way (nor will be, once ID time ran past the
 * layout). */
bool acq_idle(const struct acquire *a);
/* The holding acquired: its number, lease, sample, claim... */
const struct holding *acq_holding(const struct acquire *a);
int32_t acq_prefer(const struct acquire *a);
/* "grant", "scan", "claim", "settle", "held"; NULL while idle */
const char *acq_state_name(const struct acquire *a);

/* The highest deadline this daemon published for worker (cur: the number
 * published now), which a claim of it starts above (rule 3). */
uint64_t acq_own_last(const struct published *p, unsigned n, const struct holding *cur,
                      int32_t worker);

/* The cores' draws: xorshift64* over *rng (not 0), seeded once by the
 * driver; the cores read no other randomness. */
uint64_t core_draw(uint64_t *rng);

/* A retry's wait: doubling from 100 ms up to max_ms (*backoff_ms keeps
 * where it is; 0: at the start), half of it drawn at random from draw, so
 * that many daemons do not retry in step. */
unsigned acq_backoff(unsigned *backoff_ms, unsigned max_ms, uint64_t draw);
/* The longest wait after a failed request: an answer that never came, or a
 * store too busy to serve (5xx), backs off up to half a lease TTL (at most
 * 30 s), so that a fleet starting at once does not keep an overloaded store
 * overloaded with retries; any other failure, a second. */
unsigned acq_failure_max_ms(unsigned lease_ttl_s, bool answered, long status);
