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
        bool own; /* a claim, or a cluster read, that read this daemon's own mark */
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
