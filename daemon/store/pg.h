/* SPDX-License-Identifier: MIT */
/*
 * The store on PostgreSQL: the same calls as daemon/store/etcd.h (a path and an
 * etcd-shaped JSON body, an etcd-shaped answer), each one run as
 * SELECT snowid.call(path, body) on one connection, driven by libpq's
 * asynchronous API inside the daemon's sd-event loop: nothing here blocks.
 * One query is in flight at a time; the others wait in order.  Every call
 * has a deadline of etcd-timeout from when it was made; a deadline passing
 * on the query in flight, or the connection breaking, closes the connection
 * and fails every call waiting on it as unanswered.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "etcd.h"

struct pg;

int pg_new(sd_event *event, const struct settings *cfg, struct pg **ret);
/* Calls not answered yet are dropped without their callbacks. */
struct pg *pg_free(struct pg *p);
/* As etcd_call(): body is taken over; cb runs exactly once, from the loop
 * (never from inside pg_call), unless the client is freed first. */
int pg_call(struct pg *p, const char *path, json_t *body, etcd_cb cb, void *userdata, uint64_t tag);
unsigned pg_in_flight(const struct pg *p);
void pg_history_reset(struct pg *p);
void pg_expect_cluster(struct pg *p, uint64_t cluster_id);
/* host:port or the socket's path; never a password */
const char *pg_endpoint(const struct pg *p);
const struct etcd_stats *pg_stats(const struct pg *p);
/* As etcd_on_problem(): authentication, roles and TLS refusals. */
void pg_on_problem(struct pg *p, void (*cb)(void *userdata, const struct etcd_problem *p),
                   void *userdata);

/* The schema and snowid.call(), daemon/store/postgres.sql, embedded at build time. */
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
enum etcd_err pg_sqlstate_err(const char *sqlstate);
/* The class of a failure to connect, by libpq's message (the server's
 * SQLSTATE is not given for those). */
enum etcd_err pg_connect_err(const char *message);
/* A server error of the query as a reply: answered, with an HTTP-like status
 * (401 authentication, 403 permission, 429 and r->nospace for a full disk
 * (53100), else 500: a transient failure of the store), the server's message
 * in r->text and r->error. */
void pg_error_reply(struct etcd_reply *r, const char *sqlstate, const char *message);
/* snowid.call()'s answer, {"status": N, "body": {...}}, as a reply: the body
 * and status through etcd_reply_parse().  Malformed: answered, status 500 and
 * an error.  r->tag and r->usec are left as they are; the caller frees
 * r->json. */
void pg_answer_parse(struct etcd_reply *r, const char *text, size_t len);
