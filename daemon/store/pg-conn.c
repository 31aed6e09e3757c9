/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL backend's connection: made with PQconnectStartParams() and
 * PQconnectPoll(), set up (settings, the server's checks, the schema, a warm
 * call, the timeouts) before any call goes on it, then read as libpq says it
 * is readable.  A connection that breaks fails the calls on it as
 * unanswered; one that cannot be made leaves them waiting to their deadlines.
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

#include "log.h"
#include "patience.h"
#include "pg-int.h"

/* The standbys streaming from the server are counted from the WAL
 * senders' slots: pg_stat_replication joins every backend's activity, and
 * a fleet's connections made at once would each read all the others'. */
static const char checks_sql[] =
        "SELECT current_setting('synchronous_commit'), pg_is_in_recovery(), "
        "current_setting('synchronous_standby_names'), "
        "(SELECT count(*) FROM pg_stat_get_wal_senders())";

/* Whether the schema is this release's or newer, and the store's identity
 * made for this server (postgres.sql's last block gives a copy of the
 * database restored into another server an identity of its own): then the
 * file, which would change nothing, is not sent and compiled again on every
 * connection.  The server's own identifier is read in a query of its own,
 * and only by a role that may (a query that names pg_control_system() fails
 * for one that may not, whatever it would have evaluated); for one that may
 * not, the file's block does nothing either.  Any error (no schema yet)
 * sends the file, which says what is wrong. */
static const char current_sql[] =
        "SELECT m.schema_version, m.system_identifier, "
        "has_function_privilege('pg_control_system()', 'EXECUTE') FROM snowid.meta m";
static const char ident_sql[] = "SELECT system_identifier FROM pg_control_system()";

/* The schema version postgres.sql makes (its `want`); INT32_MAX if it
 * cannot be read: the file is then always sent. */
static long schema_want(void)
{
        static const char key[] = "want constant int := ";
        const char *w = strstr(snowid_postgres_sql, key);
        char *end;
        long v = w ? strtol(w + sizeof(key) - 1, &end, 10) : 0;
        return w && end != w + sizeof(key) - 1 && *end == ';' && v > 0 ? v : INT32_MAX;
}

/* The step after S_CURRENT's or S_IDENT's answer (res NULL: an error). */
static enum setup_step schema_next(struct pg *p, const PGresult *res)
{
        if (!res || PQntuples(res) != 1)
                return S_SCHEMA;
        if (p->step == S_IDENT)
                return !PQgetisnull(res, 0, 0) && !strcmp(PQgetvalue(res, 0, 0), p->meta_ident)
                               ? S_PREPARE
                               : S_SCHEMA;
        if (PQnfields(res) != 3 || PQgetisnull(res, 0, 0))
                return S_SCHEMA;
        char *end;
        long have = strtol(PQgetvalue(res, 0, 0), &end, 10);
        if (*end || have < schema_want())
                return S_SCHEMA;
        if (strcmp(PQgetvalue(res, 0, 2), "t"))
                return S_PREPARE; /* the identity cannot be read: the file would not either */
        if (PQgetisnull(res, 0, 1) || PQgetlength(res, 0, 1) >= (int)sizeof(p->meta_ident))
                return S_SCHEMA; /* none recorded yet: the file records it */
        snprintf(p->meta_ident, sizeof(p->meta_ident), "%s", PQgetvalue(res, 0, 1));
        return S_IDENT;
}

/* ---- the connection ---- */

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

unsigned pg_statement_timeout_ms(const struct pg *p)
{
        return p->cfg->store_timeout_ms * PATIENCE_X;
}

void pg_close_conn(struct pg *p)
{
        p->io = sd_event_source_disable_unref(p->io);
        if (p->stuck)
                sd_event_source_set_enabled(p->stuck, SD_EVENT_OFF);
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
void pg_conn_broken(struct pg *p, const char *why)
{
        char msg[256];
        pg_one_line(msg, sizeof(msg), why);
        if (!p->said_down)
                log_info("PostgreSQL at %s: connection closed: %s", p->endpoint, msg);
        p->said_down = true;
        pg_close_conn(p);
        back_off(p);
        pg_fail_all(p, STORE_ERR_NONE, msg);
        pg_kick(p); /* what the callbacks asked for */
}

/* A connection could not be made or set up.  Calls keep waiting until
 * their deadlines, unless the server refused us: then they fail with the
 * refusal, and no attempt is made until the hold is over. */
static void connect_failed(struct pg *p, enum store_err err, const char *why)
{
        char msg[256];
        pg_one_line(msg, sizeof(msg), why);
        if (!p->said_down)
                log_info("PostgreSQL at %s: cannot connect: %s", p->endpoint, msg);
        else
                log_debug("PostgreSQL at %s: cannot connect: %s", p->endpoint, msg);
        p->said_down = true;
        pg_close_conn(p);
        back_off(p);
        if (err != STORE_ERR_NONE) {
                pg_problem_seen(p, err, msg);
                if (p->next_try < p->hold.until)
                        p->next_try = p->hold.until;
                pg_fail_all(p, err, msg);
        }
        pg_kick(p);
}

static void setup_send(struct pg *p);
void pg_flush(struct pg *p);

bool pg_first_connection(const struct pg *p)
{
        return p->state != C_READY && !p->said_down;
}

/* How long an attempt may take to connect.  The first connection waits as
 * long as the calls behind it (patience.h): a server making a fleet's
 * connections at once gets to each in turn, and an attempt given up on is
 * one more for it to make. */
static unsigned connect_ms(const struct pg *p)
{
        return p->cfg->store_timeout_ms * (pg_first_connection(p) ? PATIENCE_X : 1);
}

static int on_connect_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct pg *p = userdata;
        char why[128];
        (void)s;
        (void)usec;
        if (p->state == C_SETUP)
                snprintf(why, sizeof(why), "the connection's setup took more than %u ms",
                         pg_setup_ms(p));
        else
                snprintf(why, sizeof(why), "no connection within %u ms", connect_ms(p));
        connect_failed(p, STORE_ERR_NONE, why);
        return 0;
}

static void connect_poll(struct pg *p)
{
        switch (PQconnectPoll(p->conn)) {
        case PGRES_POLLING_READING:
                if (watch(p, EPOLLIN, true) < 0)
                        connect_failed(p, STORE_ERR_NONE, "cannot watch the socket");
                return;
        case PGRES_POLLING_WRITING:
                if (watch(p, EPOLLOUT, true) < 0)
                        connect_failed(p, STORE_ERR_NONE, "cannot watch the socket");
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
                connect_failed(p, STORE_ERR_NONE, PQerrorMessage(p->conn));
                return;
        }
        pg_endpoint_format(p->endpoint, sizeof(p->endpoint), PQhost(p->conn), PQport(p->conn));
        p->state = C_SETUP;
        p->step = S_SETTINGS;
        /* connected: the setup gets a budget of its own, which a busy server
         * needs the first time a backend runs the verbs (it compiles their
         * functions); a connection closed at every 2 s deadline would pay
         * that again and again and never serve */
        sd_event_source_set_time(p->connect_timer, now_usec() + (uint64_t)pg_setup_ms(p) * 1000);
        sd_event_source_set_enabled(p->connect_timer, SD_EVENT_ONESHOT);
        setup_send(p);
}

/* The server's notices (and its goodbye to an idle connection), which
 * libpq would print on stderr: the daemon's log, for debugging. */
static void on_notice(void *userdata, const char *message)
{
        struct pg *p = userdata;
        char line[256];
        pg_one_line(line, sizeof(line), message);
        /* a commit whose wait for a synchronous standby was cancelled is
         * only local: a failover can lose it, so it is not an answer */
        if (p->query_pending && strstr(message, "might not have been replicated")) {
                p->unreplicated = true;
                log_warning("PostgreSQL at %s: %s", p->endpoint, line);
                return;
        }
        log_debug("PostgreSQL at %s: %s", p->endpoint, line);
}

void pg_connect_start(struct pg *p)
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
                pg_kick(p);
                return;
        }
        PQsetNoticeProcessor(p->conn, on_notice, p);
        p->state = C_CONNECTING;
        uint64_t until = now_usec() + (uint64_t)connect_ms(p) * 1000;
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
                connect_failed(p, STORE_ERR_NONE, "cannot watch the socket");
}

unsigned pg_setup_ms(const struct pg *p)
{
        return p->cfg->store_timeout_ms > SETUP_MIN_MS ? p->cfg->store_timeout_ms : SETUP_MIN_MS;
}

/* A read of a cluster snowid never names (its names have no space): the
 * server compiles the verbs' functions. */
static const char warm_stmt[] = "snowid_read_cluster";
static const char *const warm_params[] = {"warm up", "f", "-1"};

/* Every verb's statement, prepared on each connection. */
static const char prepare_sql[] =
        "PREPARE snowid_lease_grant AS SELECT * FROM snowid.lease_grant($1::bigint);"
        "PREPARE snowid_lease_keepalive AS SELECT * FROM snowid.lease_keepalive($1::bigint);"
        "PREPARE snowid_lease_revoke AS SELECT * FROM snowid.lease_revoke($1::bigint);"
        "PREPARE snowid_scan AS SELECT * FROM snowid.scan($1::text, $2::text, $3::bigint, "
        "$4::bigint, $5::int[]);"
        "PREPARE snowid_claim AS SELECT * FROM snowid.claim($1::text, $2::text, $3::bigint, "
        "$4::int, $5::bigint, $6::text, $7::bigint, $8::bigint, $9::bigint, $10::int, "
        "$11::bigint);"
        "PREPARE snowid_read_number AS SELECT * FROM snowid.read_number($1::text, $2::text, "
        "$3::bigint, $4::int, $5::text);"
        "PREPARE snowid_extend AS SELECT * FROM snowid.extend($1::text, $2::text, $3::bigint, "
        "$4::int, $5::bigint, $6::text, $7::bigint, $8::bigint);"
        "PREPARE snowid_raise AS SELECT * FROM snowid.raise($1::text, $2::text, $3::bigint, "
        "$4::int, $5::boolean, $6::bigint, $7::bigint);"
        /* with the host making the cluster, from its row: the function's
         * columns stay those that daemons of version 6 prepared */
        "PREPARE snowid_read_cluster AS SELECT r.*, k.creating, k.creating_rev "
        "FROM snowid.read_cluster($1::text, $2::boolean, $3::int) r "
        "LEFT JOIN snowid.clusters k ON k.name = $1::text;"
        "PREPARE snowid_creating AS SELECT * FROM snowid.creating($1::text, $2::boolean, "
        "$3::text, $4::bigint);"
        "PREPARE snowid_init_marks AS SELECT * FROM snowid.init_marks($1::text, $2::int, "
        "$3::int);"
        "PREPARE snowid_make_cluster AS SELECT * FROM snowid.make_cluster($1::text, $2::bigint, "
        "$3::int, $4::int, $5::int, $6::text, $7::bigint, $8::boolean);"
        "PREPARE snowid_witness AS SELECT * FROM snowid.witness($1::text, $2::text, $3::text);"
        "PREPARE snowid_record_range AS SELECT * FROM snowid.record_range($1::text, $2::text, "
        "$3::text, $4::bigint, $5::bigint);"
        "PREPARE snowid_fence_read AS SELECT * FROM snowid.fence_read($1::text, $2::int);"
        "PREPARE snowid_fence_write AS SELECT * FROM snowid.fence_write($1::text, $2::text, "
        "$3::bigint, $4::bigint, $5::bigint, $6::boolean, $7::text, $8::bigint, $9::int, "
        "$10::int, $11::int);"
        "PREPARE snowid_alarm AS SELECT snowid._id() AS cid;";

/* A test's own statements instead (tests/pg-driver.c): NULL in snowidd. */
const char *pg_prepare_sql;

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
                         pg_setup_ms(p), pg_setup_ms(p), p->cfg->store_timeout_ms);
                sql = settings;
                break;
        case S_PREPARE:
                sql = pg_prepare_sql ? pg_prepare_sql : prepare_sql;
                break;
        case S_WARM:
                if (pg_prepare_sql) { /* a test's own schema: nothing to warm */
                        sql = "SELECT 1";
                        break;
                }
                if (!PQsendQueryPrepared(p->conn, warm_stmt, 3, warm_params, NULL, NULL, 0)) {
                        connect_failed(p, STORE_ERR_NONE, PQerrorMessage(p->conn));
                        return;
                }
                p->query_pending = true;
                pg_flush(p);
                return;
        case S_TIMEOUTS:
                /* no statement or lock wait outlives the longest call
                 * (patience.h) by much */
                snprintf(settings, sizeof(settings),
                         "SET statement_timeout = %u; SET lock_timeout = %u",
                         pg_statement_timeout_ms(p), pg_statement_timeout_ms(p));
                sql = settings;
                break;
        case S_CHECKS:
                sql = checks_sql;
                break;
        case S_CURRENT:
                sql = current_sql;
                break;
        case S_IDENT:
                sql = ident_sql;
                break;
        case S_SCHEMA:
                sql = snowid_postgres_sql;
                break;
        default:
                return;
        }
        if (!PQsendQuery(p->conn, sql)) {
                connect_failed(p, STORE_ERR_NONE, PQerrorMessage(p->conn));
                return;
        }
        p->query_pending = true;
        pg_flush(p);
}

/* A connection failure (not one of the query's): the server went away, is
 * shutting down, or refuses connections for now. */
static bool conn_gone(const char *sqlstate)
{
        return sqlstate && (!strncmp(sqlstate, "08", 2) || !strcmp(sqlstate, "57P01") ||
                            !strcmp(sqlstate, "57P02") || !strcmp(sqlstate, "57P03"));
}

static bool sync_commit_durable(const char *v)
{
        return !strcmp(v, "on") || !strcmp(v, "remote_write") || !strcmp(v, "remote_apply");
}

/* What the server says about itself, on every new connection. */
static bool setup_checks(struct pg *p, const PGresult *res)
{
        if (PQntuples(res) != 1 || PQnfields(res) != 4) {
                connect_failed(p, STORE_ERR_NONE, "unexpected answer to the server checks");
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
                connect_failed(p, STORE_ERR_NONE, "the server is a standby");
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
        if ((p->step == S_CURRENT || p->step == S_IDENT) && res &&
            PQstatus(p->conn) != CONNECTION_BAD &&
            !conn_gone(PQresultErrorField(res, PG_DIAG_SQLSTATE))) {
                /* current: the file is skipped; else (an error too) sent */
                p->step = schema_next(p, st == PGRES_TUPLES_OK ? res : NULL);
                setup_send(p);
                return;
        }
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
                const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
                const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(p->conn);
                char line[256];
                pg_one_line(line, sizeof(line), msg);
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
        pg_kick(p);
}

static void request_result(struct pg *p, PGresult *res)
{
        struct request *q = p->current;
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        struct store_reply r = {0};
        if (p->unreplicated) {
                pg_conn_broken(p, "a commit was not replicated to the synchronous standby");
                return;
        }
        if (!q)
                return; /* failed at its deadline meanwhile */
        if (st == PGRES_TUPLES_OK) {
                r.answered = true;
                if (PQntuples(res) == 1) {
                        r.http = 200;
                } else {
                        r.http = 500;
                        r.error = "a verb of snowid's schema answered with no row";
                }
        } else {
                const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
                const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(p->conn);
                if (!res || conn_gone(sqlstate) || PQstatus(p->conn) == CONNECTION_BAD) {
                        pg_conn_broken(p, msg && *msg ? msg : "the connection broke");
                        return;
                }
                if (sqlstate && !strcmp(sqlstate, "57014") && !q->resent &&
                    now_usec() - q->sent < (uint64_t)pg_statement_timeout_ms(p) * 1000) {
                        /* cancelled before statement_timeout: the cancel of
                         * the statement before it, given up on, landed on
                         * this one (it is sent once that one is answered,
                         * and the cancel may come later), or an operator's.
                         * Rolled back, so sent again, once */
                        q->resent = true;
                        p->current = NULL;
                        return;
                }
                if (sqlstate && !strcmp(sqlstate, "57014")) {
                        /* statement_timeout: rolled back, the connection as
                         * good as before; to the caller, no answer, as at
                         * its deadline here (which comes first) */
                        snprintf(r.text, sizeof(r.text),
                                 "PostgreSQL did not answer within %u ms (statement_timeout)",
                                 pg_statement_timeout_ms(p));
                        r.error = r.text;
                } else
                        pg_error_reply(&r, sqlstate, msg);
        }
        pg_unlink_request(p, q);
        pg_finish(p, q, &r, r.http == 200 ? res : NULL);
}

/* The query's results are all in. */
static void query_done(struct pg *p)
{
        PGresult *res = p->result;
        p->result = NULL;
        p->query_pending = false;
        if (p->stuck)
                sd_event_source_set_enabled(p->stuck, SD_EVENT_OFF);
        if (p->state == C_SETUP)
                setup_result(p, res);
        else
                request_result(p, res);
        PQclear(res);
        pg_kick(p);
}

bool pg_failed(const PGresult *res)
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
                        pg_conn_broken(p, msg);
                return;
        }
        if (p->flushing) {
                pg_flush(p);
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
                                connect_failed(p, STORE_ERR_NONE, "unexpected answer (COPY)");
                        else
                                pg_conn_broken(p, "unexpected answer (COPY or malformed)");
                        return;
                }
                /* the first error, or else the last result, is the answer */
                if (p->result && pg_failed(p->result)) {
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
                        pg_conn_broken(p, PQerrorMessage(p->conn));
        }
}

void pg_flush(struct pg *p)
{
        int r = PQflush(p->conn);
        if (r < 0) {
                const char *msg = PQerrorMessage(p->conn);
                if (p->state == C_SETUP)
                        connect_failed(p, STORE_ERR_NONE, msg);
                else
                        pg_conn_broken(p, msg);
                return;
        }
        p->flushing = r > 0;
        if (watch(p, p->flushing ? EPOLLIN | EPOLLOUT : EPOLLIN, false) < 0) {
                if (p->state == C_SETUP)
                        connect_failed(p, STORE_ERR_NONE, "cannot watch the socket");
                else
                        pg_conn_broken(p, "cannot watch the socket");
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
                pg_flush(p);
                if (p->state == C_DOWN)
                        return 0;
        }
        if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
                read_input(p);
        return 0;
}
