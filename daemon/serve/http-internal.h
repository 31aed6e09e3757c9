/* SPDX-License-Identifier: MIT */
/*
 * What the HTTP server's files share; http.h is what the rest of the daemon
 * sees of them.
 *
 *   http.c          the server: start and stop, the snapshot, requests read
 *                   and routed, answers written
 *   http-limits.c   what keeps a client to its share: rates, connections
 *                   per address, the read deadline and its sweeper thread
 *   http-ids.c      POST /v1/ids and GET /v1/ids/{id}
 *   http-status.c   GET /v1/status and /healthz
 *   http-metrics.c  GET /metrics
 *
 * Every handler runs on one of libmicrohttpd's threads; what it knows of the
 * lease it reads from srv->snap inside an RCU read-side section.
 */
#pragma once

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <urcu-bp.h>

#include "barrier.h"
#include "http.h"
#include "ratelimit.h"
#include "snowid.h"

#define BODY_MAX 4096
#define CODES 600

/* One per connection (MHD's socket context).  The read deadline lives here:
 * MHD's own timeout restarts with every byte, so a client that trickles its
 * headers would hold the connection for ever. */
struct conn {
        struct conn *prev, *next; /* srv->conns, under srv->conns_lock */
        int fd;                   /* a duplicate: never reused while listed */
        bool cut;
        bool counted;  /* in srv->conn_counts */
        uint64_t addr; /* addr_key() */
        /* CLOCK_MONOTONIC ns by which the request being read must be read
         * whole; 0 while one is being answered.  Relaxed: it guards nothing
         * else; the sweeper acts on a value at most one sweep old. */
        _Atomic int64_t deadline;
        /* CLOCK_MONOTONIC ns since which it has waited for a request (since
         * it opened, or since its last answer was sent); 0 from the first
         * line of a request to the end of its answer.  A connection is
         * shut to make way for another only after a compare-and-swap of
         * this word from the value it was picked by: a request begun since
         * it was picked keeps it open. */
        _Atomic int64_t idle_since;
};

struct http_server {
        struct MHD_Daemon *mhd;
        const struct settings *cfg;
        snowid *ids;
        struct http_snapshot *snap; /* RCU: rcu_assign_pointer / rcu_dereference */
        /* the counters /metrics prints: relaxed (fetch_add_relaxed,
         * READ_ONCE), each guards nothing but itself */
        _Atomic uint64_t ids_served;
        _Atomic uint64_t by_code[CODES];
        struct token anonymous; /* counts requests made without a token file */
        struct rate addr_ids, addr_requests;
        struct addr_table *addrs;
        struct conn_counts conn_counts; /* under conns_lock */
        _Atomic uint64_t limited_addr_ids, limited_addr_requests, deadline_cuts, conns_open,
                evictions;
        int64_t read_timeout_ns;
        pthread_mutex_t conns_lock;
        struct conn conns; /* list head */
        /* under conns_lock: room for every connection listed, to weigh which
         * one makes way (http-limits.c) */
        struct conn_view *views;
        struct conn **viewed;
        size_t n_views;
        /* under conns_lock: until then (CLOCK_MONOTONIC ns), no connection
         * may make way, as the last walk found: newcomers to a full pool
         * are refused without walking again */
        int64_t no_way_until;
        pthread_t sweeper;
        pthread_cond_t stop_cond;
        bool stopping, sweeper_started;
};

struct request {
        struct conn *conn;
        struct token *token;
        struct addr_slot *ids_slot; /* the address bucket the IDs were charged to */
        size_t len;
        bool too_large;
        char body[BODY_MAX + 1];
};

/* ---- answers (http.c) ---- */

/* body (malloc'd) taken over, freed whatever happens; counted by code in
 * /metrics.  hname: one more header, or NULL. */
enum MHD_Result http_reply(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                           const char *ctype, char *body, size_t len, const char *hname,
                           const char *hvalue);
/* j taken over */
enum MHD_Result http_reply_json(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                                json_t *j, const char *hname, const char *hvalue);
/* {"error": msg}, with Retry-After on a 503 and WWW-Authenticate on a 401 */
enum MHD_Result http_fail(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                          const char *msg);
enum MHD_Result http_not_allowed(struct http_server *srv, struct MHD_Connection *c,
                                 const char *allow);
/* unix ms as RFC 3339 UTC with ms ("out of range" past year 9999) */
void http_rfc3339(uint64_t unix_ms, char *buf, size_t size);

/* ---- limits (http-limits.c) ---- */

/* srv zeroed but for cfg: the rates, the connection list and its lock, the
 * address tables.  0 or -errno; on failure http_limits_free() still frees. */
int http_limits_init(struct http_server *srv);
/* The sweeper thread: 0 or -errno. */
int http_sweeper_start(struct http_server *srv);
/* Stops the sweeper (if started) and frees what http_limits_init() set up. */
void http_limits_free(struct http_server *srv);
/* libmicrohttpd's accept policy and connection notifier (cls: srv) */
enum MHD_Result http_accept_policy(void *cls, const struct sockaddr *sa, socklen_t len);
void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe);
/* The connection of c, or NULL. */
struct conn *http_conn(struct MHD_Connection *c);
/* 0, or -1 with who refused (*by: "address" or "token") and the wait */
int http_limit_requests(struct http_server *srv, struct request *q, const char **by, int64_t *wait);
int http_charge_ids(struct http_server *srv, struct request *q, uint64_t n, const char **by,
                    int64_t *wait);
void http_refund_ids(struct http_server *srv, struct request *q, uint64_t n);
/* 429 with Retry-After */
enum MHD_Result http_too_many(struct http_server *srv, struct MHD_Connection *c, const char *by,
                              const char *what, int64_t wait_ns);

/* ---- endpoints (http-ids.c, http-status.c, http-metrics.c) ---- */

enum MHD_Result http_take_ids(struct http_server *srv, struct MHD_Connection *c, struct request *q);
/* s: what follows /v1/ids/ */
enum MHD_Result http_decode_id(struct http_server *srv, struct MHD_Connection *c, const char *s);
enum MHD_Result http_status(struct http_server *srv, struct MHD_Connection *c);
enum MHD_Result http_healthz(struct http_server *srv, struct MHD_Connection *c);
enum MHD_Result http_metrics(struct http_server *srv, struct MHD_Connection *c);
