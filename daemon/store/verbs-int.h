/* SPDX-License-Identifier: MIT */
/*
 * The verbs' inside (verbs.h is their outside), private to verbs.c and
 * verbs-cluster.c: a call's context, kept until its answer, and the readers
 * both share.
 */
#pragma once

#include "store.h"
#include "verbs.h"

enum verb_kind {
        V_GRANT,
        V_KEEPALIVE,
        V_REVOKE,
        V_SCAN,
        V_CLAIM,
        V_READ,
        V_EXTEND,
        V_RAISE,
        /* verbs-cluster.c's */
        V_CLUSTER,
        V_CREATING,
        V_DONE,
        V_ALARMS,
        V_FENCE,
};

struct verb {
        struct verb *prev, *next; /* the store's calls in flight */
        enum verb_kind kind;
        struct store *store;
        void (*cb)(void); /* the verb's own type, by kind */
        void *userdata;
        const struct cluster_ident *cl;
        int64_t lease;
        char value[320];
        uint64_t workers;
        unsigned time_bits;
        unsigned sampled;
        uint32_t sample[STORE_SAMPLE_MAX];
        bool own;         /* a claim, or a cluster read, that read this daemon's own mark */
        uint64_t sent_us; /* CLOCK_MONOTONIC, for store_observe() */
        unsigned wait_ms; /* how long its call waits for the answer (store_wait_ms()) */
        bool connecting;  /* made while the first connection was: its answer's time says nothing */
        int32_t own_worker;
};

struct verb *verb_new(struct store *s, enum verb_kind kind, void (*cb)(void), void *userdata);
/* The head of the store's list of verbs in flight (store.c keeps it). */
struct verb **store_verbs(struct store *s);
/* Sends body (taken over) for v, which is freed if it cannot be sent. */
int verb_send(struct verb *v, const char *path, json_t *body, uint64_t tag);
/* whether ops i (fence) and i + 1 (layout) of an ok answer name v->cl */
int verb_same_at(const struct store_reply *r, const struct verb *v, size_t i);
bool verb_succeeded(const struct store_reply *r);
/* Reads the answer of a verb of verbs-cluster.c and runs its callback. */
void verb_cluster_answer(struct verb *v, const struct store_reply *r);

/* The verbs in etcd's transactions (store_txn_verbs), which both backends
 * speak today: verbs.c's and verbs-cluster.c's. */
int txn_grant(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata, uint64_t tag);
int txn_keepalive(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata, uint64_t tag);
int txn_revoke(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata);
int txn_scan(struct store *s, const struct cluster_ident *cl, uint64_t workers,
             const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
             void *userdata, uint64_t tag);
int txn_claim(struct store *s, const struct store_claim_req *c, verb_claim_cb cb, void *userdata,
              uint64_t tag);
int txn_read_number(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                    const char *value, verb_read_cb cb, void *userdata, uint64_t tag);
int txn_extend(struct store *s, const struct cluster_ident *cl, uint32_t worker, int64_t lease,
               const char *value, uint64_t mark, int64_t own_rev, verb_extend_cb cb, void *userdata,
               uint64_t tag);
int txn_raise(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
              uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag);
int txn_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                     void *userdata, uint64_t tag);
int txn_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                 void *userdata, uint64_t tag);
int txn_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata);
int txn_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                     bool marked, verb_done_cb cb, void *userdata);
int txn_witness_put(struct store *s, const char *token, const struct store_witness *w,
                    verb_done_cb cb, void *userdata, uint64_t tag);
int txn_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata);
int txn_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                     int64_t layout_rev, verb_done_cb cb, void *userdata);
int txn_alarms(struct store *s, verb_alarms_cb cb, void *userdata);
int txn_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata);
int txn_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                    void *userdata);
/* v's answer came: told to the observer, if any (store_observe()). */
void verb_answered(const struct verb *v, const struct store_answer *a);
/* Frees a verb's context, its answer read (pg-verbs.c's too). */
void verb_free(struct verb *v);
/* The witnesses of a fence read, freed. */
void fence_read_clear(struct store_fence_read *f);
