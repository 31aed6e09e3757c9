/* SPDX-License-Identifier: MIT */
/*
 * The store on PostgreSQL, in the daemon's loop: one connection, made with
 * PQconnectStartParams()/PQconnectPoll() and then set non-blocking, watched
 * on PQsocket() in the direction libpq asks.  Queries wait in a queue and
 * go one at a time, each a prepared statement of the verbs (pg-verbs.c);
 * the answer's row goes back to the verb, which reads it into its typed
 * result.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pg-int.h"

/* The server, as said in logs and problems: host:port or the socket. */
void pg_endpoint_format(char *buf, size_t size, const char *host, const char *port)
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
        pg_endpoint_format(p->endpoint, sizeof(p->endpoint), host, port);
        PQconninfoFree(opts);
}

/* ---- counters and history ---- */

void pg_history_reset(struct pg *p)
{
        store_history_forget(&p->hist);
}

void pg_expect_cluster(struct pg *p, uint64_t cluster_id)
{
        p->hist.cluster_id = cluster_id;
}

/* ---- the queue ---- */

void pg_kick(struct pg *p)
{
        sd_event_source_set_enabled(p->kick, SD_EVENT_ONESHOT);
}

void pg_unlink_request(struct pg *p, struct request *q)
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
        for (unsigned i = 0; i < q->nparams; i++)
                free(q->params[i]);
        free(q);
}

/* ---- refusals: a setting is wrong, so retrying soon cannot help ---- */

static int on_hold_over(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        pg_kick(userdata);
        return 0;
}

/* Whether q waits: a refusal holds back every call it concerns (all of
 * them, except for permissions: lease calls are not checked against roles). */
static bool held(const struct pg *p, const struct request *q)
{
        return store_refusal_applies(&p->hold, q->is_kv);
}

void pg_problem_seen(struct pg *p, enum store_err err, const char *message)
{
        store_refusal_seen(&p->hold, err, message, p->endpoint, 1, p->event, "pg-hold",
                           on_hold_over, p);
}

/* A call of the kind the refusal concerned went through. */
static void problem_cleared(struct pg *p, const struct request *q)
{
        if (store_refusal_cleared(&p->hold, q->is_kv))
                pg_kick(p);
}

void pg_on_problem(struct pg *p, void (*cb)(void *userdata, const struct store_problem *p),
                   void *userdata)
{
        p->hold.cb = cb;
        p->hold.cb_userdata = userdata;
}

/* ---- answers ---- */

/* Hands q its reply and frees it; q is off the queue already. */
void pg_finish(struct pg *p, struct request *q, struct store_reply *r, const PGresult *res)
{
        r->tag = q->tag;
        r->usec = now_usec() - q->queued;
        r->kv = q->is_kv;
        int64_t max_rev = p->hist.max_rev;
        if (res) {
                /* every verb's row carries the store's identity (cid) and,
                 * a write that was applied, its revision (rev; 0 for
                 * reads, see postgres.sql) */
                int cid = PQfnumber(res, "cid"), rev = PQfnumber(res, "rev");
                if (cid >= 0 && !PQgetisnull(res, 0, cid))
                        r->cluster_id = strtoull(PQgetvalue(res, 0, cid), NULL, 10);
                if (rev >= 0 && !PQgetisnull(res, 0, rev))
                        r->revision = strtoll(PQgetvalue(res, 0, rev), NULL, 10);
                if (r->revision < 0)
                        r->revision = 0;
                /* queries run one after another: a write's revision is
                 * above every revision this daemon saw before it was sent */
                store_history_seen(&p->hist, r->revision ? q->rev_at_send : 0, q->gen_at_send, true,
                                   r);
        }
        /* a full disk lasts until a write goes through; meanwhile the alarm
         * verb says the server is full, as etcd's NOSPACE alarm */
        if (r->nospace)
                p->disk_full = true;
        else if (res && !r->went_back && r->revision > max_rev)
                p->disk_full = false;
        bool ok = r->answered && r->http == 200 && res;
        store_stats_count(&p->stats, r->usec, ok);
        p->in_flight--;
        if (r->err != STORE_ERR_NONE && r->answered)
                pg_problem_seen(p, r->err, r->error);
        else if (ok)
                problem_cleared(p, q);
        q->cb(q->userdata, r, res);
        request_free(q);
}

bool pg_disk_full(const struct pg *p)
{
        return p->disk_full;
}

/* Fails q, unanswered. */
static void fail_request(struct pg *p, struct request *q, enum store_err err, const char *why)
{
        struct store_reply r = {.err = err};
        pg_one_line(r.text, sizeof(r.text), why);
        r.error = r.text;
        pg_unlink_request(p, q);
        pg_finish(p, q, &r, NULL);
}

/* Fails every call queued now (not those their callbacks make). */
void pg_fail_all(struct pg *p, enum store_err err, const char *why)
{
        struct request *list = p->head;
        p->head = p->tail = p->current = NULL;
        while (list) {
                struct request *q = list;
                list = q->next;
                q->prev = q->next = NULL;
                struct store_reply r = {.err = err};
                pg_one_line(r.text, sizeof(r.text), why);
                r.error = r.text;
                pg_finish(p, q, &r, NULL);
        }
}

/* ---- sending ---- */

static void send_request(struct pg *p, struct request *q)
{
        if (!PQsendQueryPrepared(p->conn, q->stmt, (int)q->nparams, (const char *const *)q->params,
                                 NULL, NULL, 0)) {
                pg_conn_broken(p, PQerrorMessage(p->conn));
                return;
        }
        p->current = q;
        q->sent = now_usec();
        p->query_pending = true;
        p->unreplicated = false;
        /* calls run one after another: this one is answered at or after
         * the revision of every answer already in */
        q->rev_at_send = p->hist.max_rev;
        q->gen_at_send = p->hist.gen;
        pg_flush(p);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        pg_kick(userdata);
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
                pg_connect_start(p);
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

static int on_stuck(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct pg *p = userdata;
        char why[128];
        (void)s;
        (void)usec;
        snprintf(why, sizeof(why), "PostgreSQL did not end a cancelled statement within %u ms",
                 p->cfg->store_timeout_ms);
        pg_conn_broken(p, why);
        return 0;
}

/* libpq's cancel request: a connection of its own to the server, made
 * off the loop (it may block as long as connecting does). */
static void *cancel_thread(void *arg)
{
        PGcancel *c = arg;
        char err[256];
        (void)PQcancel(c, err, sizeof(err));
        PQfreeCancel(c);
        return NULL;
}

static int cancel_statement(struct pg *p)
{
        PGcancel *c = PQgetCancel(p->conn);
        if (!c)
                return -ENOMEM;
        pthread_attr_t attr;
        pthread_t t;
        int r = pthread_attr_init(&attr);
        if (r == 0) {
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                r = pthread_create(&t, &attr, cancel_thread, c);
                pthread_attr_destroy(&attr);
        }
        if (r != 0) {
                PQfreeCancel(c);
                return -r;
        }
        return 0;
}

/* The call on the connection was given up on: its statement is cancelled
 * and the connection kept.  The server answers the cancelled statement
 * with an error (or its result, had it ended meanwhile), which is dropped,
 * and the next call goes on the same connection; the connection is
 * dropped only if no answer comes within store-timeout.  Setting up
 * another costs a loaded server more than any call, and a statement on a
 * connection dropped runs on until it ends all the same. */
static void give_up_current(struct pg *p)
{
        uint64_t until = now_usec() + (uint64_t)p->cfg->store_timeout_ms * 1000;
        if (cancel_statement(p) < 0) {
                pg_conn_broken(p, "PostgreSQL did not answer in time, and no cancel could be sent");
                return;
        }
        if (!p->stuck) {
                if (sd_event_add_time(p->event, &p->stuck, CLOCK_MONOTONIC, until, 1000, on_stuck,
                                      p) < 0) {
                        pg_conn_broken(p, "PostgreSQL did not answer in time");
                        return;
                }
                sd_event_source_set_description(p->stuck, "pg-stuck");
                return;
        }
        sd_event_source_set_time(p->stuck, until);
        sd_event_source_set_enabled(p->stuck, SD_EVENT_ONESHOT);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct request *q = userdata;
        struct pg *p = q->pg;
        char why[sizeof(p->hold.problem.message) + sizeof(p->endpoint) + 64];
        (void)s;
        (void)usec;
        if (q == p->current) {
                snprintf(why, sizeof(why), "PostgreSQL did not answer within %u ms", q->timeout_ms);
                pg_unlink_request(p, q); /* current is NULL from here */
                give_up_current(p);      /* which may drop the connection */
                fail_request(p, q, STORE_ERR_NONE, why);
                return 0;
        }
        /* waiting out a refusal: the refusal is why it failed */
        enum store_err err =
                held(p, q) || (p->state != C_READY && p->hold.problem.err != STORE_ERR_NONE &&
                               p->hold.problem.err != STORE_ERR_PERMISSION)
                        ? p->hold.problem.err
                        : STORE_ERR_NONE;
        if (err != STORE_ERR_NONE)
                snprintf(why, sizeof(why), "%s", p->hold.problem.message);
        else if (p->state == C_READY)
                snprintf(why, sizeof(why), "waited %u ms behind other calls to PostgreSQL",
                         q->timeout_ms);
        else
                snprintf(why, sizeof(why), "no connection to PostgreSQL at %s within %u ms",
                         p->endpoint, q->timeout_ms);
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
                pg_unlink_request(p, q);
                request_free(q);
        }
        pg_close_conn(p);
        sd_event_source_disable_unref(p->kick);
        sd_event_source_disable_unref(p->retry);
        sd_event_source_disable_unref(p->connect_timer);
        sd_event_source_disable_unref(p->stuck);
        store_refusal_free(&p->hold);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

int pg_query(struct pg *p, const char *stmt, unsigned n, const char *const *params, bool kv,
             pg_result_cb cb, void *userdata, uint64_t tag, unsigned timeout_ms)
{
        struct request *q = n <= PG_PARAMS_MAX ? calloc(1, sizeof(*q)) : NULL;
        if (!q)
                return -ENOMEM;
        q->pg = p;
        q->stmt = stmt;
        for (; q->nparams < n; q->nparams++)
                if (params[q->nparams] && !(q->params[q->nparams] = strdup(params[q->nparams]))) {
                        request_free(q);
                        return -ENOMEM;
                }
        q->cb = cb;
        q->userdata = userdata;
        q->tag = tag;
        q->queued = now_usec();
        q->timeout_ms = timeout_ms;
        q->is_kv = kv;
        int r = sd_event_add_time(p->event, &q->deadline, CLOCK_MONOTONIC,
                                  q->queued + (uint64_t)timeout_ms * 1000, 1000, on_deadline, q);
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
        pg_kick(p); /* from the loop: no callback runs inside pg_query() */
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

const struct store_stats *pg_stats(const struct pg *p)
{
        return &p->stats;
}

/* ---- the backend's table ---- */

static int ops_new(sd_event *event, const struct settings *cfg, void **ret)
{
        struct pg *p;
        int r = pg_new(event, cfg, &p);
        if (r >= 0)
                *ret = p;
        return r;
}

static void ops_free(void *b)
{
        pg_free(b);
}

static unsigned ops_in_flight(const void *b)
{
        return pg_in_flight(b);
}

static bool ops_connecting(const void *b)
{
        return pg_first_connection(b);
}

static void ops_history_reset(void *b)
{
        pg_history_reset(b);
}

static void ops_expect_cluster(void *b, uint64_t cluster_id)
{
        pg_expect_cluster(b, cluster_id);
}

static const char *ops_endpoint(const void *b)
{
        return pg_endpoint(b);
}

static const struct store_stats *ops_stats(const void *b)
{
        return pg_stats(b);
}

static void ops_on_problem(void *b, store_problem_cb cb, void *userdata)
{
        pg_on_problem(b, cb, userdata);
}

/* one server: its refusal is the store's */
static unsigned ops_members(const struct settings *cfg)
{
        (void)cfg;
        return 1;
}

const struct store_ops store_pg_ops = {
        .name = "postgres",
        .title = "PostgreSQL",
        .verbs = &store_pg_verbs,
        .new = ops_new,
        .free = ops_free,
        .in_flight = ops_in_flight,
        .connecting = ops_connecting,
        .history_reset = ops_history_reset,
        .expect_cluster = ops_expect_cluster,
        .endpoint = ops_endpoint,
        .stats = ops_stats,
        .on_problem = ops_on_problem,
        .err_name = pg_err_name,
        .refusal_hint = pg_refusal_hint,
        .full_text = pg_full_text,
        .members = ops_members,
};
