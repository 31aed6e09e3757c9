/* SPDX-License-Identifier: MIT */
/*
 * daemon/store/pg.c in a real sd-event loop, driven line by line from stdin by
 * tests/integration/test_pg_transport.py:
 *   call TAG PATH JSON   pg_query() of the test's statement; the answer comes
 *                        as one JSON line
 *   stats                the counters, as one JSON line
 *   quit
 * Usage: snowid-pg-driver CONNINFO TIMEOUT_MS
 *
 * The schema run on each connection is the test's own: its snowid.call()
 * sleeps, raises or answers as the body asks, which the daemon's verbs never
 * do; each connection prepares it as the statement snowid_call, whose row
 * carries the columns every verb's does (cid, rev) and the answer (body).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "pg.h"

const char snowid_postgres_sql[] =
        "SELECT pg_advisory_xact_lock(7723);\n"
        "CREATE SCHEMA IF NOT EXISTS snowid;\n"
        "CREATE SEQUENCE IF NOT EXISTS snowid.rev;\n"
        "CREATE OR REPLACE FUNCTION snowid.call(path text, body jsonb) RETURNS jsonb\n"
        "LANGUAGE plpgsql AS $$\n"
        "BEGIN\n"
        "  IF body ? 'sleep_ms' THEN\n"
        "    PERFORM pg_sleep((body->>'sleep_ms')::int / 1000.0);\n"
        "  END IF;\n"
        "  IF body ? 'raise' THEN\n"
        "    RAISE EXCEPTION USING ERRCODE = body->>'raise', MESSAGE = 'raised ' || "
        "(body->>'raise');\n"
        "  END IF;\n"
        "  IF body ? 'answer' THEN\n"
        "    RETURN body->'answer';\n"
        "  END IF;\n"
        "  RETURN jsonb_build_object('status', 200, 'body', jsonb_build_object(\n"
        "    'header', jsonb_build_object('cluster_id', '77', 'member_id', '1',\n"
        "                                 'revision', nextval('snowid.rev')::text),\n"
        "    'path', path, 'echo', body, 'pid', pg_backend_pid()));\n"
        "END $$;\n";

static const char prepare_sql[] = "PREPARE snowid_call AS SELECT j::text AS body, "
                                  "(j->'body'->'header'->>'cluster_id')::bigint AS cid, "
                                  "(j->'body'->'header'->>'revision')::bigint AS rev "
                                  "FROM snowid.call($1::text, $2::jsonb) j;";

static struct settings cfg;
static struct pg *pg;
static sd_event *event;
static bool in_call;
static char line[16 << 20]; /* a call of several megabytes fits */
static size_t line_len;

static void on_reply(void *userdata, const struct store_reply *r, const PGresult *res)
{
        (void)userdata;
        bool ok = r->answered && r->http == 200 && res;
        json_t *o = json_pack("{s:I, s:b, s:I, s:b, s:s?, s:s?, s:b, s:I, s:I, s:I, s:b, s:b}",
                              "tag", (json_int_t)r->tag, "answered", r->answered, "http",
                              (json_int_t)r->http, "ok", ok, "error", r->error, "err",
                              pg_err_name(r->err), "nospace", r->nospace, "usec",
                              (json_int_t)r->usec, "revision", (json_int_t)r->revision, "in_flight",
                              (json_int_t)pg_in_flight(pg), "kv", r->kv, "inside_call", in_call);
        json_t *body = ok ? json_loads(PQgetvalue(res, 0, PQfnumber(res, "body")), 0, NULL) : NULL;
        if (body)
                json_object_set_new(o, "body", body);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(o);
}

static void on_problem(void *userdata, const struct store_problem *p)
{
        (void)userdata;
        json_t *o = json_pack("{s:s, s:s?, s:s, s:s, s:I, s:I}", "problem",
                              p->err ? pg_err_name(p->err) : "cleared", "endpoint", p->endpoint,
                              "message", p->message, "kind", "problem", "in_row",
                              (json_int_t)p->in_row, "hold_ms", (json_int_t)p->hold_ms);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(o);
}

static void command(char *cmd)
{
        if (!strncmp(cmd, "call ", 5)) {
                char *tag = cmd + 5, *path = strchr(tag, ' '), *body;
                if (!path || !(body = strchr(path + 1, ' '))) {
                        printf("{\"bad\": \"call TAG PATH JSON\"}\n");
                        return;
                }
                *path++ = 0;
                *body++ = 0;
                const char *params[] = {path, body};
                in_call = true;
                int r = pg_query(pg, "snowid_call", 2, params, !strncmp(path, "/v3/kv/", 7),
                                 on_reply, NULL, strtoull(tag, NULL, 10), cfg.store_timeout_ms);
                in_call = false;
                if (r < 0)
                        printf("{\"call_failed\": %d}\n", r);
        } else if (!strcmp(cmd, "stats")) {
                const struct store_stats *s = pg_stats(pg);
                printf("{\"stats\": {\"requests\": %llu, \"failures\": %llu, \"le\": [%llu, %llu, "
                       "%llu, %llu, %llu, %llu, %llu, %llu], \"in_flight\": %u, \"endpoint\": "
                       "\"%s\"}}\n",
                       (unsigned long long)s->requests, (unsigned long long)s->failures,
                       (unsigned long long)s->latency_le[0], (unsigned long long)s->latency_le[1],
                       (unsigned long long)s->latency_le[2], (unsigned long long)s->latency_le[3],
                       (unsigned long long)s->latency_le[4], (unsigned long long)s->latency_le[5],
                       (unsigned long long)s->latency_le[6], (unsigned long long)s->latency_le[7],
                       pg_in_flight(pg), pg_endpoint(pg));
        } else if (!strcmp(cmd, "quit")) {
                sd_event_exit(event, 0);
        } else if (*cmd) {
                printf("{\"bad\": \"unknown command\"}\n");
        }
        fflush(stdout);
}

static int on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        (void)s;
        (void)revents;
        (void)userdata;
        ssize_t n = read(fd, line + line_len, sizeof(line) - 1 - line_len);
        if (n <= 0) {
                sd_event_exit(event, 0);
                return 0;
        }
        line_len += (size_t)n;
        char *nl;
        while ((nl = memchr(line, '\n', line_len))) {
                *nl = 0;
                command(line);
                size_t used = (size_t)(nl + 1 - line);
                memmove(line, nl + 1, line_len - used);
                line_len -= used;
        }
        return 0;
}

int main(int argc, char **argv)
{
        if (argc != 3) {
                fprintf(stderr, "usage: %s CONNINFO TIMEOUT_MS\n", argv[0]);
                return 2;
        }
        char why[256];
        if (pg_conninfo_check(argv[1], why, sizeof(why)) < 0) {
                fprintf(stderr, "%s\n", why);
                return 2;
        }
        pg_prepare_sql = prepare_sql;
        cfg.store = STORE_POSTGRES;
        cfg.postgres = argv[1];
        cfg.store_timeout_ms = (unsigned)atoi(argv[2]);
        if (sd_event_default(&event) < 0 || pg_new(event, &cfg, &pg) < 0)
                return 1;
        pg_on_problem(pg, on_problem, NULL);
        sd_event_source *in;
        if (sd_event_add_io(event, &in, 0, EPOLLIN, on_stdin, NULL) < 0)
                return 1;
        int r = sd_event_loop(event);
        pg_free(pg);
        sd_event_source_unref(in);
        sd_event_unref(event);
        return r < 0 ? 1 : 0;
}
