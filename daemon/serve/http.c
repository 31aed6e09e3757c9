/* SPDX-License-Identifier: MIT */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <urcu-bp.h>

#include "addr.h"
#include "http.h"
#include "log.h"
#include "handshake.h"
#include "ratelimit.h"
#include "segment.h"
#include "snowid.h"
#include "uuid-text.h"

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
};

struct http_server {
        struct MHD_Daemon *mhd;
        const struct settings *cfg;
        snowid *ids;
        struct http_snapshot *snap; /* RCU: rcu_assign_pointer / rcu_dereference */
        _Atomic uint64_t ids_served;
        _Atomic uint64_t by_code[CODES];
        struct token anonymous; /* counts requests made without a token file */
        struct rate addr_ids, addr_requests;
        struct addr_table *addrs;
        struct conn_counts conn_counts; /* under conns_lock */
        _Atomic uint64_t limited_addr_ids, limited_addr_requests, deadline_cuts, conns_open;
        int64_t read_timeout_ns;
        pthread_mutex_t conns_lock;
        struct conn conns; /* list head */
        pthread_t sweeper;
        pthread_cond_t stop_cond;
        bool stopping, sweeper_started;
};

struct snapshot_box {
        struct rcu_head rcu;
        struct http_snapshot snap;
};

struct request {
        struct conn *conn;
        struct token *token;
        struct addr_slot *ids_slot; /* the address bucket the IDs were charged to */
        size_t len;
        bool too_large;
        char body[BODY_MAX + 1];
};

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- responses ---- */

static enum MHD_Result reply(struct http_server *srv, struct MHD_Connection *c, unsigned code,
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
        atomic_fetch_add_explicit(&srv->by_code[code < CODES ? code : 0], 1, memory_order_relaxed);
        enum MHD_Result ret = MHD_queue_response(c, code, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result reply_json(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                                  json_t *j, const char *hname, const char *hvalue)
{
        char *body = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!body)
                return MHD_NO;
        size_t len = strlen(body);
        return reply(srv, c, code, "application/json", body, len, hname, hvalue);
}

static enum MHD_Result fail(struct http_server *srv, struct MHD_Connection *c, unsigned code,
                            const char *msg)
{
        const char *hname = NULL, *hvalue = NULL;
        if (code == 503)
                hname = "Retry-After", hvalue = "1";
        else if (code == 401)
                hname = "WWW-Authenticate", hvalue = "Bearer";
        return reply_json(srv, c, code, json_pack("{s:s}", "error", msg), hname, hvalue);
}

static enum MHD_Result not_allowed(struct http_server *srv, struct MHD_Connection *c,
                                   const char *allow)
{
        return reply_json(srv, c, 405, json_pack("{s:s}", "error", "method not allowed"), "Allow",
                          allow);
}

/* ---- helpers ---- */

static int parse_u64_strict(const char *s, size_t len, uint64_t *ret)
{
        uint64_t v = 0;
        if (len == 0 || len > 20)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                unsigned d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static char *u64_to(char *p, uint64_t v)
{
        char tmp[24];
        int n = 0;
        do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        while (n)
                *p++ = tmp[--n];
        return p;
}

static void rfc3339(uint64_t unix_ms, char *buf, size_t size)
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

static bool accepts(const char *accept, const char *type)
{
        return accept && strstr(accept, type);
}

/* ---- limits ---- */

static enum MHD_Result too_many(struct http_server *srv, struct MHD_Connection *c, const char *by,
                                const char *what, int64_t wait_ns)
{
        char after[24];
        int64_t secs = (wait_ns + 999999999) / 1000000000;
        snprintf(after, sizeof(after), "%" PRId64, secs > 0 ? secs : 1);
        json_t *j = json_pack("{s:s,s:s,s:s,s:I}", "error", "rate limit exceeded", "limit", what,
                              "by", by, "retry_after_s", (json_int_t)(secs > 0 ? secs : 1));
        return reply_json(srv, c, 429, j, "Retry-After", after);
}

static struct addr_slot *addr_slot(struct http_server *srv, const struct request *q, struct rate r,
                                   int64_t now)
{
        return r.per_s ? addr_slot_get(srv->addrs, q->conn->addr, now) : NULL;
}

/* A request's share of its address's and its token's request rates. */
static int limit_requests(struct http_server *srv, struct request *q, const char **by,
                          int64_t *wait)
{
        int64_t now = mono_ns();
        struct addr_slot *a = addr_slot(srv, q, srv->addr_requests, now);
        if (a && addr_take(a, &a->requests, srv->addr_requests, 1, now, wait) < 0) {
                atomic_fetch_add_explicit(&srv->limited_addr_requests, 1, memory_order_relaxed);
                *by = "address";
                return -1;
        }
        struct token *t = q->token;
        if (bucket_take(&t->requests_bucket, t->requests, 1, now, wait) < 0) {
                atomic_fetch_add_explicit(&t->limited_requests, 1, memory_order_relaxed);
                *by = "token";
                return -1;
        }
        return 0;
}

/* n IDs charged to the address's and the token's ID rates; q remembers the
 * address slot charged, for refund_ids() */
static int charge_ids(struct http_server *srv, struct request *q, uint64_t n, const char **by,
                      int64_t *wait)
{
        int64_t now = mono_ns();
        struct token *t = q->token;
        struct addr_slot *a = addr_slot(srv, q, srv->addr_ids, now);
        if (a && addr_take(a, &a->ids, srv->addr_ids, n, now, wait) < 0) {
                atomic_fetch_add_explicit(&srv->limited_addr_ids, 1, memory_order_relaxed);
                *by = "address";
                return -1;
        }
        if (bucket_take(&t->ids_bucket, t->ids, n, now, wait) < 0) {
                if (a)
                        bucket_refund(&a->ids, srv->addr_ids, n);
                atomic_fetch_add_explicit(&t->limited_ids, 1, memory_order_relaxed);
                *by = "token";
                return -1;
        }
        q->ids_slot = a;
        return 0;
}

/* n IDs charged by charge_ids() but not issued, given back to the very
 * buckets charged, even if the address slot changed hands since */
static void refund_ids(struct http_server *srv, struct request *q, uint64_t n)
{
        if (q->ids_slot)
                bucket_refund(&q->ids_slot->ids, srv->addr_ids, n);
        bucket_refund(&q->token->ids_bucket, q->token->ids, n);
}

/* ---- endpoints ---- */

enum format { F_JSON, F_TEXT, F_BINARY };

/* Which form a request asks for: ?format=int64|uuid7, else a format
 * parameter on the Accept media type ("Accept: text/plain; format=uuid7");
 * the 64-bit ID by default. */
static int id_form(const char *qformat, const char *accept, bool *ret_uuid)
{
        if (qformat) {
                if (strcmp(qformat, "uuid7") && strcmp(qformat, "int64"))
                        return -EINVAL;
                *ret_uuid = !strcmp(qformat, "uuid7");
                return 0;
        }
        /* media type parameter names are case-insensitive (RFC 9110 8.3.1) */
        *ret_uuid = accept && strcasestr(accept, "format=uuid7");
        return 0;
}

static enum MHD_Result none_issued(struct http_server *srv, struct MHD_Connection *c, int r)
{
        return fail(srv, c, r == -EAGAIN ? 503 : 500,
                    r == -EAGAIN ? "no ID can be issued now (no lease, or past the deadline)"
                                 : "the segment is damaged");
}

/* Out of memory after the IDs were charged: none reach the client, so the
 * charge is given back. */
static enum MHD_Result oom_refund(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, uint64_t count)
{
        refund_ids(srv, q, count);
        return fail(srv, c, 500, "out of memory");
}

/* count values as JSON strings in {"ids": [...]} or one a line, put(p,
 * items, i) writing the i-th (at most max_len characters) and returning the
 * end; on out of memory the IDs charged are given back */
static enum MHD_Result reply_list(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, enum format fmt, uint64_t count,
                                  size_t max_len, char *(*put)(char *, const void *, uint64_t),
                                  const void *items)
{
        char *out = malloc(count * (max_len + 3) + 16), *p = out;
        if (!out)
                return oom_refund(srv, c, q, count);
        if (fmt == F_JSON)
                p = stpcpy(p, "{\"ids\":[");
        for (uint64_t i = 0; i < count; i++) {
                if (fmt == F_JSON) {
                        if (i)
                                *p++ = ',';
                        *p++ = '"';
                        p = put(p, items, i);
                        *p++ = '"';
                } else {
                        p = put(p, items, i);
                        *p++ = '\n';
                }
        }
        if (fmt == F_JSON)
                p = stpcpy(p, "]}");
        return reply(srv, c, 200, fmt == F_JSON ? "application/json" : "text/plain; charset=utf-8",
                     out, (size_t)(p - out), NULL, NULL);
}

static char *put_uuid(char *p, const void *items, uint64_t i)
{
        return uuid_to_text(((const uint8_t(*)[16])items)[i], p);
}

static char *put_id(char *p, const void *items, uint64_t i)
{
        return u64_to(p, ((const uint64_t *)items)[i]);
}

/* count UUIDv7s, in chunks of at most 2^seq_bits (one atomic operation each),
 * as 36-character strings or 16 bytes each */
static enum MHD_Result take_uuids(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, uint64_t count, enum format fmt,
                                  uint64_t chunk)
{
        uint8_t(*u)[16] = malloc(count * 16);
        if (!u)
                return oom_refund(srv, c, q, count);
        for (uint64_t done = 0; done < count;) {
                size_t k = (size_t)(count - done < chunk ? count - done : chunk);
                int r = snowid_next_uuid7_batch(srv->ids, u + done, k);
                if (r < 0) {
                        free(u);
                        refund_ids(srv, q, count);
                        return none_issued(srv, c, r);
                }
                done += k;
        }
        atomic_fetch_add_explicit(&srv->ids_served, count, memory_order_relaxed);
        atomic_fetch_add_explicit(&q->token->n_ids, count, memory_order_relaxed);
        if (fmt == F_BINARY)
                return reply(srv, c, 200, "application/octet-stream", (char *)u, count * 16, NULL,
                             NULL);
        enum MHD_Result ret = reply_list(srv, c, q, fmt, count, UUID_TEXT_LEN, put_uuid, u);
        free(u);
        return ret;
}

static enum MHD_Result take_ids(struct http_server *srv, struct MHD_Connection *c,
                                struct request *q)
{
        const char *qcount = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "count");
        const char *qformat = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
        const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        uint64_t count = 1;
        bool uuid;

        if (q->too_large)
                return fail(srv, c, 413, "the body is larger than 4096 bytes");
        if (id_form(qformat, accept, &uuid) < 0)
                return fail(srv, c, 400, "format must be int64 or uuid7");
        if (qcount) {
                if (parse_u64_strict(qcount, strlen(qcount), &count) < 0)
                        return fail(srv, c, 400, "count must be a positive integer");
        } else if (q->len > 0) {
                if (!ctype || strncasecmp(ctype, "application/json", 16))
                        return fail(srv, c, 415, "the body must be application/json");
                json_error_t err;
                json_t *j = json_loadb(q->body, q->len, 0, &err), *v;
                if (!j)
                        return fail(srv, c, 400, "the body is not valid JSON");
                v = json_is_object(j) ? json_object_get(j, "count") : NULL;
                if (!json_is_object(j) || (v && !json_is_integer(v)) ||
                    (v && json_integer_value(v) < 0)) {
                        json_decref(j);
                        return fail(srv, c, 400, "count must be a positive integer");
                }
                count = v ? (uint64_t)json_integer_value(v) : 1;
                json_decref(j);
        }
        if (count == 0 || count > srv->cfg->http_max_count) {
                char msg[96];
                snprintf(msg, sizeof(msg), "count must be 1 to %u", srv->cfg->http_max_count);
                return fail(srv, c, 400, msg);
        }
        enum format fmt = F_JSON;
        if (accepts(accept, "application/octet-stream"))
                fmt = F_BINARY;
        else if (accepts(accept, "text/plain"))
                fmt = F_TEXT;
        else if (accept && *accept && !accepts(accept, "application/json") &&
                 !accepts(accept, "*/*") && !accepts(accept, "application/*"))
                return fail(srv, c, 406,
                            "IDs come as application/json, text/plain or "
                            "application/octet-stream");

        const char *by;
        int64_t wait;
        if (charge_ids(srv, q, count, &by, &wait) < 0)
                return too_many(srv, c, by, "ids", wait);
        snowid_layout l;
        int r = snowid_get_layout(srv->ids, &l);
        uint64_t chunk = r < 0 ? 1 : UINT64_C(1) << l.seq_bits;
        if (uuid && r < 0)
                refund_ids(srv, q, count);
        if (uuid)
                return r < 0 ? none_issued(srv, c, r) : take_uuids(srv, c, q, count, fmt, chunk);
        uint64_t *ids = malloc(count * sizeof(uint64_t));
        if (!ids)
                return oom_refund(srv, c, q, count);
        for (uint64_t done = 0; r >= 0 && done < count;) {
                size_t k = (size_t)(count - done < chunk ? count - done : chunk);
                r = snowid_next_batch(srv->ids, ids + done, k);
                done += k;
        }
        if (r < 0) {
                free(ids);
                refund_ids(srv, q, count);
                return none_issued(srv, c, r);
        }
        atomic_fetch_add_explicit(&srv->ids_served, count, memory_order_relaxed);
        atomic_fetch_add_explicit(&q->token->n_ids, count, memory_order_relaxed);

        if (fmt == F_BINARY) {
                for (uint64_t i = 0; i < count; i++)
                        ids[i] = htobe64(ids[i]);
                return reply(srv, c, 200, "application/octet-stream", (char *)ids,
                             count * sizeof(uint64_t), NULL, NULL);
        }
        enum MHD_Result ret = reply_list(srv, c, q, fmt, count, 20, put_id, ids);
        free(ids);
        return ret;
}

/* GET /v1/ids/{id}: a decimal 64-bit ID or a UUIDv7 (8-4-4-4-12 hex) */
static enum MHD_Result decode_id(struct http_server *srv, struct MHD_Connection *c, const char *s)
{
        uint64_t id = 0;
        uint8_t u[16];
        snowid_layout l;
        snowid_parts p;
        char when[48], idbuf[UUID_TEXT_LEN + 1];
        size_t len = strlen(s);
        bool uuid = uuid_text_like(s, len);
        if (uuid ? uuid_from_text(s, len, u) < 0 : parse_u64_strict(s, len, &id) < 0)
                return fail(srv, c, 400,
                            uuid ? "a UUID is 8-4-4-4-12 hex digits"
                                 : "an ID is a decimal number or a UUID");
        if (snowid_get_layout(srv->ids, &l) < 0)
                return fail(srv, c, 503, "no layout published yet");
        if (uuid ? snowid_decode_uuid7(&l, u, &p) < 0 : snowid_decode(&l, id, &p) < 0)
                return fail(srv, c, 400,
                            uuid ? "not a UUIDv7 of this layout" : "not an ID of this layout");
        rfc3339(p.unix_ms, when, sizeof(when));
        if (uuid)
                uuid_to_text(u, idbuf); /* lowercase, as snowidd hands them out */
        else
                *u64_to(idbuf, id) = 0;
        return reply_json(srv, c, 200,
                          json_pack("{s:s, s:s, s:I, s:I, s:I}", "id", idbuf, "time", when,
                                    "unix_ms", (json_int_t)p.unix_ms, "worker",
                                    (json_int_t)p.worker, "sequence", (json_int_t)p.sequence),
                          NULL, NULL);
}

static const char *state_name(int state)
{
        static const char *const names[] = {"starting",    "leased",  "no-lease", "etcd-restored",
                                            "layout-lost", "retired", "etcd-full"};
        return state >= 0 && state < 7 ? names[state] : "unknown";
}

static enum MHD_Result status(struct http_server *srv, struct MHD_Connection *c)
{
        snowid_status st = SNOWID_STATUS_INIT;
        char deadline[48];
        if (snowid_get_status(srv->ids, &st) < 0)
                return fail(srv, c, 500, "cannot read the segment");
        rfc3339(st.deadline_unix_ms, deadline, sizeof(deadline));
        rcu_read_lock();
        const struct http_snapshot *s = rcu_dereference(srv->snap);
        uint32_t from, to;
        settings_worker_range(srv->cfg, s->layout.worker_bits, &from, &to);
        /* the whole space is known only once the layout is */
        json_t *range =
                s->layout_ready || srv->cfg->range_given
                        ? json_pack("{s:I, s:I}", "from", (json_int_t)from, "to", (json_int_t)to)
                        : json_null();
        json_t *j = json_pack(
                "{s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:s, s:s, s:s, s:I, s:b, s:s, s:I, "
                "s:s, s:o}",
                "cluster", srv->cfg->cluster, "instance", srv->cfg->instance, "layout", "epoch_ms",
                (json_int_t)s->layout.epoch_ms, "time_bits", (json_int_t)s->layout.time_bits,
                "worker_bits", (json_int_t)s->layout.worker_bits, "seq_bits",
                (json_int_t)s->layout.seq_bits, "worker", (json_int_t)s->worker, "generation",
                (json_int_t)st.generation, "state", state_name(st.state), "lease", s->lease,
                "deadline", deadline, "headroom_ms", (json_int_t)st.headroom_ms, "etcd_reachable",
                s->etcd_reachable, "halted", s->halted ? s->halted : "no", "uptime_s",
                (json_int_t)((mono_ms() - s->mono_started_ms) / 1000), "region", srv->cfg->region,
                "worker_range", range);
        /* how etcd refuses us, if it does: class and its own words */
        /* the store behind the etcd_* fields (docs/postgres.md) */
        json_object_set_new(j, "store",
                            json_string(srv->cfg->store == STORE_POSTGRES ? "postgres" : "etcd"));
        /* the clock clients read (docs/clocks.md, "The TSC clock") */
        json_object_set_new(
                j, "tsc_clock",
                json_pack("{s:s, s:b, s:o, s:f, s:f, s:I}", "mode", s->tsc.mode, "on", s->tsc.on,
                          "why_off", s->tsc.on ? json_null() : json_string(s->tsc.why_off),
                          "last_error_us", (double)s->tsc.last_error_ns / 1000, "max_error_us",
                          (double)s->tsc.max_error_ns / 1000, "trips", (json_int_t)s->tsc.trips));
        json_object_set_new(j, "etcd_error",
                            s->etcd_error ? json_string(s->etcd_error) : json_null());
        json_object_set_new(j, "etcd_error_message",
                            s->etcd_error ? json_string(s->etcd_error_message) : json_null());
        rcu_read_unlock();
        return reply_json(srv, c, 200, j, NULL, NULL);
}

static enum MHD_Result healthz(struct http_server *srv, struct MHD_Connection *c)
{
        snowid_status st = SNOWID_STATUS_INIT;
        char why[256];
        if (snowid_get_status(srv->ids, &st) < 0)
                return fail(srv, c, 503, "cannot read the segment");
        rcu_read_lock();
        const char *halted = rcu_dereference(srv->snap)->halted;
        bool full = rcu_dereference(srv->snap)->etcd_full;
        const char *refused = rcu_dereference(srv->snap)->etcd_error;
        if (refused) /* the message lives in the snapshot: copied inside the section */
                snprintf(why, sizeof(why),
                         "%s: etcd refuses snowidd: %.160s (the log says "
                         "what to check)",
                         refused, rcu_dereference(srv->snap)->etcd_error_message);
        rcu_read_unlock();
        if (halted && strcmp(halted, "checking")) {
                /* a static string: safe past the read-side section */
                snprintf(
                        why, sizeof(why),
                        "%s: %s; run `snowid fence` against the cluster (IDs stop at the deadline)",
                        halted,
                        !strcmp(halted, "etcd-restored")
                                ? "etcd was restored from a snapshot or replaced"
                                : "the cluster's layout or fence key is gone");
                return fail(srv, c, 503, why);
        }
        if (full) {
                snprintf(why, sizeof(why),
                         "etcd-full: etcd's store is full (NOSPACE alarm) and it refuses every "
                         "write; compact, defragment and disarm it (IDs stop at the deadline, "
                         "%" PRId64 " ms from now)",
                         st.headroom_ms);
                return fail(srv, c, 503, why);
        }
        if (refused)
                return fail(srv, c, 503, why);
        if (st.generation & 1)
                return fail(srv, c, 503,
                            "no worker number published yet, or a switch is under way");
        if (st.headroom_ms < 1000) {
                snprintf(why, sizeof(why), "only %" PRId64 " ms of headroom before the deadline",
                         st.headroom_ms);
                return fail(srv, c, 503, why);
        }
        return reply_json(srv, c, 200,
                          json_pack("{s:s, s:I, s:I}", "status", "ok", "worker",
                                    (json_int_t)st.worker, "headroom_ms",
                                    (json_int_t)st.headroom_ms),
                          NULL, NULL);
}

static enum MHD_Result metrics(struct http_server *srv, struct MHD_Connection *c)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        snowid_status st = SNOWID_STATUS_INIT;
        if (!f)
                return fail(srv, c, 500, "out of memory");
        snowid_get_status(srv->ids, &st);
        fprintf(f,
                "# HELP snowid_http_ids_total IDs served over HTTP.\n"
                "# TYPE snowid_http_ids_total counter\nsnowid_http_ids_total %" PRIu64 "\n",
                atomic_load(&srv->ids_served));
        fprintf(f, "# HELP snowid_http_token_requests_total Requests by bearer token (its name; "
                   "none: no token).\n# TYPE snowid_http_token_requests_total counter\n");
        for (unsigned i = 0; i <= srv->cfg->n_http_tokens; i++) {
                const struct token *t =
                        i < srv->cfg->n_http_tokens ? &srv->cfg->http_tokens[i] : &srv->anonymous;
                fprintf(f, "snowid_http_token_requests_total{token=\"%s\"} %" PRIu64 "\n", t->name,
                        atomic_load_explicit(&t->n_requests, memory_order_relaxed));
        }
        fprintf(f, "# HELP snowid_http_token_ids_total IDs served, by bearer token.\n"
                   "# TYPE snowid_http_token_ids_total counter\n");
        for (unsigned i = 0; i <= srv->cfg->n_http_tokens; i++) {
                const struct token *t =
                        i < srv->cfg->n_http_tokens ? &srv->cfg->http_tokens[i] : &srv->anonymous;
                fprintf(f, "snowid_http_token_ids_total{token=\"%s\"} %" PRIu64 "\n", t->name,
                        atomic_load_explicit(&t->n_ids, memory_order_relaxed));
        }
        fprintf(f, "# HELP snowid_http_limited_total Requests refused (429) by a rate limit: "
                   "a token's or an address's, of IDs or of requests.\n"
                   "# TYPE snowid_http_limited_total counter\n");
        for (unsigned i = 0; i < srv->cfg->n_http_tokens; i++) {
                const struct token *t = &srv->cfg->http_tokens[i];
                fprintf(f,
                        "snowid_http_limited_total{by=\"token\",token=\"%s\",limit=\"ids\"} "
                        "%" PRIu64
                        "\nsnowid_http_limited_total{by=\"token\",token=\"%s\",limit=\"requests\"} "
                        "%" PRIu64 "\n",
                        t->name, atomic_load_explicit(&t->limited_ids, memory_order_relaxed),
                        t->name, atomic_load_explicit(&t->limited_requests, memory_order_relaxed));
        }
        fprintf(f,
                "snowid_http_limited_total{by=\"address\",limit=\"ids\"} %" PRIu64 "\n"
                "snowid_http_limited_total{by=\"address\",limit=\"requests\"} %" PRIu64 "\n"
                "# HELP snowid_http_connections Open HTTP connections.\n"
                "# TYPE snowid_http_connections gauge\nsnowid_http_connections %" PRIu64 "\n"
                "# HELP snowid_http_read_deadline_cuts_total Connections shut because a request "
                "was not read whole within http-read-timeout.\n"
                "# TYPE snowid_http_read_deadline_cuts_total counter\n"
                "snowid_http_read_deadline_cuts_total %" PRIu64 "\n",
                atomic_load_explicit(&srv->limited_addr_ids, memory_order_relaxed),
                atomic_load_explicit(&srv->limited_addr_requests, memory_order_relaxed),
                atomic_load_explicit(&srv->conns_open, memory_order_relaxed),
                atomic_load_explicit(&srv->deadline_cuts, memory_order_relaxed));
        fprintf(f, "# HELP snowid_http_requests_total HTTP requests answered, by status code.\n"
                   "# TYPE snowid_http_requests_total counter\n");
        for (unsigned code = 100; code < CODES; code++) {
                uint64_t n = atomic_load_explicit(&srv->by_code[code], memory_order_relaxed);
                if (n)
                        fprintf(f, "snowid_http_requests_total{code=\"%u\"} %" PRIu64 "\n", code,
                                n);
        }
        rcu_read_lock();
        const struct http_snapshot *s = rcu_dereference(srv->snap);
        fprintf(f,
                "# HELP snowid_lease_renewals_total Mark extensions acknowledged by etcd.\n"
                "# TYPE snowid_lease_renewals_total counter\nsnowid_lease_renewals_total %" PRIu64
                "\n# HELP snowid_lease_renewal_failures_total Keepalives or extensions that "
                "failed.\n"
                "# TYPE snowid_lease_renewal_failures_total counter\n"
                "snowid_lease_renewal_failures_total %" PRIu64 "\n"
                "# HELP snowid_leases_lost_total Worker numbers lost.\n"
                "# TYPE snowid_leases_lost_total counter\nsnowid_leases_lost_total %" PRIu64 "\n"
                "# HELP snowid_worker_switches_total Segment switches to a new worker number.\n"
                "# TYPE snowid_worker_switches_total counter\nsnowid_worker_switches_total %" PRIu64
                "\n# HELP snowid_clock_steps_total Wall clock steps seen, by direction.\n"
                "# TYPE snowid_clock_steps_total counter\n"
                "snowid_clock_steps_total{direction=\"forward\"} %" PRIu64 "\n"
                "snowid_clock_steps_total{direction=\"back\"} %" PRIu64 "\n"
                /* not snowid_counter_...: a name that holds a metric type fails
                 * promtool check metrics (tests/integration/test_http.py) */
                "# HELP snowid_backstop_switches_total Switches to a fresh worker number because "
                "the live counter ran ahead of ID time.\n"
                "# TYPE snowid_backstop_switches_total counter\n"
                "snowid_backstop_switches_total %" PRIu64 "\n"
                "# HELP snowid_clock_offset_seconds ID time minus CLOCK_MONOTONIC, less the "
                "epoch.\n"
                "# TYPE snowid_clock_offset_seconds gauge\nsnowid_clock_offset_seconds %.6f\n"
                "# HELP snowid_etcd_reachable Whether the last etcd request got an answer.\n"
                "# TYPE snowid_etcd_reachable gauge\nsnowid_etcd_reachable %d\n"
                "# HELP snowid_worker The worker number held, -1 if none.\n"
                "# TYPE snowid_worker gauge\nsnowid_worker %" PRId32 "\n",
                s->holder.renewals, s->holder.renewal_failures, s->holder.leases_lost,
                s->holder.switches, s->holder.steps_forward, s->holder.steps_back,
                s->holder.backstops, (double)s->offset_ns / 1e9, s->etcd_reachable, s->worker);
        fprintf(f,
                "# HELP snowid_tsc_clock_on Whether clients read time from the TSC clock that "
                "snowidd calibrates (else the vDSO).\n# TYPE snowid_tsc_clock_on gauge\n"
                "snowid_tsc_clock_on %d\n"
                "# HELP snowid_tsc_clock_error_seconds The TSC clock minus CLOCK_MONOTONIC at its "
                "last check while on.\n# TYPE snowid_tsc_clock_error_seconds gauge\n"
                "snowid_tsc_clock_error_seconds %.9f\n"
                "# HELP snowid_tsc_clock_trips_total Times the TSC clock went off because its "
                "error passed tsc-max-error.\n# TYPE snowid_tsc_clock_trips_total counter\n"
                "snowid_tsc_clock_trips_total %" PRIu64 "\n",
                s->tsc.on, (double)s->tsc.last_error_ns / 1e9, s->tsc.trips);
        fprintf(f,
                "# HELP snowid_cluster_halted Whether the daemon extends nothing on the cluster, "
                "and why (run `snowid fence`).\n# TYPE snowid_cluster_halted gauge\n");
        static const char *const reasons[] = {"etcd-restored", "layout-lost", "fence-lost"};
        for (size_t i = 0; i < 3; i++)
                fprintf(f, "snowid_cluster_halted{reason=\"%s\"} %d\n", reasons[i],
                        s->halted && !strcmp(s->halted, reasons[i]));
        fprintf(f,
                "# HELP snowid_marks_raised_total Marks found absent or low and written back.\n"
                "# TYPE snowid_marks_raised_total counter\nsnowid_marks_raised_total %" PRIu64 "\n"
                "# HELP snowid_fences_adopted_total New fences (snowid fence) adopted.\n"
                "# TYPE snowid_fences_adopted_total counter\nsnowid_fences_adopted_total %" PRIu64
                "\n# HELP snowid_etcd_restores_seen_total Times etcd's history went back.\n"
                "# TYPE snowid_etcd_restores_seen_total counter\n"
                "snowid_etcd_restores_seen_total %" PRIu64 "\n",
                s->holder.marks_raised, s->holder.fences_adopted, s->holder.restores_seen);
        fprintf(f,
                "# HELP snowid_segments_replaced_total Segments replaced because their counters "
                "were far ahead (written by a client).\n"
                "# TYPE snowid_segments_replaced_total counter\n"
                "snowid_segments_replaced_total %" PRIu64 "\n"
                "# HELP snowid_handshakes_total Handshakes on the socket, by result.\n"
                "# TYPE snowid_handshakes_total counter\n"
                "snowid_handshakes_total{result=\"given\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"refused\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"malformed\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"timeout\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"evicted\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"busy\"} %" PRIu64 "\n",
                s->holder.segments_replaced, s->handshakes.given, s->handshakes.refused,
                s->handshakes.bad, s->handshakes.timeouts, s->handshakes.evicted,
                s->handshakes.busy);
        fprintf(f,
                "# HELP snowid_etcd_full Whether etcd refuses writes because its store is full "
                "(NOSPACE alarm).\n# TYPE snowid_etcd_full gauge\nsnowid_etcd_full %d\n"
                "# HELP snowid_etcd_full_total Times etcd was found full.\n"
                "# TYPE snowid_etcd_full_total counter\nsnowid_etcd_full_total %" PRIu64 "\n",
                s->etcd_full, s->holder.store_full_seen);
        static const char *const le[] = {"0.001", "0.002", "0.005", "0.01",
                                         "0.05",  "0.1",   "1",     "+Inf"};
        fprintf(f, "# HELP snowid_etcd_request_duration_seconds etcd request latency.\n"
                   "# TYPE snowid_etcd_request_duration_seconds histogram\n");
        for (size_t i = 0; i < 8; i++)
                fprintf(f, "snowid_etcd_request_duration_seconds_bucket{le=\"%s\"} %" PRIu64 "\n",
                        le[i], s->etcd.latency_le[i]);
        fprintf(f,
                "snowid_etcd_request_duration_seconds_sum %.6f\n"
                "snowid_etcd_request_duration_seconds_count %" PRIu64 "\n",
                s->etcd.latency_sum_s, s->etcd.latency_le[7]);
        rcu_read_unlock();
        fprintf(f,
                "# HELP snowid_headroom_seconds Time left before the published deadline.\n"
                "# TYPE snowid_headroom_seconds gauge\nsnowid_headroom_seconds %.3f\n",
                (double)st.headroom_ms / 1000);
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        if (snowid_get_host_stats(srv->ids, &hs) == 0)
                fprintf(f,
                        "# HELP snowid_host_ids_issued_total Counter values taken on this host "
                        "(all processes).\n# TYPE snowid_host_ids_issued_total counter\n"
                        "snowid_host_ids_issued_total %" PRIu64 "\n"
                        "# HELP snowid_host_waits_total Calls that waited, by reason.\n"
                        "# TYPE snowid_host_waits_total counter\n"
                        "snowid_host_waits_total{reason=\"ceiling\"} %" PRIu64 "\n"
                        "snowid_host_waits_total{reason=\"deadline\"} %" PRIu64 "\n"
                        "snowid_host_waits_total{reason=\"switch\"} %" PRIu64 "\n"
                        "# HELP snowid_host_eagain_total Calls that gave up with EAGAIN.\n"
                        "# TYPE snowid_host_eagain_total counter\nsnowid_host_eagain_total %" PRIu64
                        "\n",
                        hs.issued, hs.waits_ceiling, hs.waits_deadline, hs.waits_switch, hs.eagain);
        fclose(f);
        return reply(srv, c, 200, "text/plain; version=0.0.4", buf, len, NULL, NULL);
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
                        if (limit_requests(srv, q, &by, &wait) < 0)
                                return too_many(srv, c, by, "requests", wait);
                        return fail(srv, c, 401, "a valid bearer token is required");
                }
                q->token = t;
        }
        if (limit_requests(srv, q, &by, &wait) < 0)
                return too_many(srv, c, by, "requests", wait);
        atomic_fetch_add_explicit(&q->token->n_requests, 1, memory_order_relaxed);
        if (!strcmp(url, "/v1/ids"))
                return !strcmp(method, "POST") ? take_ids(srv, c, q) : not_allowed(srv, c, "POST");
        if (!strncmp(url, "/v1/ids/", 8))
                return get ? decode_id(srv, c, url + 8) : not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/v1/status"))
                return get ? status(srv, c) : not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/healthz"))
                return get ? healthz(srv, c) : not_allowed(srv, c, "GET, HEAD");
        if (!strcmp(url, "/metrics"))
                return get ? metrics(srv, c) : not_allowed(srv, c, "GET, HEAD");
        return fail(srv, c, 404, "no such endpoint");
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
                const union MHD_ConnectionInfo *ci =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
                struct conn *k = ci ? ci->socket_context : NULL;
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
        atomic_store_explicit(&q->conn->deadline, 0, memory_order_relaxed);
        return route(srv, c, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct http_server *srv = cls;
        (void)toe;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *k = ci ? ci->socket_context : NULL;
        /* the next request on this connection: read whole by then */
        if (k)
                atomic_store_explicit(&k->deadline, mono_ns() + srv->read_timeout_ns,
                                      memory_order_relaxed);
        free(*req_cls);
        *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
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
                atomic_init(&k->deadline, mono_ns() + srv->read_timeout_ns);
                pthread_mutex_lock(&srv->conns_lock);
                /* over its address's share (an IPv6 /64's): shut at once,
                 * and closed by MHD as any other */
                k->counted = conn_counts_add(&srv->conn_counts, k->addr,
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
                atomic_fetch_add_explicit(&srv->conns_open, 1, memory_order_relaxed);
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
        atomic_fetch_sub_explicit(&srv->conns_open, 1, memory_order_relaxed);
}

/* A connection from an address (an IPv4 address, an IPv6 /64) that has its
 * share open already is turned away before MHD sets it up; on_connection()
 * counts, exactly. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *sa, socklen_t len)
{
        struct http_server *srv = cls;
        (void)len;
        pthread_mutex_lock(&srv->conns_lock);
        unsigned n = conn_counts_get(&srv->conn_counts, addr_key(sa));
        pthread_mutex_unlock(&srv->conns_lock);
        return n < srv->cfg->http_connections_per_address ? MHD_YES : MHD_NO;
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
                int64_t now = mono_ns();
                for (struct conn *k = srv->conns.next; k != &srv->conns; k = k->next) {
                        int64_t d = atomic_load_explicit(&k->deadline, memory_order_relaxed);
                        if (d && d < now && !k->cut && k->fd >= 0) {
                                shutdown(k->fd, SHUT_RDWR);
                                k->cut = true;
                                atomic_fetch_add_explicit(&srv->deadline_cuts, 1,
                                                          memory_order_relaxed);
                        }
                }
        }
        pthread_mutex_unlock(&srv->conns_lock);
        return NULL;
}

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
        if (srv->sweeper_started) {
                pthread_mutex_lock(&srv->conns_lock);
                srv->stopping = true;
                pthread_cond_signal(&srv->stop_cond);
                pthread_mutex_unlock(&srv->conns_lock);
                pthread_join(srv->sweeper, NULL);
        }
        pthread_cond_destroy(&srv->stop_cond);
        pthread_mutex_destroy(&srv->conns_lock);
        if (srv->snap)
                free(caa_container_of(srv->snap, struct snapshot_box, snap));
        snowid_close(srv->ids);
        free(srv->addrs);
        conn_counts_free(&srv->conn_counts);
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
        r = srv->addrs ? addr_table_init(srv->addrs) : -ENOMEM;
        if (r >= 0)
                r = conn_counts_init(&srv->conn_counts, cfg->http_connections);
        if (r < 0) {
                server_free(srv);
                return r;
        }
        char path[SHM_SOCK_PATH_MAX];
        int ctl = dup(pub->ctl_ro_fd), ctr = dup(pub->ctr_fd);
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
        s->mono_started_ms = mono_ms();
        rcu_assign_pointer(srv->snap, s);
        r = -pthread_create(&srv->sweeper, NULL, sweep, srv);
        if (r < 0) {
                server_free(srv);
                return r;
        }
        srv->sweeper_started = true;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO |
                         (((struct sockaddr *)sa)->sa_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        srv->mhd = MHD_start_daemon(
                flags, 0, accept_policy, srv, on_request, srv, MHD_OPTION_SOCK_ADDR, sa,
                MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->http_connections,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->http_connections_per_address,
                /* idle (and a stalled reader of an answer); the read deadline
                 * is the sweeper's */
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->http_read_timeout_s,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_NOTIFY_COMPLETED,
                on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                MHD_OPTION_END);
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
