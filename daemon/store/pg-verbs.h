/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL verbs' inside, shared by pg-verbs.c (leases, numbers) and
 * pg-verbs-cluster.c (the cluster): arguments as text, the answer's row
 * read by column name.
 */
#pragma once

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "pg-int.h"
#include "verbs-int.h"

/* An argument list: text values kept in one buffer. */
struct args {
        const char *v[PG_PARAMS_MAX];
        unsigned n;
        char buf[PG_PARAMS_MAX][24];
};

void arg_str(struct args *a, const char *s);
void arg_i64(struct args *a, int64_t x);
void arg_u64(struct args *a, uint64_t x);
void arg_bool(struct args *a, bool b);
/* The cluster's name: the verbs' prefix, "/snowid/<name>/". */
const char *cluster_name(struct store *s, char *buf, size_t size);

/* A column of the answer's one row: NULL (absent column, or SQL's NULL),
 * text, a boolean, an integer (absent when NULL). */
bool col_null(const PGresult *res, const char *name);
const char *col_text(const PGresult *res, const char *name);
bool col_bool(const PGresult *res, const char *name);
int64_t col_i64(const PGresult *res, const char *name, int64_t absent);
/* Whether the answer came with its row. */
bool answered(const struct store_reply *r, const PGresult *res);

struct verb *new_verb(struct store *s, enum verb_kind kind, void (*cb)(void), void *userdata,
                      const struct cluster_ident *cl);
/* Queues v's statement; v is freed if it cannot be. */
int send_verb(struct verb *v, const char *stmt, const struct args *a, bool kv, uint64_t tag);

/* pg-verbs-cluster.c's */
int pg_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                    void *userdata, uint64_t tag);
int pg_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                void *userdata, uint64_t tag);
int pg_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata);
int pg_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                    bool marked, verb_done_cb cb, void *userdata);
int pg_witness_put(struct store *s, const char *token, const struct store_witness *w,
                   verb_done_cb cb, void *userdata, uint64_t tag);
int pg_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata);
int pg_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                    int64_t layout_rev, verb_done_cb cb, void *userdata);
int pg_alarms(struct store *s, verb_alarms_cb cb, void *userdata);
int pg_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata);
int pg_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                   void *userdata);
/* The answer of one of them, read and handed to its callback. */
void pg_cluster_row(struct verb *v, const struct store_reply *r, const PGresult *res);
