/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ratelimit.h"
#include "snowid.h"

#define EX_CONFIG_ 78   /* sysexits.h EX_CONFIG: a bad setting, not worth a restart */
#define EX_SOFTWARE_ 70 /* sysexits.h EX_SOFTWARE: a bug of snowidd's; restarted */
#define ETCD_ENDPOINTS_MAX 16
#define ALLOW_MAX 64

/* Where the leases and marks live: etcd, or PostgreSQL (daemon/store/pg.c). */
enum store_kind { STORE_ETCD, STORE_POSTGRES };

/* The TSC clock (tsc-clock.h, docs/clocks.md) */
enum tsc_mode {
        TSC_MODE_AUTO = 0, /* on while the TSC is invariant and the kernel's clocksource */
        TSC_MODE_ON,       /* on wherever x86-64 has a TSC (tests, benchmarks) */
        TSC_MODE_OFF,
};

struct settings {
        enum store_kind store;
        char *postgres; /* libpq conninfo (keywords or URI), without a password */
        char *etcd[ETCD_ENDPOINTS_MAX];
        unsigned n_etcd;
        char *cluster;
        char *instance;
        unsigned lease_ttl_s; /* lease TTL */
        unsigned renew_ms;    /* keepalive and mark extension period */
        unsigned window_s;    /* headroom kept: an etcd outage shorter than this is invisible */
        unsigned mark_step_s; /* a mark write lasts this long before the next */
        /* store-timeout (etcd-timeout): each request, to either store */
        unsigned store_timeout_ms;
        unsigned step_back_ms;  /* wall clock this far behind ID time: a fresh number */
        unsigned slew_us_per_s; /* how fast ID time is brought back to the wall clock */
        unsigned lead_ms;       /* how far the counter may run ahead of ID time */
        enum tsc_mode tsc_mode;
        unsigned tsc_max_error_us; /* the TSC clock's error past this: off, backing off */
        snowid_layout layout;
        bool layout_given; /* any of --epoch/--*-bits was set */
        bool range_given;  /* worker-range was set; else the whole worker space */
        uint32_t range_from, range_to;
        char *region;       /* names this region's range record (docs/regions.md) */
        char *runtime_dir;  /* the socket and the lock live here */
        char *allow_users;  /* "name-or-uid,..." or "*" */
        char *allow_groups; /* "name-or-gid,..." */
        bool allow_all;
        uid_t allow_uid[ALLOW_MAX];
        gid_t allow_gid[ALLOW_MAX];
        unsigned n_allow_uid, n_allow_gid;
        char *cacert, *cert, *key;
        char *user, *password_file, *password;
        int log_level;
        bool check_config;
        bool prepare_runtime_dir; /* --prepare-runtime-dir UID:GID: give it, exit */
        uid_t prepare_uid;
        gid_t prepare_gid;
        char *http; /* "ADDR:PORT" or NULL: the HTTP API is off */
        char *http_token_file;
        struct token *http_tokens; /* read from http_token_file */
        unsigned n_http_tokens;
        unsigned http_max_count;
        unsigned http_threads;
        unsigned http_token_ids, http_token_requests;     /* per second, per token; 0: none */
        unsigned http_address_ids, http_address_requests; /* per second, per address */
        unsigned http_connections, http_connections_per_address;
        unsigned http_read_timeout_s; /* a whole request, however it trickles */
        /* as given to settings_load() */
        const struct settings_checks *checks;
};

/* Checks that other parts of snowidd make of their own settings, given to
 * settings_load() by a program that links those parts, so that a program
 * that needs settings does not link them (libpq) for nothing.  Without
 * them, the settings they check are refused, never taken unchecked. */
struct settings_checks {
        /* 0 if a libpq connection string parses and has no password; else
         * -EINVAL and why (never the value) in why */
        int (*postgres)(const char *conninfo, char *why, size_t why_size);
        /* fn for each file a connection string names, until one fails */
        int (*postgres_files)(const char *conninfo,
                              int (*fn)(const char *keyword, const char *path));
};
/* The PostgreSQL store's (pg-conninfo.c). */
extern const struct settings_checks settings_checks_postgres;

/* Defaults, then the config file, then flags, each setting parsed by its row
 * (config-table.c), then the checks across settings.  0 to run; 1 when
 * --help or --check-config has done what it was asked; or, after logging one
 * line that says what is wrong, a negative errno.  checks may be NULL. */
int settings_load(struct settings *s, const struct settings_checks *checks, int argc, char **argv);
/* What a program exits with after settings_load() returned r, not 0: 0, or
 * EX_CONFIG_ for a bad setting (a restart cannot mend it), or 1 when out of
 * memory. */
static inline int settings_exit_status(int r)
{
        return r > 0 ? 0 : r == -ENOMEM ? 1 : EX_CONFIG_;
}
void settings_free(struct settings *s);
/* Root, snowidd's own user, and whoever the allow lists name (a group by its
 * primary or any supplementary gid) may take IDs. */
bool settings_allowed(const struct settings *s, uid_t uid, const gid_t *gids, unsigned n_gids);

/* The numbers this daemon claims in a layout of worker_bits: worker-range,
 * or the whole space. */
static inline void settings_worker_range(const struct settings *s, unsigned worker_bits,
                                         uint32_t *ret_from, uint32_t *ret_to)
{
        *ret_from = s->range_given ? s->range_from : 0;
        *ret_to = s->range_given ? s->range_to : (uint32_t)((UINT64_C(1) << worker_bits) - 1);
}
