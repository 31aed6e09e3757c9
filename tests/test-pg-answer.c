/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL store's parts that need no server (daemon/store/pg-answer.c,
 * daemon/store/pg-conninfo.c): a connection string with a password is refused,
 * server errors are classed by SQLSTATE and libpq's connect messages, and
 * the revisions a verb's row carries are noted as etcd's would be.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pg.h"

static void test_conninfo(void **state)
{
        static const char *const good[] = {
                "host=127.0.0.1 port=5432 dbname=snowid user=snowid",
                "host=/run/postgresql dbname=snowid passfile=/etc/snowid/pgpass",
                "postgresql://snowid@db:5432/snowid?sslmode=verify-full&sslrootcert=/ca.pem",
                "postgresql://[::1]:5432/snowid",
                "postgres:///snowid?host=/tmp",
                "dbname=snowid password=", /* empty: none */
                "",
        };
        static const char *const with_password[] = {
                "host=127.0.0.1 password=hunter2",
                "password='a b' host=x",
                "postgresql://snowid:hunter2@db.example/snowid",
                "postgres://snowid:hunter2@db.example:5432",
                "postgresql://db.example/snowid?password=hunter2",
        };
        static const char *const malformed[] = {
                "host=x bogus=1",
                "host='unterminated",
                "postgresql://db.example/snowid?bogus=1",
        };
        char why[256];
        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
                if (pg_conninfo_check(good[i], why, sizeof(why)) != 0)
                        fail_msg("'%s' refused: %s", good[i], why);
        for (size_t i = 0; i < sizeof(with_password) / sizeof(*with_password); i++) {
                if (pg_conninfo_check(with_password[i], why, sizeof(why)) == 0)
                        fail_msg("'%s' taken", with_password[i]);
                assert_non_null(strstr(why, "passfile"));
                assert_null(strstr(why, "hunter2"));
        }
        for (size_t i = 0; i < sizeof(malformed) / sizeof(*malformed); i++) {
                if (pg_conninfo_check(malformed[i], why, sizeof(why)) == 0)
                        fail_msg("'%s' taken", malformed[i]);
                assert_null(strstr(why, "passfile"));
        }
}

static void test_sqlstate(void **state)
{
        static const struct {
                const char *sqlstate;
                enum store_err err;
                long http;
                bool nospace;
        } cases[] = {
                {"28P01", STORE_ERR_AUTH, 401, false},       {"28000", STORE_ERR_AUTH, 401, false},
                {"42501", STORE_ERR_PERMISSION, 403, false}, {"53100", STORE_ERR_NONE, 429, true},
                {"53200", STORE_ERR_NONE, 500, false}, /* out of memory: transient */
                {"40001", STORE_ERR_NONE, 500, false}, /* serialization failure */
                {"42883", STORE_ERR_NONE, 500, false}, /* a verb's function missing */
                {NULL, STORE_ERR_NONE, 500, false},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct store_reply r = {0};
                assert_int_equal(pg_sqlstate_err(cases[i].sqlstate), cases[i].err);
                pg_error_reply(&r, cases[i].sqlstate, "ERROR:  something\nDETAIL:  more\n");
                assert_true(r.answered);
                assert_int_equal(r.http, cases[i].http);
                assert_int_equal(r.err, cases[i].err);
                assert_int_equal(r.nospace, cases[i].nospace);
                assert_string_equal(r.error, "ERROR:  something");
                assert_null(r.json);
                assert_false(store_ok(&r));
        }
        struct store_reply r = {0};
        pg_error_reply(&r, "XX000", NULL);
        assert_string_equal(r.error, "PostgreSQL reported an error");
        pg_error_reply(&r, "XX000", "caf\xc3\xa9\tbar");
        assert_string_equal(r.error, "caf??\?bar");
}

static void test_connect_err(void **state)
{
        static const struct {
                const char *msg;
                enum store_err err;
        } cases[] = {
                {"connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password "
                 "authentication failed for user \"snowid\"\n",
                 STORE_ERR_AUTH},
                {"connection to server at \"127.0.0.1\", port 5432 failed: fe_sendauth: no "
                 "password supplied\n",
                 STORE_ERR_AUTH},
                {"connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: FATAL:  no "
                 "pg_hba.conf entry for host \"[local]\", user \"x\", database \"y\", no "
                 "encryption\n",
                 STORE_ERR_AUTH},
                {"FATAL:  role \"snowid\" does not exist\n", STORE_ERR_AUTH},
                {"FATAL:  permission denied for database \"snowid\"\nDETAIL:  User does not "
                 "have CONNECT privilege.\n",
                 STORE_ERR_PERMISSION},
                {"connection to server at \"db\" (10.0.0.1), port 5432 failed: SSL error: "
                 "certificate verify failed\n",
                 STORE_ERR_TLS},
                {"server certificate for \"db.example\" does not match host name \"db\"\n",
                 STORE_ERR_TLS},
                {"root certificate file \"/root/.postgresql/root.crt\" does not exist\n",
                 STORE_ERR_TLS},
                {"server does not support SSL, but SSL was required\n", STORE_ERR_TLS},
                {"FATAL:  connection requires a valid client certificate\n", STORE_ERR_CERT},
                {"FATAL:  certificate authentication failed for user \"snowid\"\n", STORE_ERR_CERT},
                {"SSL error: sslv3 alert certificate required\n", STORE_ERR_CERT},
                {"SSL error: tlsv1 alert unknown ca\n", STORE_ERR_CERT},
                {"could not load private key file \"/k.pem\": No such file\n", STORE_ERR_CERT},
                /* outages */
                {"connection to server at \"127.0.0.1\", port 5432 failed: Connection "
                 "refused\n\tIs the server running on that host and accepting TCP/IP "
                 "connections?\n",
                 STORE_ERR_NONE},
                {"FATAL:  the database system is starting up\n", STORE_ERR_NONE},
                {"FATAL:  the database system is shutting down\n", STORE_ERR_NONE},
                {"FATAL:  sorry, too many clients already\n", STORE_ERR_NONE},
                {"server closed the connection unexpectedly\n", STORE_ERR_NONE},
                {"could not translate host name \"db\" to address\n", STORE_ERR_NONE},
                {"", STORE_ERR_NONE},
                {NULL, STORE_ERR_NONE},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
                if (pg_connect_err(cases[i].msg) != cases[i].err)
                        fail_msg("'%s': class %d, not %d", cases[i].msg,
                                 pg_connect_err(cases[i].msg), cases[i].err);
}

/* A server's error as a reply: its class, and the status the holder reads. */
static void test_errors(void **state)
{
        static const struct {
                const char *sqlstate;
                long http;
                enum store_err err;
                bool nospace;
        } cases[] = {
                {"28P01", 401, STORE_ERR_AUTH, false}, {"42501", 403, STORE_ERR_PERMISSION, false},
                {"53100", 429, STORE_ERR_NONE, true},  {"40001", 500, STORE_ERR_NONE, false},
                {"SNOW2", 500, STORE_ERR_NONE, false}, {NULL, 500, STORE_ERR_NONE, false},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct store_reply r = {0};
                pg_error_reply(&r, cases[i].sqlstate, "ERROR:  something\nDETAIL: more");
                if (!r.answered || r.http != cases[i].http || r.err != cases[i].err ||
                    r.nospace != cases[i].nospace || store_ok(&r))
                        fail_msg("%s: answered %d http %ld err %d nospace %d", cases[i].sqlstate,
                                 r.answered, r.http, r.err, r.nospace);
                assert_string_equal(r.error, "ERROR:  something");
        }
}

/* A verb's row carries the store's identity and, for a write, its
 * revision: a read (revision 0) is checked on its identity alone. */
static void test_history(void **state)
{
        struct store_history hist = {0};
        struct store_reply r = {.revision = 40, .cluster_id = 9};
        (void)state;
        store_history_seen(&hist, 0, 0, true, &r);
        assert_false(r.went_back);
        assert_int_equal(hist.max_rev, 40);
        /* a read: no revision, the same store */
        r = (struct store_reply){.cluster_id = 9};
        store_history_seen(&hist, 0, 0, true, &r);
        assert_false(r.went_back);
        /* a write below one seen before it was sent: a restore */
        r = (struct store_reply){.revision = 30, .cluster_id = 9};
        store_history_seen(&hist, hist.max_rev, 0, true, &r);
        assert_true(r.went_back);
        /* a read from another store, after a reset */
        store_history_forget(&hist);
        hist.cluster_id = 9;
        r = (struct store_reply){.cluster_id = 10};
        store_history_seen(&hist, 0, hist.gen, true, &r);
        assert_true(r.went_back);
}

/* The schema is embedded whole and ends with a NUL. */
static void test_embedded_sql(void **state)
{
        (void)state;
        assert_non_null(strstr(snowid_postgres_sql, "FUNCTION snowid.claim("));
        assert_null(strstr(snowid_postgres_sql, "snowid.call("));
        assert_true(strlen(snowid_postgres_sql) > 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_conninfo),    cmocka_unit_test(test_sqlstate),
                cmocka_unit_test(test_connect_err), cmocka_unit_test(test_errors),
                cmocka_unit_test(test_history),     cmocka_unit_test(test_embedded_sql),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
