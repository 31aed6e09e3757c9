/* SPDX-License-Identifier: MIT */
/*
 * How the daemon classes etcd's refusals (daemon/store/etcd-json.c, and the
 * answers' reading in daemon/store/answer.c): answers as
 * etcd 3.4's gateway sends them (the bodies were taken from a real etcd with
 * auth and TLS on), and libcurl's codes with the text of its error buffer.
 * A refusal names a setting to fix; everything else is an outage.
 */
#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "etcd.h"
#include "txn.h"

struct answer {
        long http;
        const char *body;
        enum store_err want;
        const char *error; /* what r.error must say; NULL: not checked */
};

#define JSON_ERR(msg, code) "{\"error\":\"" msg "\",\"message\":\"" msg "\",\"code\":" #code "}"

static const struct answer answers[] = {
        /* refusals */
        {400, JSON_ERR("etcdserver: authentication failed, invalid user ID or password", 3),
         STORE_ERR_AUTH, "etcdserver: authentication failed, invalid user ID or password"},
        {400, JSON_ERR("etcdserver: user name is empty", 3), STORE_ERR_AUTH,
         "etcdserver: user name is empty"},
        {412, JSON_ERR("etcdserver: authentication is not enabled", 9), STORE_ERR_AUTH, NULL},
        {403, JSON_ERR("etcdserver: permission denied", 7), STORE_ERR_PERMISSION,
         "etcdserver: permission denied"},
        {403, "{}", STORE_ERR_PERMISSION, "the store answered an error"},
        {400,
         "CommonName of client sending a request against gateway will be ignored and not "
         "used as expected\n",
         STORE_ERR_CERT,
         "CommonName of client sending a request against gateway will be ignored and not used "
         "as expected"},
        /* outages, and errors a retry or a new token mends */
        {401, JSON_ERR("etcdserver: invalid auth token", 16), STORE_ERR_NONE, NULL},
        {503, JSON_ERR("etcdserver: no leader", 14), STORE_ERR_NONE, "etcdserver: no leader"},
        {503,
         "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: no "
         "leader\",\"http_status\":\"Service Unavailable\"}}",
         STORE_ERR_NONE, "the store answered an error"},
        {500, JSON_ERR("context deadline exceeded", 2), STORE_ERR_NONE, NULL},
        {429, JSON_ERR("etcdserver: mvcc: database space exceeded", 8), STORE_ERR_NONE, NULL},
        {400, JSON_ERR("illegal base64 data at input byte 0", 3), STORE_ERR_NONE, NULL},
        {404, JSON_ERR("etcdserver: requested lease not found", 5), STORE_ERR_NONE, NULL},
        {404, "404 page not found\n", STORE_ERR_NONE, "404 page not found"},
        {502, "<html>bad gateway: no certificate</html>", STORE_ERR_NONE, NULL},
        {200, "{\"header\":{\"revision\":\"1\"}}", STORE_ERR_NONE, NULL},
        {200, "certificate", STORE_ERR_NONE, "the store's answer is not a JSON object"},
};

static void test_answers(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(answers) / sizeof(*answers); i++) {
                const struct answer *a = &answers[i];
                struct store_reply r = {0};
                store_reply_parse(&r, a->http, a->body, strlen(a->body));
                if (r.err != a->want)
                        fail_msg("answer %zu (%ld %s): class %d, not %d", i, a->http, a->body,
                                 r.err, a->want);
                if (a->error)
                        assert_string_equal(r.error, a->error);
                if (a->http != 200)
                        assert_non_null(r.error);
                assert_true(r.answered);
                json_decref(r.json);
        }
}

/* A plain-text refusal is kept in the reply, one printable line, cut to fit. */
static void test_plain_text(void **state)
{
        char body[600];
        struct store_reply r = {0};
        (void)state;
        memset(body, 'x', sizeof(body));
        memcpy(body, "CommonName\x01\x7f", 12);
        store_reply_parse(&r, 400, body, sizeof(body));
        assert_int_equal(r.err, STORE_ERR_CERT);
        assert_ptr_equal(r.error, r.text);
        assert_int_equal(strlen(r.text), sizeof(r.text) - 1);
        assert_memory_equal(r.text, "CommonName??xx", 14);
        assert_null(r.json);

        memset(&r, 0, sizeof(r));
        store_reply_parse(&r, 400, "first\r\nCommonName", 17);
        assert_string_equal(r.error, "first");
        assert_int_equal(r.err, STORE_ERR_NONE); /* only the first line counts */

        memset(&r, 0, sizeof(r));
        store_reply_parse(&r, 400, NULL, 0);
        assert_string_equal(r.error, "the store answered an error");
        assert_int_equal(r.err, STORE_ERR_NONE);
}

static void test_curl(void **state)
{
        (void)state;
        static const struct {
                int code;
                const char *errbuf;
                enum store_err want;
        } cases[] = {
                {CURLE_PEER_FAILED_VERIFICATION,
                 "SSL certificate problem: unable to get local issuer certificate", STORE_ERR_TLS},
                {CURLE_PEER_FAILED_VERIFICATION,
                 "SSL: no alternative certificate subject name matches target host name "
                 "'localhost'",
                 STORE_ERR_TLS},
                {CURLE_SSL_CACERT_BADFILE, "error setting certificate file: /x", STORE_ERR_TLS},
                {CURLE_SSL_CERTPROBLEM, "unable to set private key file: 'k.pem' type PEM",
                 STORE_ERR_CERT},
                {CURLE_RECV_ERROR,
                 "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A000412:SSL routines::sslv3 alert "
                 "bad certificate, errno 0",
                 STORE_ERR_CERT},
                {CURLE_SSL_CONNECT_ERROR,
                 "OpenSSL/3.0.19: error:0A00045C:SSL routines::tlsv13 alert certificate required",
                 STORE_ERR_CERT},
                {CURLE_SSL_CONNECT_ERROR,
                 "OpenSSL/3.0.19: error:0A000418:SSL routines::tlsv1 "
                 "alert unknown ca",
                 STORE_ERR_CERT},
                /* a member going away mid-handshake, or never there */
                {CURLE_SSL_CONNECT_ERROR,
                 "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to 127.0.0.1:2379",
                 STORE_ERR_NONE},
                {CURLE_RECV_ERROR, "Recv failure: Connection reset by peer", STORE_ERR_NONE},
                {CURLE_RECV_ERROR, NULL, STORE_ERR_NONE},
                {CURLE_COULDNT_CONNECT, "Failed to connect to 127.0.0.1 port 2379", STORE_ERR_NONE},
                {CURLE_OPERATION_TIMEDOUT, "Operation timed out after 2000 milliseconds",
                 STORE_ERR_NONE},
                {CURLE_GOT_NOTHING, "Empty reply from server", STORE_ERR_NONE},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
                if (etcd_curl_err(cases[i].code, cases[i].errbuf) != cases[i].want)
                        fail_msg("curl %d '%s': not class %d", cases[i].code,
                                 cases[i].errbuf ? cases[i].errbuf : "(null)", cases[i].want);
}

static void test_names(void **state)
{
        (void)state;
        assert_null(etcd_err_name(STORE_ERR_NONE));
        assert_string_equal(etcd_err_name(STORE_ERR_AUTH), "etcd-auth");
        assert_string_equal(etcd_err_name(STORE_ERR_PERMISSION), "etcd-permission");
        assert_string_equal(etcd_err_name(STORE_ERR_TLS), "etcd-tls");
        assert_string_equal(etcd_err_name(STORE_ERR_CERT), "etcd-cert");
        assert_null(etcd_err_name(STORE_ERR_MAX_));
        assert_null(etcd_err_name((enum store_err) - 1));
}

/* One answer with this header, noted as a kv (linearizable) or a lease
 * answer sent when the history stood at rev_at_send. */
static struct store_reply noted(struct store_history *hist, const char *cluster, int64_t revision,
                                int64_t rev_at_send, bool linearizable)
{
        char body[160];
        struct store_reply r = {0};
        snprintf(body, sizeof(body), "{\"header\":{\"cluster_id\":\"%s\",\"revision\":\"%lld\"}}",
                 cluster, (long long)revision);
        store_reply_parse(&r, 200, body, strlen(body));
        store_history_note(hist, rev_at_send, hist->gen, linearizable, &r);
        json_decref(r.json);
        return r;
}

/* Revisions and cluster IDs: a kv answer lower than one seen before it was
 * sent is a restore; a lease answer lower is only worth a check (a member
 * that lags); any answer from another cluster is a restore, and sticks. */
static void test_history(void **state)
{
        (void)state;
        struct store_history hist = {0};
        struct store_reply r = noted(&hist, "7", 10, 0, true);
        assert_false(r.went_back);
        assert_int_equal(hist.max_rev, 10);
        assert_int_equal(hist.cluster_id, 7);
        r = noted(&hist, "7", 8, 10, false); /* a lease answer from a lagging member */
        assert_false(r.went_back);
        assert_true(r.behind);
        assert_int_equal(hist.max_rev, 10);
        r = noted(&hist, "7", 12, 10, false);
        assert_false(r.behind);
        assert_int_equal(hist.max_rev, 10); /* lease answers do not raise it */
        r = noted(&hist, "7", 9, 10, true); /* a kv answer below: restored */
        assert_true(r.went_back);
        r = noted(&hist, "7", 50, 10, true);
        assert_true(r.went_back); /* sticky */
        /* another cluster, on a lease answer too */
        hist = (struct store_history){.gen = 1, .cluster_id = 7};
        r = noted(&hist, "8", 100, 0, false);
        assert_true(r.went_back);
        assert_int_equal(r.cluster_id, 8);
        /* a keepalive's answer: the header inside "result" */
        hist = (struct store_history){.cluster_id = 7};
        r = (struct store_reply){0};
        const char *ka = "{\"result\":{\"header\":{\"cluster_id\":\"8\",\"revision\":\"3\"},"
                         "\"ID\":\"5\",\"TTL\":\"9\"}}";
        store_reply_parse(&r, 200, ka, strlen(ka));
        store_history_note(&hist, 0, 0, false, &r);
        assert_int_equal(r.revision, 3);
        assert_true(r.went_back);
        json_decref(r.json);
        /* no header: nothing noted */
        hist = (struct store_history){0};
        r = (struct store_reply){0};
        store_reply_parse(&r, 200, "{}", 2);
        store_history_note(&hist, 5, 0, true, &r);
        assert_false(r.went_back);
        assert_int_equal(r.revision, 0);
        json_decref(r.json);
}

/* A fence names the cluster ID it was made on, or none (an earlier
 * snowid's); a damaged cluster_id is no fence. */
static void test_fence_cluster_id(void **state)
{
        (void)state;
        struct cluster_ident c = {0}, d = {0};
        assert_int_equal(fence_make(100, 0, 9808234760971256761ULL, false, &c), 0);
        assert_int_equal(c.cluster_id, 9808234760971256761ULL);
        assert_int_equal(c.claims_above, 100);
        assert_false(c.made);
        assert_int_equal(fence_parse(c.fence, c.fence_len, &d), 0);
        assert_int_equal(d.cluster_id, 9808234760971256761ULL);
        assert_false(d.made);
        assert_int_equal(fence_make(100, c.era, 0, true, &c), 0);
        assert_int_equal(c.cluster_id, 0);
        assert_true(c.made);
        assert_null(strstr(c.fence, "cluster_id"));
        assert_int_equal(fence_parse(c.fence, c.fence_len, &d), 0);
        assert_true(d.made);
        /* "made" is a boolean or absent */
        static const char *const made_bad = "{\"token\":\"0123456789abcdef0123456789abcdef\","
                                            "\"era\":5,\"claims_above\":7,\"made\":1}";
        assert_int_equal(fence_parse(made_bad, strlen(made_bad), &d), -EBADMSG);
        static const char *const bad[] = {
                "\"\"", "\"12x\"", "\"-1\"", "\"0\"", "12", "\"99999999999999999999999\"",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char v[200];
                int n = snprintf(v, sizeof(v),
                                 "{\"token\":\"%032d\",\"era\":1,\"claims_above\":2,"
                                 "\"cluster_id\":%s}",
                                 0, bad[i]);
                assert_true(fence_parse(v, (size_t)n, &d) < 0);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_answers), cmocka_unit_test(test_plain_text),
                cmocka_unit_test(test_curl),    cmocka_unit_test(test_names),
                cmocka_unit_test(test_history), cmocka_unit_test(test_fence_cluster_id),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
