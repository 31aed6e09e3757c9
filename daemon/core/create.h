/* SPDX-License-Identifier: MIT */
/*
 * Making the cluster, on a store that holds none, as a pure core
 * (docs/fences.md rule 7): one host takes the key `creating` and makes it,
 * the others read the cluster again until it is made (the read says
 * whether `creating` is there), with a wait that grows and follows the
 * store's own answers; a creation not finished in time (its
 * host gone) is taken over.  The host that makes it reads every mark
 * first, marks 0 where none is (batches, several at once), and makes the
 * layout, fence and floor above the clock bound a fence would set.
 *
 * As acquire.h: its driver (holder/cluster.c) turns answers and the
 * cluster's reread timer into inputs to create_step(), and does the typed
 * actions it returns.  Whether the cluster is to be made is the cluster
 * read's verdict (cluster_verdict()), not this core's.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

enum create_state {
        CREATE_IDLE,    /* this host does not make it (now): a reread reads the cluster */
        CREATE_MARKING, /* this host makes it: the marks' batches in flight */
        CREATE_MAKING,  /* this host makes it: layout, fence and floor in flight */
};

struct create_settings {
        unsigned worker_bits, window_s, mark_step_s, lease_ttl_s;
        uint64_t epoch_ms;
        const char *token; /* `creating` names its holder by it */
        uint64_t seed;
};

struct create_view {
        uint64_t mono_ms;
        uint64_t wall_ms; /* the wall clock, Unix ms */
};

enum create_in_kind {
        CREATE_IN_MAKE,   /* the cluster read: none there, this daemon may make it
                           * (creating, value, mod_rev: the read's `creating`) */
        CREATE_IN_REREAD, /* the cluster's reread timer */
        CREATE_IN_LOCKED, /* store_creating()'s answer */
        CREATE_IN_MARKED, /* a batch of store_init_marks()'s answer */
        CREATE_IN_MADE,   /* store_make_cluster()'s answer */
};

struct create_in {
        enum create_in_kind kind;
        bool unsent; /* the verb could not be sent at all */
        /* LOCKED: what came back (answered: an answer came; status for the
         * wait); MARKED, MADE: ok, succeeded */
        bool ok, succeeded, answered;
        long status;
        int layout;        /* LOCKED: 1 there, 0 absent, -1 unreadable */
        int creating;      /* LOCKED, MAKE: likewise */
        const char *value; /* LOCKED, MAKE: `creating`'s value */
        int64_t mod_rev;   /* LOCKED, MAKE: its mod revision */
};

enum create_do {
        CREATE_DO_LOCK,   /* store_creating(): take it (over mod revision a) */
        CREATE_DO_READ,   /* read the cluster (the marks too: create_marks()) */
        CREATE_DO_REREAD, /* CREATE_IN_REREAD, and so a read, in a ms */
        CREATE_DO_MARK,   /* store_init_marks() of numbers [a, b) */
        CREATE_DO_MAKE,   /* store_make_cluster() with floor and claims above a (b = 1: marked) */
        CREATE_DO_MADE,   /* made: said */
};

struct create_action {
        enum create_do what;
        uint64_t a, b;
};

#define CREATE_IN_FLIGHT 16 /* batches of marks sent at once */
#define CREATE_ACTIONS_MAX (CREATE_IN_FLIGHT + 2)
struct create_ready {
        unsigned n;
        struct create_action a[CREATE_ACTIONS_MAX];
};

struct create {
        struct create_settings set;
        enum create_state state;
        bool marks;       /* this host took `creating`: its reads of the cluster read every mark */
        bool reading;     /* a read of the cluster this core asked for is in flight */
        uint64_t sent_ms; /* when the last call this core asked for was sent */
        /* another host's `creating` as this host first found it (its mod
         * revision), and when: one whose start cannot be read is stale
         * once it has stayed the same CREATE_STALE_MS */
        int64_t seen_rev;
        uint64_t seen_ms;
        int64_t lock_rev; /* the revision the last take compared (0: none there) */
        unsigned backoff_ms;
        unsigned pending; /* batches not answered */
        uint64_t next;    /* the first number of the next batch */
        int failed;       /* a batch failed: 1 answered (made meanwhile), 2 no answer */
        uint64_t rng;
};

void create_init(struct create *c, const struct create_settings *set);
void create_step(struct create *c, const struct create_view *v, const struct create_in *in,
                 struct create_ready *out);
/* Whether the cluster reads read every mark (this host holds `creating`). */
bool create_marks(const struct create *c);
