/* SPDX-License-Identifier: MIT */
/* Settings: /etc/snowid/snowidd.conf (key = value lines), then flags. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include "addr.h"
#include "config.h"
#include "range.h"
#include "handshake.h"
#include "pg.h"
#include "segment.h"

#define DEFAULT_CONFIG "/etc/snowid/snowidd.conf"
#define SLEW_TICK_MS 100  /* the daemon applies slew in ticks of CLOCK_TICK_MS (holder.c) */
#define ETCD_URL_MAX 1024 /* one endpoint URL; longer is refused, never cut */
#define SECRET_MAX 1023   /* the line of a password or token file */

enum {
        O_ETCD = 256,
        O_CLUSTER,
        O_INSTANCE,
        O_LEASE_TTL,
        O_RENEW,
        O_WINDOW,
        O_EPOCH,
        O_TIME_BITS,
        O_WORKER_BITS,
        O_SEQ_BITS,
        O_ALLOW_GROUPS,
        O_ALLOW_USERS,
        O_RUNTIME_DIR,
        O_CACERT,
        O_CERT,
        O_KEY,
        O_USER,
        O_PASSWORD_FILE,
        O_LOG_LEVEL,
        O_ETCD_TIMEOUT,
        O_STEP_BACK,
        O_SLEW,
        O_LEAD,
        O_CONFIG,
        O_CHECK,
        O_HELP,
        O_HTTP,
        O_HTTP_TOKEN_FILE,
        O_HTTP_MAX_COUNT,
        O_HTTP_THREADS,
        O_MARK_STEP,
        O_WORKER_RANGE,
        O_REGION,
        O_HTTP_TOKEN_IDS,
        O_HTTP_TOKEN_REQUESTS,
        O_HTTP_ADDRESS_IDS,
        O_HTTP_ADDRESS_REQUESTS,
        O_HTTP_CONNECTIONS,
        O_HTTP_CONNECTIONS_PER_ADDRESS,
        O_HTTP_READ_TIMEOUT,
        O_STORE,
        O_POSTGRES,
        O_TSC_CLOCK,
        O_TSC_MAX_ERROR
};

/* One table serves the flags and the config file's keys. */
static const struct option options[] = {
        {"store", required_argument, NULL, O_STORE},
        {"postgres", required_argument, NULL, O_POSTGRES},
        {"etcd", required_argument, NULL, O_ETCD},
        {"cluster", required_argument, NULL, O_CLUSTER},
        {"instance", required_argument, NULL, O_INSTANCE},
        {"lease-ttl", required_argument, NULL, O_LEASE_TTL},
        {"renew-interval", required_argument, NULL, O_RENEW},
        {"window", required_argument, NULL, O_WINDOW},
        {"mark-step", required_argument, NULL, O_MARK_STEP},
        {"epoch", required_argument, NULL, O_EPOCH},
        {"time-bits", required_argument, NULL, O_TIME_BITS},
        {"worker-bits", required_argument, NULL, O_WORKER_BITS},
        {"seq-bits", required_argument, NULL, O_SEQ_BITS},
        {"worker-range", required_argument, NULL, O_WORKER_RANGE},
        {"region", required_argument, NULL, O_REGION},
        {"allow-users", required_argument, NULL, O_ALLOW_USERS},
        {"allow-groups", required_argument, NULL, O_ALLOW_GROUPS},
        {"group", required_argument, NULL, O_ALLOW_GROUPS}, /* its older name */
        {"runtime-dir", required_argument, NULL, O_RUNTIME_DIR},
        {"etcd-cacert", required_argument, NULL, O_CACERT},
        {"etcd-cert", required_argument, NULL, O_CERT},
        {"etcd-key", required_argument, NULL, O_KEY},
        {"etcd-user", required_argument, NULL, O_USER},
        {"etcd-password-file", required_argument, NULL, O_PASSWORD_FILE},
        {"log-level", required_argument, NULL, O_LOG_LEVEL},
        {"etcd-timeout", required_argument, NULL, O_ETCD_TIMEOUT},
        {"step-back-threshold", required_argument, NULL, O_STEP_BACK},
        {"slew", required_argument, NULL, O_SLEW},
        {"lead", required_argument, NULL, O_LEAD},
        {"tsc-clock", required_argument, NULL, O_TSC_CLOCK},
        {"tsc-max-error", required_argument, NULL, O_TSC_MAX_ERROR},
        {"http", required_argument, NULL, O_HTTP},
        {"http-token-file", required_argument, NULL, O_HTTP_TOKEN_FILE},
        {"http-max-count", required_argument, NULL, O_HTTP_MAX_COUNT},
        {"http-threads", required_argument, NULL, O_HTTP_THREADS},
        {"http-token-ids", required_argument, NULL, O_HTTP_TOKEN_IDS},
        {"http-token-requests", required_argument, NULL, O_HTTP_TOKEN_REQUESTS},
        {"http-address-ids", required_argument, NULL, O_HTTP_ADDRESS_IDS},
        {"http-address-requests", required_argument, NULL, O_HTTP_ADDRESS_REQUESTS},
        {"http-connections", required_argument, NULL, O_HTTP_CONNECTIONS},
        {"http-connections-per-address", required_argument, NULL, O_HTTP_CONNECTIONS_PER_ADDRESS},
        {"http-read-timeout", required_argument, NULL, O_HTTP_READ_TIMEOUT},
        {"config", required_argument, NULL, O_CONFIG},
        {"check-config", no_argument, NULL, O_CHECK},
        {"help", no_argument, NULL, O_HELP},
        {},
};

static const char help[] =
        "Usage: snowidd [OPTIONS]\n\n"
        "Leases a worker number from etcd and publishes it to the host's snowid segment.\n\n"
        "  --config FILE             settings file (default " DEFAULT_CONFIG ")\n"
        "  --store etcd|postgres     where leases and marks live (default etcd)\n"
        "  --postgres CONNINFO       PostgreSQL for --store postgres: a libpq connection\n"
        "                            string or URI (TLS: sslmode, sslrootcert...); never a\n"
        "                            password: use a passfile (passfile= or PGPASSFILE)\n"
        "  --etcd URL[,URL...]       etcd client URLs (default http://127.0.0.1:2379)\n"
        "  --cluster NAME            keys under /snowid/NAME/ (default default)\n"
        "  --instance NAME           the segment (default default)\n"
        "  --lease-ttl SEC           lease TTL (default 10)\n"
        "  --renew-interval MS       keepalive and mark period (default 1000)\n"
        "  --window SEC              headroom kept ahead of ID time: an etcd outage shorter\n"
        "                            than this is invisible to clients (default 10)\n"
        "  --mark-step SEC           the mark is written window + this ahead, once the\n"
        "                            headroom falls below window: one etcd revision per\n"
        "                            this many seconds at rest (default 5)\n"
        "  --epoch MS --time-bits N --worker-bits N --seq-bits N\n"
        "                            layout, used when the cluster's layout is first created\n"
        "  --worker-range FROM-TO    claim only worker numbers FROM to TO (default all)\n"
        "  --region NAME             records the range under this name, refused if it\n"
        "                            overlaps another region's record (default default)\n"
        "  --runtime-dir DIR         where the socket lives (default " SHM_RUNTIME_DIR_DEFAULT ")\n"
        "  --allow-users U[,U...]    users (names or uids) who may take IDs; * for anyone\n"
        "  --allow-groups G[,G...]   groups (names or gids) whose members may take IDs\n"
        "                            (root and snowidd's own user always may)\n"
        "  --etcd-cacert/--etcd-cert/--etcd-key FILE   TLS to etcd\n"
        "  --etcd-user NAME --etcd-password-file FILE  etcd authentication\n"
        "  --etcd-timeout MS         timeout of each etcd request (default 2000)\n"
        "  --step-back-threshold MS  wall clock this far behind: a fresh number (default 1000)\n"
        "  --slew US                 how much ID time may slow per second (default 1000)\n"
        "  --lead MS                 how far the counter may run ahead of the clock (default 1)\n"
        "  --tsc-clock auto|on|off   clients read time from the TSC, calibrated here;\n"
        "                            auto: while the TSC is invariant and the kernel's\n"
        "                            clocksource (default auto)\n"
        "  --tsc-max-error US        the TSC clock off CLOCK_MONOTONIC by more: it goes off\n"
        "                            for a while (default 200; at most half of --lead)\n"
        "  --http ADDR:PORT          serve the HTTP API there (off unless set)\n"
        "  --http-token-file FILE    require 'Authorization: Bearer <token>' on /v1/; one\n"
        "                            token a line: NAME SECRET [ids=N] [requests=N]\n"
        "  --http-max-count N        most IDs one request may take (default 10000)\n"
        "  --http-threads N          HTTP worker threads (default 2)\n"
        "  --http-token-ids N        IDs per second per token, unless its line says (0: no\n"
        "                            limit; default 0)\n"
        "  --http-token-requests N   requests per second per token (default 0)\n"
        "  --http-address-ids N      IDs per second per client address (an IPv6 /64)\n"
        "                            (default 1000000)\n"
        "  --http-address-requests N requests per second per client address (default 0)\n"
        "  --http-connections N      open HTTP connections in all (default 1024; fits\n"
        "                            the open-file limit)\n"
        "  --http-connections-per-address N   open connections per address: an IPv4\n"
        "                            address or an IPv6 /64 (default 64)\n"
        "  --http-read-timeout SEC   time to send a whole request, from connecting or from\n"
        "                            the last answer; trickling does not extend it (default 10)\n"
        "  --log-level LEVEL         err, warning, notice, info or debug (default info)\n"
        "  --check-config            validate the settings and exit\n"
        "  --help                    this text\n";

static int bad(const char *origin, const char *key, const char *value, const char *why)
{
        if (!value)
                value = "";
        fprintf(stderr, "snowidd: %s: bad setting %s = '%.200s'%s: %s\n", origin, key, value,
                strlen(value) > 200 ? "..." : "", why);
        return EX_CONFIG_;
}

static int parse_uint(const char *v, uint64_t min, uint64_t max, uint64_t *ret)
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

static int name_ok(const char *v)
{
        return shm_instance_valid(v);
}

static void set_str(char **field, const char *v)
{
        free(*field);
        *field = strdup(v);
}

static int set_etcd(struct settings *s, const char *origin, const char *v)
{
        char *copy = strdup(v), *save = NULL;
        for (unsigned i = 0; i < s->n_etcd; i++)
                free(s->etcd[i]);
        s->n_etcd = 0;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                while (*tok == ' ')
                        tok++;
                if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)) {
                        free(copy);
                        return bad(origin, "etcd", v, "each URL starts with http:// or https://");
                }
                if (s->n_etcd == ETCD_ENDPOINTS_MAX || strlen(tok) > ETCD_URL_MAX) {
                        free(copy);
                        return bad(origin, "etcd", v, "at most 16 URLs of at most 1024 bytes each");
                }
                s->etcd[s->n_etcd++] = strdup(tok);
        }
        free(copy);
        return s->n_etcd ? 0 : bad(origin, "etcd", v, "no URL given");
}

static int apply(struct settings *s, const char *origin, int id, const char *key, const char *v)
{
        uint64_t x;
        switch (id) {
        case O_STORE:
                if (!strcmp(v, "etcd"))
                        s->store = STORE_ETCD;
                else if (!strcmp(v, "postgres"))
                        s->store = STORE_POSTGRES;
                else
                        return bad(origin, key, v, "etcd or postgres");
                return 0;
        case O_POSTGRES: {
                char why[256];
                if (pg_conninfo_check(v, why, sizeof(why)) < 0) {
                        /* never echo the value: it may hold the password */
                        fprintf(stderr, "snowidd: %s: bad setting %s: %s\n", origin, key, why);
                        return EX_CONFIG_;
                }
                set_str(&s->postgres, v);
                return 0;
        }
        case O_ETCD:
                return set_etcd(s, origin, v);
        case O_CLUSTER:
        case O_INSTANCE:
                if (!name_ok(v))
                        return bad(origin, key, v, "1 to 64 of A-Z a-z 0-9 _ -");
                set_str(id == O_CLUSTER ? &s->cluster : &s->instance, v);
                return 0;
        case O_LEASE_TTL:
                if (parse_uint(v, 2, 3600, &x) < 0)
                        return bad(origin, key, v, "seconds, 2 to 3600");
                s->lease_ttl_s = (unsigned)x;
                return 0;
        case O_RENEW:
                if (parse_uint(v, 50, 600000, &x) < 0)
                        return bad(origin, key, v, "milliseconds, 50 to 600000");
                s->renew_ms = (unsigned)x;
                return 0;
        case O_WINDOW:
                if (parse_uint(v, 1, 3600, &x) < 0)
                        return bad(origin, key, v, "seconds, 1 to 3600");
                s->window_s = (unsigned)x;
                return 0;
        case O_MARK_STEP:
                if (parse_uint(v, 0, 3600, &x) < 0)
                        return bad(origin, key, v, "seconds, 0 to 3600");
                s->mark_step_s = (unsigned)x;
                return 0;
        case O_ETCD_TIMEOUT:
                if (parse_uint(v, 100, 60000, &x) < 0)
                        return bad(origin, key, v, "milliseconds, 100 to 60000");
                s->etcd_timeout_ms = (unsigned)x;
                return 0;
        case O_STEP_BACK:
                if (parse_uint(v, 10, 3600000, &x) < 0)
                        return bad(origin, key, v, "milliseconds, 10 to 3600000");
                s->step_back_ms = (unsigned)x;
                return 0;
        case O_SLEW:
                if (parse_uint(v, 0, 100000, &x) < 0)
                        return bad(origin, key, v, "microseconds per second, 0 to 100000");
                s->slew_us_per_s = (unsigned)x;
                return 0;
        case O_LEAD:
                if (parse_uint(v, 1, 100, &x) < 0)
                        return bad(origin, key, v, "milliseconds, 1 to 100");
                s->lead_ms = (unsigned)x;
                return 0;
        case O_TSC_CLOCK:
                if (!strcmp(v, "auto"))
                        s->tsc_mode = TSC_MODE_AUTO;
                else if (!strcmp(v, "on"))
                        s->tsc_mode = TSC_MODE_ON;
                else if (!strcmp(v, "off"))
                        s->tsc_mode = TSC_MODE_OFF;
                else
                        return bad(origin, key, v, "auto, on or off");
                return 0;
        case O_TSC_MAX_ERROR:
                if (parse_uint(v, 1, 50000, &x) < 0)
                        return bad(origin, key, v, "microseconds, 1 to 50000");
                s->tsc_max_error_us = (unsigned)x;
                return 0;
        case O_EPOCH:
                if (parse_uint(v, 0, (UINT64_C(1) << 62) - 1, &x) < 0)
                        return bad(origin, key, v, "unix milliseconds");
                s->layout.epoch_ms = x;
                s->layout_given = true;
                return 0;
        case O_TIME_BITS:
        case O_WORKER_BITS:
        case O_SEQ_BITS:
                if (parse_uint(v, id == O_TIME_BITS ? 32 : 0, id == O_TIME_BITS ? 63 : 31, &x) < 0)
                        return bad(origin, key, v,
                                   id == O_TIME_BITS ? "32 to 63 bits" : "0 to 31 bits");
                *(id == O_TIME_BITS     ? &s->layout.time_bits
                  : id == O_WORKER_BITS ? &s->layout.worker_bits
                                        : &s->layout.seq_bits) = (unsigned)x;
                s->layout_given = true;
                return 0;
        case O_WORKER_RANGE:
                if (worker_range_parse(v, &s->range_from, &s->range_to) < 0)
                        return bad(origin, key, v,
                                   "FROM-TO, worker numbers with FROM <= TO, "
                                   "e.g. 0-511");
                s->range_given = true;
                return 0;
        case O_REGION:
                if (!name_ok(v))
                        return bad(origin, key, v, "1 to 64 of A-Z a-z 0-9 _ -");
                set_str(&s->region, v);
                return 0;
        case O_ALLOW_USERS:
        case O_ALLOW_GROUPS:
                set_str(id == O_ALLOW_USERS ? &s->allow_users : &s->allow_groups, v);
                return 0;
        case O_RUNTIME_DIR:
                if (v[0] != '/')
                        return bad(origin, key, v, "an absolute path");
                set_str(&s->runtime_dir, v);
                return 0;
        case O_CACERT:
                set_str(&s->cacert, v);
                return 0;
        case O_CERT:
                set_str(&s->cert, v);
                return 0;
        case O_KEY:
                set_str(&s->key, v);
                return 0;
        case O_USER:
                set_str(&s->user, v);
                return 0;
        case O_PASSWORD_FILE:
                set_str(&s->password_file, v);
                return 0;
        case O_HTTP: {
                unsigned char sa[128];
                unsigned len;
                if (addr_parse_listen(v, sa, &len) < 0)
                        return bad(origin, key, v, "ADDR:PORT, e.g. 127.0.0.1:7723 or [::1]:7723");
                set_str(&s->http, v);
                return 0;
        }
        case O_HTTP_TOKEN_FILE:
                set_str(&s->http_token_file, v);
                return 0;
        case O_HTTP_MAX_COUNT:
                if (parse_uint(v, 1, 1000000, &x) < 0)
                        return bad(origin, key, v, "1 to 1000000");
                s->http_max_count = (unsigned)x;
                return 0;
        case O_HTTP_THREADS:
                if (parse_uint(v, 1, 64, &x) < 0)
                        return bad(origin, key, v, "1 to 64");
                s->http_threads = (unsigned)x;
                return 0;
        case O_HTTP_TOKEN_IDS:
        case O_HTTP_TOKEN_REQUESTS:
        case O_HTTP_ADDRESS_IDS:
        case O_HTTP_ADDRESS_REQUESTS:
                if (parse_uint(v, 0, LIMIT_RATE_MAX, &x) < 0)
                        return bad(origin, key, v, "per second, 0 (no limit) to 1000000000");
                *(id == O_HTTP_TOKEN_IDS        ? &s->http_token_ids
                  : id == O_HTTP_TOKEN_REQUESTS ? &s->http_token_requests
                  : id == O_HTTP_ADDRESS_IDS    ? &s->http_address_ids
                                                : &s->http_address_requests) = (unsigned)x;
                return 0;
        case O_HTTP_CONNECTIONS:
        case O_HTTP_CONNECTIONS_PER_ADDRESS:
                if (parse_uint(v, 1, 1000000, &x) < 0)
                        return bad(origin, key, v, "1 to 1000000");
                *(id == O_HTTP_CONNECTIONS ? &s->http_connections
                                           : &s->http_connections_per_address) = (unsigned)x;
                return 0;
        case O_HTTP_READ_TIMEOUT:
                if (parse_uint(v, 1, 3600, &x) < 0)
                        return bad(origin, key, v, "seconds, 1 to 3600");
                s->http_read_timeout_s = (unsigned)x;
                return 0;
        case O_LOG_LEVEL: {
                static const char *const names[] = {"err", "warning", "notice", "info", "debug"};
                static const int levels[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
                for (size_t i = 0; i < 5; i++)
                        if (!strcmp(v, names[i])) {
                                s->log_level = levels[i];
                                return 0;
                        }
                return bad(origin, key, v, "err, warning, notice, info or debug");
        }
        }
        return bad(origin, key, v, "not a setting of snowidd");
}

static int load_file(struct settings *s, const char *path, bool must_exist)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT && !must_exist)
                        return 0;
                fprintf(stderr, "snowidd: cannot read %s: %s\n", path, strerror(errno));
                return EX_CONFIG_;
        }
        char line[4096], origin[4200];
        int r = 0;
        struct stat st;
        /* a directory reads as empty: every default, silently */
        if (fstat(fileno(f), &st) < 0 ||
            !(S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))) {
                fprintf(stderr, "snowidd: config %s is not a regular file\n", path);
                fclose(f);
                return EX_CONFIG_;
        }
        for (unsigned n = 1; r == 0 && fgets(line, sizeof(line), f); n++) {
                snprintf(origin, sizeof(origin), "%s:%u", path, n);
                if (!strchr(line, '\n') && !feof(f)) {
                        fprintf(stderr, "snowidd: %s: line too long\n", origin);
                        r = EX_CONFIG_;
                        break;
                }
                char *p = line + strspn(line, " \t");
                p[strcspn(p, "\r\n")] = 0;
                if (!*p || *p == '#')
                        continue;
                char *eq = strchr(p, '=');
                if (!eq) {
                        fprintf(stderr, "snowidd: %s: expected 'key = value'\n", origin);
                        r = EX_CONFIG_;
                        break;
                }
                char *key = p, *v = eq + 1;
                *eq = 0;
                for (char *e = eq - 1; e >= key && (*e == ' ' || *e == '\t'); e--)
                        *e = 0;
                v += strspn(v, " \t");
                for (char *e = v + strlen(v) - 1; e >= v && (*e == ' ' || *e == '\t'); e--)
                        *e = 0;
                int id = 0;
                for (const struct option *o = options; o->name; o++)
                        if (!strcmp(o->name, key) && o->has_arg == required_argument &&
                            o->val != O_CONFIG)
                                id = o->val;
                r = apply(s, origin, id, key, v);
        }
        fclose(f);
        return r;
}

/* The first line of a secret file, without its newline. */
static int read_secret(const char *key, const char *path, char **ret)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                fprintf(stderr, "snowidd: cannot read %s %s: %s\n", key, path, strerror(errno));
                return EX_CONFIG_;
        }
        char buf[SECRET_MAX + 2];
        errno = 0;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        int err = ferror(f) ? errno : 0;
        bool cut = !strchr(buf, '\n') && fgetc(f) != EOF;
        fclose(f);
        buf[strcspn(buf, "\r\n")] = 0;
        if (err || cut || !*buf) {
                fprintf(stderr, "snowidd: %s %s %s\n", key, path,
                        err   ? strerror(err)
                        : cut ? "has a first line longer than 1023 bytes"
                              : "is empty");
                explicit_bzero(buf, sizeof(buf));
                return EX_CONFIG_;
        }
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return 0;
}

/* A file that libcurl opens later: read now, so that a wrong path is said
 * at start (and by --check-config), not as a TLS failure. */
static int check_readable(const char *key, const char *path)
{
        char byte;
        struct stat st = {0};
        /* non-blocking: a FIFO or a terminal named here must not hang the start */
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : -2;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                fprintf(stderr, "snowidd: cannot read %s %s: %s\n", key, path,
                        S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
                return EX_CONFIG_;
        }
        ssize_t n = fd >= 0 ? read(fd, &byte, 1) : -1;
        int err = errno;
        if (fd >= 0)
                close(fd);
        if (!path || n > 0)
                return 0;
        fprintf(stderr, "snowidd: cannot read %s %s: %s\n", key, path,
                n == 0 ? "it is empty" : strerror(err));
        return EX_CONFIG_;
}

/* A file the PostgreSQL connection string names, read now as the etcd
 * ones are: libpq would skip a missing passfile or client certificate
 * silently, and the server's refusal would not name the file. */
static int check_pg_file(const char *keyword, const char *path)
{
        char key[64];
        snprintf(key, sizeof(key), "postgres %s", keyword);
        return check_readable(key, path);
}

/* One id of an allow list: a number, or a name that must exist. */
static int resolve_id(const char *list, const char *tok, bool user, unsigned *ret)
{
        uint64_t x;
        if (parse_uint(tok, 0, UINT32_MAX - 1, &x) == 0) {
                *ret = (unsigned)x;
                return 0;
        }
        if (user) {
                struct passwd *pw = getpwnam(tok);
                if (pw) {
                        *ret = pw->pw_uid;
                        return 0;
                }
        } else {
                struct group *g = getgrnam(tok);
                if (g) {
                        *ret = g->gr_gid;
                        return 0;
                }
        }
        fprintf(stderr,
                "snowidd: allow-%s = '%s': no %s '%s' (names must exist; numbers need "
                "not)\n",
                user ? "users" : "groups", list, user ? "user" : "group", tok);
        return EX_CONFIG_;
}

static int resolve_list(struct settings *s, const char *list, bool user)
{
        if (!list)
                return 0;
        char *copy = strdup(list), *save = NULL;
        int r = 0;
        for (char *tok = strtok_r(copy, ", ", &save); tok && !r;
             tok = strtok_r(NULL, ", ", &save)) {
                unsigned id;
                if (user && !strcmp(tok, "*")) {
                        s->allow_all = true;
                        continue;
                }
                if ((user ? s->n_allow_uid : s->n_allow_gid) == ALLOW_MAX) {
                        fprintf(stderr, "snowidd: allow-%s: at most %d entries\n",
                                user ? "users" : "groups", ALLOW_MAX);
                        r = EX_CONFIG_;
                        break;
                }
                r = resolve_id(list, tok, user, &id);
                if (r == 0 && user)
                        s->allow_uid[s->n_allow_uid++] = (uid_t)id;
                else if (r == 0)
                        s->allow_gid[s->n_allow_gid++] = (gid_t)id;
        }
        free(copy);
        return r;
}

static int resolve_allow(struct settings *s)
{
        int r = resolve_list(s, s->allow_users, true);
        return r ? r : resolve_list(s, s->allow_groups, false);
}

bool settings_allowed(const struct settings *s, uid_t uid, const gid_t *gids, unsigned n_gids)
{
        if (s->allow_all || uid == 0 || uid == geteuid())
                return true;
        for (unsigned i = 0; i < s->n_allow_uid; i++)
                if (s->allow_uid[i] == uid)
                        return true;
        for (unsigned i = 0; i < s->n_allow_gid; i++)
                for (unsigned k = 0; k < n_gids; k++)
                        if (s->allow_gid[i] == gids[k])
                                return true;
        return false;
}

/* Settings that are fine alone but not together. */
static int check(struct settings *s)
{
        if (s->store == STORE_POSTGRES && !s->postgres) {
                fprintf(stderr, "snowidd: store = postgres needs postgres = CONNINFO (a libpq "
                                "connection string or URI)\n");
                return EX_CONFIG_;
        }
        if (s->layout_given && snowid_layout_check(&s->layout) < 0) {
                fprintf(stderr,
                        "snowidd: bad layout %u/%u/%u: time-bits >= 32 and time + worker + "
                        "seq bits = 63\n",
                        s->layout.time_bits, s->layout.worker_bits, s->layout.seq_bits);
                return EX_CONFIG_;
        }
        /* without layout settings, the layout stored in etcd decides (holder) */
        if (s->range_given && s->layout_given &&
            !worker_range_fits(s->range_from, s->range_to, s->layout.worker_bits)) {
                fprintf(stderr,
                        "snowidd: worker-range %u-%u does not fit %u worker bits "
                        "(numbers 0 to %" PRIu64 ")\n",
                        s->range_from, s->range_to, s->layout.worker_bits,
                        (UINT64_C(1) << s->layout.worker_bits) - 1);
                return EX_CONFIG_;
        }
        if (s->renew_ms * 2 > s->lease_ttl_s * 1000) {
                fprintf(stderr,
                        "snowidd: renew-interval %u ms must be at most half of lease-ttl "
                        "%u s\n",
                        s->renew_ms, s->lease_ttl_s);
                return EX_CONFIG_;
        }
        if (s->renew_ms * 2 > s->window_s * 1000) {
                fprintf(stderr,
                        "snowidd: renew-interval %u ms must be at most half of window "
                        "%u s\n",
                        s->renew_ms, s->window_s);
                return EX_CONFIG_;
        }
        if (s->etcd_timeout_ms > s->window_s * 1000) {
                fprintf(stderr, "snowidd: etcd-timeout %u ms must not exceed window %u s\n",
                        s->etcd_timeout_ms, s->window_s);
                return EX_CONFIG_;
        }
        /* a tick of slew steps ID time back by slew * tick: a counter a ms
         * ahead of the clock is then up to a + ceil(step) ms ahead, and
         * clients wait past lead.  A step of at most half the lead keeps
         * counters up to lead / 2 ms ahead (rounded down: load, bursts)
         * from waiting on every tick */
        uint64_t max_slew = (uint64_t)s->lead_ms * 1000 / 2 * 1000 / SLEW_TICK_MS;
        if (s->slew_us_per_s > max_slew) {
                fprintf(stderr,
                        "snowidd: slew %u us/s is too fast for lead %u ms: its step "
                        "back every %u ms must be at most half the lead, so slew at "
                        "most %" PRIu64 " us/s\n",
                        s->slew_us_per_s, s->lead_ms, SLEW_TICK_MS, max_slew);
                return EX_CONFIG_;
        }
        /* an error inside half the lead costs at most a short wait at the
         * lead bound when the clock goes back to the vDSO */
        if ((uint64_t)s->tsc_max_error_us * 2 > (uint64_t)s->lead_ms * 1000) {
                fprintf(stderr, "snowidd: tsc-max-error %u us must be at most half of lead %u ms\n",
                        s->tsc_max_error_us, s->lead_ms);
                return EX_CONFIG_;
        }
        if ((s->cert == NULL) != (s->key == NULL)) {
                fprintf(stderr, "snowidd: etcd-cert and etcd-key go together\n");
                return EX_CONFIG_;
        }
        if ((s->user == NULL) != (s->password_file == NULL)) {
                fprintf(stderr, "snowidd: etcd-user and etcd-password-file go together\n");
                return EX_CONFIG_;
        }
        if (check_readable("etcd-cacert", s->cacert) || check_readable("etcd-cert", s->cert) ||
            check_readable("etcd-key", s->key))
                return EX_CONFIG_;
        if (s->store == STORE_POSTGRES && pg_conninfo_files(s->postgres, check_pg_file))
                return EX_CONFIG_;
        if (s->password_file && read_secret("etcd-password-file", s->password_file, &s->password))
                return EX_CONFIG_;
        if (s->http_token_file) {
                char err[512];
                if (tokens_load(s->http_token_file, (struct rate){s->http_token_ids},
                                (struct rate){s->http_token_requests}, &s->http_tokens,
                                &s->n_http_tokens, err, sizeof(err)) < 0) {
                        fprintf(stderr, "snowidd: %s\n", err);
                        return EX_CONFIG_;
                }
        }
        if (s->http_token_file && !s->http) {
                fprintf(stderr, "snowidd: http-token-file is set but http is not\n");
                return EX_CONFIG_;
        }
        /* <dir>/.<instance>.new is the longest name made there: a sun_path
         * holds 107 bytes and a NUL */
        if (strlen(s->runtime_dir) + strlen(s->instance) + 7 > 107) {
                fprintf(stderr,
                        "snowidd: runtime-dir '%s' and instance '%s' make a socket path "
                        "longer than 107 bytes\n",
                        s->runtime_dir, s->instance);
                return EX_CONFIG_;
        }
        return resolve_allow(s);
}

int settings_load(struct settings *s, int argc, char **argv)
{
        *s = (struct settings){
                .lease_ttl_s = 10,
                .renew_ms = 1000,
                .window_s = 10,
                .mark_step_s = 5,
                .etcd_timeout_ms = 2000,
                .step_back_ms = 1000,
                .slew_us_per_s = 1000,
                .lead_ms = 1,
                .tsc_max_error_us = 200,
                .http_max_count = 10000,
                .http_threads = 2,
                .http_address_ids = 1000000,
                .http_connections = 1024,
                .http_connections_per_address = 64,
                .http_read_timeout_s = 10,
                .log_level = LOG_INFO,
                .cluster = strdup("default"),
                .instance = strdup("default"),
                .region = strdup("default"),
                .runtime_dir = strdup(SHM_RUNTIME_DIR_DEFAULT),
        };
        snowid_layout_default(&s->layout);
        set_etcd(s, "default", "http://127.0.0.1:2379");

        /* the config file first, so that flags override it */
        const char *config = DEFAULT_CONFIG;
        bool explicit_config = false;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--config") && i + 1 < argc)
                        config = argv[i + 1], explicit_config = true;
                else if (!strncmp(argv[i], "--config=", 9))
                        config = argv[i] + 9, explicit_config = true;
                else if (!strcmp(argv[i], "--help")) {
                        fputs(help, stdout);
                        return 1;
                }
        }
        int r = load_file(s, config, explicit_config);
        if (r)
                return r;

        int c;
        opterr = 0;
        optind = 0; /* glibc: start afresh, even after an earlier parse */
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                if (c == '?' || c == ':') {
                        fprintf(stderr, "snowidd: bad flag '%s' (see snowidd --help)\n",
                                argv[optind - 1]);
                        return EX_CONFIG_;
                }
                if (c == O_CONFIG)
                        continue;
                if (c == O_CHECK) {
                        s->check_config = true;
                        continue;
                }
                if (c == O_HELP) { /* an abbreviation of --help: getopt takes it too */
                        fputs(help, stdout);
                        return 1;
                }
                const char *name = "?";
                for (const struct option *o = options; o->name; o++)
                        if (o->val == c)
                                name = o->name;
                r = apply(s, "command line", c, name, optarg);
                if (r)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr, "snowidd: unexpected argument '%s'\n", argv[optind]);
                return EX_CONFIG_;
        }
        r = check(s);
        if (r)
                return r;
        if (s->check_config) {
                printf("snowidd: settings are valid\n");
                return 1;
        }
        return 0;
}

void settings_free(struct settings *s)
{
        for (unsigned i = 0; i < s->n_etcd; i++)
                free(s->etcd[i]);
        free(s->cluster);
        free(s->instance);
        free(s->region);
        free(s->runtime_dir);
        free(s->allow_users);
        free(s->allow_groups);
        free(s->cacert);
        free(s->cert);
        free(s->key);
        free(s->user);
        free(s->password_file);
        if (s->password)
                memset(s->password, 0, strlen(s->password));
        free(s->password);
        free(s->http);
        free(s->http_token_file);
        free(s->postgres);
        tokens_free(s->http_tokens, s->n_http_tokens);
}
