/* SPDX-License-Identifier: MIT */
/*
 * The PostgreSQL backend's pure parts (tests/test-pg-answer.c): a server's
 * error as a store_reply, the classes of refusals by
 * SQLSTATE and by libpq's words, their names and what mends them.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pg-int.h"

/* The first line of msg, printable, into buf. */
const char *pg_one_line(char *buf, size_t size, const char *msg)
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

enum store_err pg_sqlstate_err(const char *sqlstate)
{
        if (!sqlstate)
                return STORE_ERR_NONE;
        if (!strcmp(sqlstate, "28P01") || !strcmp(sqlstate, "28000"))
                return STORE_ERR_AUTH;
        if (!strcmp(sqlstate, "42501"))
                return STORE_ERR_PERMISSION;
        return STORE_ERR_NONE;
}

static bool has_any(const char *msg, const char *const *needles)
{
        for (; *needles; needles++)
                if (strstr(msg, *needles))
                        return true;
        return false;
}

enum store_err pg_connect_err(const char *msg)
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
                return STORE_ERR_NONE;
        if (has_any(msg, cert))
                return STORE_ERR_CERT;
        if (has_any(msg, tls))
                return STORE_ERR_TLS;
        if (has_any(msg, auth))
                return STORE_ERR_AUTH;
        if (strstr(msg, "role \"") && strstr(msg, "\" does not exist"))
                return STORE_ERR_AUTH;
        if (has_any(msg, permission))
                return STORE_ERR_PERMISSION;
        return STORE_ERR_NONE;
}

void pg_error_reply(struct store_reply *r, const char *sqlstate, const char *message)
{
        r->answered = true;
        r->json = NULL;
        r->err = pg_sqlstate_err(sqlstate);
        r->nospace = sqlstate && !strcmp(sqlstate, "53100");
        r->http = r->err == STORE_ERR_AUTH         ? 401
                  : r->err == STORE_ERR_PERMISSION ? 403
                  : r->nospace                     ? 429 /* as etcd's gateway: RESOURCE_EXHAUSTED */
                                                   : 500;
        pg_one_line(r->text, sizeof(r->text), message);
        r->error = r->text[0] ? r->text : "PostgreSQL reported an error";
}

const char *pg_err_name(enum store_err err)
{
        static const char *const names[STORE_ERR_MAX_] = {
                [STORE_ERR_AUTH] = "postgres-auth",
                [STORE_ERR_PERMISSION] = "postgres-permission",
                [STORE_ERR_TLS] = "postgres-tls",
                [STORE_ERR_CERT] = "postgres-cert",
        };
        return err > STORE_ERR_NONE && err < STORE_ERR_MAX_ ? names[err] : NULL;
}

void pg_refusal_hint(const struct settings *cfg, enum store_err err, const char *prefix, char *buf,
                     size_t size)
{
        (void)cfg;
        (void)prefix;
        switch (err) {
        case STORE_ERR_AUTH:
                snprintf(buf, size,
                         "check the user in the postgres setting and its password in the "
                         "password file (passfile= in the postgres setting, or PGPASSFILE), "
                         "and that pg_hba.conf lets that user in");
                break;
        case STORE_ERR_PERMISSION:
                snprintf(buf, size,
                         "the user in the postgres setting needs USAGE on the schema snowid, "
                         "SELECT, INSERT, UPDATE, DELETE on its tables and EXECUTE on its "
                         "functions (or CREATE on the "
                         "database, for the first daemon, which creates the schema)");
                break;
        case STORE_ERR_TLS:
                snprintf(buf, size,
                         "check sslrootcert in the postgres setting: it must hold the CA "
                         "that signed the server's certificate, and with sslmode=verify-full "
                         "that certificate must name the host");
                break;
        default:
                snprintf(buf, size,
                         "check sslcert and sslkey in the postgres setting: the server must "
                         "trust the CA that signed them (pg_hba.conf's clientcert)");
                break;
        }
}

void pg_full_text(const char *member, const char *endpoint, int64_t left_ms, char *buf, size_t size)
{
        snprintf(buf, size,
                 "PostgreSQL's disk is full (SQLSTATE 53100, at %s): no mark is extended and no "
                 "number claimed; IDs stop at the deadline, %" PRId64 " ms from now, on every "
                 "host. Free space on the server; snowidd goes on by itself",
                 member ? member : endpoint, left_ms);
}
