/* SPDX-License-Identifier: MIT */
/*
 * The marks this daemon published, and raising them, as a pure core
 * (docs/fences.md rule 4): the numbers it held in the last hour with their
 * last deadlines, raised again on a new fence or a restore seen; a mark
 * found low raised by reading it and then putting it comparing the mod
 * revision read, until the store has it at or above its target; and the
 * lease of a number given up revoked only once its mark is confirmed, kept
 * alive until then.
 *
 * As acquire.h: its driver (holder/marks.c) turns answers and timers into
 * inputs to raise_step(), and does the typed actions it returns.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "holding.h"
#include "reads.h"

/* A mark being raised to at least `mark`: read, then compare its mod
 * revision and put. */
struct mark_raise {
        uint64_t id;
        int32_t worker;
        uint64_t mark;
        uint64_t sent;        /* the mark the compare-and-put in flight writes */
        int64_t lease;        /* revoked once the mark is confirmed; 0: none */
        int64_t lease2;       /* a second holding of the number retiring meanwhile */
        uint64_t for_holding; /* the holding whose renewal waits for it; 0: none */
        int64_t acked_rev;    /* this daemon's last acknowledged write of the mark; 0: unknown */
        int64_t acked_sent;   /* acked_rev as it was when the request in flight was sent */
        unsigned tries;
        bool active, waiting;
        bool lease_gone; /* a keepalive found the lease gone (said once) */
};

#define RAISES_MAX (PUBLISHED_MAX + 2)
#define PUBLISHED_KEEP_MS (3600 * 1000)

struct raise_view {
        uint64_t mono_ms;
        bool stopping;
        uint64_t claims_above; /* the fence's */
        const struct holding *cur;
};

enum raise_in_kind {
        RAISE_IN_RAISE,   /* raise worker's mark to at least mark */
        RAISE_IN_RETIRED, /* worker's last deadline, mark, is no longer published */
        RAISE_IN_FENCED,  /* a new fence adopted: marks published past it raised again */
        RAISE_IN_PROTECT, /* a restore seen: every mark of the last hour raised again */
        RAISE_IN_ANSWER,  /* store_raise()'s answer */
        RAISE_IN_TIMER,   /* the wait after a raise without answer ended */
        RAISE_IN_KEEP,    /* the leases waiting for their marks' confirmation: keep them */
        RAISE_IN_KEPT,    /* a keepalive's answer for them (ttl_s 0: the lease is gone) */
};

struct raise_in {
        enum raise_in_kind kind;
        int32_t worker;       /* RAISE, RETIRED */
        uint64_t mark;        /* RAISE, RETIRED */
        int64_t lease;        /* RAISE: revoked once the mark is confirmed (0: none) */
        uint64_t for_holding; /* RAISE: the holding whose renewal waits for it (0: none) */
        int64_t acked_rev;    /* RAISE: this daemon's last acknowledged write of it (0: none) */
        uint64_t tag;         /* ANSWER, KEPT */
        bool unsent;          /* ANSWER: the verb could not be sent */
        /* ANSWER, rule 1: the cluster was halted as restored when it came
         * (the raise goes on against the store as it is); else whether
         * cluster_ok() let it through, and whether the cluster is halted
         * after it */
        bool restored, not_current, halted;
        const struct store_raised *raised; /* ANSWER */
        int64_t ttl_s;                     /* KEPT */
};

enum raise_do {
        RAISE_DO_SEND,      /* store_raise() of raise a: put (b = 1) or read, comparing modrev */
        RAISE_DO_WAIT,      /* RAISE_IN_TIMER in ms */
        RAISE_DO_KEEP_IN,   /* RAISE_IN_KEEP in ms */
        RAISE_DO_KEEPALIVE, /* store_keepalive() of lease, tag: the raise's id */
        RAISE_DO_REVOKE,    /* the lease given up */
        RAISE_DO_RAISED,    /* the holding `a` waited for this raise: it may renew */
        RAISE_DO_RESTORED,  /* the store forgot worker's mark written at a, now at b */
        RAISE_DO_ENDED,     /* a raise ended: stopping, whether anything is left */
        RAISE_DO_SAY,
};

enum raise_say {
        RAISE_SAY_NONE,
        RAISE_SAY_REVOKING,    /* stopping: worker's mark confirmed at or above a */
        RAISE_SAY_LEASE_GONE,  /* worker's lease ran out before a was confirmed */
        RAISE_SAY_RAISED_BACK, /* worker's mark raised back to a */
        RAISE_SAY_READS_LOW,   /* worker's mark reads b (0 absent, 1 lower, 2 damaged), below a */
        RAISE_SAY_TOO_MANY,    /* no slot for worker's raise */
        RAISE_SAY_THREE_TIMES, /* worker retired three times at once: lease left to expire */
        RAISE_SAY_PAST_FENCE,  /* worker's last deadline a is past the new fence's b */
};

struct raise_action {
        enum raise_do what;
        enum raise_say say;
        int32_t worker;
        uint64_t id;   /* SEND, KEEPALIVE: the raise's */
        int64_t lease; /* KEEPALIVE, REVOKE */
        uint64_t a, b;
        int64_t modrev; /* SEND */
};

#define RAISE_ACTIONS_MAX (2 * RAISES_MAX + 4)
struct raise_ready {
        unsigned n;
        struct raise_action a[RAISE_ACTIONS_MAX];
};

struct raises {
        struct mark_raise r[RAISES_MAX];
        struct published published[PUBLISHED_MAX];
        unsigned n_published;
        uint64_t ids;
        unsigned keep_ms; /* a third of the lease TTL */
        bool keep_armed;
};

void raise_init(struct raises *m, unsigned lease_ttl_s);
void raise_step(struct raises *m, const struct raise_view *v, const struct raise_in *in,
                struct raise_ready *out);
/* Whether an answer with this tag is a raise's. */
bool raise_expects(const struct raises *m, uint64_t tag);
/* Whether any raise is under way. */
bool raise_active(const struct raises *m);
/* Whether a raise of worker's mark will give up a lease once confirmed. */
bool raise_handing_over(const struct raises *m, int32_t worker);
/* The highest deadline published in the last hour (cur's included). */
uint64_t raise_highest(const struct raises *m, const struct holding *cur, uint64_t mono_ms);
