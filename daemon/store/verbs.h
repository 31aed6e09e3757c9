/* SPDX-License-Identifier: MIT */
/*
 * The store's verbs: what the holder asks of a store, in its own terms
 * (leases, numbers, marks), each answered with a typed result
 * (docs/design.md, "The store's verbs").  The holder builds no request and
 * reads no JSON; verbs.c says each verb in the transactions both backends
 * speak today, and reads their answers back.
 *
 * Every result comes with what its answer said besides (struct
 * store_answer: answered, status, revision, cluster ID, a restore seen, a
 * full store, a refusal); the answer itself is verbs.c's to read.
 *
 * `same` in a result: whether the answer names the fence and layout of cl,
 * the cluster ident the caller passed (read when the answer comes: the
 * caller keeps it alive and current).  1 it does, or (a write) the write's
 * compares held; 0 another (rule 1: read the cluster); -1 the answer does
 * not say (no answer, or malformed).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cluster-ident.h"
#include "reads.h"
#include "store-api.h"

/* The keys' prefix, "/snowid/<cluster>/", for every verb after. */
void store_set_prefix(struct store *s, const char *prefix);
const char *store_prefix(const struct store *s);
/* Frees what the verbs in flight keep: their answers will not come (the
 * backend is being freed, dropping its calls). */
void store_verbs_drop(struct store *s);

/* ---- leases ---- */

/* lease: the lease granted (0: none, or malformed); ttl_s: its TTL (-1: no
 * answer, or malformed); for a keepalive, 0: the store does not know the
 * lease. */
typedef void (*verb_lease_cb)(void *userdata, const struct store_answer *r, int64_t lease,
                              int64_t ttl_s);
int store_grant(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata, uint64_t tag);
int store_keepalive(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata, uint64_t tag);
/* gone: revoked, or the store did not know it */
typedef void (*verb_revoke_cb)(void *userdata, const struct store_answer *r, bool gone);
int store_revoke(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata);

/* ---- numbers ---- */

typedef void (*verb_scan_cb)(void *userdata, const struct store_answer *r,
                             const struct store_scan *scan);
#define STORE_SAMPLE_MAX 8
/* sample: the numbers to read (sampled, at most STORE_SAMPLE_MAX), or NULL
 * for all;
 * time_bits: a mark above it is not one */
int store_scan(struct store *s, const struct cluster_ident *cl, uint64_t workers,
               const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
               void *userdata, uint64_t tag);

/* A claim of worker under lease, writing value and mark, if workers/<n>
 * is absent and hwm/<n> is at mod revision modrev (0: absent; then the
 * floor must be below start), the fence and layout are cl's, and (own_rev
 * > 0) this daemon's last acknowledged write of hwm/<own_worker> is still
 * there. */
struct store_claim_req {
        const struct cluster_ident *cl;
        uint32_t worker;
        int64_t lease;
        const char *value;
        uint64_t start, mark;
        int64_t modrev;
        int32_t own_worker;
        int64_t own_rev;
};
typedef void (*verb_claim_cb)(void *userdata, const struct store_answer *r,
                              const struct store_claimed *c);
int store_claim(struct store *s, const struct store_claim_req *req, verb_claim_cb cb,
                void *userdata, uint64_t tag);

typedef void (*verb_read_cb)(void *userdata, const struct store_answer *r,
                             const struct store_read *rd);
int store_read_number(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                      const char *value, verb_read_cb cb, void *userdata, uint64_t tag);

/* A mark extension: hwm/<n> to mark if workers/<n> is (lease, value), the
 * mark is below it, its mod revision is at least own_rev, and the fence and
 * layout are cl's; failed: the number as read. */
typedef void (*verb_extend_cb)(void *userdata, const struct store_answer *r,
                               const struct store_extended *e);
int store_extend(struct store *s, const struct cluster_ident *cl, uint32_t worker, int64_t lease,
                 const char *value, uint64_t mark, int64_t own_rev, verb_extend_cb cb,
                 void *userdata, uint64_t tag);

/* A mark raised (rule 4): read it (put false), or put mark comparing its
 * mod revision (0: absent), the fence and layout cl's.  put: the put was
 * applied; else the mark as read (n), and same. */
typedef void (*verb_raise_cb)(void *userdata, const struct store_answer *r,
                              const struct store_raised *rs);
int store_raise(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
                uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag);

/* ---- the cluster (verbs-cluster.c) ---- */

typedef void (*verb_cluster_cb)(void *userdata, const struct store_answer *r,
                                const struct store_cluster *c);
/* marks: read the highest mark (the host that makes the cluster); own_worker
 * >= 0: read the mark of that number too */
int store_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                       void *userdata, uint64_t tag);

/* The key `creating`, while there is no layout: taken (value; over a stale
 * one at stale_rev).  Not taken: layout, 1 there, 0 absent, -1 unreadable;
 * creating likewise, with its value and mod revision. */
struct store_creating {
        bool ok, succeeded;
        int layout, creating;
        char value[128];
        int64_t mod_rev;
};
typedef void (*verb_creating_cb)(void *userdata, const struct store_answer *r,
                                 const struct store_creating *c);
int store_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                   void *userdata, uint64_t tag);

/* A write's answer: ok (answered, 200, JSON) and whether it was applied. */
typedef void (*verb_done_cb)(void *userdata, const struct store_answer *r, bool ok, bool succeeded);
/* Marks 0 for numbers [from, to) where absent, while there is no layout and
 * no floor. */
int store_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata);
/* The cluster made: layout, fence and floor, and `creating` deleted, if
 * nothing of it is there, no number is held, no witness is there, and every
 * mark is 0 (marked) or absent. */
int store_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                       bool marked, verb_done_cb cb, void *userdata);
/* A witness (docs/fences.md rule 7) of this daemon's token put, whatever
 * the store holds; or deleted. */
struct store_witness {
        const char *host, *instance;
        uint64_t era, claims_above, deadline, wall_ms;
};
int store_witness_put(struct store *s, const char *token, const struct store_witness *w,
                      verb_done_cb cb, void *userdata, uint64_t tag);
int store_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata);
/* A region's record put (value as stored), if no record changed since
 * revision rev and the layout is the one at layout_rev. */
int store_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                       int64_t layout_rev, verb_done_cb cb, void *userdata);

/* ---- `snowid fence` (cli/fence.c) ---- */

/* A witness as stored: its key (for messages) and value. */
struct store_fence_witness {
        char key[160];
        char *value;
        size_t len;
};
/* What a fence reads: the layout (1 there, 0 absent; its create revision),
 * the fence's bytes as stored (1 there, 0 absent) and its revision, the
 * floor (1 a valid mark, 0 absent, -1 there but not one), how many marks
 * below 2^time_bits are stored and the highest, the witnesses, and what
 * the write compares to find nothing written since (since, digest). */
struct store_fence_read {
        bool ok;
        int layout;
        int64_t layout_rev;
        int fence;
        char fence_bytes[FENCE_MAX];
        size_t fence_len;
        int64_t fence_rev;
        int floor;
        uint64_t floor_value;
        size_t marks;
        uint64_t highest;
        size_t n_witnesses;
        struct store_fence_witness *witnesses;
        int64_t since;
        char digest[40];
};
typedef void (*verb_fence_read_cb)(void *userdata, const struct store_answer *r,
                                   const struct store_fence_read *f);
int store_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata);
/* A fence written: fence and floor put (and layout, if the read found
 * none), every witness deleted, if the layout and fence are as read, the
 * floor and every mark at most floor (or, none read, still none and no
 * mark written since), and no witness written since the read. */
struct store_fence_write {
        const struct store_fence_read *read;
        const char *fence;
        uint64_t floor;
        const snowid_layout *layout;
};
int store_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                      void *userdata);

/* Whether the store says it is full (etcd's NOSPACE alarm): member, the
 * member that said so, or NULL; ok: the store answered the question. */
typedef void (*verb_alarms_cb)(void *userdata, const struct store_answer *r, bool ok,
                               const char *member);
int store_alarms(struct store *s, verb_alarms_cb cb, void *userdata);
