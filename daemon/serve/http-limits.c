/* SPDX-License-Identifier: MIT */
/*
 * What keeps each client of the HTTP API to its share (docs/http.md): the
 * request and ID rates of its address and its token (ratelimit.c keeps the
 * buckets), its address's count of open connections and its share of the
 * pool when the pool is full, and the deadline by which a request must be
 * read whole, kept by a sweeper thread because libmicrohttpd's own timeout
 * restarts with every byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http-internal.h"
#include "monotonic.h"

/* ---- rates ---- */

enum MHD_Result http_too_many(struct http_server *srv, struct MHD_Connection *c, const char *by,
                              const char *what, int64_t wait_ns)
{
        char after[24];
        int64_t secs = (wait_ns + 999999999) / 1000000000;
        snprintf(after, sizeof(after), "%" PRId64, secs > 0 ? secs : 1);
        json_t *j = json_pack("{s:s,s:s,s:s,s:I}", "error", "rate limit exceeded", "limit", what,
                              "by", by, "retry_after_s", (json_int_t)(secs > 0 ? secs : 1));
        return http_reply_json(srv, c, 429, j, "Retry-After", after);
}

static struct addr_slot *addr_slot(struct http_server *srv, const struct request *q, struct rate r,
                                   int64_t now)
{
        return r.per_s ? addr_slot_get(srv->addrs, q->conn->addr, now) : NULL;
}

/* A request's share of its address's and its token's request rates. */
int http_limit_requests(struct http_server *srv, struct request *q, const char **by, int64_t *wait)
{
        int64_t now = shm_monotonic_ns();
        struct addr_slot *a = addr_slot(srv, q, srv->addr_requests, now);
        if (a && addr_take(a, &a->requests, srv->addr_requests, 1, now, wait) < 0) {
                fetch_add_relaxed(srv->limited_addr_requests, 1);
                *by = "address";
                return -1;
        }
        struct token *t = q->token;
        if (bucket_take(&t->requests_bucket, t->requests, 1, now, wait) < 0) {
                fetch_add_relaxed(t->limited_requests, 1);
                *by = "token";
                return -1;
        }
        return 0;
}

/* n IDs charged to the address's and the token's ID rates; q remembers the
 * address slot charged, for http_refund_ids() */
int http_charge_ids(struct http_server *srv, struct request *q, uint64_t n, const char **by,
                    int64_t *wait)
{
        int64_t now = shm_monotonic_ns();
        struct token *t = q->token;
        struct addr_slot *a = addr_slot(srv, q, srv->addr_ids, now);
        if (a && addr_take(a, &a->ids, srv->addr_ids, n, now, wait) < 0) {
                fetch_add_relaxed(srv->limited_addr_ids, 1);
                *by = "address";
                return -1;
        }
        if (bucket_take(&t->ids_bucket, t->ids, n, now, wait) < 0) {
                if (a)
                        bucket_refund(&a->ids, srv->addr_ids, n);
                fetch_add_relaxed(t->limited_ids, 1);
                *by = "token";
                return -1;
        }
        q->ids_slot = a;
        return 0;
}

/* n IDs charged by http_charge_ids() but not issued, given back to the very
 * buckets charged, even if the address slot changed hands since */
void http_refund_ids(struct http_server *srv, struct request *q, uint64_t n)
{
        if (q->ids_slot)
                bucket_refund(&q->ids_slot->ids, srv->addr_ids, n);
        bucket_refund(&q->token->ids_bucket, q->token->ids, n);
}

/* ---- connections and the read deadline ---- */

struct conn *http_conn(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

/* How long a walk that found none that may make way is trusted: newcomers
 * meanwhile are refused at the cost of a lookup, not a walk. */
#define NO_WAY_NS 100000000

/* The pool is full and a connection from an address holding mine comes: the
 * connection that conn_victim() picks among those waiting for a request is
 * shut (MHD then sees the end of it and closes it) and no longer counted.
 * A request sent at that very moment, or whose first line MHD has read only
 * in part, sees the connection closed before any answer (no ID issued), as
 * with any server that closes idle keep-alive connections; its client
 * opens another.  0, or -1 if none may go.  Under conns_lock. */
static int make_way(struct http_server *srv, unsigned mine)
{
        size_t n = 0;
        int64_t now = shm_monotonic_ns();
        if (now < srv->no_way_until)
                return -1;
        for (struct conn *k = srv->conns.next; k != &srv->conns && n < srv->n_views; k = k->next) {
                int64_t idle = READ_ONCE(k->idle_since);
                if (!k->counted || k->cut || k->fd < 0 || idle <= 0)
                        continue;
                srv->views[n] =
                        (struct conn_view){conn_counts_get(&srv->conn_counts, k->addr), idle};
                srv->viewed[n++] = k;
        }
        /* one picked may have a request come or begun since: the next one,
         * each tried once (a client that sends on all its connections at
         * once has as many picked in turn) */
        for (;;) {
                long i = conn_victim(srv->views, n, mine);
                if (i < 0) {
                        srv->no_way_until = now + NO_WAY_NS;
                        return -1;
                }
                struct conn *v = srv->viewed[i];
                int64_t idle = srv->views[i].idle_since;
                char b;
                srv->views[i].idle_since = 0;
                /* a request arrived and not yet read (MHD reads it on its
                 * thread), or read since it was picked: not waiting */
                if (recv(v->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0 ||
                    !cas_relaxed(v->idle_since, &idle, 0))
                        continue;
                shutdown(v->fd, SHUT_RDWR);
                v->cut = true;
                v->counted = false;
                conn_counts_del(&srv->conn_counts, v->addr);
                fetch_add_relaxed(srv->evictions, 1);
                return 0;
        }
}

void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
        struct http_server *srv = cls;
        struct conn *k = *socket_context;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fi =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *ai =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                k = calloc(1, sizeof(*k));
                if (!k)
                        return; /* its first request closes it */
                /* a descriptor of our own, so the sweeper never shuts a
                 * number that MHD closed and the kernel gave to another */
                k->fd = fi ? fcntl(fi->connect_fd, F_DUPFD_CLOEXEC, 3) : -1;
                k->addr = ai && ai->client_addr ? addr_key(ai->client_addr) : 1;
                /* before k is listed: the sweeper sees it under conns_lock */
                int64_t now = shm_monotonic_ns();
                WRITE_ONCE(k->deadline, now + srv->read_timeout_ns);
                WRITE_ONCE(k->idle_since, now);
                pthread_mutex_lock(&srv->conns_lock);
                /* at its address's cap (an IPv6 /64's), or at its share of
                 * a full pool, or the pool full and none that may make way:
                 * shut at once, and closed by MHD as any other */
                enum conn_admit a =
                        conn_admit(&srv->conn_counts, k->addr, srv->cfg->http_connections,
                                   srv->cfg->http_connections_per_address);
                if (a == CONN_MAKE_WAY &&
                    (k->fd < 0 || make_way(srv, conn_counts_get(&srv->conn_counts, k->addr)) < 0))
                        a = CONN_REFUSE;
                k->counted = a != CONN_REFUSE &&
                             conn_counts_add(&srv->conn_counts, k->addr,
                                             srv->cfg->http_connections_per_address) == 0;
                if (!k->counted && k->fd >= 0) {
                        shutdown(k->fd, SHUT_RDWR);
                        k->cut = true;
                }
                k->next = srv->conns.next;
                k->prev = &srv->conns;
                k->next->prev = k;
                srv->conns.next = k;
                pthread_mutex_unlock(&srv->conns_lock);
                fetch_add_relaxed(srv->conns_open, 1);
                *socket_context = k;
                return;
        }
        if (!k)
                return;
        pthread_mutex_lock(&srv->conns_lock);
        k->prev->next = k->next;
        k->next->prev = k->prev;
        if (k->counted)
                conn_counts_del(&srv->conn_counts, k->addr);
        pthread_mutex_unlock(&srv->conns_lock);
        if (k->fd >= 0)
                close(k->fd);
        free(k);
        *socket_context = NULL;
        fetch_sub_relaxed(srv->conns_open, 1);
}

/* A connection from an address (an IPv4 address, an IPv6 /64) that has its
 * cap open already, or its share of a full pool, is turned away before MHD
 * sets it up; http_on_connection() counts, exactly, and makes way. */
enum MHD_Result http_accept_policy(void *cls, const struct sockaddr *sa, socklen_t len)
{
        struct http_server *srv = cls;
        (void)len;
        pthread_mutex_lock(&srv->conns_lock);
        enum conn_admit a = conn_admit(&srv->conn_counts, addr_key(sa), srv->cfg->http_connections,
                                       srv->cfg->http_connections_per_address);
        /* a full pool where none may make way, as found just now */
        if (a == CONN_MAKE_WAY && shm_monotonic_ns() < srv->no_way_until)
                a = CONN_REFUSE;
        pthread_mutex_unlock(&srv->conns_lock);
        return a != CONN_REFUSE ? MHD_YES : MHD_NO;
}

/* Five times a second, shuts every connection whose request is not read
 * whole by its deadline; MHD then sees the end of it and closes it.  The
 * lock is taken here and when a connection opens or closes, never per
 * request. */
static void *sweep(void *arg)
{
        struct http_server *srv = arg;
        pthread_mutex_lock(&srv->conns_lock);
        while (!srv->stopping) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += 200000000;
                if (ts.tv_nsec >= 1000000000)
                        ts.tv_sec++, ts.tv_nsec -= 1000000000;
                pthread_cond_timedwait(&srv->stop_cond, &srv->conns_lock, &ts);
                int64_t now = shm_monotonic_ns();
                for (struct conn *k = srv->conns.next; k != &srv->conns; k = k->next) {
                        int64_t d = READ_ONCE(k->deadline);
                        if (d && d < now && !k->cut && k->fd >= 0) {
                                shutdown(k->fd, SHUT_RDWR);
                                k->cut = true;
                                fetch_add_relaxed(srv->deadline_cuts, 1);
                        }
                }
        }
        pthread_mutex_unlock(&srv->conns_lock);
        return NULL;
}

int http_limits_init(struct http_server *srv)
{
        const struct settings *cfg = srv->cfg;
        srv->addr_ids = (struct rate){cfg->http_address_ids};
        srv->addr_requests = (struct rate){cfg->http_address_requests};
        srv->read_timeout_ns = (int64_t)cfg->http_read_timeout_s * 1000000000;
        srv->conns.next = srv->conns.prev = &srv->conns;
        pthread_mutex_init(&srv->conns_lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&srv->stop_cond, &ca);
        pthread_condattr_destroy(&ca);
        srv->addrs = calloc(1, sizeof(*srv->addrs));
        int r = srv->addrs ? addr_table_init(srv->addrs) : -ENOMEM;
        if (r >= 0)
                r = conn_counts_init(&srv->conn_counts, cfg->http_connections);
        /* every connection that MHD may hold is listed */
        srv->n_views = http_connections_max(cfg->http_connections);
        srv->views = calloc(srv->n_views, sizeof(*srv->views));
        srv->viewed = calloc(srv->n_views, sizeof(*srv->viewed));
        if (r >= 0 && (!srv->views || !srv->viewed))
                r = -ENOMEM;
        return r;
}

int http_sweeper_start(struct http_server *srv)
{
        int r = -pthread_create(&srv->sweeper, NULL, sweep, srv);
        if (r < 0)
                return r;
        srv->sweeper_started = true;
        return 0;
}

void http_limits_free(struct http_server *srv)
{
        if (srv->sweeper_started) {
                pthread_mutex_lock(&srv->conns_lock);
                srv->stopping = true;
                pthread_cond_signal(&srv->stop_cond);
                pthread_mutex_unlock(&srv->conns_lock);
                pthread_join(srv->sweeper, NULL);
        }
        pthread_cond_destroy(&srv->stop_cond);
        pthread_mutex_destroy(&srv->conns_lock);
        free(srv->addrs);
        conn_counts_free(&srv->conn_counts);
        free(srv->views);
        free(srv->viewed);
}
