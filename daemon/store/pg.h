/* SPDX-License-Identifier: MIT */
/*
 * The store on PostgreSQL (private to the backend: the daemon sees store.h):
 * the verbs' statements (pg-verbs.c), each a prepared call of one function
 * of daemon/store/postgres.sql, run on one connection, driven by libpq's
 * asynchronous API inside the daemon's sd-event loop: nothing here blocks.
 * One query is in flight at a time; the others wait in order.  Every call
 * has a deadline of store-timeout from when it was made; a deadline passing
 * on the query in flight, or the connection breaking, closes the connection
 * and fails every call waiting on it as unanswered.
 */
#pragma once

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "store.h"

struct pg;

int pg_new(sd_event *event, const struct settings *cfg, struct pg **ret);
/* Calls not answered yet are dropped without their callbacks. */
struct pg *pg_free(struct pg *p);
/* A query's answer: r says whether it came (r->answered, r->http 200 and
 * res non-NULL: its rows), or why not; r->revision and r->cluster_id are
 * the row's columns rev and cid, where it has them.  res lives only during
 * the call. */
typedef void (*pg_result_cb)(void *userdata, const struct store_reply *r, const PGresult *res);
/* Runs prepared statement stmt (one of those pg-conn.c prepares, or a
 * test's own) with n text parameters (NULL: SQL's NULL);
 * kv: on the cluster's rows (the only calls a permission refusal holds
 * back).  cb runs exactly once, from the loop, unless p is freed first, at
 * the latest timeout_ms after the call. */
int pg_query(struct pg *p, const char *stmt, unsigned n, const char *const *params, bool kv,
             pg_result_cb cb, void *userdata, uint64_t tag, unsigned timeout_ms);
/* What every connection prepares instead of the verbs' statements: a
 * test's own (tests/pg-driver.c); NULL in snowidd. */
extern const char *pg_prepare_sql;
unsigned pg_in_flight(const struct pg *p);
void pg_history_reset(struct pg *p);
void pg_expect_cluster(struct pg *p, uint64_t cluster_id);
/* host:port or the socket's path; never a password */
const char *pg_endpoint(const struct pg *p);
const struct store_stats *pg_stats(const struct pg *p);
void pg_on_problem(struct pg *p, store_problem_cb cb, void *userdata);

/* The schema and the verbs' functions, daemon/store/postgres.sql, embedded at build time. */
extern const char snowid_postgres_sql[];

/* ---- pure parts, apart from the connection (tests/test-pg.c) ---- */

/* 0 if conninfo (keywords or a URI) parses and carries no password; else
 * -EINVAL and why (never the value itself) in err. */
int pg_conninfo_check(const char *conninfo, char *err, size_t errlen);
/* Calls fn for each file the connection string names (passfile, sslrootcert,
 * sslcert, sslkey, sslcrl), until one returns non-zero; returns that. */
int pg_conninfo_files(const char *conninfo, int (*fn)(const char *keyword, const char *path));
/* The class of a server error by its SQLSTATE: 28P01 and 28000 are
 * authentication, 42501 is permission; anything else is none. */
enum store_err pg_sqlstate_err(const char *sqlstate);
/* The class of a failure to connect, by libpq's message (the server's
 * SQLSTATE is not given for those). */
enum store_err pg_connect_err(const char *message);
/* A server error of the query as a reply: answered, with an HTTP-like status
 * (401 authentication, 403 permission, 429 and r->nospace for a full disk
 * (53100), else 500: a transient failure of the store), the server's message
 * in r->text and r->error. */
void pg_error_reply(struct store_reply *r, const char *sqlstate, const char *message);
/* "postgres-auth", "postgres-permission", "postgres-tls", "postgres-cert";
 * NULL for none. */
const char *pg_err_name(enum store_err err);
/* What to set in snowidd's postgres setting, or grant in PostgreSQL, to mend err. */
void pg_refusal_hint(const struct settings *cfg, enum store_err err, const char *prefix, char *buf,
                     size_t size);
void pg_full_text(const char *member, const char *endpoint, int64_t left_ms, char *buf,
                  size_t size);
