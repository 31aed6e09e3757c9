/* SPDX-License-Identifier: MIT */
/*
 * snowid's keys in etcd and the pieces of its transactions (docs/fences.md):
 * ops as the v3 JSON gateway wants them, the compares that name the cluster
 * a transaction is meant for, the nested raise of the floor, and reading
 * keys back out of an answer.  Shared by snowidd and `snowid fence`.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster-ident.h"
#include "values.h"

struct kv {
        char *key;
        char *value;
        size_t value_len;
        int64_t lease, mod_revision, create_revision;
};

/* "<prefix><what>" or "<prefix><what><n>" (n >= 0), base64 */
json_t *txn_key(const char *prefix, const char *what, int64_t n);
json_t *txn_range(json_t *key, json_t *range_end, bool keys_only);
json_t *txn_put(json_t *key, json_t *value, int64_t lease);
/* a mark's value: 20 decimal digits, so byte order is numeric order */
json_t *txn_mark(uint64_t v);
/* a compare: target "VALUE", "CREATE", "MOD", "LEASE"; result "EQUAL",
 * "LESS", "GREATER"; for VALUE, arg is a base64 JSON string (taken over),
 * else an integer */
json_t *txn_cmp(json_t *key, const char *target, const char *result, json_t *value, int64_t arg);
/* the op that raises floor to v if it is lower: a nested transaction */
json_t *txn_raise_floor(const char *prefix, uint64_t v);
/* appends the compares naming the cluster: fence's value, layout's create revision */
void txn_cluster_compares(json_t *compares, const char *prefix, const struct cluster_ident *c);
/* appends the reads of fence and layout (in that order) */
void txn_cluster_reads(json_t *ops, const char *prefix);

/* The kvs of the i-th response of a txn (a response_range), or NULL. */
json_t *txn_kvs(const json_t *root, size_t i);
/* The first kv of the i-th response: 1 found, 0 absent, -EBADMSG. */
int txn_kv(const json_t *root, size_t i, struct kv *kv);
int kv_parse(const json_t *j, struct kv *kv);
void kv_clear(struct kv *kv);
/* Whether the fence and layout read at ops i (fence) and i + 1 (layout) of
 * an answer are the ones in c: 1 same, 0 changed or absent, -EBADMSG. */
int txn_cluster_same(const json_t *root, size_t i, const struct cluster_ident *c);
