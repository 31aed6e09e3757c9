/* SPDX-License-Identifier: MIT */
/*
 * The store's table of operations (daemon/store/store.h): store.c driven by
 * a backend of the test's own, which records what reaches it and answers
 * from the test; both real backends' tables complete and in their own
 * terms; and holders, two on one loop, each with its own backend, each
 * asking its own store for the cluster first.
 */
#include <errno.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "helpers.h"
#include "holder.h"
#include "holder-int.h"
#include "log.h"
#include "patience.h"
#include "publish.h"
#include "store.h"

/* ---- a backend that records ---- */

struct fake {
        int id;
        unsigned calls, in_flight, resets, frees;
        uint64_t expected_cluster;
        char last_path[64];
        uint64_t last_tag;
        unsigned last_timeout_ms;
        store_cb cb;
        void *cb_userdata;
        store_problem_cb problem_cb;
        void *problem_userdata;
        struct store_stats stats;
};

static struct fake fakes[2];
static unsigned n_fakes;
static struct fake *freed_last;

static int fake_new(sd_event *event, const struct settings *cfg, void **ret)
{
        (void)event;
        (void)cfg;
        if (n_fakes == 2)
                return -ENOSPC;
        struct fake *f = &fakes[n_fakes];
        *f = (struct fake){.id = (int)n_fakes++};
        *ret = f;
        return 0;
}

static void fake_free(void *b)
{
        struct fake *f = b;
        f->frees++;
        freed_last = f;
}

static int fake_call(void *b, const char *path, json_t *body, store_cb cb, void *userdata,
                     uint64_t tag, unsigned timeout_ms)
{
        struct fake *f = b;
        /* the body is taken over: freed here, as a backend must */
        json_decref(body);
        f->calls++;
        f->in_flight++;
        snprintf(f->last_path, sizeof(f->last_path), "%s", path);
        f->last_tag = tag;
        f->last_timeout_ms = timeout_ms;
        f->cb = cb;
        f->cb_userdata = userdata;
        return 0;
}

static unsigned fake_in_flight(const void *b)
{
        return ((const struct fake *)b)->in_flight;
}

static void fake_history_reset(void *b)
{
        ((struct fake *)b)->resets++;
}

static void fake_expect_cluster(void *b, uint64_t cluster_id)
{
        ((struct fake *)b)->expected_cluster = cluster_id;
}

static const char *fake_endpoint(const void *b)
{
        return ((const struct fake *)b)->id ? "fake-1" : "fake-0";
}

static const struct store_stats *fake_stats(const void *b)
{
        return &((const struct fake *)b)->stats;
}

static void fake_on_problem(void *b, store_problem_cb cb, void *userdata)
{
        struct fake *f = b;
        f->problem_cb = cb;
        f->problem_userdata = userdata;
}

static const char *fake_err_name(enum store_err err)
{
        return err == STORE_ERR_AUTH ? "fake-auth" : NULL;
}

static void fake_refusal_hint(const struct settings *cfg, enum store_err err, const char *prefix,
                              char *buf, size_t size)
{
        (void)cfg;
        snprintf(buf, size, "hint %d for %s", (int)err, prefix);
}

static void fake_full_text(const char *member, const char *endpoint, int64_t left_ms, char *buf,
                           size_t size)
{
        snprintf(buf, size, "full at %s (%s), %lld ms left", member ? member : "-", endpoint,
                 (long long)left_ms);
}

static unsigned fake_members(const struct settings *cfg)
{
        (void)cfg;
        return 7;
}

static bool fake_connecting_now;
static bool fake_connecting(const void *b)
{
        (void)b;
        return fake_connecting_now;
}

static const struct store_ops fake_ops = {
        .name = "fake",
        .title = "Fake",
        .verbs = &store_txn_verbs,
        .new = fake_new,
        .free = fake_free,
        .call = fake_call,
        .in_flight = fake_in_flight,
        .connecting = fake_connecting,
        .history_reset = fake_history_reset,
        .expect_cluster = fake_expect_cluster,
        .endpoint = fake_endpoint,
        .stats = fake_stats,
        .on_problem = fake_on_problem,
        .err_name = fake_err_name,
        .refusal_hint = fake_refusal_hint,
        .full_text = fake_full_text,
        .members = fake_members,
};

static struct settings cfg;

static int setup(void **state)
{
        (void)state;
        char *argv[] = {"snowidd",
                        "--config",
                        "/dev/null",
                        "--instance",
                        (char *)test_instance("store"),
                        "--log-level",
                        "err",
                        "--runtime-dir",
                        (char *)test_dir(),
                        NULL};
        if (settings_load(&cfg, NULL, (int)(sizeof(argv) / sizeof(*argv)) - 1, argv) != 0)
                return -1;
        log_max_level = cfg.log_level;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        settings_free(&cfg);
        return 0;
}

static unsigned answered;
static void on_answer(void *userdata, const struct store_reply *r)
{
        assert_ptr_equal(userdata, &answered);
        assert_int_equal(r->tag, 42);
        answered++;
}

static unsigned problems;
static void on_problem(void *userdata, const struct store_problem *p)
{
        assert_ptr_equal(userdata, &problems);
        assert_int_equal(p->err, STORE_ERR_AUTH);
        problems++;
}

/* Every call of the interface reaches the backend's op, with its arguments,
 * and what the op returns comes back unchanged. */
static void test_dispatch(void **state)
{
        (void)state;
        n_fakes = 0;
        struct store *s = NULL;
        assert_int_equal(store_new_with(&fake_ops, NULL, &cfg, &s), 0);
        struct fake *f = &fakes[0];

        assert_int_equal(
                store_call(s, "/v3/kv/range", json_object(), on_answer, &answered, 42, 1234), 0);
        assert_int_equal(f->calls, 1);
        assert_string_equal(f->last_path, "/v3/kv/range");
        assert_int_equal(f->last_tag, 42);
        assert_int_equal(f->last_timeout_ms, 1234);
        assert_int_equal(store_in_flight(s), 1);
        f->cb(f->cb_userdata, &(struct store_reply){.answered = true, .http = 200, .tag = 42});
        assert_int_equal(answered, 1);

        store_history_reset(s);
        store_history_reset(s);
        assert_int_equal(f->resets, 2);
        store_expect_cluster(s, 0x1234);
        assert_int_equal(f->expected_cluster, 0x1234);
        assert_string_equal(store_endpoint(s), "fake-0");
        f->stats.requests = 9;
        assert_int_equal(store_stats(s)->requests, 9);
        store_on_problem(s, on_problem, &problems);
        f->problem_cb(f->problem_userdata, &(struct store_problem){.err = STORE_ERR_AUTH});
        assert_int_equal(problems, 1);

        assert_string_equal(store_name(s), "fake");
        assert_string_equal(store_title(s), "Fake");
        assert_string_equal(store_err_name(s, STORE_ERR_AUTH), "fake-auth");
        assert_null(store_err_name(s, STORE_ERR_NONE));
        char buf[128];
        store_refusal_hint(s, &cfg, STORE_ERR_PERMISSION, "/snowid/x/", buf, sizeof(buf));
        assert_string_equal(buf, "hint 2 for /snowid/x/");
        /* the endpoint in use is the backend's */
        store_full_text(s, NULL, 1500, buf, sizeof(buf));
        assert_string_equal(buf, "full at - (fake-0), 1500 ms left");
        assert_int_equal(store_members(s, &cfg), 7);

        assert_null(store_free(s));
        assert_ptr_equal(freed_last, f);
        assert_int_equal(f->frees, 1);
        assert_null(store_free(NULL));
}

/* A backend that cannot start: nothing is made, nothing freed twice. */
static void test_new_fails(void **state)
{
        (void)state;
        n_fakes = 2; /* full */
        struct store *s = (struct store *)&cfg;
        assert_int_equal(store_new_with(&fake_ops, NULL, &cfg, &s), -ENOSPC);
        assert_ptr_equal(s, (struct store *)&cfg); /* left alone */
}

/* Both backends fill every op, and speak of themselves; etcd's alone
 * takes requests in its own language (PostgreSQL speaks only the verbs). */
static void test_backends_complete(void **state)
{
        (void)state;
        const struct store_ops *all[] = {&store_etcd_ops, &store_pg_ops};
        for (size_t i = 0; i < 2; i++) {
                const struct store_ops *o = all[i];
                assert_non_null(o->name);
                assert_non_null(o->title);
                assert_non_null(o->new);
                assert_non_null(o->free);
                assert_true((o->call != NULL) == (o == &store_etcd_ops));
                assert_non_null(o->in_flight);
                assert_non_null(o->history_reset);
                assert_non_null(o->expect_cluster);
                assert_non_null(o->endpoint);
                assert_non_null(o->stats);
                assert_non_null(o->on_problem);
                assert_non_null(o->err_name);
                assert_non_null(o->refusal_hint);
                assert_non_null(o->full_text);
                assert_non_null(o->members);
                assert_null(o->err_name(STORE_ERR_NONE));
                /* every verb of the contract */
                const struct store_verb_ops *v = o->verbs;
                assert_non_null(v);
                const void *verbs[] = {v->grant,       v->keepalive,      v->revoke,
                                       v->scan,        v->claim,          v->read_number,
                                       v->extend,      v->raise,          v->read_cluster,
                                       v->creating,    v->init_marks,     v->make_cluster,
                                       v->witness_put, v->witness_delete, v->record_range,
                                       v->alarms,      v->fence_read,     v->fence_write};
                for (size_t k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++)
                        assert_non_null(verbs[k]);
        }
        assert_string_equal(store_etcd_ops.err_name(STORE_ERR_AUTH), "etcd-auth");
        assert_string_equal(store_pg_ops.err_name(STORE_ERR_AUTH), "postgres-auth");
        assert_string_equal(store_pg_ops.err_name(STORE_ERR_PERMISSION), "postgres-permission");

        /* each one's hints name its own settings, never the other's */
        char buf[512];
        for (enum store_err e = STORE_ERR_AUTH; e < STORE_ERR_MAX_; e++) {
                store_pg_ops.refusal_hint(&cfg, e, "/snowid/default/", buf, sizeof(buf));
                assert_non_null(strstr(buf, "postgres setting"));
                assert_null(strstr(buf, "etcd"));
                store_etcd_ops.refusal_hint(&cfg, e, "/snowid/default/", buf, sizeof(buf));
                assert_non_null(strstr(buf, "etcd"));
                assert_null(strstr(buf, "postgres"));
        }
        store_pg_ops.full_text(NULL, "db:5432", 10, buf, sizeof(buf));
        assert_non_null(strstr(buf, "PostgreSQL's disk is full"));
        assert_non_null(strstr(buf, "db:5432"));
        store_etcd_ops.full_text("m1", "http://e:2379", 10, buf, sizeof(buf));
        assert_non_null(strstr(buf, "NOSPACE alarm is raised on member m1"));

        /* a refusal by every etcd endpoint is the cluster's; PostgreSQL is one server */
        assert_int_equal(store_etcd_ops.members(&cfg), cfg.n_etcd);
        assert_int_equal(store_pg_ops.members(&cfg), 1);
}

static void on_lease(void *userdata, const struct store_answer *a, int64_t lease, int64_t ttl)
{
        (void)a;
        (void)lease;
        (void)ttl;
        ++*(int *)userdata;
}

static void on_extended(void *userdata, const struct store_answer *a,
                        const struct store_extended *e)
{
        (void)a;
        (void)e;
        ++*(int *)userdata;
}

/* The estimator alone: store-timeout until answers say the store is
 * slower, then their smoothed latency and four deviations; doubled per call
 * in a row with no answer; never above PATIENCE_X store-timeouts. */
static void test_patience(void **state)
{
        (void)state;
        struct patience p = {0};
        assert_int_equal(patience_ms(&p, 2000, false), 2000);
        patience_answered(&p, 100000); /* fast answers: store-timeout stays */
        assert_int_equal(patience_ms(&p, 2000, false), 2000);
        p = (struct patience){0};
        patience_answered(&p, 1500000); /* 1.5 s, deviation 0.75 s: 4.5 s */
        assert_int_equal(patience_ms(&p, 2000, false), 4500);
        for (int i = 0; i < 40; i++) /* steady at 1.5 s: the deviation decays */
                patience_answered(&p, 1500000);
        unsigned steady = patience_ms(&p, 2000, false);
        assert_true(steady >= 2000 && steady < 2100);
        patience_lost(&p);
        assert_int_equal(patience_ms(&p, 2000, false), 2 * steady);
        patience_lost(&p);
        patience_lost(&p);
        assert_int_equal(patience_ms(&p, 2000, false), PATIENCE_X * 2000); /* the cap */
        for (int i = 0; i < 20; i++)
                patience_lost(&p);
        assert_int_equal(patience_ms(&p, 2000, false), PATIENCE_X * 2000);
        patience_answered(&p, 100000); /* an answer ends the doubling */
        assert_true(patience_ms(&p, 2000, false) < 2 * steady);
        p = (struct patience){0};
        patience_answered(&p, 60000000); /* a minute: still the cap */
        assert_int_equal(patience_ms(&p, 100, false), PATIENCE_X * 100);
        /* the first connection being made: the longest wait, whatever the
         * estimate */
        p = (struct patience){0};
        assert_int_equal(patience_ms(&p, 2000, true), PATIENCE_X * 2000);
        patience_answered(&p, 1000);
        assert_int_equal(patience_ms(&p, 2000, true), PATIENCE_X * 2000);
}

/* Through the store: a patient verb (a grant) waits as the estimator says,
 * a mark's write (an extension) always store-timeout; a patient call that
 * waited its whole wait in vain doubles the next patient wait, one refused
 * at once does not, nor does another call's; one made behind the first
 * connection waits the longest. */
static void test_waits(void **state)
{
        (void)state;
        n_fakes = 0;
        struct store *s = NULL;
        assert_int_equal(store_new_with(&fake_ops, NULL, &cfg, &s), 0);
        store_set_prefix(s, "/snowid/t/");
        struct fake *f = &fakes[0];
        unsigned t = cfg.store_timeout_ms;
        int n = 0;
        assert_int_equal(store_grant(s, 10, on_lease, &n, 1), 0);
        assert_int_equal(f->last_timeout_ms, t);
        store_waited(s, true, t, 1000, false); /* refused at once */
        assert_int_equal(store_wait_ms(s, true, false), t);
        store_waited(s, false, t, (uint64_t)t * 1000, false); /* a keepalive's, say */
        assert_int_equal(store_wait_ms(s, true, false), t);
        store_waited(s, true, t, (uint64_t)t * 1000, false); /* no answer within its wait */
        assert_int_equal(store_grant(s, 10, on_lease, &n, 2), 0);
        assert_int_equal(f->last_timeout_ms, 2 * t);
        struct cluster_ident cl = {0};
        assert_int_equal(store_extend(s, &cl, 3, 1, "{}", 100, 0, on_extended, &n, 3), 0);
        assert_int_equal(f->last_timeout_ms, t);
        /* an answer, even a slow one, ends the doubling */
        store_waited(s, true, 2 * t, (uint64_t)t * 500, true);
        assert_int_equal(store_wait_ms(s, true, false), t * 3 / 2);
        assert_int_equal(store_wait_ms(s, false, false), t);
        /* behind the first connection: a patient call waits the longest, a
         * mark's write still store-timeout */
        fake_connecting_now = true;
        assert_int_equal(store_grant(s, 10, on_lease, &n, 4), 0);
        assert_int_equal(f->last_timeout_ms, PATIENCE_X * t);
        /* its answer, however fast, waited for the connection too: the
         * estimate is not fed (a fast answer would change it) */
        fake_connecting_now = false;
        f->cb(f->cb_userdata, &(struct store_reply){.answered = true, .http = 200, .tag = 4});
        assert_int_equal(n, 1);
        assert_int_equal(store_wait_ms(s, true, false), t * 3 / 2);
        fake_connecting_now = true;
        assert_int_equal(store_extend(s, &cl, 3, 1, "{}", 100, 0, on_extended, &n, 5), 0);
        assert_int_equal(f->last_timeout_ms, t);
        fake_connecting_now = false;
        f->cb(f->cb_userdata, &(struct store_reply){.answered = true, .http = 200, .tag = 5});
        assert_int_equal(n, 2);
        assert_null(store_free(s));
}

/* Two holders on one loop, each with its own backend: each asks its own
 * store for the cluster first, and each is freed with its store. */
static void test_two_holders(void **state)
{
        (void)state;
        n_fakes = 0;
        struct settings c2 = cfg;
        c2.instance = (char *)test_instance("store-2");
        struct shm_pub *p1 = NULL, *p2 = NULL;
        assert_int_equal(shm_pub_open(cfg.runtime_dir, cfg.instance, -1, -1, &p1), 0);
        assert_int_equal(shm_pub_open(c2.runtime_dir, c2.instance, -1, -1, &p2), 0);
        sd_event *ev = NULL;
        assert_int_equal(sd_event_new(&ev), 0);

        struct holder *h1 = NULL, *h2 = NULL;
        assert_int_equal(holder_new(ev, &cfg, p1, &fake_ops, NULL, &h1), 0);
        assert_int_equal(holder_new(ev, &c2, p2, &fake_ops, NULL, &h2), 0);
        assert_int_equal(n_fakes, 2);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(fakes[i].calls, 1);
                assert_string_equal(fakes[i].last_path, "/v3/kv/txn");
        }
        struct holder_status st;
        holder_status(h2, &st);
        assert_int_equal(st.worker, -1);
        assert_string_equal(st.lease, "claiming");
        assert_string_equal(st.store_name, "fake");
        assert_false(st.layout_ready);

        assert_null(holder_free(h1));
        assert_int_equal(fakes[0].frees, 1);
        assert_int_equal(fakes[1].frees, 0);
        assert_null(holder_free(h2));
        assert_int_equal(fakes[1].frees, 1);
        sd_event_unref(ev);
        shm_pub_close(p1);
        shm_pub_close(p2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dispatch),
                cmocka_unit_test(test_new_fails),
                cmocka_unit_test(test_backends_complete),
                cmocka_unit_test(test_patience),
                cmocka_unit_test(test_waits),
                cmocka_unit_test(test_two_holders),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
