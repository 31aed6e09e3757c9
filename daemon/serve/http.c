/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server: libmicrohttpd started and stopped, the loop's snapshot
 * taken in, each request read and routed to its endpoint, and the answers
 * every endpoint writes.  The endpoints and the limits are files of their
 * own (http-internal.h lists them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "handshake.h"
#include "http-internal.h"
#include "monotonic.h"

struct snapshot_box {
        struct rcu_head rcu;
        struct http_snapshot snap;
};

/* ---- answers ---- */

enum MHD_Result http_reply(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                           const char *ctype, char *body, size_t len, const char *hname,
                           const char *hvalue)
{
        struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        MHD_add_response_header(r, "Cache-Control", "no-store");
        if (hname)
                MHD_add_response_header(r, hname, hvalue);
        fetch_add_relaxed(srv->by_code[code < CODES ? code : 0], 1);
        enum MHD_Result ret = MHD_queue_response(c, code, r);
        MHD_destroy_response(r);
        return ret;
}

enum MHD_Result http_reply_json(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                                json_t *j, const char *hname, const char *hvalue)
{
        char *body = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!body)
                return MHD_NO;
        size_t len = strlen(body);
        return http_reply(srv, c, code, "application/json", body, len, hname, hvalue);
}

enum MHD_Result http_fail(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                          const char *msg)
{
        const char *hname = NULL, *hvalue = NULL;
        if (code == 503)
                hname = "Retry-After", hvalue = "1";
        else if (code == 401)
                hname = "WWW-Authenticate", hvalue = "Bearer";
        return http_reply_json(srv, c, code, json_pack("{s:s}", "error", msg), hname, hvalue);
}

enum MHD_Result http_not_allowed(struct http_server *srv, struct MHD_Connection *c,
                                 const char *allow)
{
        return http_reply_json(srv, c, 405, json_pack("{s:s}", "error", "method not allowed"),
                               "Allow", allow);
}

void http_rfc3339(uint64_t unix_ms, char *buf, size_t size)
{
        time_t sec = (time_t)(unix_ms / 1000);
        struct tm tm;
        if (!gmtime_r(&sec, &tm) || tm.tm_year > 9999 - 1900) {
                snprintf(buf, size, "out of range");
                return;
        }
        size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, size - n, ".%03uZ", (unsigned)(unix_ms % 1000));
}

/* ---- dispatch ---- */

static enum MHD_Result route(struct http_server *srv, struct MHD_Connection *c, const char *url,
                             const char *method, struct request *q)
{
        bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        const char *by;
        int64_t wait;
        /* the address's rate first: unauthenticated floods count too */
        q->token = &srv->anonymous;
        if (!strncmp(url, "/v1/", 4) && srv->cfg->http_tokens) {
                const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
                struct token *t = NULL;
                if (auth && !strncmp(auth, "Bearer ", 7))
                        t = tokens_find(srv->cfg->http_tokens, srv->cfg->n_http_tokens, auth + 7);
                if (!t) {
                        if (http_limit_requests(srv, q, &by, &wait) < 0)
                                return http_too_many(srv, c, by, "requests", wait);
                        return http_fail(srv, c, 401, "a valid bearer token is required");
                }
                q->token = t;
        }
        if (http_limit_requests(srv, q, &by, &wait) < 0)
                return http_too_many(srv, c, by, "requests", wait);
        fetch_add_relaxed(q->token->n_requests, 1);
        if (!strcmp(url, "/v1/ids"))
                return !strcmp(method, "POST") ? http_take_ids(srv, c, q)
                                               : http_not_allowed(srv, c, "POST");
        if (!strncmp(url, "/v1/ids/", 8))
                return get ? http_decode_id(srv, c, url + 8)
                           : http_not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/v1/status"))
                return get ? http_status(srv, c) : http_not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/healthz"))
                return get ? http_healthz(srv, c) : http_not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/metrics"))
                return get ? http_metrics(srv, c) : http_not_allowed(srv, c, "GET, HEAD");
        return http_fail(srv, c, 404, "no such endpoint");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
        struct http_server *srv = cls;
        struct request *q = *req_cls;
        (void)version;
        if (!q) {
                /* the first call only sets up: queuing now would end keep-alive */
                struct conn *k = http_conn(c);
                if (!k || k->fd < 0)
                        return MHD_NO; /* no deadline could be kept: closed */
                q = calloc(1, sizeof(*q));
                if (!q)
                        return MHD_NO;
                q->conn = k;
                *req_cls = q;
                return MHD_YES;
        }
        if (*upload_size) {
                if (q->len + *upload_size > BODY_MAX)
                        q->too_large = true;
                else {
                        memcpy(q->body + q->len, upload, *upload_size);
                        q->len += *upload_size;
                }
                *upload_size = 0;
                return MHD_YES;
        }
        /* read whole: no deadline while it is answered */
        WRITE_ONCE(q->conn->deadline, 0);
        return route(srv, c, url, method, q);
}

/* A request's first line is read: its connection no longer waits for one,
 * and is not closed to make way for another (http-limits.c). */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
        (void)cls;
        (void)uri;
        struct conn *k = http_conn(c);
        if (k)
                WRITE_ONCE(k->idle_since, 0);
        return NULL; /* *req_cls as on_request() expects it first */
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct http_server *srv = cls;
        (void)toe;
        struct conn *k = http_conn(c);
        /* the next request on this connection: read whole by then; until
         * it begins, the connection may make way for another */
        if (k) {
                int64_t now = shm_monotonic_ns();
                WRITE_ONCE(k->deadline, now + srv->read_timeout_ns);
                WRITE_ONCE(k->idle_since, now);
        }
        free(*req_cls);
        *req_cls = NULL;
}

/* ---- the server ---- */

static void free_box(struct rcu_head *head)
{
        free(caa_container_of(head, struct snapshot_box, rcu));
}

void http_publish(struct http_server *srv, struct http_snapshot *snap)
{
        /* pairs with rcu_dereference() in the handlers */
        struct http_snapshot *old = rcu_xchg_pointer(&srv->snap, snap);
        if (old)
                call_rcu(&caa_container_of(old, struct snapshot_box, snap)->rcu, free_box);
}

struct http_snapshot *http_snapshot_new(void)
{
        struct snapshot_box *box = calloc(1, sizeof(*box));
        return box ? &box->snap : NULL;
}

static void server_free(struct http_server *srv)
{
        http_limits_free(srv);
        if (srv->snap)
                free(caa_container_of(srv->snap, struct snapshot_box, snap));
        snowid_close(srv->ids);
        free(srv);
}

int http_start(const struct settings *cfg, const struct shm_pub *pub, struct http_server **ret)
{
        unsigned char sa[128];
        unsigned salen;
        int r = addr_parse_listen(cfg->http, sa, &salen);
        if (r < 0)
                return r;
        struct http_server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->cfg = cfg;
        snprintf(srv->anonymous.name, sizeof(srv->anonymous.name), "none");
        r = http_limits_init(srv);
        if (r < 0) {
                server_free(srv);
                return r;
        }
        char path[SHM_SOCK_PATH_MAX];
        /* the client's own descriptors (snowid_open_fds() takes them over),
         * closed in anything the daemon might exec */
        int ctl = fcntl(pub->ctl_ro_fd, F_DUPFD_CLOEXEC, 3);
        int ctr = fcntl(pub->ctr_fd, F_DUPFD_CLOEXEC, 3);
        r = shm_socket_path(path, sizeof(path), cfg->runtime_dir, cfg->instance);
        if (r >= 0 && (ctl < 0 || ctr < 0))
                r = -errno;
        if (r >= 0)
                r = snowid_open_fds(ctl, ctr, path, &srv->ids);
        else {
                if (ctl >= 0)
                        close(ctl);
                if (ctr >= 0)
                        close(ctr);
        }
        if (r < 0) {
                server_free(srv);
                return r;
        }
        struct http_snapshot *s = http_snapshot_new();
        if (!s) {
                server_free(srv);
                return -ENOMEM;
        }
        s->worker = -1;
        s->lease = "claiming";
        s->mono_started_ms = now_msec();
        rcu_assign_pointer(srv->snap, s);
        r = http_sweeper_start(srv);
        if (r < 0) {
                server_free(srv);
                return r;
        }
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO |
                         (((struct sockaddr *)sa)->sa_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        srv->mhd = MHD_start_daemon(
                flags, 0, http_accept_policy, srv, on_request, srv, MHD_OPTION_SOCK_ADDR, sa,
                MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
                /* snowidd keeps http-connections (http-limits.c); the
                 * rest is room for those closed to make way */
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)http_connections_max(cfg->http_connections),
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->http_connections_per_address,
                /* idle (and a stalled reader of an answer); the read deadline
                 * is the sweeper's */
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->http_read_timeout_s,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_NOTIFY_COMPLETED,
                on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, http_on_connection, srv,
                MHD_OPTION_URI_LOG_CALLBACK, on_request_line, srv, MHD_OPTION_END);
        if (!srv->mhd) {
                server_free(srv);
                return -EADDRINUSE;
        }
        *ret = srv;
        return 0;
}

unsigned http_port(const struct http_server *srv)
{
        const union MHD_DaemonInfo *i = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
        return i ? i->port : 0;
}

void http_stop(struct http_server *srv)
{
        if (!srv)
                return;
        MHD_stop_daemon(srv->mhd);
        synchronize_rcu();
        rcu_barrier();
        server_free(srv);
}
