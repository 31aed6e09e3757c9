/* SPDX-License-Identifier: MIT */
/*
 * The store as the daemon's other parts see it: made from the settings,
 * asked by the verbs of verbs.h, and what every answer says besides its
 * result (struct store_answer).  No request, no wire and no JSON here:
 * store.h is the backends' side (store_call(), struct store_ops).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"

/* A failure that retrying cannot mend: a setting (or the store's users and
 * roles) is wrong.  Anything else (no answer, a 5xx, a timeout) is an
 * outage, and is retried quietly.  docs/etcd.md and docs/postgres.md say
 * what each means for their store. */
enum store_err {
        STORE_ERR_NONE,
        STORE_ERR_AUTH,       /* the store refused the user or password, or wants a user */
        STORE_ERR_PERMISSION, /* the user has no rights on the cluster's keys */
        STORE_ERR_TLS,        /* the store's certificate failed verification */
        STORE_ERR_CERT,       /* the store refused our client certificate */
        STORE_ERR_MAX_,
};

/* What every answer says besides its result. */
struct store_answer {
        bool answered;     /* an answer came (any status) */
        long status;       /* its status (HTTP's codes, whichever store), 0 if none */
        const char *error; /* a short description for logs, when it failed */
        uint64_t tag;      /* what the caller passed with the verb */
        /* the store's revision and cluster ID when it answered (0 if none) */
        int64_t revision;
        uint64_t cluster_id;
        /* the store was restored or replaced: a kv answer below a revision
         * seen before it was sent, or an answer from another cluster than
         * the one expected; stays set until store_history_reset() */
        bool went_back;
        /* a lease answer below a revision seen before it was sent: worth a
         * check */
        bool behind;
        bool nospace;       /* a write refused because the store is full */
        enum store_err err; /* a refusal (a setting is wrong), or none */
        bool kv;            /* a request on keys: the only ones roles are checked on */
};

/* Counters for STATUS= and /metrics. */
struct store_stats {
        uint64_t requests, failures;
        uint64_t latency_le[8]; /* cumulative: <= 1, 2, 5, 10, 50, 100, 1000 ms, +Inf */
        double latency_sum_s;
};

/* The last refusal of a class above, kept until a request of its kind goes
 * through (for the permission class, a kv request: lease calls are not
 * checked against roles). */
struct store_problem {
        enum store_err err; /* STORE_ERR_NONE: cleared */
        char message[256];  /* the store's or TLS's own words */
        const char *endpoint;
        unsigned in_row;  /* failures of this class in a row */
        unsigned members; /* how many endpoints refused this way */
        unsigned hold_ms; /* requests it concerns wait this long before the next try */
};
typedef void (*store_problem_cb)(void *userdata, const struct store_problem *p);

struct store_ops;
struct store;

/* The backend the settings name. */
int store_new(sd_event *event, const struct settings *cfg, struct store **ret);
/* A backend given (a test's own). */
int store_new_with(const struct store_ops *ops, sd_event *event, const struct settings *cfg,
                   struct store **ret);
struct store *store_free(struct store *s);
unsigned store_in_flight(const struct store *s);
/* Forgets the revisions and cluster identity seen (a new fence adopted). */
void store_history_reset(struct store *s);
/* Every answer must come from this cluster ID (the one the fence names):
 * one from another sets went_back. */
void store_expect_cluster(struct store *s, uint64_t cluster_id);
/* Where requests go now, for logs: an etcd endpoint, or PostgreSQL's host and port. */
const char *store_endpoint(const struct store *s);
const struct store_stats *store_stats(const struct store *s);
/* cb runs after every refusal of a class above and once when it clears,
 * before the callback of the request concerned. */
void store_on_problem(struct store *s, store_problem_cb cb, void *userdata);
/* "etcd" or "postgres" */
const char *store_name(const struct store *s);
/* "etcd" or "PostgreSQL" */
const char *store_title(const struct store *s);
const char *store_err_name(const struct store *s, enum store_err err);
void store_refusal_hint(const struct store *s, const struct settings *cfg, enum store_err err,
                        const char *prefix, char *buf, size_t size);
void store_full_text(const struct store *s, const char *member, int64_t left_ms, char *buf,
                     size_t size);
unsigned store_members(const struct store *s, const struct settings *cfg);

/* Every verb of every store in the process, as it is sent and as its
 * answer comes (before its callback): which verb ("grant", "scan", ...),
 * and for an answer how long it took and what it said.  For benches
 * (bench/hosts.c); NULL: none. */
struct store_observer {
        void (*sent)(void *userdata, struct store *s, const char *verb);
        void (*answered)(void *userdata, struct store *s, const char *verb, uint64_t usec,
                         const struct store_answer *a);
        void *userdata;
};
void store_observe(const struct store_observer *o);
