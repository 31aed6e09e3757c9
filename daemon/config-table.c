/* SPDX-License-Identifier: MIT */
/* snowidd's settings, one row each, and the parsers the rows name. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "addr.h"
#include "config-table.h"
#include "handshake.h"
#include "range.h"
#include "segment.h"

#define ETCD_URL_MAX 1024 /* one endpoint URL; longer is refused, never cut */

/* the choices are written as int */
_Static_assert(sizeof(enum store_kind) == sizeof(int), "enum store_kind is an int");
_Static_assert(sizeof(enum tsc_mode) == sizeof(int), "enum tsc_mode is an int");

#define FIELD(s, row, type) ((type *)(void *)((char *)(s) + (row)->offset))

static int set_str(char **field, const char *v)
{
        char *copy = strdup(v);
        if (!copy)
                return -ENOMEM;
        free(*field);
        *field = copy;
        return 0;
}

int setting_number(const char *v, uint64_t min, uint64_t max, uint64_t *ret)
{
        char *end;
        if (!*v || !isdigit((unsigned char)*v))
                return -EINVAL;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || x < min || x > max)
                return -ERANGE;
        *ret = x;
        return 0;
}

static int parse_number(const struct setting *row, struct settings *s, const char *v, char *why,
                        size_t n)
{
        uint64_t x;
        (void)why, (void)n;
        if (setting_number(v, row->min, row->max, &x) < 0)
                return -EINVAL;
        if (row->max > UINT32_MAX)
                *FIELD(s, row, uint64_t) = x;
        else
                *FIELD(s, row, unsigned) = (unsigned)x;
        return 0;
}

static int parse_choice(const struct setting *row, struct settings *s, const char *v, char *why,
                        size_t n)
{
        (void)why, (void)n;
        for (const struct setting_choice *c = row->choices; c->name; c++)
                if (!strcmp(v, c->name)) {
                        *FIELD(s, row, int) = c->value;
                        return 0;
                }
        return -EINVAL;
}

static int parse_flag(const struct setting *row, struct settings *s, const char *v, char *why,
                      size_t n)
{
        (void)v, (void)why, (void)n;
        *FIELD(s, row, bool) = true;
        return 0;
}

/* UID:GID, neither of them root's */
static int parse_owner(const struct setting *row, struct settings *s, const char *v, char *why,
                       size_t n)
{
        char uid[16];
        const char *colon = strchr(v, ':');
        uint64_t u, g;
        (void)row;
        if (!colon || (size_t)(colon - v) >= sizeof(uid)) {
                snprintf(why, n, "UID:GID, both numbers");
                return -EINVAL;
        }
        memcpy(uid, v, (size_t)(colon - v));
        uid[colon - v] = 0;
        if (setting_number(uid, 1, INT32_MAX - 1, &u) < 0 ||
            setting_number(colon + 1, 1, INT32_MAX - 1, &g) < 0) {
                snprintf(why, n, "UID:GID, both numbers from 1 to %d", INT32_MAX - 1);
                return -EINVAL;
        }
        s->prepare_runtime_dir = true;
        s->prepare_uid = (uid_t)u;
        s->prepare_gid = (gid_t)g;
        return 0;
}

static int parse_string(const struct setting *row, struct settings *s, const char *v, char *why,
                        size_t n)
{
        (void)why, (void)n;
        return set_str(FIELD(s, row, char *), v);
}

static int parse_name(const struct setting *row, struct settings *s, const char *v, char *why,
                      size_t n)
{
        (void)why, (void)n;
        return shm_instance_valid(v) ? set_str(FIELD(s, row, char *), v) : -EINVAL;
}

static int parse_path(const struct setting *row, struct settings *s, const char *v, char *why,
                      size_t n)
{
        (void)why, (void)n;
        return v[0] == '/' ? set_str(FIELD(s, row, char *), v) : -EINVAL;
}

static int parse_listen(const struct setting *row, struct settings *s, const char *v, char *why,
                        size_t n)
{
        unsigned char sa[128];
        unsigned len;
        (void)why, (void)n;
        return addr_parse_listen(v, sa, &len) < 0 ? -EINVAL : set_str(FIELD(s, row, char *), v);
}

static int parse_range(const struct setting *row, struct settings *s, const char *v, char *why,
                       size_t n)
{
        (void)row, (void)why, (void)n;
        if (worker_range_parse(v, &s->range_from, &s->range_to) < 0)
                return -EINVAL;
        s->range_given = true;
        return 0;
}

/* The store's own check: a program without it refuses the setting. */
static int parse_postgres(const struct setting *row, struct settings *s, const char *v, char *why,
                          size_t n)
{
        if (!s->checks || !s->checks->postgres) {
                snprintf(why, n, "this program has no PostgreSQL store");
                return -EINVAL;
        }
        if (s->checks->postgres(v, why, n) < 0)
                return -EINVAL;
        return set_str(FIELD(s, row, char *), v);
}

static int parse_etcd(const struct setting *row, struct settings *s, const char *v, char *why,
                      size_t n)
{
        char *copy = strdup(v), *save = NULL;
        int r = 0;
        (void)row;
        if (!copy)
                return -ENOMEM;
        for (unsigned i = 0; i < s->n_etcd; i++)
                free(s->etcd[i]);
        s->n_etcd = 0;
        for (char *tok = strtok_r(copy, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
                tok += strspn(tok, " ");
                if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)) {
                        snprintf(why, n, "each URL starts with http:// or https://");
                        r = -EINVAL;
                } else if (s->n_etcd == ETCD_ENDPOINTS_MAX || strlen(tok) > ETCD_URL_MAX) {
                        snprintf(why, n, "at most %d URLs of at most %d bytes each",
                                 ETCD_ENDPOINTS_MAX, ETCD_URL_MAX);
                        r = -EINVAL;
                } else if (!(s->etcd[s->n_etcd] = strdup(tok)))
                        r = -ENOMEM;
                else
                        s->n_etcd++;
        }
        free(copy);
        if (r == 0 && s->n_etcd == 0) {
                snprintf(why, n, "no URL given");
                r = -EINVAL;
        }
        return r;
}

static const struct setting_choice stores[] = {
        {"etcd", STORE_ETCD},
        {"postgres", STORE_POSTGRES},
        {},
};
static const struct setting_choice tsc_modes[] = {
        {"auto", TSC_MODE_AUTO},
        {"on", TSC_MODE_ON},
        {"off", TSC_MODE_OFF},
        {},
};
static const struct setting_choice log_levels[] = {
        {"err", LOG_ERR},   {"warning", LOG_WARNING}, {"notice", LOG_NOTICE},
        {"info", LOG_INFO}, {"debug", LOG_DEBUG},     {},
};

#define AT(field) .offset = offsetof(struct settings, field)
#define NUMBER(field, lo, hi, u)                                                                   \
        AT(field), .parse = parse_number, .min = (lo), .max = (hi), .unit = (u)
#define CHOICE(field, list) AT(field), .parse = parse_choice, .choices = (list)
#define STRING(field) AT(field), .parse = parse_string
#define NAME(field) AT(field), .parse = parse_name, .why = "1 to 64 of A-Z a-z 0-9 _ -"
#define RATE(field) NUMBER(field, 0, LIMIT_RATE_MAX, "per second (0: no limit)")

/* In --help's order. */
const struct setting settings_table[] = {
        {"config", .arg = "FILE", .def = "/etc/snowid/snowidd.conf", .help = "settings file",
         .flags = SETTING_FLAG_ONLY},
        {"store", .arg = "etcd|postgres", .def = "etcd", .help = "where leases and marks live",
         CHOICE(store, stores)},
        {"postgres", .arg = "CONNINFO", AT(postgres), .parse = parse_postgres,
         .flags = SETTING_SECRET,
         .help = "PostgreSQL for --store postgres: a libpq connection string or URI (TLS: "
                 "sslmode, sslrootcert...); never a password: use a passfile (passfile= or "
                 "PGPASSFILE)"},
        {"etcd", .arg = "URL[,URL...]", .def = "http://127.0.0.1:2379", .parse = parse_etcd,
         .help = "etcd client URLs"},
        {"cluster", .arg = "NAME", .def = "default", .help = "keys under /snowid/NAME/",
         NAME(cluster)},
        {"instance", .arg = "NAME", .def = "default", .help = "the segment", NAME(instance)},
        {"lease-ttl", .arg = "SEC", .def = "10", .help = "lease TTL",
         NUMBER(lease_ttl_s, 2, 3600, "seconds")},
        {"renew-interval", .arg = "MS", .def = "1000", .help = "keepalive and mark period",
         NUMBER(renew_ms, 50, 600000, "milliseconds")},
        {"window", .arg = "SEC", .def = "10",
         .help = "headroom kept ahead of ID time: a store outage shorter than this is invisible "
                 "to clients",
         NUMBER(window_s, 1, 3600, "seconds")},
        {"mark-step", .arg = "SEC", .def = "5",
         .help = "the mark is written window + this ahead, once the headroom falls below "
                 "window: one store write per this many seconds at rest",
         NUMBER(mark_step_s, 0, 3600, "seconds")},
        {"epoch", .arg = "MS", .def = "1735689600000", .flags = SETTING_LAYOUT,
         .help = "the layout's ID time 0, in unix ms; the layout is used when the cluster's "
                 "layout is first created, and must last a year more",
         NUMBER(layout.epoch_ms, 0, (UINT64_C(1) << 62) - 1, "unix milliseconds")},
        {"time-bits", .arg = "N", .def = "41", .flags = SETTING_LAYOUT,
         .help = "the layout's bits of milliseconds", NUMBER(layout.time_bits, 32, 63, "bits")},
        {"worker-bits", .arg = "N", .def = "10", .flags = SETTING_LAYOUT,
         .help = "the layout's bits of worker number", NUMBER(layout.worker_bits, 0, 31, "bits")},
        {"seq-bits", .arg = "N", .def = "12", .flags = SETTING_LAYOUT,
         .help = "the layout's bits of sequence", NUMBER(layout.seq_bits, 0, 31, "bits")},
        {"worker-range", .arg = "FROM-TO", .parse = parse_range,
         .why = "FROM-TO, worker numbers with FROM <= TO, e.g. 0-511",
         .help = "claim only worker numbers FROM to TO (default all)"},
        {"region", .arg = "NAME", .def = "default",
         .help = "records the range under this name, refused if it overlaps another region's "
                 "record",
         NAME(region)},
        {"runtime-dir", .arg = "DIR", .def = SHM_RUNTIME_DIR_DEFAULT, AT(runtime_dir),
         .parse = parse_path, .why = "an absolute path", .help = "where the socket lives"},
        {"allow-users", .arg = "U[,U...]",
         .help = "users (names or uids) who may take IDs; * for anyone", STRING(allow_users)},
        {"allow-groups", .alias = "group", .arg = "G[,G...]",
         .help = "groups (names or gids) whose members may take IDs; root and snowidd's own user "
                 "always may",
         STRING(allow_groups)},
        {"etcd-cacert", .arg = "FILE", .help = "the CA certificate of etcd's TLS", STRING(cacert)},
        {"etcd-cert", .arg = "FILE", .help = "a client certificate for etcd (with --etcd-key)",
         STRING(cert)},
        {"etcd-key", .arg = "FILE", .help = "its key", STRING(key)},
        {"etcd-user", .arg = "NAME", .help = "etcd's user (with --etcd-password-file)",
         STRING(user)},
        {"etcd-password-file", .arg = "FILE", .help = "a file whose first line is its password",
         STRING(password_file)},
        {"store-timeout", .alias = "etcd-timeout", .arg = "MS", .def = "2000",
         .help = "timeout of each request to the store",
         NUMBER(store_timeout_ms, 100, 60000, "milliseconds")},
        {"step-back-threshold", .arg = "MS", .def = "1000",
         .help = "wall clock this far behind: a fresh number",
         NUMBER(step_back_ms, 10, 3600000, "milliseconds")},
        {"slew", .arg = "US", .def = "1000", .help = "how much ID time may slow per second",
         NUMBER(slew_us_per_s, 0, 100000, "microseconds per second")},
        {"lead", .arg = "MS", .def = "1", .help = "how far the counter may run ahead of the clock",
         NUMBER(lead_ms, 1, 100, "milliseconds")},
        {"tsc-clock", .arg = "auto|on|off", .def = "auto",
         .help = "clients read time from the TSC, calibrated here; auto: while the TSC is "
                 "invariant and the kernel's clocksource",
         CHOICE(tsc_mode, tsc_modes)},
        {"tsc-max-error", .arg = "US", .def = "200",
         .help = "the TSC clock off CLOCK_MONOTONIC by more: it goes off for a while; at most "
                 "half of --lead",
         NUMBER(tsc_max_error_us, 1, 50000, "microseconds")},
        {"http", .arg = "ADDR:PORT", AT(http), .parse = parse_listen,
         .why = "ADDR:PORT, e.g. 127.0.0.1:7723 or [::1]:7723",
         .help = "serve the HTTP API there (off unless set)"},
        {"http-token-file", .arg = "FILE",
         .help = "require 'Authorization: Bearer <token>' on /v1/; one token a line: NAME SECRET "
                 "[ids=N] [requests=N]",
         STRING(http_token_file)},
        {"http-max-count", .arg = "N", .def = "10000", .help = "most IDs one request may take",
         NUMBER(http_max_count, 1, 1000000, NULL)},
        {"http-threads", .arg = "N", .def = "2", .help = "HTTP worker threads",
         NUMBER(http_threads, 1, 64, NULL)},
        {"http-token-ids", .arg = "N", .def = "0",
         .help = "IDs per second per token, unless its line says; 0: no limit",
         RATE(http_token_ids)},
        {"http-token-requests", .arg = "N", .def = "0", .help = "requests per second per token",
         RATE(http_token_requests)},
        {"http-address-ids", .arg = "N", .def = "1000000",
         .help = "IDs per second per client address (an IPv6 /64)", RATE(http_address_ids)},
        {"http-address-requests", .arg = "N", .def = "0",
         .help = "requests per second per client address", RATE(http_address_requests)},
        {"http-connections", .arg = "N", .def = "1024",
         .help = "HTTP connections held in all; when all are held, a new one takes the place of "
                 "one waiting for a request; lowered to fit the open-file limit",
         NUMBER(http_connections, 1, 1000000, NULL)},
        {"http-connections-per-address", .arg = "N", .def = "64",
         .help = "open connections per address: an IPv4 address or an IPv6 /64",
         NUMBER(http_connections_per_address, 1, 1000000, NULL)},
        {"http-read-timeout", .arg = "SEC", .def = "10",
         .help = "time to send a whole request, from connecting or from the last answer; "
                 "trickling does not extend it",
         NUMBER(http_read_timeout_s, 1, 3600, "seconds")},
        {"log-level", .arg = "LEVEL", .def = "info", .help = "err, warning, notice, info or debug",
         CHOICE(log_level, log_levels)},
        {"check-config", .help = "check the settings, and the files they name, and exit",
         AT(check_config), .parse = parse_flag, .flags = SETTING_FLAG_ONLY | SETTING_NO_VALUE},
        {"prepare-runtime-dir", .arg = "UID:GID",
         .help = "as root, before snowidd starts as UID:GID (a container's init step): give "
                 "runtime-dir to UID:GID, mode 0755, and exit; refused if it belongs to another "
                 "uid, or to root with files in it (another snowidd uses it)",
         .parse = parse_owner, .flags = SETTING_FLAG_ONLY},
        {"help", .help = "this text", .flags = SETTING_FLAG_ONLY | SETTING_NO_VALUE},
};
const size_t settings_table_size = sizeof(settings_table) / sizeof(*settings_table);

const struct setting *setting_find(const char *name)
{
        for (size_t i = 0; i < settings_table_size; i++)
                if (!strcmp(settings_table[i].name, name) ||
                    (settings_table[i].alias && !strcmp(settings_table[i].alias, name)))
                        return &settings_table[i];
        return NULL;
}

void setting_why(const struct setting *row, char *why, size_t n)
{
        if (row->choices) {
                size_t len = 0;
                const struct setting_choice *c = row->choices;
                why[0] = 0;
                for (; c->name && len < n; c++)
                        len += (size_t)snprintf(why + len, n - len, "%s%s",
                                                c == row->choices ? ""
                                                : c[1].name       ? ", "
                                                                  : " or ",
                                                c->name);
        } else if (row->parse == parse_number)
                snprintf(why, n, "%s%s%" PRIu64 " to %" PRIu64, row->unit ? row->unit : "",
                         row->unit ? ", " : "", row->min, row->max);
        else
                snprintf(why, n, "%s", row->why ? row->why : "not valid");
}
