/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL backend's own parts, shared by pg.c (the queue, sending,
 * the interface), pg-conn.c (the connection: connecting, its setup, reading
 * answers) and pg-answer.c (the pure parts): private to the backend.
 */
#pragma once

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "monotonic.h"
#include "pg.h"
#include "store-refusal.h"

#define BACKOFF_MIN_MS 100 /* reconnecting: the first wait, doubled up to the last */
#define BACKOFF_MAX_MS 1000
#define SETUP_MIN_MS 10000     /* a new connection's setup may take this long, at least */
#define ANSWER_MAX (16u << 20) /* an answer larger than this is not one of ours */

#define PG_PARAMS_MAX 16

struct request {
        struct pg *pg;
        const char *stmt; /* a prepared statement's name (pg_statements) */
        unsigned nparams;
        char *params[PG_PARAMS_MAX]; /* text; NULL is SQL's NULL */
        pg_result_cb cb;
        void *userdata;
        uint64_t tag;
        uint64_t queued;     /* CLOCK_MONOTONIC usec */
        uint64_t sent;       /* idem, when its statement went on the connection */
        unsigned timeout_ms; /* its deadline, from queued */
        bool resent;         /* sent again once, cancelled by a cancel meant for another */
        int64_t rev_at_send; /* the highest kv revision seen when it was sent */
        unsigned gen_at_send;
        bool is_kv;
        sd_event_source *deadline;
        struct request *prev, *next;
};

enum conn_state {
        C_DOWN,       /* no connection */
        C_CONNECTING, /* PQconnectPoll() until it says OK or FAILED */
        C_SETUP,      /* the queries every new connection runs first */
        C_READY,
};

/* Run in this order on every new connection, before any call. */
enum setup_step {
        S_SETTINGS, /* the setup's timeouts, isolation and application_name */
        S_CHECKS,   /* a primary, and how durable its commits are */
        S_CURRENT,  /* whether the schema is this release's */
        S_IDENT,    /* and its identity made for this server */
        S_SCHEMA,   /* daemon/store/postgres.sql (unless both): idempotent */
        S_PREPARE,  /* the verbs' statements, prepared on this connection */
        S_WARM,     /* one harmless read: the server compiles the verbs' functions */
        S_TIMEOUTS, /* then every statement bounded by store-timeout */
        S_DONE,
};

struct pg {
        sd_event *event;
        const struct settings *cfg;
        PGconn *conn;
        enum conn_state state;
        enum setup_step step;
        sd_event_source *io;
        sd_event_source *kick;          /* runs dispatch() from the loop */
        sd_event_source *retry;         /* the next connection attempt */
        sd_event_source *connect_timer; /* connecting and setting up take this long at most */
        /* a statement given up on still runs: the connection is dropped if
         * the server has not ended it by then */
        sd_event_source *stuck;
        uint64_t next_try;           /* CLOCK_MONOTONIC usec: no attempt before */
        unsigned backoff_ms;         /* 0: the last connection was made */
        bool query_pending;          /* a query's results are still to come */
        bool flushing;               /* libpq holds bytes not yet sent */
        PGresult *result;            /* what the query in flight got so far */
        struct request *head, *tail; /* oldest first */
        struct request *current;     /* its query is on the connection */
        unsigned in_flight;
        struct store_stats stats;
        struct store_history hist; /* of kv and lease answers */
        /* a refusal that needs an operator, and the wait it imposes */
        struct store_refusal hold; /* a refusal in force */
        /* said once per daemon, not on every reconnect */
        bool warned_sync_commit, warned_async_standby;
        /* the server's disk is full (SQLSTATE 53100) and no write went through
         * since: what the alarm call answers, as etcd's NOSPACE alarm */
        bool disk_full;
        /* the call in flight committed locally but its wait for a synchronous
         * standby was cancelled: not acknowledged */
        bool unreplicated;
        /* said once per streak of failed connections */
        bool said_down, said_standby, said_setup;
        char meta_ident[24]; /* snowid.meta's system identifier, as S_CURRENT read it */
        char endpoint[256];
};

bool pg_failed(const PGresult *res);
const char *pg_one_line(char *buf, size_t size, const char *msg);
void pg_close_conn(struct pg *p);
/* The session's statement_timeout and lock_timeout: the longest a call
 * waits (patience.h). */
unsigned pg_statement_timeout_ms(const struct pg *p);
void pg_conn_broken(struct pg *p, const char *why);
void pg_connect_start(struct pg *p);
void pg_endpoint_format(char *buf, size_t size, const char *host, const char *port);
void pg_fail_all(struct pg *p, enum store_err err, const char *why);
void pg_finish(struct pg *p, struct request *q, struct store_reply *r, const PGresult *res);
void pg_flush(struct pg *p);
bool pg_disk_full(const struct pg *p);
/* The daemon's first connection is being made: none has been up, and no
 * attempt has failed (said_down is set by the first failure, and cleared
 * only once a connection is up).  Its attempt, and the patient calls
 * behind it, wait PATIENCE_X store-timeouts (patience.h). */
bool pg_first_connection(const struct pg *p);
/* How long a new connection's setup may take. */
unsigned pg_setup_ms(const struct pg *p);
void pg_kick(struct pg *p);
void pg_problem_seen(struct pg *p, enum store_err err, const char *message);
void pg_unlink_request(struct pg *p, struct request *q);
