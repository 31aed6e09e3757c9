/* SPDX-License-Identifier: MIT */
/*
 * The store's verbs (daemon/store/verbs.c) over a backend of the test's
 * own, which keeps each request and answers it with a body the test wrote:
 * what each verb compares and writes, and how each kind of answer (applied,
 * refused with reads, another fence, malformed, no answer) reads back as
 * the verb's typed result.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store.h"
#include "txn.h"
#include "verbs.h"

#define PREFIX "/snowid/t/"
#define FENCE "{\"token\":\"0123456789abcdef0123456789abcdef\",\"era\":5,\"claims_above\":7}"
#define OTHER "{\"token\":\"fedcba9876543210fedcba9876543210\",\"era\":6,\"claims_above\":9}"
#define VALUE "{\"host\":\"h\",\"token\":\"t-1\"}"

/* ---- a backend that keeps one request ---- */

static json_t *last_body;
static char last_path[64];
static store_cb last_cb;
static void *last_userdata;
static uint64_t last_tag;
static unsigned last_timeout_ms;
static struct store_stats stats;

static int fake_new(sd_event *event, const struct settings *cfg, void **ret)
{
        (void)event;
        (void)cfg;
        *ret = &stats;
        return 0;
}

static void fake_free(void *b)
{
        (void)b;
}

static int fake_call(void *b, const char *path, json_t *body, store_cb cb, void *userdata,
                     uint64_t tag, unsigned timeout_ms)
{
        (void)b;
        json_decref(last_body);
        last_body = body;
        snprintf(last_path, sizeof(last_path), "%s", path);
        last_cb = cb;
        last_userdata = userdata;
        last_tag = tag;
        last_timeout_ms = timeout_ms;
        return 0;
}

static unsigned fake_in_flight(const void *b)
{
        (void)b;
        return 0;
}

static void fake_nothing(void *b)
{
        (void)b;
}

static void fake_expect(void *b, uint64_t c)
{
        (void)b;
        (void)c;
}

static const char *fake_endpoint(const void *b)
{
        (void)b;
        return "fake";
}

static const struct store_stats *fake_stats(const void *b)
{
        return b;
}

static const struct store_ops fake_ops = {
        .name = "fake",
        .title = "Fake",
        .verbs = &store_txn_verbs,
        .new = fake_new,
        .free = fake_free,
        .call = fake_call,
        .in_flight = fake_in_flight,
        .history_reset = fake_nothing,
        .expect_cluster = fake_expect,
        .endpoint = fake_endpoint,
        .stats = fake_stats,
};

static struct store *store;
static struct cluster_ident cl;

/* Answers the request kept with status http and body (NULL: no answer). */
static void answer(long http, const char *body)
{
        struct store_reply r = {.tag = last_tag};
        if (body) {
                store_reply_parse(&r, http, body, strlen(body));
                r.answered = true;
                r.http = http;
                r.revision = 40;
        } else
                r.error = "timed out";
        store_cb cb = last_cb;
        last_cb = NULL;
        cb(last_userdata, &r);
        json_decref(r.json);
}

/* A kv as etcd's gateway gives it, into buf. */
static const char *kv(char *buf, size_t size, const char *key, const char *value, int64_t lease,
                      int64_t mod)
{
        json_t *k = store_b64("%s%s", PREFIX, key), *v = store_b64("%s", value);
        snprintf(buf, size,
                 "{\"kvs\":[{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\","
                 "\"mod_revision\":\"%lld\",\"create_revision\":\"3\"}]}",
                 json_string_value(k), json_string_value(v), (long long)lease, (long long)mod);
        json_decref(k);
        json_decref(v);
        return buf;
}

static const char *none = "{}";

/* A txn's answer: succeeded, and up to five range responses (NULL: none). */
static const char *txn(char *buf, size_t size, bool ok, const char *a, const char *b, const char *c,
                       const char *d, const char *e)
{
        const char *rs[] = {a, b, c, d, e};
        int n = snprintf(buf, size,
                         "{\"header\":{\"cluster_id\":\"7\",\"revision\":\"40\"},"
                         "\"succeeded\":%s,\"responses\":[",
                         ok ? "true" : "false");
        for (int i = 0; i < 5 && rs[i]; i++)
                n += snprintf(buf + n, size - (size_t)n, "%s{\"response_range\":%s}", i ? "," : "",
                              rs[i]);
        snprintf(buf + n, size - (size_t)n, "]}");
        return buf;
}

static const char *mark_text(uint64_t m)
{
        static char b[4][21];
        static int i;
        i = (i + 1) % 4;
        snprintf(b[i], sizeof(b[i]), "%020llu", (unsigned long long)m);
        return b[i];
}

/* Whether the request kept has a compare on key (after the prefix) with
 * target and result. */
static bool compares(const char *key, const char *target, const char *result)
{
        json_t *c, *k = store_b64("%s%s", PREFIX, key);
        size_t i;
        bool found = false;
        json_array_foreach(json_object_get(last_body, "compare"), i, c)
        {
                found |= !strcmp(json_string_value(json_object_get(c, "key")),
                                 json_string_value(k)) &&
                         !strcmp(json_string_value(json_object_get(c, "target")), target) &&
                         !strcmp(json_string_value(json_object_get(c, "result")), result);
        }
        json_decref(k);
        return found;
}

/* ---- results ---- */

static struct store_claimed claimed;
static struct store_extended extended;
static struct store_read readn;
static struct store_raised raised;
static struct store_number scanned[16];
static struct store_scan scan_res;
static int64_t got_lease, got_ttl;
static int calls;

static void on_claim(void *u, const struct store_answer *r, const struct store_claimed *c)
{
        (void)u;
        (void)r;
        claimed = *c;
        calls++;
}

static void on_extend(void *u, const struct store_answer *r, const struct store_extended *e)
{
        (void)u;
        (void)r;
        extended = *e;
        calls++;
}

static void on_read(void *u, const struct store_answer *r, const struct store_read *rd)
{
        (void)u;
        (void)r;
        readn = *rd;
        calls++;
}

static void on_raise(void *u, const struct store_answer *r, const struct store_raised *rs)
{
        (void)u;
        (void)r;
        raised = *rs;
        calls++;
}

static void on_scan(void *u, const struct store_answer *r, const struct store_scan *sc)
{
        (void)u;
        (void)r;
        scan_res = *sc;
        memset(scanned, 0, sizeof(scanned));
        if (sc->numbers)
                memcpy(scanned, sc->numbers,
                       sizeof(scanned[0]) * (sc->workers < 16 ? sc->workers : 16));
        scan_res.numbers = NULL;
        calls++;
}

static void on_lease(void *u, const struct store_answer *r, int64_t lease, int64_t ttl)
{
        (void)u;
        (void)r;
        got_lease = lease;
        got_ttl = ttl;
        calls++;
}

/* ---- tests ---- */

static void test_claim(void **state)
{
        (void)state;
        char a[512], b[512], c[512], d[512], e[512], body[4096];
        struct store_claim_req req = {.cl = &cl,
                                      .worker = 3,
                                      .lease = 77,
                                      .value = VALUE,
                                      .start = 1000,
                                      .mark = 9000,
                                      .modrev = 0,
                                      .own_worker = 5,
                                      .own_rev = 30};
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 11), 0);
        assert_string_equal(last_path, "/v3/kv/txn");
        assert_int_equal(last_tag, 11);
        assert_true(compares("workers/3", "CREATE", "EQUAL"));
        assert_true(compares("hwm/3", "MOD", "EQUAL"));
        assert_true(compares("fence", "VALUE", "EQUAL"));
        assert_true(compares("layout", "CREATE", "EQUAL"));
        assert_true(compares("hwm/5", "MOD", "GREATER")); /* its own last write */
        assert_true(compares("floor", "VALUE", "LESS"));  /* no mark: the floor below */
        answer(200, txn(body, sizeof(body), true, NULL, NULL, NULL, NULL, NULL));
        assert_true(claimed.succeeded);
        assert_int_equal(claimed.same, 1);
        assert_int_equal(claimed.revision, 40);
        assert_false(claimed.no_answer);

        /* refused: the fence as known, its own mark lowered and rewritten */
        req.modrev = 12;
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 12), 0);
        assert_false(compares("floor", "VALUE", "LESS")); /* a mark: no floor compare */
        answer(200,
               txn(body, sizeof(body), false, kv(a, sizeof(a), "workers/3", "x", 5, 20),
                   kv(b, sizeof(b), "hwm/3", mark_text(500), 0, 21),
                   kv(c, sizeof(c), "fence", FENCE, 0, 2), kv(d, sizeof(d), "layout", "{}", 0, 3),
                   kv(e, sizeof(e), "hwm/5", mark_text(100), 0, 25)));
        assert_false(claimed.succeeded);
        assert_int_equal(claimed.same, 1);
        assert_true(claimed.own_read);
        assert_true(claimed.own.marked);
        assert_true(claimed.own.mark_valid);
        assert_int_equal(claimed.own.mark, 100);
        assert_int_equal(claimed.own.mark_rev, 25);

        /* refused under another fence */
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 13), 0);
        answer(200,
               txn(body, sizeof(body), false, none, none, kv(c, sizeof(c), "fence", OTHER, 0, 2),
                   kv(d, sizeof(d), "layout", "{}", 0, 3), none));
        assert_int_equal(claimed.same, 0);
        assert_true(claimed.own_read);
        assert_false(claimed.own.marked); /* absent */

        /* no answer, a 5xx, a 200 that is not JSON: may be applied */
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 14), 0);
        answer(0, NULL);
        assert_true(claimed.no_answer);
        assert_int_equal(claimed.same, -1);
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 15), 0);
        answer(503, "{\"message\":\"busy\"}");
        assert_true(claimed.no_answer);
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 16), 0);
        answer(200, "not json");
        assert_true(claimed.no_answer);
        /* an own mark that cannot be read */
        assert_int_equal(store_claim(store, &req, on_claim, NULL, 17), 0);
        answer(200,
               txn(body, sizeof(body), false, none, none, kv(c, sizeof(c), "fence", FENCE, 0, 2),
                   kv(d, sizeof(d), "layout", "{}", 0, 3), "{\"kvs\":[{\"key\":5}]}"));
        assert_false(claimed.own_read);
}

static void test_extend_and_read(void **state)
{
        (void)state;
        char a[512], b[512], c[512], d[512], body[4096];
        assert_int_equal(store_extend(store, &cl, 3, 77, VALUE, 9000, 30, on_extend, NULL, 21), 0);
        assert_true(compares("workers/3", "LEASE", "EQUAL"));
        assert_true(compares("workers/3", "VALUE", "EQUAL"));
        assert_true(compares("hwm/3", "VALUE", "LESS"));
        assert_true(compares("hwm/3", "MOD", "GREATER"));
        /* refused: ours, the mark gone (rule 4 raises it) */
        answer(200, txn(body, sizeof(body), false, kv(a, sizeof(a), "workers/3", VALUE, 77, 20),
                        none, kv(c, sizeof(c), "fence", FENCE, 0, 2),
                        kv(d, sizeof(d), "layout", "{}", 0, 3), NULL));
        assert_false(extended.succeeded);
        assert_int_equal(extended.same, 1);
        assert_true(extended.n.held);
        assert_int_equal(extended.n.lease, 77);
        assert_true(extended.n.value_is);
        assert_false(extended.n.marked);
        assert_int_equal(extended.n.mark_rev, 0);
        /* another holder's value; a damaged mark */
        assert_int_equal(store_extend(store, &cl, 3, 77, VALUE, 9000, 30, on_extend, NULL, 22), 0);
        answer(200,
               txn(body, sizeof(body), false, kv(a, sizeof(a), "workers/3", "other", 78, 20),
                   kv(b, sizeof(b), "hwm/3", "12", 0, 31), kv(c, sizeof(c), "fence", FENCE, 0, 2),
                   kv(d, sizeof(d), "layout", "{}", 0, 3), NULL));
        assert_false(extended.n.value_is);
        assert_true(extended.n.marked);
        assert_false(extended.n.mark_valid);
        assert_false(extended.n.malformed);
        /* a read of a number */
        assert_int_equal(store_read_number(store, &cl, 3, VALUE, on_read, NULL, 23), 0);
        answer(200, txn(body, sizeof(body), true, kv(a, sizeof(a), "workers/3", VALUE, 77, 20),
                        kv(b, sizeof(b), "hwm/3", mark_text(8000), 0, 33),
                        kv(c, sizeof(c), "fence", OTHER, 0, 2),
                        kv(d, sizeof(d), "layout", "{}", 0, 3), NULL));
        assert_true(readn.ok);
        assert_int_equal(readn.same, 0);
        assert_int_equal(readn.n.mark, 8000);
        assert_int_equal(readn.n.mark_rev, 33);
        /* a raise that put; one that read */
        assert_int_equal(store_raise(store, &cl, 3, true, 9000, 33, on_raise, NULL, 24), 0);
        assert_true(compares("hwm/3", "MOD", "EQUAL"));
        answer(200, "{\"succeeded\":true,\"responses\":[{\"response_put\":{}}]}");
        assert_true(raised.put);
        assert_int_equal(raised.same, 1);
        assert_int_equal(store_raise(store, &cl, 3, false, 9000, 0, on_raise, NULL, 25), 0);
        answer(200,
               txn(body, sizeof(body), false, kv(b, sizeof(b), "hwm/3", mark_text(8000), 0, 33),
                   kv(c, sizeof(c), "fence", FENCE, 0, 2), kv(d, sizeof(d), "layout", "{}", 0, 3),
                   NULL, NULL));
        assert_false(raised.put);
        assert_int_equal(raised.same, 1);
        assert_int_equal(raised.n.mark, 8000);
        assert_false(raised.n.malformed);
        /* applied, yet no put in the answer: its mark is not read as absent */
        assert_int_equal(store_raise(store, &cl, 3, false, 9000, 0, on_raise, NULL, 26), 0);
        answer(200, "{\"succeeded\":true,\"responses\":[]}");
        assert_false(raised.put);
        assert_true(raised.n.malformed);
}

static void test_scan(void **state)
{
        (void)state;
        char a[512], b[512], c[512], d[512], e[512], f[512], g[512], body[8192];
        const uint32_t sample[2] = {2, 9};
        assert_int_equal(store_scan(store, &cl, 16, sample, 2, 41, on_scan, NULL, 31), 0);
        /* [workers/2, workers/9, hwm/2, hwm/9, floor, fence, layout] */
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":%s},"
                 "{\"response_range\":{}},{\"response_range\":%s},{\"response_range\":%s},"
                 "{\"response_range\":%s},{\"response_range\":%s},{\"response_range\":%s}]}",
                 kv(a, sizeof(a), "workers/2", VALUE, 5, 3),
                 kv(b, sizeof(b), "hwm/2", mark_text(70), 0, 4),
                 kv(c, sizeof(c), "hwm/9", mark_text(60), 0, 8),
                 kv(d, sizeof(d), "floor", mark_text(90), 0, 9),
                 kv(e, sizeof(e), "fence", FENCE, 0, 2), kv(f, sizeof(f), "layout", "{}", 0, 3));
        answer(200, body);
        assert_true(scan_res.ok);
        assert_int_equal(scan_res.same, 1);
        assert_int_equal(scan_res.floor_read, 1);
        assert_int_equal(scan_res.floor, 90);
        assert_true(scanned[2].held);
        assert_false(scanned[9].held);
        assert_int_equal(scanned[9].mark, 60);
        assert_int_equal(scanned[9].mark_rev, 8);
        assert_true(scanned[0].held); /* not in the sample */
        /* every number: a mark above the layout's time bits is none */
        assert_int_equal(store_scan(store, &cl, 16, NULL, 0, 41, on_scan, NULL, 32), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":{}},"
                 "{\"response_range\":%s},{\"response_range\":%s},{\"response_range\":%s},"
                 "{\"response_range\":%s}]}",
                 kv(a, sizeof(a), "hwm/4", mark_text(UINT64_C(1) << 41), 0, 4),
                 kv(d, sizeof(d), "floor", mark_text(90), 0, 9),
                 kv(e, sizeof(e), "fence", FENCE, 0, 2), kv(f, sizeof(f), "layout", "{}", 0, 3));
        answer(200, body);
        assert_false(scanned[0].held);
        assert_true(scanned[4].marked);
        assert_false(scanned[4].mark_valid);
        /* a damaged floor: as if lost; another fence */
        assert_int_equal(store_scan(store, &cl, 16, NULL, 0, 41, on_scan, NULL, 33), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":{}},"
                 "{\"response_range\":{}},{\"response_range\":%s},{\"response_range\":%s},"
                 "{\"response_range\":%s}]}",
                 kv(d, sizeof(d), "floor", "x", 0, 9), kv(e, sizeof(e), "fence", OTHER, 0, 2),
                 kv(g, sizeof(g), "layout", "{}", 0, 3));
        answer(200, body);
        assert_int_equal(scan_res.floor_read, 0);
        assert_int_equal(scan_res.same, 0);
        assert_int_equal(calls > 0, true);
}

static void test_leases(void **state)
{
        (void)state;
        assert_int_equal(store_grant(store, 10, on_lease, NULL, 41), 0);
        assert_string_equal(last_path, "/v3/lease/grant");
        answer(200, "{\"ID\":\"123\",\"TTL\":\"10\"}");
        assert_int_equal(got_lease, 123);
        assert_int_equal(got_ttl, 10);
        assert_int_equal(store_grant(store, 10, on_lease, NULL, 42), 0);
        answer(200, "{\"ID\":\"x\"}");
        assert_int_equal(got_lease, 0);
        assert_int_equal(store_keepalive(store, 123, on_lease, NULL, 43), 0);
        answer(200, "{\"result\":{\"ID\":\"123\",\"TTL\":\"7\"}}");
        assert_int_equal(got_ttl, 7);
        assert_int_equal(store_keepalive(store, 123, on_lease, NULL, 44), 0);
        answer(200, "{\"result\":{\"ID\":\"123\",\"TTL\":\"-1\"}}");
        assert_int_equal(got_ttl, 0); /* unknown */
        assert_int_equal(store_keepalive(store, 123, on_lease, NULL, 45), 0);
        answer(200, "{\"result\":{\"ID\":\"123\"}}");
        assert_int_equal(got_ttl, 0); /* unknown: TTL left out */
        assert_int_equal(store_keepalive(store, 123, on_lease, NULL, 46), 0);
        answer(200, "{\"error\":{}}");
        assert_int_equal(got_ttl, -1);
        assert_int_equal(store_keepalive(store, 123, on_lease, NULL, 47), 0);
        answer(0, NULL);
        assert_int_equal(got_ttl, -1);
}

static struct store_cluster cluster_res;
static char record_region[32], record_value[64];
static struct store_creating creating_res;
static bool done_ok, done_succeeded;

static void on_cluster(void *u, const struct store_answer *r, const struct store_cluster *c)
{
        (void)u;
        (void)r;
        cluster_res = *c;
        record_region[0] = record_value[0] = 0;
        if (c->n_records && c->records[0].region) {
                snprintf(record_region, sizeof(record_region), "%s", c->records[0].region);
                snprintf(record_value, sizeof(record_value), "%s", c->records[0].value);
        }
        cluster_res.records = NULL;
        calls++;
}

static void on_creating(void *u, const struct store_answer *r, const struct store_creating *c)
{
        (void)u;
        (void)r;
        creating_res = *c;
        calls++;
}

static void on_done(void *u, const struct store_answer *r, bool ok, bool succeeded)
{
        (void)u;
        (void)r;
        done_ok = ok;
        done_succeeded = succeeded;
        calls++;
}

#define LAYOUT "{\"epoch_ms\":1735689600000,\"time_bits\":41,\"worker_bits\":10,\"seq_bits\":12}"

static void test_cluster(void **state)
{
        (void)state;
        char a[512], b[512], c[512], d[512], e[512], f[512], body[8192];
        /* [layout, fence, floor, workers/, hwm/, ranges/, witness/, creating,
         * hwm/<own>] */
        assert_int_equal(store_read_cluster(store, false, 4, on_cluster, NULL, 51), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":%s},"
                 "{\"response_range\":%s},{\"response_range\":%s},{\"response_range\":{}},"
                 "{\"response_range\":{}},{\"response_range\":%s},{\"response_range\":{}},"
                 "{\"response_range\":{}},{\"response_range\":%s}]}",
                 kv(a, sizeof(a), "layout", LAYOUT, 0, 3), kv(b, sizeof(b), "fence", FENCE, 0, 2),
                 kv(c, sizeof(c), "floor", mark_text(90), 0, 9),
                 kv(d, sizeof(d), "ranges/eu", "{\"from\":0,\"to\":511}", 0, 10),
                 kv(e, sizeof(e), "hwm/4", mark_text(77), 0, 12));
        answer(200, body);
        assert_true(cluster_res.ok);
        assert_false(cluster_res.malformed);
        assert_int_equal(cluster_res.layout, 1);
        assert_int_equal(cluster_res.l.worker_bits, 10);
        assert_int_equal(cluster_res.layout_rev, 3);
        assert_int_equal(cluster_res.fence, 1);
        assert_int_equal(cluster_res.c.claims_above, 7);
        assert_int_equal(cluster_res.c.layout_rev, 3);
        assert_int_equal(cluster_res.floor, 1);
        assert_int_equal(cluster_res.floor_value, 90);
        assert_int_equal(cluster_res.n_records, 1);
        assert_string_equal(record_region, "eu");
        assert_string_equal(record_value, "{\"from\":0,\"to\":511}");
        assert_true(cluster_res.own_read);
        assert_int_equal(cluster_res.own_worker, 4);
        assert_int_equal(cluster_res.own_mark_rev, 12);
        assert_false(cluster_res.witnessed);
        assert_int_equal(cluster_res.creating, 0);
        /* never used: nothing there, no holder, every mark 0; a witness;
         * another host making it */
        assert_int_equal(store_read_cluster(store, true, -1, on_cluster, NULL, 0), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":false,\"responses\":[{\"response_range\":{}},"
                 "{\"response_range\":{}},{\"response_range\":{}},{\"response_range\":{}},"
                 "{\"response_range\":%s},{\"response_range\":{}},{\"response_range\":%s},"
                 "{\"response_range\":%s}]}",
                 kv(a, sizeof(a), "hwm/9", mark_text(0), 0, 4),
                 kv(f, sizeof(f), "witness/x", "{}", 0, 5),
                 kv(e, sizeof(e), "creating", "other 17", 0, 33));
        answer(200, body);
        assert_int_equal(cluster_res.creating, 1);
        assert_string_equal(cluster_res.creating_value, "other 17");
        assert_int_equal(cluster_res.creating_rev, 33);
        assert_int_equal(cluster_res.layout, 0);
        assert_int_equal(cluster_res.fence, 0);
        assert_int_equal(cluster_res.floor, 0);
        assert_false(cluster_res.held);
        assert_true(cluster_res.marks_zero);
        assert_true(cluster_res.witnessed);
        assert_false(cluster_res.own_read);
        /* a mark above 0, a damaged layout, fence and floor */
        assert_int_equal(store_read_cluster(store, true, -1, on_cluster, NULL, 0), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":%s},"
                 "{\"response_range\":%s},{\"response_range\":%s},{\"response_range\":{}},"
                 "{\"response_range\":%s},{\"response_range\":{}},{\"response_range\":{}},"
                 "{\"response_range\":{}}]}",
                 kv(a, sizeof(a), "layout", "{\"epoch_ms\":1}", 0, 3),
                 kv(b, sizeof(b), "fence", "{}", 0, 2), kv(c, sizeof(c), "floor", "9", 0, 9),
                 kv(d, sizeof(d), "hwm/9", mark_text(5), 0, 4));
        answer(200, body);
        assert_int_equal(cluster_res.layout, -1);
        assert_string_equal(cluster_res.layout_text, "{\"epoch_ms\":1}");
        assert_int_equal(cluster_res.fence, -1);
        assert_int_equal(cluster_res.floor, -1);
        assert_false(cluster_res.marks_zero);
        /* a region's record that cannot be read: malformed, not skipped */
        assert_int_equal(store_read_cluster(store, false, -1, on_cluster, NULL, 0), 0);
        snprintf(body, sizeof(body),
                 "{\"succeeded\":true,\"responses\":[{\"response_range\":%s},"
                 "{\"response_range\":%s},{\"response_range\":%s},{\"response_range\":{}},"
                 "{\"response_range\":{}},{\"response_range\":{\"kvs\":[{\"key\":7}]}},"
                 "{\"response_range\":{}},{\"response_range\":{}}]}",
                 kv(a, sizeof(a), "layout", LAYOUT, 0, 3), kv(b, sizeof(b), "fence", FENCE, 0, 2),
                 kv(c, sizeof(c), "floor", mark_text(90), 0, 9));
        answer(200, body);
        assert_true(cluster_res.malformed);
        /* an answer without its ops: malformed, not absent */
        assert_int_equal(store_read_cluster(store, false, -1, on_cluster, NULL, 0), 0);
        answer(200, "{\"succeeded\":true,\"responses\":[]}");
        assert_true(cluster_res.malformed);
        assert_int_equal(store_read_cluster(store, false, -1, on_cluster, NULL, 0), 0);
        answer(0, NULL);
        assert_false(cluster_res.ok);

        /* creating: taken by another host; and made */
        assert_int_equal(store_creating(store, "tok 5", 0, on_creating, NULL, 0), 0);
        assert_true(compares("creating", "CREATE", "EQUAL"));
        answer(200, txn(body, sizeof(body), false, none,
                        kv(a, sizeof(a), "creating", "other 17", 0, 33), NULL, NULL, NULL));
        assert_false(creating_res.succeeded);
        assert_int_equal(creating_res.layout, 0);
        assert_int_equal(creating_res.creating, 1);
        assert_string_equal(creating_res.value, "other 17");
        assert_int_equal(creating_res.mod_rev, 33);
        assert_int_equal(store_creating(store, "tok 5", 33, on_creating, NULL, 0), 0);
        assert_true(compares("creating", "MOD", "EQUAL")); /* over a stale one */
        answer(200, "{\"succeeded\":true,\"responses\":[{\"response_put\":{}}]}");
        assert_true(creating_res.succeeded);
        const snowid_layout l = {1735689600000, 41, 10, 12};
        assert_int_equal(store_make_cluster(store, &l, FENCE, 1234, true, on_done, NULL), 0);
        assert_true(compares("layout", "CREATE", "EQUAL"));
        assert_true(compares("witness/", "CREATE", "EQUAL"));
        assert_true(compares("hwm/", "VALUE", "EQUAL"));
        answer(200, "{\"succeeded\":false}");
        assert_true(done_ok);
        assert_false(done_succeeded);
}

static void test_drop(void **state)
{
        (void)state;
        /* a verb in flight when its store is freed: its answer never comes,
         * its callback never runs, and nothing it kept is left (ASan) */
        struct store *s;
        static struct settings cfg;
        int before = calls;
        assert_int_equal(store_new_with(&fake_ops, NULL, &cfg, &s), 0);
        store_set_prefix(s, PREFIX);
        assert_int_equal(store_read_number(s, &cl, 3, VALUE, on_read, NULL, 61), 0);
        assert_int_equal(store_grant(s, 10, on_lease, NULL, 62), 0);
        last_cb = NULL;
        assert_null(store_free(s));
        assert_int_equal(calls, before);
}

static int setup(void **state)
{
        (void)state;
        static struct settings cfg;
        if (store_new_with(&fake_ops, NULL, &cfg, &store) < 0)
                return -1;
        store_set_prefix(store, PREFIX);
        if (fence_parse(FENCE, strlen(FENCE), &cl) < 0)
                return -1;
        cl.layout_rev = 3;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        store = store_free(store);
        json_decref(last_body);
        last_body = NULL;
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_claim),   cmocka_unit_test(test_extend_and_read),
                cmocka_unit_test(test_scan),    cmocka_unit_test(test_leases),
                cmocka_unit_test(test_cluster), cmocka_unit_test(test_drop),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
