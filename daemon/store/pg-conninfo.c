/* SPDX-License-Identifier: MIT */
/* A PostgreSQL connection string is checked when the settings are read:
 * a password in it would sit in a config file, a unit file or in ps. */
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "pg.h"

/* A URI's "user:password@": PQconninfoParse() reports it as the password
 * keyword too; this is the same check, kept in case it ever does not. */
static bool uri_has_password(const char *s)
{
        const char *p;
        if (!strncmp(s, "postgresql://", 13))
                p = s + 13;
        else if (!strncmp(s, "postgres://", 11))
                p = s + 11;
        else
                return false;
        size_t auth = strcspn(p, "@/?");
        if (p[auth] != '@')
                return false;
        return memchr(p, ':', auth) != NULL;
}

int pg_conninfo_check(const char *conninfo, char *err, size_t errlen)
{
        char *msg = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &msg);
        if (!opts) {
                /* libpq's words may quote a part of it (a password, say):
                 * repeated only when they quote a keyword */
                const char *kw = "invalid connection option ";
                size_t n = msg && !strncmp(msg, kw, strlen(kw)) ? strcspn(msg, "\n") : 0;
                if (n)
                        snprintf(err, errlen, "not a libpq connection string or URI: %.*s", (int)n,
                                 msg);
                else
                        snprintf(err, errlen,
                                 "not a libpq connection string or URI (see "
                                 "libpq's \"Connection Strings\")");
                PQfreemem(msg);
                return -EINVAL;
        }
        bool password = uri_has_password(conninfo);
        for (PQconninfoOption *o = opts; o->keyword; o++)
                if ((!strcmp(o->keyword, "password") || !strcmp(o->keyword, "sslpassword")) &&
                    o->val && *o->val)
                        password = true;
        PQconninfoFree(opts);
        if (password) {
                snprintf(err, errlen,
                         "it carries a password: keep the password in a passfile "
                         "(libpq's passfile keyword or PGPASSFILE), not in the "
                         "connection string");
                return -EINVAL;
        }
        return 0;
}

int pg_conninfo_files(const char *conninfo, int (*fn)(const char *keyword, const char *path))
{
        static const char *const files[] = {"passfile", "sslrootcert", "sslcert",
                                            "sslkey",   "sslcrl",      NULL};
        PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
        int r = 0;
        for (PQconninfoOption *o = opts; o && o->keyword && !r; o++) {
                if (!o->val || !*o->val)
                        continue;
                for (const char *const *f = files; *f && !r; f++)
                        /* sslrootcert=system: the system's store, not a file */
                        if (!strcmp(o->keyword, *f) && strcmp(o->val, "system"))
                                r = fn(o->keyword, o->val);
        }
        PQconninfoFree(opts);
        return r;
}

const struct settings_checks settings_checks_postgres = {
        .postgres = pg_conninfo_check,
        .postgres_files = pg_conninfo_files,
};
