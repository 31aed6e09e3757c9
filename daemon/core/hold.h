/* SPDX-License-Identifier: MIT */
/*
 * Holding the published number, as a pure core: the lease kept alive, the
 * mark extended under its guard and the deadline raised only to a mark the
 * store acknowledged, a lease unknown before its time told apart (a
 * restore, or a revocation) by reading the mark, and the number given up
 * when it is lost (docs/design.md rules 2, 4, 10 and 11; docs/fences.md
 * rules 4 and 5).
 *
 * As acquire.h: its driver (holder/renew.c) turns answers and the renewal
 * timer into inputs to hold_step(), and does the typed actions it returns.
 * The holding's state (H_NONE, H_HELD, H_LOST) is the model's: a daemon
 * at `renew`, or one that gave its number up and acquires another.  While
 * held, what is in flight is two lines side by side (holding.h: the mark's,
 * `enum hold_mark`, and the lease's, `enum hold_lease`), as the model's
 * daemon runs them with KAFLIGHT=1: the keepalive's answer may come while
 * an extension or a raise is in flight.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "holding.h"
#include "reads.h"

struct hold_settings {
        unsigned lease_ttl_s, window_s, mark_step_s;
};

struct hold_view {
        uint64_t mono_ms, boot_ms; /* CLOCK_MONOTONIC, CLOCK_BOOTTIME */
        uint64_t id_ms;            /* ID time now */
        unsigned time_bits;
        bool halted;   /* nothing is extended on a cluster not trusted */
        bool restored; /* halted as restored: the lease's answers mean nothing */
};

enum hold_in_kind {
        HOLD_IN_PUBLISHED, /* a number published: the holding acquired */
        HOLD_IN_TICK,      /* the renewal timer (or the deadline must catch up at once) */
        HOLD_IN_KEPT,      /* store_keepalive()'s answer */
        HOLD_IN_EXTENDED,  /* store_extend()'s */
        HOLD_IN_CHECKED,   /* store_read_number()'s, the lease check's */
        HOLD_IN_RAISED,    /* the raise a holding waited for is confirmed (holding: its id) */
        HOLD_IN_FENCED,    /* a new fence adopted: the number is given up to its mark */
        HOLD_IN_STOP,      /* stopping: nothing is renewed */
};

struct hold_in {
        enum hold_in_kind kind;
        uint64_t tag; /* the holding the answer is for (its id) */
        bool unsent;  /* the verb could not be sent at all */
        /* the answer names another fence or layout, or the cluster is
         * halted (rule 1, cluster_ok()): only its request's end is noted */
        bool not_current;
        const struct holding *published;       /* PUBLISHED */
        uint64_t holding;                      /* RAISED */
        int64_t ttl_s;                         /* KEPT: -1 no answer, 0 the lease unknown */
        const struct store_extended *extended; /* EXTENDED */
        const struct store_read *read;         /* CHECKED */
};

enum hold_do {
        HOLD_DO_KEEPALIVE,  /* store_keepalive() of the holding's lease */
        HOLD_DO_EXTEND,     /* store_extend() of its mark to pending, comparing mark_rev */
        HOLD_DO_CHECK,      /* store_read_number() of it: its lease unknown early */
        HOLD_DO_DEADLINE,   /* the store acknowledged mark a: publish the deadline, mark */
        HOLD_DO_LOST,       /* lost (say: why): given up to its mark, another acquired */
        HOLD_DO_RAISE,      /* its mark read back low: raised before anything else */
        HOLD_DO_RESTORED,   /* the store forgot its mark written at a, now at b (say: where) */
        HOLD_DO_TAKEN_BACK, /* restored: another's claim on it (b = 1), or its mark a below */
        HOLD_DO_SAY,
};

enum hold_say {
        HOLD_SAY_NONE,
        HOLD_SAY_KEEPALIVE_FAILED, /* no answer to a keepalive */
        HOLD_SAY_EXTEND_FAILED,    /* no answer to an extension, or an error */
        HOLD_SAY_MALFORMED,        /* the extension's answer is malformed */
        HOLD_SAY_UNKNOWN_EARLY,    /* the lease unknown, a ms before its TTL could run out */
        /* why it is lost, or where a write was found forgotten */
        HOLD_SAY_WRITTEN_OVER,   /* another's key on it, under this daemon's live lease */
        HOLD_SAY_EXPIRED,        /* its lease expired */
        HOLD_SAY_TAKEN,          /* another holder has it, or its lease is gone */
        HOLD_SAY_REVOKED_EARLY,  /* its lease revoked before its TTL ran out, its mark intact */
        HOLD_SAY_CHECK_UNSENT,   /* its lease unknown, and its mark could not be read */
        HOLD_SAY_AT_EXTENSION,   /* a write found forgotten extending the mark */
        HOLD_SAY_AT_LEASE_CHECK, /* ... reading it, its lease unknown */
};

struct hold_action {
        enum hold_do what;
        enum hold_say say;
        uint64_t a, b;
};

#define HOLD_ACTIONS_MAX 4
struct hold_ready {
        unsigned n;
        struct hold_action a[HOLD_ACTIONS_MAX];
};

struct hold {
        struct hold_settings set;
        struct holding cur; /* the number published (state H_NONE: none) */
};

void hold_init(struct hold *k, const struct hold_settings *set);
void hold_step(struct hold *k, const struct hold_view *v, const struct hold_in *in,
               struct hold_ready *out);
/* Whether an answer with this tag is for the holding, and expected now
 * (kind: KEPT, EXTENDED or CHECKED). */
bool hold_expects(const struct hold *k, uint64_t tag, enum hold_in_kind kind);
