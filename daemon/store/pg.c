/* SPDX-License-Identifier: MIT */
/*
 * The store on PostgreSQL, in the daemon's loop: one connection, made with
 * PQconnectStartParams()/PQconnectPoll() and then set non-blocking, watched
 * on PQsocket() in the direction libpq asks.  Calls wait in a queue and go
 * one at a time as SELECT snowid.call($1, $2::jsonb); the answer, an HTTP-like
 * status and an etcd-shaped body, is read as etcd's gateway answers are
 * (etcd_reply_parse()), so the holder cannot tell the stores apart.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "store-refusal.h"
#include "log.h"
#include "pg.h"

#define BACKOFF_MIN_MS 100 /* reconnecting: the first wait, doubled up to the last */
#define BACKOFF_MAX_MS 1000
#define SETUP_MIN_MS 10000     /* a new connection's setup may take this long, at least */
#define ANSWER_MAX (16u << 20) /* an answer larger than this is not one of ours */

static const char call_sql[] = "SELECT snowid.call($1, $2::jsonb)::text";

static const char checks_sql[] =
        "SELECT current_setting('synchronous_commit'), pg_is_in_recovery(), "
        "current_setting('synchronous_standby_names'), "
        "(SELECT count(*) FROM pg_stat_replication)";

struct request {
        struct pg *pg;
        char *path;
        char *body;
        etcd_cb cb;
        void *userdata;
        uint64_t tag;
        uint64_t queued;     /* CLOCK_MONOTONIC usec */
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
        S_SCHEMA,   /* daemon/store/postgres.sql: idempotent */
        S_WARM,     /* one harmless call: the server compiles snowid.call's functions */
        S_TIMEOUTS, /* then every statement bounded by etcd-timeout */
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
        uint64_t next_try;              /* CLOCK_MONOTONIC usec: no attempt before */
        unsigned backoff_ms;            /* 0: the last connection was made */
        bool query_pending;             /* a query's results are still to come */
        bool flushing;                  /* libpq holds bytes not yet sent */
        PGresult *result;               /* what the query in flight got so far */
        struct request *head, *tail;    /* oldest first */
        struct request *current;        /* its query is on the connection */
        unsigned in_flight;
        struct etcd_stats stats;
        struct etcd_history hist; /* of kv and lease answers */
        /* a refusal that needs an operator, and the wait it imposes */
        struct hold hold; /* a refusal in force */
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
        char endpoint[256];
};

static uint64_t now_usec(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* The first line of msg, printable, into buf. */
static const char *one_line(char *buf, size_t size, const char *msg)
{
        size_t n = 0;
        if (!msg)
                msg = "";
        /* libpq's "connection to server at ... failed: FATAL:  ..." keeps
         * the server's words after the prefix: said as they are */
        while (*msg == ' ' || *msg == '\n')
                msg++;
        for (; msg[n] && msg[n] != '\n' && n < size - 1; n++) {
                unsigned char c = (unsigned char)msg[n];
                buf[n] = c < 0x20 || c > 0x7e ? '?' : (char)c;
        }
        buf[n] = 0;
        while (n && buf[n - 1] == ' ')
                buf[--n] = 0;
        return buf;
}

/* ---- the pure parts ---- */

enum etcd_err pg_sqlstate_err(const char *sqlstate)
{
        if (!sqlstate)
                return ETCD_ERR_NONE;
        if (!strcmp(sqlstate, "28P01") || !strcmp(sqlstate, "28000"))
                return ETCD_ERR_AUTH;
        if (!strcmp(sqlstate, "42501"))
                return ETCD_ERR_PERMISSION;
        return ETCD_ERR_NONE;
}

static bool has_any(const char *msg, const char *const *needles)
{
        for (; *needles; needles++)
                if (strstr(msg, *needles))
                        return true;
        return false;
}

enum etcd_err pg_connect_err(const char *msg)
{
        /* our certificate or key: unusable here, or refused by the server */
        static const char *const cert[] = {
                "certificate authentication failed",
                "connection requires a valid client certificate",
                "alert certificate required",
                "alert bad certificate",
                "alert unknown ca",
                "alert certificate unknown",
                "alert certificate expired",
                "alert certificate revoked",
                "alert unsupported certificate",
                "could not open certificate file",
                "could not read certificate file",
                "could not load private key file",
                "could not open private key file",
                "could not load SSL engine",
                "certificate present, but not private key",
                "has group or world access",
                "certificate does not match private key",
                NULL,
        };
        /* the server's certificate failed verification, or TLS was wanted
         * and the server has none */
        static const char *const tls[] = {
                "certificate verify failed",
                "does not match host name",
                "server certificate for",
                "root certificate file",
                "locate root certificate",
                "SSL certificate revocation list",
                "server does not support SSL, but SSL was required",
                "tlsv1 alert",
                NULL,
        };
        static const char *const auth[] = {
                "password authentication failed",
                "no password supplied",
                "pg_hba.conf rejects connection",
                "no pg_hba.conf entry",
                "authentication failed for user",
                "channel binding required",
                "server requested a password",
                "SCRAM authentication",
                NULL,
        };
        static const char *const permission[] = {
                "permission denied for database",
                "does not have CONNECT privilege",
                NULL,
        };
        if (!msg)
                return ETCD_ERR_NONE;
        if (has_any(msg, cert))
                return ETCD_ERR_CERT;
        if (has_any(msg, tls))
                return ETCD_ERR_TLS;
        if (has_any(msg, auth))
                return ETCD_ERR_AUTH;
        if (strstr(msg, "role \"") && strstr(msg, "\" does not exist"))
                return ETCD_ERR_AUTH;
        if (has_any(msg, permission))
                return ETCD_ERR_PERMISSION;
        return ETCD_ERR_NONE;
}

void pg_error_reply(struct etcd_reply *r, const char *sqlstate, const char *message)
{
        r->answered = true;
        r->json = NULL;
        r->err = pg_sqlstate_err(sqlstate);
        r->nospace = sqlstate && !strcmp(sqlstate, "53100");
        r->http = r->err == ETCD_ERR_AUTH         ? 401
                  : r->err == ETCD_ERR_PERMISSION ? 403
                  : r->nospace                    ? 429 /* as etcd's gateway: RESOURCE_EXHAUSTED */
                                                  : 500;
        one_line(r->text, sizeof(r->text), message);
        r->error = r->text[0] ? r->text : "PostgreSQL reported an error";
}

void pg_answer_parse(struct etcd_reply *r, const char *text, size_t len)
{
        json_t *a = text ? json_loadb(text, len, 0, NULL) : NULL;
        json_t *status = json_object_get(a, "status"), *body = json_object_get(a, "body");
        if (!json_is_object(a) || !json_is_integer(status) || json_integer_value(status) < 100 ||
            json_integer_value(status) > 599) {
                json_decref(a);
                r->answered = true;
                r->http = 500;
                r->json = NULL;
                r->error = "snowid.call() answered something other than {\"status\", \"body\"}";
                return;
        }
        char *dump = body && !json_is_null(body) ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)
                                                 : NULL;
        etcd_reply_parse(r, (long)json_integer_value(status), dump, dump ? strlen(dump) : 0);
        free(dump);
        json_decref(a);
}

/* The server, as said in logs and problems: host:port or the socket. */
static void endpoint_format(char *buf, size_t size, const char *host, const char *port)
{
        if (!port || !*port)
                port = "5432";
        if (!host || !*host)
                snprintf(buf, size, "local socket, port %s", port);
        else if (host[0] == '/' || host[0] == '@')
                snprintf(buf, size, "%s/.s.PGSQL.%s", host, port);
        else if (strchr(host, ':'))
                snprintf(buf, size, "[%s]:%s", host, port);
        else
                snprintf(buf, size, "%s:%s", host, port);
}

static void endpoint_from_conninfo(struct pg *p)
{
        const char *host = getenv("PGHOST"), *port = getenv("PGPORT");
        PQconninfoOption *opts = PQconninfoParse(p->cfg->postgres, NULL);
        for (PQconninfoOption *o = opts; o && o->keyword; o++) {
                if (!o->val || !*o->val)
                        continue;
                if (!strcmp(o->keyword, "host") || (!strcmp(o->keyword, "hostaddr") && !host))
                        host = o->val;
                else if (!strcmp(o->keyword, "port"))
                        port = o->val;
        }
        endpoint_format(p->endpoint, sizeof(p->endpoint), host, port);
        PQconninfoFree(opts);
}

/* ---- counters and history ---- */

static void account(struct pg *p, uint64_t usec, bool ok)
{
        static const uint64_t bounds_ms[] = {1, 2, 5, 10, 50, 100, 1000};
        p->stats.requests++;
        p->stats.failures += !ok;
        p->stats.latency_sum_s += (double)usec / 1e6;
        for (size_t i = 0; i < 7; i++)
                if (usec <= bounds_ms[i] * 1000)
                        p->stats.latency_le[i]++;
        p->stats.latency_le[7]++;
}

void pg_history_reset(struct pg *p)
{
        p->hist = (struct etcd_history){.gen = p->hist.gen + 1};
}

void pg_expect_cluster(struct pg *p, uint64_t cluster_id)
{
        p->hist.cluster_id = cluster_id;
}

/* ---- the queue ---- */

static void kick(struct pg *p)
{
        sd_event_source_set_enabled(p->kick, SD_EVENT_ONESHOT);
}

static void unlink_request(struct pg *p, struct request *q)
{
        if (q->prev)
                q->prev->next = q->next;
        else if (p->head == q)
                p->head = q->next;
        if (q->next)
                q->next->prev = q->prev;
        else if (p->tail == q)
                p->tail = q->prev;
        q->prev = q->next = NULL;
        if (p->current == q)
                p->current = NULL;
}

static void request_free(struct request *q)
{
        sd_event_source_disable_unref(q->deadline);
        free(q->path);
        free(q->body);
        free(q);
}

/* ---- refusals: a setting is wrong, so retrying soon cannot help ---- */

static int on_hold_over(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        kick(userdata);
        return 0;
}

/* Whether q waits: a refusal holds back every call it concerns (all of
 * them, except for permissions: lease calls are not checked against roles). */
static bool held(const struct pg *p, const struct request *q)
{
        return hold_applies(&p->hold, q->is_kv);
}

static void problem_seen(struct pg *p, enum etcd_err err, const char *message)
{
        hold_seen(&p->hold, err, message, p->endpoint, 1, p->event, "pg-hold", on_hold_over, p);
}

/* A call of the kind the refusal concerned went through. */
static void problem_cleared(struct pg *p, const struct request *q)
{
        if (hold_cleared(&p->hold, q->is_kv))
                kick(p);
}

void pg_on_problem(struct pg *p, void (*cb)(void *userdata, const struct etcd_problem *p),
                   void *userdata)
{
        p->hold.cb = cb;
        p->hold.cb_userdata = userdata;
}

/* ---- answers ---- */

/* Hands q its reply and frees it; q is off the queue already. */
static void finish(struct pg *p, struct request *q, struct etcd_reply *r)
{
        r->tag = q->tag;
        r->usec = now_usec() - q->queued;
        r->kv = q->is_kv;
        int64_t max_rev = p->hist.max_rev;
        /* every call runs under the one row lock, leases too: one sent
         * after an answer at revision R is answered at R or later */
        if ((q->is_kv || !strncmp(q->path, "/v3/lease/", 10)) && etcd_ok(r))
                etcd_history_note(&p->hist, q->rev_at_send, q->gen_at_send, true, r);
        /* a full disk lasts until a write goes through (the revision moved);
         * meanwhile the alarm call says NOSPACE, as etcd's would */
        if (r->nospace)
                p->disk_full = true;
        else if (q->is_kv && etcd_ok(r) && !r->went_back && r->revision > max_rev)
                p->disk_full = false;
        if (p->disk_full && etcd_ok(r) && !strcmp(q->path, "/v3/maintenance/alarm")) {
                json_decref(r->json);
                r->json = json_pack("{s:[{s:s, s:s}]}", "alarms", "alarm", "NOSPACE", "memberID",
                                    p->endpoint);
        }
        account(p, r->usec, etcd_ok(r));
        p->in_flight--;
        if (r->err != ETCD_ERR_NONE && r->answered)
                problem_seen(p, r->err, r->error);
        else if (etcd_ok(r))
                problem_cleared(p, q);
        q->cb(q->userdata, r);
        json_decref(r->json);
        request_free(q);
}

/* Fails q, unanswered. */
static void fail_request(struct pg *p, struct request *q, enum etcd_err err, const char *why)
{
        struct etcd_reply r = {.err = err};
        one_line(r.text, sizeof(r.text), why);
        r.error = r.text;
        unlink_request(p, q);
        finish(p, q, &r);
}

/* Fails every call queued now (not those their callbacks make). */
static void fail_all(struct pg *p, enum etcd_err err, const char *why)
{
        struct request *list = p->head;
        p->head = p->tail = p->current = NULL;
        while (list) {
                struct request *q = list;
                list = q->next;
                q->prev = q->next = NULL;
                struct etcd_reply r = {.err = err};
                one_line(r.text, sizeof(r.text), why);
                r.error = r.text;
                finish(p, q, &r);
        }
}

/* ---- the connection ---- */

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static void close_conn(struct pg *p)
{
        p->io = sd_event_source_disable_unref(p->io);
        if (p->connect_timer)
                sd_event_source_set_enabled(p->connect_timer, SD_EVENT_OFF);
        PQclear(p->result);
        p->result = NULL;
        if (p->conn)
                PQfinish(p->conn); /* closes the socket; sends Terminate, which does not block */
        p->conn = NULL;
        p->state = C_DOWN;
        p->query_pending = false;
        p->flushing = false;
        p->current = NULL;
}

/* Waits for the socket to be ready in the direction libpq asks.  The
 * socket can change while connecting (another address, SSL refused): the
 * source is made anew each time. */
static int watch(struct pg *p, uint32_t events, bool anew)
{
        int fd = PQsocket(p->conn);
        if (fd < 0)
                return -EBADF;
        if (p->io && !anew)
                return sd_event_source_set_io_events(p->io, events);
        p->io = sd_event_source_disable_unref(p->io);
        int r = sd_event_add_io(p->event, &p->io, fd, events, on_io, p);
        if (r >= 0)
                sd_event_source_set_description(p->io, "pg-io");
        return r;
}

/* After a failure: the next attempt waits 100 ms, doubling to 1 s, jittered
 * so that a fleet does not come back at the same moment.  No longer: IDs
 * flow again within about a second of the server's return, as with etcd,
 * and an attempt a second per host costs a server little. */
static void back_off(struct pg *p)
{
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (p->backoff_ms > BACKOFF_MAX_MS)
                p->backoff_ms = BACKOFF_MAX_MS;
        unsigned rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
                rnd = (unsigned)now_usec();
        unsigned wait = p->backoff_ms / 2 + rnd % (p->backoff_ms / 2 + 1);
        p->next_try = now_usec() + (uint64_t)wait * 1000;
}

/* An established connection broke, or its query ran out of time: the
 * calls on it and behind it fail unanswered. */
static void conn_broken(struct pg *p, const char *why)
{
        char msg[256];
        one_line(msg, sizeof(msg), why);
        if (!p->said_down)
                log_info("PostgreSQL at %s: connection closed: %s", p->endpoint, msg);
        p->said_down = true;
        close_conn(p);
        back_off(p);
        fail_all(p, ETCD_ERR_NONE, msg);
        kick(p); /* what the callbacks asked for */
}

/* A connection could not be made or set up.  Calls keep waiting until
 * their deadlines, unless the server refused us: then they fail with the
 * refusal, and no attempt is made until the hold is over. */
static void connect_failed(struct pg *p, enum etcd_err err, const char *why)
{
        char msg[256];
        one_line(msg, sizeof(msg), why);
        if (!p->said_down)
                log_info("PostgreSQL at %s: cannot connect: %s", p->endpoint, msg);
        else
                log_debug("PostgreSQL at %s: cannot connect: %s", p->endpoint, msg);
        p->said_down = true;
        close_conn(p);
        back_off(p);
        if (err != ETCD_ERR_NONE) {
                problem_seen(p, err, msg);
                if (p->next_try < p->hold.until)
                        p->next_try = p->hold.until;
                fail_all(p, err, msg);
        }
        kick(p);
}

static void setup_send(struct pg *p);
static unsigned setup_ms(const struct pg *p);
static void flush(struct pg *p);

static int on_connect_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct pg *p = userdata;
        char why[128];
        (void)s;
        (void)usec;
        if (p->state == C_SETUP)
                snprintf(why, sizeof(why), "the connection's setup took more than %u ms",
                         setup_ms(p));
        else
                snprintf(why, sizeof(why), "no connection within %u ms", p->cfg->etcd_timeout_ms);
        connect_failed(p, ETCD_ERR_NONE, why);
        return 0;
}

static void connect_poll(struct pg *p)
{
        switch (PQconnectPoll(p->conn)) {
        case PGRES_POLLING_READING:
                if (watch(p, EPOLLIN, true) < 0)
                        connect_failed(p, ETCD_ERR_NONE, "cannot watch the socket");
                return;
        case PGRES_POLLING_WRITING:
                if (watch(p, EPOLLOUT, true) < 0)
                        connect_failed(p, ETCD_ERR_NONE, "cannot watch the socket");
                return;
        case PGRES_POLLING_OK:
                break;
        default: {
                const char *msg = PQerrorMessage(p->conn);
                connect_failed(p, pg_connect_err(msg), msg);
                return;
        }
        }
        if (PQsetnonblocking(p->conn, 1) < 0) {
                connect_failed(p, ETCD_ERR_NONE, PQerrorMessage(p->conn));
                return;
        }
        endpoint_format(p->endpoint, sizeof(p->endpoint), PQhost(p->conn), PQport(p->conn));
        p->state = C_SETUP;
        p->step = S_SETTINGS;
        /* connected: the setup gets a budget of its own, which a busy server
         * needs the first time a backend runs snowid.call (it compiles the
         * functions); a connection closed at every 2 s deadline would pay
         * that again and again and never serve */
        sd_event_source_set_time(p->connect_timer, now_usec() + (uint64_t)setup_ms(p) * 1000);
        sd_event_source_set_enabled(p->connect_timer, SD_EVENT_ONESHOT);
        setup_send(p);
}

/* The server's notices (and its goodbye to an idle connection), which
 * libpq would print on stderr: the daemon's log, for debugging. */
static void on_notice(void *userdata, const char *message)
{
        struct pg *p = userdata;
        char line[256];
        one_line(line, sizeof(line), message);
        /* a commit whose wait for a synchronous standby was cancelled is
         * only local: a failover can lose it, so it is not an answer */
        if (p->query_pending && strstr(message, "might not have been replicated")) {
                p->unreplicated = true;
                log_warning("PostgreSQL at %s: %s", p->endpoint, line);
                return;
        }
        log_debug("PostgreSQL at %s: %s", p->endpoint, line);
}

static void connect_start(struct pg *p)
{
        /* the conninfo, expanded (a URI too); nothing added overrides it.
         * libpq looks a host name up with getaddrinfo(), which blocks: an
         * address (host=10.0.0.5, or hostaddr= beside host=) avoids it, as
         * does a local resolver.  Several hosts with
         * target_session_attrs=read-write find the primary after a
         * failover. */
        const char *const keys[] = {"dbname", NULL};
        const char *const values[] = {p->cfg->postgres, NULL};
        p->conn = PQconnectStartParams(keys, values, 1);
        if (!p->conn) {
                back_off(p);
                kick(p);
                return;
        }
        PQsetNoticeProcessor(p->conn, on_notice, p);
        p->state = C_CONNECTING;
        uint64_t until = now_usec() + (uint64_t)p->cfg->etcd_timeout_ms * 1000;
        if (!p->connect_timer) {
                if (sd_event_add_time(p->event, &p->connect_timer, CLOCK_MONOTONIC, until, 1000,
                                      on_connect_timeout, p) >= 0)
                        sd_event_source_set_description(p->connect_timer, "pg-connect");
        } else {
                sd_event_source_set_time(p->connect_timer, until);
                sd_event_source_set_enabled(p->connect_timer, SD_EVENT_ONESHOT);
        }
        if (PQstatus(p->conn) == CONNECTION_BAD) {
                const char *msg = PQerrorMessage(p->conn);
                connect_failed(p, pg_connect_err(msg), msg);
                return;
        }
        /* as if PQconnectPoll() had said PGRES_POLLING_WRITING */
        if (watch(p, EPOLLOUT, true) < 0)
                connect_failed(p, ETCD_ERR_NONE, "cannot watch the socket");
}

static unsigned setup_ms(const struct pg *p)
{
        return p->cfg->etcd_timeout_ms > SETUP_MIN_MS ? p->cfg->etcd_timeout_ms : SETUP_MIN_MS;
}

/* A transaction that reads one key snowid never writes, through the same
 * functions as the daemon's calls. */
static const char warm_sql[] =
        "SELECT snowid.call('/v3/kv/txn', '{\"compare\": [{\"key\": \"AA==\", \"target\": "
        "\"CREATE\", \"result\": \"EQUAL\", \"create_revision\": \"0\"}], \"success\": "
        "[{\"request_range\": {\"key\": \"AA==\"}}], \"failure\": [{\"request_range\": "
        "{\"key\": \"AA==\", \"range_end\": \"AQ==\", \"limit\": \"1\"}}]}'::jsonb)";

static void setup_send(struct pg *p)
{
        char settings[384];
        const char *sql;
        switch (p->step) {
        case S_SETTINGS:
                /* a backend writing an answer to a daemon that is gone
                 * (unacknowledged data ends the connection) would hold the
                 * store's row lock: a statement's answer is sent before its
                 * commit */
                snprintf(settings, sizeof(settings),
                         "SET statement_timeout = %u; SET lock_timeout = %u; "
                         "SET tcp_user_timeout = %u; "
                         "SET default_transaction_isolation = 'read committed'; "
                         "SET application_name = 'snowidd'; SET client_min_messages = warning",
                         setup_ms(p), setup_ms(p), p->cfg->etcd_timeout_ms);
                sql = settings;
                break;
        case S_WARM:
                sql = warm_sql;
                break;
        case S_TIMEOUTS:
                /* no statement or lock wait outlives the call that made it */
                snprintf(settings, sizeof(settings),
                         "SET statement_timeout = %u; SET lock_timeout = %u",
                         p->cfg->etcd_timeout_ms, p->cfg->etcd_timeout_ms);
                sql = settings;
                break;
        case S_CHECKS:
                sql = checks_sql;
                break;
        case S_SCHEMA:
                sql = snowid_postgres_sql;
                break;
        default:
                return;
        }
        if (!PQsendQuery(p->conn, sql)) {
                connect_failed(p, ETCD_ERR_NONE, PQerrorMessage(p->conn));
                return;
        }
        p->query_pending = true;
        flush(p);
}

static bool sync_commit_durable(const char *v)
{
        return !strcmp(v, "on") || !strcmp(v, "remote_write") || !strcmp(v, "remote_apply");
}

/* What the server says about itself, on every new connection. */
static bool setup_checks(struct pg *p, const PGresult *res)
{
        if (PQntuples(res) != 1 || PQnfields(res) != 4) {
                connect_failed(p, ETCD_ERR_NONE, "unexpected answer to the server checks");
                return false;
        }
        const char *sync_commit = PQgetvalue(res, 0, 0);
        bool standby = !strcmp(PQgetvalue(res, 0, 1), "t");
        const char *sync_names = PQgetvalue(res, 0, 2);
        long senders = strtol(PQgetvalue(res, 0, 3), NULL, 10);
        if (standby) {
                if (!p->said_standby)
                        log_error("PostgreSQL at %s is a standby (in recovery): snowidd needs "
                                  "the primary, and tries again (connect to the primary, or "
                                  "list every server with target_session_attrs=read-write)",
                                  p->endpoint);
                p->said_standby = true;
                connect_failed(p, ETCD_ERR_NONE, "the server is a standby");
                return false;
        }
        p->said_standby = false;
        if (!sync_commit_durable(sync_commit) && !p->warned_sync_commit) {
                log_warning("PostgreSQL at %s has synchronous_commit = %s: a commit is "
                            "acknowledged before it is on disk, so a crash of the server can "
                            "lose an acknowledged mark and IDs can repeat; set it to on",
                            p->endpoint, sync_commit);
                p->warned_sync_commit = true;
        }
        if (senders > 0 && !*sync_names && !p->warned_async_standby) {
                log_warning("PostgreSQL at %s streams to %ld standby(s) while "
                            "synchronous_standby_names is empty: an asynchronous standby "
                            "promoted after a crash can lose an acknowledged mark and IDs can "
                            "repeat; make replication synchronous",
                            p->endpoint, senders);
                p->warned_async_standby = true;
        }
        return true;
}

static void setup_result(struct pg *p, PGresult *res)
{
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
                const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
                const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(p->conn);
                char line[256];
                one_line(line, sizeof(line), msg);
                if (p->step == S_SCHEMA && !p->said_setup)
                        log_error("PostgreSQL at %s: creating snowid's schema failed%s%s: %s",
                                  p->endpoint, sqlstate ? ", SQLSTATE " : "",
                                  sqlstate ? sqlstate : "", line);
                p->said_setup = true;
                connect_failed(p, pg_sqlstate_err(sqlstate), line);
                return;
        }
        if (p->step == S_CHECKS && !setup_checks(p, res))
                return;
        if (++p->step < S_DONE) {
                setup_send(p);
                return;
        }
        sd_event_source_set_enabled(p->connect_timer, SD_EVENT_OFF);
        if (p->said_down)
                log_info("PostgreSQL at %s: connected", p->endpoint);
        p->said_down = p->said_setup = false;
        p->state = C_READY;
        p->backoff_ms = 0;
        kick(p);
}

/* A connection failure (not one of the query's): the server went away, is
 * shutting down, or refuses connections for now. */
static bool conn_gone(const char *sqlstate)
{
        return sqlstate && (!strncmp(sqlstate, "08", 2) || !strcmp(sqlstate, "57P01") ||
                            !strcmp(sqlstate, "57P02") || !strcmp(sqlstate, "57P03"));
}

static void request_result(struct pg *p, PGresult *res)
{
        struct request *q = p->current;
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        struct etcd_reply r = {0};
        if (!q)
                return; /* failed at its deadline meanwhile */
        if (p->unreplicated) {
                conn_broken(p, "a commit was not replicated to the synchronous standby");
                return;
        }
        if (st == PGRES_TUPLES_OK) {
                if (PQntuples(res) == 1 && PQnfields(res) == 1 && !PQgetisnull(res, 0, 0)) {
                        size_t len = (size_t)PQgetlength(res, 0, 0);
                        if (len > ANSWER_MAX) {
                                r.answered = true;
                                r.http = 500;
                                r.error = "PostgreSQL's answer is too large";
                        } else {
                                pg_answer_parse(&r, PQgetvalue(res, 0, 0), len);
                        }
                } else {
                        r.answered = true;
                        r.http = 500;
                        r.error = "snowid.call() gave no answer";
                }
        } else {
                const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
                const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(p->conn);
                if (!res || conn_gone(sqlstate) || PQstatus(p->conn) == CONNECTION_BAD) {
                        conn_broken(p, msg && *msg ? msg : "the connection broke");
                        return;
                }
                if (sqlstate && !strcmp(sqlstate, "57014")) {
                        /* statement_timeout, which is the call's deadline seen
                         * from the server: the same as the deadline here */
                        char why[128];
                        snprintf(why, sizeof(why),
                                 "PostgreSQL did not answer within %u ms "
                                 "(statement_timeout)",
                                 p->cfg->etcd_timeout_ms);
                        conn_broken(p, why);
                        return;
                }
                pg_error_reply(&r, sqlstate, msg);
        }
        unlink_request(p, q);
        finish(p, q, &r);
}

/* The query's results are all in. */
static void query_done(struct pg *p)
{
        PGresult *res = p->result;
        p->result = NULL;
        p->query_pending = false;
        if (p->state == C_SETUP)
                setup_result(p, res);
        else
                request_result(p, res);
        PQclear(res);
        kick(p);
}

static bool failed(const PGresult *res)
{
        ExecStatusType st = PQresultStatus(res);
        return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY;
}

static void read_input(struct pg *p)
{
        if (!PQconsumeInput(p->conn)) {
                const char *msg = PQerrorMessage(p->conn);
                if (p->state == C_SETUP)
                        connect_failed(p, pg_connect_err(msg), msg);
                else
                        conn_broken(p, msg);
                return;
        }
        if (p->flushing) {
                flush(p);
                if (p->state == C_DOWN)
                        return;
        }
        while (p->query_pending && !PQisBusy(p->conn)) {
                PGresult *res = PQgetResult(p->conn);
                if (!res) {
                        query_done(p);
                        return;
                }
                ExecStatusType st = PQresultStatus(res);
                if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH ||
                    st == PGRES_BAD_RESPONSE) {
                        /* nothing snowid sends answers so: not a server to trust */
                        PQclear(res);
                        if (p->state == C_SETUP)
                                connect_failed(p, ETCD_ERR_NONE, "unexpected answer (COPY)");
                        else
                                conn_broken(p, "unexpected answer (COPY or malformed)");
                        return;
                }
                /* the first error, or else the last result, is the answer */
                if (p->result && failed(p->result)) {
                        PQclear(res);
                } else {
                        PQclear(p->result);
                        p->result = res;
                }
        }
        if (!p->query_pending) {
                /* idle: notices, or the server saying goodbye */
                PGnotify *n;
                while ((n = PQnotifies(p->conn)))
                        PQfreemem(n);
                if (PQstatus(p->conn) == CONNECTION_BAD)
                        conn_broken(p, PQerrorMessage(p->conn));
        }
}

static void flush(struct pg *p)
{
        int r = PQflush(p->conn);
        if (r < 0) {
                const char *msg = PQerrorMessage(p->conn);
                if (p->state == C_SETUP)
                        connect_failed(p, ETCD_ERR_NONE, msg);
                else
                        conn_broken(p, msg);
                return;
        }
        p->flushing = r > 0;
        if (watch(p, p->flushing ? EPOLLIN | EPOLLOUT : EPOLLIN, false) < 0) {
                if (p->state == C_SETUP)
                        connect_failed(p, ETCD_ERR_NONE, "cannot watch the socket");
                else
                        conn_broken(p, "cannot watch the socket");
        }
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct pg *p = userdata;
        (void)s;
        (void)fd;
        if (p->state == C_CONNECTING) {
                connect_poll(p);
                return 0;
        }
        if (p->flushing && (revents & EPOLLOUT)) {
                flush(p);
                if (p->state == C_DOWN)
                        return 0;
        }
        if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
                read_input(p);
        return 0;
}

/* ---- sending ---- */

static void send_request(struct pg *p, struct request *q)
{
        const char *params[2] = {q->path, q->body};
        if (!PQsendQueryParams(p->conn, call_sql, 2, NULL, params, NULL, NULL, 0)) {
                conn_broken(p, PQerrorMessage(p->conn));
                return;
        }
        p->current = q;
        p->query_pending = true;
        p->unreplicated = false;
        /* calls run one after another: this one is answered at or after
         * the revision of every answer already in */
        q->rev_at_send = p->hist.max_rev;
        q->gen_at_send = p->hist.gen;
        flush(p);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        kick(userdata);
        return 0;
}

static void retry_at(struct pg *p, uint64_t when)
{
        if (!p->retry) {
                if (sd_event_add_time(p->event, &p->retry, CLOCK_MONOTONIC, when, 1000, on_retry,
                                      p) >= 0)
                        sd_event_source_set_description(p->retry, "pg-retry");
                return;
        }
        sd_event_source_set_time(p->retry, when);
        sd_event_source_set_enabled(p->retry, SD_EVENT_ONESHOT);
}

/* Moves the queue on: connects when calls wait, sends the oldest one that
 * may go when the connection is free. */
static void dispatch(struct pg *p)
{
        if (!p->head)
                return;
        if (p->state == C_DOWN) {
                uint64_t now = now_usec();
                if (now < p->next_try) {
                        retry_at(p, p->next_try);
                        return;
                }
                connect_start(p);
                return;
        }
        if (p->state != C_READY || p->query_pending)
                return;
        for (struct request *q = p->head; q; q = q->next)
                if (!held(p, q)) {
                        send_request(p, q);
                        return;
                }
}

static int on_kick(sd_event_source *s, void *userdata)
{
        (void)s;
        dispatch(userdata);
        return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct request *q = userdata;
        struct pg *p = q->pg;
        char why[sizeof(p->hold.problem.message) + sizeof(p->endpoint) + 64];
        (void)s;
        (void)usec;
        if (q == p->current) {
                snprintf(why, sizeof(why), "PostgreSQL did not answer within %u ms",
                         p->cfg->etcd_timeout_ms);
                conn_broken(p, why);
                return 0;
        }
        /* waiting out a refusal: the refusal is why it failed */
        enum etcd_err err =
                held(p, q) || (p->state != C_READY && p->hold.problem.err != ETCD_ERR_NONE &&
                               p->hold.problem.err != ETCD_ERR_PERMISSION)
                        ? p->hold.problem.err
                        : ETCD_ERR_NONE;
        if (err != ETCD_ERR_NONE)
                snprintf(why, sizeof(why), "%s", p->hold.problem.message);
        else if (p->state == C_READY)
                snprintf(why, sizeof(why), "waited %u ms behind other calls to PostgreSQL",
                         p->cfg->etcd_timeout_ms);
        else
                snprintf(why, sizeof(why), "no connection to PostgreSQL at %s within %u ms",
                         p->endpoint, p->cfg->etcd_timeout_ms);
        fail_request(p, q, err, why);
        return 0;
}

/* ---- the interface ---- */

int pg_new(sd_event *event, const struct settings *cfg, struct pg **ret)
{
        if (!cfg->postgres)
                return -EINVAL;
        struct pg *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->cfg = cfg;
        int r = sd_event_add_defer(event, &p->kick, on_kick, p);
        if (r < 0) {
                pg_free(p);
                return r;
        }
        sd_event_source_set_enabled(p->kick, SD_EVENT_OFF);
        sd_event_source_set_description(p->kick, "pg-kick");
        endpoint_from_conninfo(p);
        *ret = p;
        return 0;
}

struct pg *pg_free(struct pg *p)
{
        if (!p)
                return NULL;
        /* calls not answered yet are dropped without their callbacks */
        while (p->head) {
                struct request *q = p->head;
                unlink_request(p, q);
                request_free(q);
        }
        close_conn(p);
        sd_event_source_disable_unref(p->kick);
        sd_event_source_disable_unref(p->retry);
        sd_event_source_disable_unref(p->connect_timer);
        hold_free(&p->hold);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

int pg_call(struct pg *p, const char *path, json_t *body, etcd_cb cb, void *userdata, uint64_t tag)
{
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        struct request *q = text ? calloc(1, sizeof(*q)) : NULL;
        if (!q || !(q->path = strdup(path))) {
                free(q);
                free(text);
                return -ENOMEM;
        }
        q->pg = p;
        q->body = text;
        q->cb = cb;
        q->userdata = userdata;
        q->tag = tag;
        q->queued = now_usec();
        q->is_kv = !strncmp(path, "/v3/kv/", 7);
        int r = sd_event_add_time(p->event, &q->deadline, CLOCK_MONOTONIC,
                                  q->queued + (uint64_t)p->cfg->etcd_timeout_ms * 1000, 1000,
                                  on_deadline, q);
        if (r < 0) {
                request_free(q);
                return r;
        }
        sd_event_source_set_description(q->deadline, "pg-deadline");
        q->prev = p->tail;
        if (p->tail)
                p->tail->next = q;
        else
                p->head = q;
        p->tail = q;
        p->in_flight++;
        kick(p); /* from the loop: no callback runs inside pg_call() */
        return 0;
}

unsigned pg_in_flight(const struct pg *p)
{
        return p->in_flight;
}

const char *pg_endpoint(const struct pg *p)
{
        return p->endpoint;
}

const struct etcd_stats *pg_stats(const struct pg *p)
{
        return &p->stats;
}
