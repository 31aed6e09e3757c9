/* SPDX-License-Identifier: MIT */
/*
 * The coordination store, the backends' side.  Everything else asks by the
 * verbs of verbs.h, which each backend says in its own language: etcd's v3
 * JSON gateway (a path such as "/v3/kv/txn" and a JSON body, sent by
 * store/etcd.c; verbs.c and verbs-cluster.c build them, store/answer.c
 * reads the answers), or PostgreSQL's prepared statements of snowid's
 * schema (store/pg.c; pg-verbs.c and pg-verbs-cluster.c).
 *
 * A backend fills a struct store_ops; store.c picks one by the settings,
 * and keeps what does not depend on the backend: the verbs in flight, and
 * how long each call waits (patience.h).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store-api.h"
#include "verbs.h"

struct store_reply {
        bool answered;     /* an answer came (any status) */
        long http;         /* its status (HTTP's codes, whichever store), 0 if none */
        json_t *json;      /* the parsed body, NULL if none or not JSON */
        const char *error; /* a short description for logs when !ok */
        uint64_t tag;      /* what the caller passed to store_call() */
        uint64_t usec;     /* how long it took */
        /* header.revision and header.cluster_id of the answer (0 if none) */
        int64_t revision;
        uint64_t cluster_id;
        /* a kv answer whose revision is lower than one seen before this
         * request was sent, or any answer from a cluster other than the one
         * expected: the store was restored or replaced.  Stays set on every
         * later answer until store_history_reset(). */
        bool went_back;
        /* a lease answer (not linearizable: a member that lags may give it)
         * whose revision is lower than the highest seen before it was sent:
         * worth a check */
        bool behind;
        /* the store refused a write because it is full */
        bool nospace;
        enum store_err err;
        bool kv;        /* a /v3/kv/ request: the only ones roles are checked on */
        char text[160]; /* a plain-text error body, as the store said it (r->error) */
};

static inline bool store_ok(const struct store_reply *r)
{
        return r->answered && r->http == 200 && r->json && json_is_object(r->json);
}

typedef void (*store_cb)(void *userdata, const struct store_reply *reply);

/* What the reply says besides its body, for the verbs' callers. */
struct store_answer store_answer_of(const struct store_reply *r);

/* The verbs (verbs.h) as a backend says them: the store's contract
 * (docs/design.md, "The store's verbs"), one function each, called by
 * store_grant() and the others with their arguments as they are.  Both
 * backends say them in etcd's transactions today (store_txn_verbs:
 * verbs.c, verbs-cluster.c); a backend may say any of them its own way. */
struct store_verb_ops {
        int (*grant)(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata,
                     uint64_t tag);
        int (*keepalive)(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata,
                         uint64_t tag);
        int (*revoke)(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata);
        int (*scan)(struct store *s, const struct cluster_ident *cl, uint64_t workers,
                    const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
                    void *userdata, uint64_t tag);
        int (*claim)(struct store *s, const struct store_claim_req *c, verb_claim_cb cb,
                     void *userdata, uint64_t tag);
        int (*read_number)(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                           const char *value, verb_read_cb cb, void *userdata, uint64_t tag);
        int (*extend)(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                      int64_t lease, const char *value, uint64_t mark, int64_t own_rev,
                      verb_extend_cb cb, void *userdata, uint64_t tag);
        int (*raise)(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
                     uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag);
        int (*read_cluster)(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                            void *userdata, uint64_t tag);
        int (*creating)(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                        void *userdata, uint64_t tag);
        int (*init_marks)(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb,
                          void *userdata);
        int (*make_cluster)(struct store *s, const snowid_layout *l, const char *fence,
                            uint64_t floor, bool marked, verb_done_cb cb, void *userdata);
        int (*witness_put)(struct store *s, const char *token, const struct store_witness *w,
                           verb_done_cb cb, void *userdata, uint64_t tag);
        int (*witness_delete)(struct store *s, const char *token, verb_done_cb cb, void *userdata);
        int (*record_range)(struct store *s, const char *region, const char *value, int64_t rev,
                            int64_t layout_rev, verb_done_cb cb, void *userdata);
        int (*alarms)(struct store *s, verb_alarms_cb cb, void *userdata);
        int (*fence_read)(struct store *s, unsigned time_bits, verb_fence_read_cb cb,
                          void *userdata);
        int (*fence_write)(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                           void *userdata);
};

extern const struct store_verb_ops store_txn_verbs, store_pg_verbs;

/* The backend's own object (what its ops' new() made), for its verbs. */
void *store_backend(struct store *s);

/* What a backend does.  `b` is the backend's own object, made by new(). */
struct store_ops {
        const char *name;  /* "etcd", "postgres": for settings and JSON */
        const char *title; /* "etcd", "PostgreSQL": for sentences */
        const struct store_verb_ops *verbs;
        int (*new)(sd_event *event, const struct settings *cfg, void **ret);
        void (*free)(void *b);
        /* body taken over; cb runs exactly once, from the loop (never from
         * inside call), unless the backend is freed first.  NULL: the
         * backend speaks only its verbs */
        int (*call)(void *b, const char *path, json_t *body, store_cb cb, void *userdata,
                    uint64_t tag, unsigned timeout_ms);
        unsigned (*in_flight)(const void *b);
        /* the first connection is being made, and none has failed (NULL:
         * the backend has no connection of its own to wait for) */
        bool (*connecting)(const void *b);
        void (*history_reset)(void *b);
        void (*expect_cluster)(void *b, uint64_t cluster_id);
        const char *(*endpoint)(const void *b);
        const struct store_stats *(*stats)(const void *b);
        void (*on_problem)(void *b, store_problem_cb cb, void *userdata);
        /* the refusal's class by name ("etcd-auth"), NULL for none */
        const char *(*err_name)(enum store_err err);
        /* what to set or run to mend a refusal, one sentence; prefix is the
         * cluster's key prefix */
        void (*refusal_hint)(const struct settings *cfg, enum store_err err, const char *prefix,
                             char *buf, size_t size);
        /* what a full store means and what mends it, one line for the log:
         * the member that said so (or NULL), the endpoint in use, the IDs
         * left in ms */
        void (*full_text)(const char *member, const char *endpoint, int64_t left_ms, char *buf,
                          size_t size);
        /* how many members or servers may answer (a refusal by all of them
         * is the store's, not one member's) */
        unsigned (*members)(const struct settings *cfg);
};

extern const struct store_ops store_etcd_ops, store_pg_ops;

/* Sends a request in etcd's language (the verbs' own backend side); cb runs
 * exactly once, from the loop, at the latest timeout_ms after it was sent
 * (per endpoint tried). */
int store_call(struct store *s, const char *path, json_t *body, store_cb cb, void *userdata,
               uint64_t tag, unsigned timeout_ms);

/* How long a verb's call waits for its answer (patience.h): store-timeout,
 * or for a patient verb (one that writes nothing the fences count on) as
 * long as the store's answers take now (connecting: store_connecting(),
 * as the caller read it). */
unsigned store_wait_ms(const struct store *s, bool patient, bool connecting);
/* The backend's first connection is being made (store_ops.connecting). */
bool store_connecting(const struct store *s);
/* What a call that waited up to waited_ms said of the store: an answer
 * after usec, or none (which counts for a patient call that waited its
 * whole wait). */
void store_waited(struct store *s, bool patient, unsigned waited_ms, uint64_t usec, bool answered);

/* ---- the answers' language (store/answer.c), pure ---- */

/* The revisions and cluster seen on kv and lease answers. */
struct store_history {
        int64_t max_rev;     /* the highest header.revision of a linearizable answer */
        uint64_t cluster_id; /* 0: none yet */
        bool went_back;      /* sticky until reset */
        unsigned gen;        /* resets so far: answers to requests sent before one are not noted */
};
/* Forgets the revisions and cluster seen (store_history_reset()): answers
 * to requests sent before are not noted. */
void store_history_forget(struct store_history *hist);
/* One answer counted in a backend's stats: how long it took, whether ok. */
void store_stats_count(struct store_stats *st, uint64_t usec, bool ok);

/* Reads an answer's header (a keepalive's: result.header) into r->revision
 * and r->cluster_id.  Sets r->went_back if it is from another cluster, or
 * (linearizable: a kv answer) lower than rev_at_send (the history's max_rev
 * when the request was sent), or was already; sets r->behind for a lease
 * answer lower than rev_at_send. */
void store_history_note(struct store_history *hist, int64_t rev_at_send, unsigned gen_at_send,
                        bool linearizable, struct store_reply *r);
/* The same, with r->revision and r->cluster_id already read (a revision of
 * 0: the answer carries none, and only its cluster is compared). */
void store_history_seen(struct store_history *hist, int64_t rev_at_send, unsigned gen_at_send,
                        bool linearizable, struct store_reply *r);
/* An answer (status, body) as a reply: the body parsed as JSON, and a short
 * error unless it is a 200 with a JSON object.  r->tag and r->usec are left
 * as they are; the caller frees r->json. */
void store_reply_parse(struct store_reply *r, long http, const char *body, size_t len);

/* Base64, as keys and values travel: standard alphabet with padding. */
char *b64_encode(const void *data, size_t len);
/* NULL if s is not valid base64; *ret_len gets the length (a NUL follows). */
char *b64_decode(const char *s, size_t *ret_len);
/* A JSON string holding base64(printf(fmt, ...)). */
json_t *store_b64(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An int64 field sent as a string (or a number); absent is 0.  -EBADMSG if
 * present and not an integer. */
int store_int64(const json_t *obj, const char *field, int64_t *ret);
