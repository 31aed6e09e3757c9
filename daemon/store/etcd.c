/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "etcd.h"
#include "log.h"
#include "monotonic.h"
#include "store-refusal.h"

#define BODY_MAX (16u << 20) /* an answer larger than this is not one of ours */

struct request {
        struct etcd *etcd;
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        char *path; /* kept to resend after authenticating */
        char *answer;
        size_t answer_len;
        bool too_big;
        store_cb cb;
        void *userdata;
        uint64_t tag;
        uint64_t started;
        unsigned timeout_ms;          /* how long each attempt waits (patience.h) */
        int64_t rev_at_send;          /* the highest kv revision seen when it was sent */
        unsigned member;              /* the endpoint it was sent to */
        char errbuf[CURL_ERROR_SIZE]; /* libcurl's own words when it fails */
        unsigned gen_at_send;
        bool is_kv;
        bool is_lease;
        bool is_auth;
        struct request *prev, *next; /* the client's list of requests in flight */
};

struct etcd {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        const struct settings *cfg;
        unsigned cur; /* the endpoint tried first */
        unsigned in_flight;
        char *token; /* etcd auth token, when a user is set */
        bool authenticating;
        struct request *requests;
        struct store_stats stats;
        struct store_history hist; /* of kv and lease answers */
        /* a refusal that needs an operator, and the wait it imposes */
        struct store_refusal hold; /* a refusal in force */
        uint32_t problem_members;  /* bit i: endpoint i refused this way */
};

/* ---- libcurl's multi interface in sd-event ---- */

static void finish(struct request *q, CURLcode result);

static void check_finished(struct etcd *e)
{
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(e->multi, &left))) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                struct request *q = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
                finish(q, msg->data.result);
        }
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct etcd *e = userdata;
        int action = 0, running;
        (void)s;
        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;
        curl_multi_socket_action(e->multi, fd, action, &running);
        check_finished(e);
        return 0;
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
        struct etcd *e = userp;
        sd_event_source *io = socketp;
        (void)easy;
        if (what == CURL_POLL_REMOVE) {
                if (io) {
                        sd_event_source_disable_unref(io);
                        curl_multi_assign(e->multi, fd, NULL);
                }
                return 0;
        }
        uint32_t events =
                (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
        if (io) {
                if (sd_event_source_set_io_events(io, events) < 0 ||
                    sd_event_source_set_enabled(io, SD_EVENT_ON) < 0)
                        return -1;
                return 0;
        }
        if (sd_event_add_io(e->event, &io, fd, events, on_io, e) < 0)
                return -1;
        sd_event_source_set_description(io, "etcd-io");
        curl_multi_assign(e->multi, fd, io);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct etcd *e = userdata;
        int running;
        (void)s;
        (void)usec;
        curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_finished(e);
        return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct etcd *e = userp;
        (void)multi;
        if (timeout_ms < 0)
                return e->timer ? sd_event_source_set_enabled(e->timer, SD_EVENT_OFF) < 0 ? -1 : 0
                                : 0;
        uint64_t when = now_usec() + (uint64_t)timeout_ms * 1000;
        if (!e->timer) {
                if (sd_event_add_time(e->event, &e->timer, CLOCK_MONOTONIC, when, 0, on_timer, e) <
                    0)
                        return -1;
                sd_event_source_set_description(e->timer, "etcd-timer");
                return 0;
        }
        if (sd_event_source_set_time(e->timer, when) < 0 ||
            sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT) < 0)
                return -1;
        return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct request *q = userdata;
        size_t n = size * nmemb;
        if (q->answer_len + n > BODY_MAX) {
                q->too_big = true;
                return 0; /* aborts the transfer */
        }
        char *a = realloc(q->answer, q->answer_len + n + 1);
        if (!a)
                return 0;
        memcpy(a + q->answer_len, ptr, n);
        q->answer = a;
        q->answer_len += n;
        a[q->answer_len] = 0;
        return n;
}

static void etcd_free(void *b);

static int etcd_new(sd_event *event, const struct settings *cfg, void **ret)
{
        struct etcd *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->event = sd_event_ref(event);
        e->cfg = cfg;
        e->multi = curl_multi_init();
        if (!e->multi) {
                etcd_free(e);
                return -ENOMEM;
        }
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
        curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
        /* several endpoints each keep a connection alive */
        curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)cfg->n_etcd * 4);
        /* a fleet's hosts start at different members: the load spreads */
        unsigned pick = 0;
        if (getrandom(&pick, sizeof(pick), 0) != sizeof(pick))
                pick = (unsigned)getpid();
        e->cur = pick % cfg->n_etcd;
        *ret = e;
        return 0;
}

static void request_free(struct request *q)
{
        if (q->prev)
                q->prev->next = q->next;
        else if (q->etcd->requests == q)
                q->etcd->requests = q->next;
        if (q->next)
                q->next->prev = q->prev;
        if (q->easy) {
                curl_multi_remove_handle(q->etcd->multi, q->easy);
                curl_easy_cleanup(q->easy);
        }
        curl_slist_free_all(q->headers);
        free(q->body);
        free(q->path);
        free(q->answer);
        free(q);
}

static void etcd_free(void *b)
{
        struct etcd *e = b;
        if (!e)
                return;
        if (e->multi) {
                /* requests still in flight are dropped without their callbacks */
                while (e->requests)
                        request_free(e->requests);
                curl_multi_cleanup(e->multi);
        }
        sd_event_source_disable_unref(e->timer);
        store_refusal_free(&e->hold);
        sd_event_unref(e->event);
        free(e->token);
        free(e);
}

static int send_request(struct etcd *e, struct request *q);

static void rotate(struct etcd *e)
{
        e->cur = (e->cur + 1) % e->cfg->n_etcd;
}

static void auth_done(struct etcd *e, const struct store_reply *r);

static void etcd_history_reset(void *b)
{
        struct etcd *e = b;
        store_history_forget(&e->hist);
}

static void etcd_expect_cluster(void *b, uint64_t cluster_id)
{
        struct etcd *e = b;
        e->hist.cluster_id = cluster_id;
}

/* ---- refusals: a setting is wrong, so retrying soon cannot help ---- */

static void fail_request(struct request *q, const struct store_reply *why);

/* Sends what waited for the end of a hold (or for a token); what cannot be
 * sent fails. */
static void release_parked(struct etcd *e)
{
        for (struct request *q = e->requests, *next; q; q = next) {
                next = q->next;
                if (q->easy || q->is_auth)
                        continue;
                if (send_request(e, q) < 0) {
                        struct store_reply fail = {.error = "cannot send the request"};
                        fail_request(q, &fail);
                }
        }
}

static int on_hold_over(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        release_parked(userdata);
        return 0;
}

/* Whether q waits: a refusal holds back every request it concerns (all of
 * them but the authentication, except for permissions: lease calls are not
 * checked against roles, and keepalives keep the number while an operator
 * fixes the roles). */
static bool held(const struct etcd *e, const struct request *q)
{
        return !q->is_auth && store_refusal_applies(&e->hold, q->is_kv);
}

static void problem_seen(struct etcd *e, const struct request *q, const struct store_reply *r)
{
        if (e->hold.problem.err != r->err)
                e->problem_members = 0;
        e->problem_members |= UINT32_C(1) << q->member;
        store_refusal_seen(&e->hold, r->err, r->error, e->cfg->etcd[q->member],
                           (unsigned)__builtin_popcount(e->problem_members), e->event, "etcd-hold",
                           on_hold_over, e);
}

/* A request of the kind the refusal concerned went through. */
static void problem_cleared(struct etcd *e, const struct request *q)
{
        if (!store_refusal_cleared(&e->hold, q->is_kv))
                return;
        e->problem_members = 0;
        release_parked(e);
}

static void etcd_on_problem(void *b, store_problem_cb cb, void *userdata)
{
        struct etcd *e = b;
        e->hold.cb = cb;
        e->hold.cb_userdata = userdata;
}

/* ---- requests ---- */

static void finish(struct request *q, CURLcode result)
{
        struct etcd *e = q->etcd;
        struct store_reply r = {.tag = q->tag, .usec = now_usec() - q->started, .kv = q->is_kv};

        e->in_flight--;
        if (result == CURLE_OK) {
                long http = 0;
                curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &http);
                store_reply_parse(&r, http, q->answer, q->answer_len);
                /* kv reads and transactions are linearizable: one sent after
                 * an answer at revision R is answered at R or later.  A lease
                 * call is answered at the revision of the member that took it,
                 * which may lag; its cluster ID is the cluster's all the same */
                if ((q->is_kv || q->is_lease) && store_ok(&r))
                        store_history_note(&e->hist, q->rev_at_send, q->gen_at_send, q->is_kv, &r);
        } else {
                r.err = etcd_curl_err(result, q->errbuf);
                r.error = q->too_big     ? "etcd's answer is too large"
                          : q->errbuf[0] ? q->errbuf
                                         : curl_easy_strerror(result);
        }
        store_stats_count(&e->stats, r.usec, store_ok(&r));
        /* a member whose certificate fails, or that refuses ours, may be
         * the only one set up wrong */
        if (!r.answered || r.http >= 500 || r.err == STORE_ERR_TLS || r.err == STORE_ERR_CERT)
                rotate(e); /* try another member next time */
        if (r.err != STORE_ERR_NONE)
                problem_seen(e, q, &r);
        else if (store_ok(&r))
                problem_cleared(e, q);
        if (r.answered && r.http == 401 && e->token && !q->is_auth) {
                /* the token expired: authenticate again, then resend this one */
                free(e->token);
                e->token = NULL;
                json_decref(r.json);
                struct request *again = q;
                curl_multi_remove_handle(e->multi, q->easy);
                curl_easy_cleanup(q->easy);
                q->easy = NULL;
                curl_slist_free_all(q->headers);
                q->headers = NULL;
                free(q->answer);
                q->answer = NULL;
                q->answer_len = 0;
                e->in_flight++;
                if (send_request(e, again) < 0) {
                        struct store_reply fail = {.error = "cannot resend"};
                        fail_request(q, &fail);
                }
                return;
        }
        if (q->is_auth)
                auth_done(e, &r);
        else
                q->cb(q->userdata, &r);
        json_decref(r.json);
        request_free(q);
}

static int start_auth(struct etcd *e);

/* Fails a request that never got (or never will get) its own answer. */
static void fail_request(struct request *q, const struct store_reply *why)
{
        struct store_reply fail = *why;
        fail.tag = q->tag;
        fail.json = NULL;
        fail.kv = q->is_kv;
        fail.usec = 0;
        q->etcd->in_flight--;
        q->cb(q->userdata, &fail);
        request_free(q);
}

static int send_request(struct etcd *e, struct request *q)
{
        const struct settings *cfg = e->cfg;
        char *url = NULL, *auth = NULL;

        if (held(e, q)) {
                /* parked until the hold is over; on_hold_over() sends it */
                q->easy = NULL;
                return 0;
        }
        if (cfg->user && !e->token && !q->is_auth) {
                /* parked until authenticate answers; auth_done() sends it */
                q->easy = NULL;
                return e->authenticating ? 0 : start_auth(e);
        }
        /* built to size: a URL or token is never cut short */
        if (asprintf(&url, "%s%s", cfg->etcd[e->cur], q->path) < 0)
                return -ENOMEM;
        if (e->token && !q->is_auth && asprintf(&auth, "Authorization: %s", e->token) < 0) {
                free(url);
                return -ENOMEM;
        }
        q->member = e->cur;
        q->errbuf[0] = 0;
        q->easy = curl_easy_init();
        if (!q->easy) {
                free(url);
                free(auth);
                return -ENOMEM;
        }
        q->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (auth)
                q->headers = curl_slist_append(q->headers, auth);
        free(auth);
        curl_easy_setopt(q->easy, CURLOPT_URL, url); /* copied by libcurl */
        free(url);
        curl_easy_setopt(q->easy, CURLOPT_ERRORBUFFER, q->errbuf);
        curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
        curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->headers);
        curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(q->easy, CURLOPT_TIMEOUT_MS, (long)q->timeout_ms);
        curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)(cfg->store_timeout_ms < 1000 ? cfg->store_timeout_ms : 1000));
        curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(q->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(q->easy, CURLOPT_USERAGENT, "snowidd");
        if (cfg->cacert)
                curl_easy_setopt(q->easy, CURLOPT_CAINFO, cfg->cacert);
        if (cfg->cert) {
                curl_easy_setopt(q->easy, CURLOPT_SSLCERT, cfg->cert);
                curl_easy_setopt(q->easy, CURLOPT_SSLKEY, cfg->key);
        }
        q->started = now_usec();
        if (curl_multi_add_handle(e->multi, q->easy) != CURLM_OK)
                return -EIO;
        return 0;
}

static void auth_done(struct etcd *e, const struct store_reply *r)
{
        e->authenticating = false;
        json_t *t = r->json ? json_object_get(r->json, "token") : NULL;
        if (store_ok(r) && json_is_string(t)) {
                free(e->token);
                e->token = strdup(json_string_value(t));
        } else if (r->err == STORE_ERR_NONE) {
                log_debug("etcd authentication as '%s' failed: %s", e->cfg->user,
                          r->error ? r->error : "no token in the answer");
        }
        /* send, or fail, every request parked behind authentication: a
         * refusal is theirs too (the holder says it once) */
        for (struct request *q = e->requests, *next; q; q = next) {
                next = q->next;
                if (q->easy || q->is_auth)
                        continue;
                if (!e->token) {
                        struct store_reply fail = *r;
                        if (!fail.error)
                                fail.error = "no token in etcd's answer to authenticate";
                        fail_request(q, &fail);
                } else if (send_request(e, q) < 0) {
                        struct store_reply fail = {.error = "cannot send the request"};
                        fail_request(q, &fail);
                }
        }
}

static struct request *request_new(struct etcd *e, const char *path, char *body)
{
        struct request *q = calloc(1, sizeof(*q));
        if (!q)
                return NULL;
        q->etcd = e;
        q->path = strdup(path);
        q->body = body;
        q->timeout_ms = e->cfg->store_timeout_ms;
        q->next = e->requests;
        if (q->next)
                q->next->prev = q;
        e->requests = q;
        e->in_flight++;
        return q;
}

static int start_auth(struct etcd *e)
{
        json_t *b = json_pack("{s:s, s:s}", "name", e->cfg->user, "password", e->cfg->password);
        char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
        json_decref(b);
        if (!body)
                return -ENOMEM;
        struct request *q = request_new(e, "/v3/auth/authenticate", body);
        if (!q) {
                free(body);
                return -ENOMEM;
        }
        q->is_auth = true;
        e->authenticating = true;
        int r = send_request(e, q);
        if (r < 0) {
                e->in_flight--;
                e->authenticating = false;
                request_free(q);
        }
        return r;
}

static int etcd_call(void *b, const char *path, json_t *body, store_cb cb, void *userdata,
                     uint64_t tag, unsigned timeout_ms)
{
        struct etcd *e = b;
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!text)
                return -ENOMEM;
        struct request *q = request_new(e, path, text);
        if (!q) {
                free(text);
                return -ENOMEM;
        }
        q->cb = cb;
        q->userdata = userdata;
        q->tag = tag;
        q->timeout_ms = timeout_ms;
        q->is_kv = !strncmp(path, "/v3/kv/", 7);
        q->is_lease = !strncmp(path, "/v3/lease/", 10);
        q->rev_at_send = e->hist.max_rev;
        q->gen_at_send = e->hist.gen;
        int r = send_request(e, q);
        if (r < 0) {
                e->in_flight--;
                request_free(q);
        }
        return r;
}

static unsigned etcd_in_flight(const void *b)
{
        const struct etcd *e = b;
        return e->in_flight;
}

static const char *etcd_endpoint(const void *b)
{
        const struct etcd *e = b;
        return e->cfg->etcd[e->cur];
}

static const struct store_stats *etcd_stats(const void *b)
{
        const struct etcd *e = b;
        return &e->stats;
}

/* ---- the backend's table ---- */

/* every endpoint refusing is the cluster's refusal, not one member's */
static unsigned ops_members(const struct settings *cfg)
{
        return cfg->n_etcd;
}

const struct store_ops store_etcd_ops = {
        .name = "etcd",
        .title = "etcd",
        .verbs = &store_txn_verbs,
        .new = etcd_new,
        .free = etcd_free,
        .call = etcd_call,
        .in_flight = etcd_in_flight,
        .history_reset = etcd_history_reset,
        .expect_cluster = etcd_expect_cluster,
        .endpoint = etcd_endpoint,
        .stats = etcd_stats,
        .on_problem = etcd_on_problem,
        .err_name = etcd_err_name,
        .refusal_hint = etcd_refusal_hint,
        .full_text = etcd_full_text,
        .members = ops_members,
};
