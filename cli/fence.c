/* SPDX-License-Identifier: MIT */
/*
 * snowid fence: a new history for a cluster (docs/fences.md).  Run after
 * etcd was restored from a snapshot, or when the cluster's layout, fence or
 * floor key was lost.  Writes a new fence token and claims_above, raises
 * the floor to it, and re-creates a lost layout from the configuration.
 * Daemons see the new fence at their next request and go on by themselves.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "store.h"
#include "values.h"
#include "verbs.h"
#include "fence.h"
#include "fencing.h"
#include "log.h"
#include "rules.h"
#include "trace.h"

struct fence_run {
        const struct settings *cfg;
        sd_event *event;
        struct store *store;
        char prefix[96];
        uint64_t ahead_ms;
        int64_t lost_lead_ms; /* --lost-lead; -1: not given */
        unsigned tries, races;
        int result;
        char said[512];     /* printed once etcd took the fence */
        double far_ahead_s; /* how far the floor was past ahead + window */
};

static void send_read(struct fence_run *f);

static void done(struct fence_run *f, int result)
{
        f->result = result;
        sd_event_exit(f->event, 0);
}

static void on_write(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct fence_run *f = userdata;
        if (!ok) {
                fprintf(stderr,
                        "snowid fence: no answer from %s (%s): the fence may or may "
                        "not be in place; run it again\n",
                        store_title(f->store), r->error ? r->error : "malformed answer");
                done(f, 1);
                return;
        }
        if (!succeeded) {
                /* a daemon raised the floor past it, or another fence won: again */
                if (++f->races < 10) {
                        send_read(f);
                        return;
                }
                fprintf(stderr, "snowid fence: the cluster's keys kept changing while it was "
                                "being fenced; run it again\n");
                done(f, 1);
                return;
        }
        fputs(f->said, stdout);
        if (f->far_ahead_s > 0)
                fprintf(stderr,
                        "snowid fence: note: the floor or a mark was %.0f s past this host's clock "
                        "(a host's clock ran ahead once): every claim from now on starts there, "
                        "and "
                        "ID time is brought back to the wall clock at the slew rate\n",
                        f->far_ahead_s);
        done(f, 0);
}

static uint64_t wall_unix_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t wall_id_ms(const snowid_layout *l)
{
        uint64_t unix_ms = wall_unix_ms();
        return unix_ms > l->epoch_ms ? unix_ms - l->epoch_ms : 0;
}

/* The fencing core's settings, from the command's flags and snowidd's. */
static struct fencing_settings settings_of(const struct fence_run *f)
{
        const snowid_layout *l = &f->cfg->layout;
        return (struct fencing_settings){.epoch_ms = l->epoch_ms,
                                         .time_bits = l->time_bits,
                                         .window_s = f->cfg->window_s,
                                         .mark_step_s = f->cfg->mark_step_s,
                                         .slew_us_per_s = f->cfg->slew_us_per_s,
                                         .ahead_ms = f->ahead_ms,
                                         .lost_lead_ms = f->lost_lead_ms};
}

/* Why no fence is written without --lost-lead, and what to pass. */
static void refuse(const struct fence_run *f, const struct cluster_ident *old,
                   const struct fencing_decision *d, uint64_t cluster_id)
{
        char when[64] = "";
        time_t t = (time_t)(old->era / 1000);
        struct tm tm;
        const struct fencing_settings set = settings_of(f);
        if (old->era && gmtime_r(&t, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
        if (d->verdict == FENCING_REFUSE_FENCELESS)
                fprintf(stderr,
                        "snowid fence: %s holds no valid fence for cluster %s (deleted, damaged, "
                        "or restored from a snapshot without it): the leads of the fences made "
                        "before cannot be read from it.\n",
                        store_title(f->store), f->cfg->cluster);
        else
                fprintf(stderr,
                        "snowid fence: %s answers as cluster %" PRIu64 ", but its fence (token "
                        "%s, made %s) was written on cluster %" PRIu64 ": it was restored or "
                        "replaced, and that fence may not be the last one. Hosts that claimed "
                        "after a fence the snapshot does not hold run that fence's lead ahead of "
                        "their clocks, and nothing in the store shows it.\n",
                        store_title(f->store), cluster_id, old->token, when, old->cluster_id);
        fprintf(stderr,
                "snowid fence: not fenced. Run it again with --lost-lead MS: 0 if no `snowid "
                "fence` ran after %s; otherwise the lead (\"s from this host's clock\") that "
                "the last fence made since printed, which carries those before it (%" PRIu64
                " for one made with these settings and no earlier lead).\n",
                d->verdict == FENCING_REFUSE_FENCELESS ? "the cluster was made" : "that one",
                fencing_own_lead_ms(&set));
}

/* The witnesses' values, parsed for the core (-1 where a field is missing
 * or not a number); each one the core does not count is said. */
static struct fencing_witness *witnesses_parse(const struct fence_run *f,
                                               const struct store_fence_read *rd, uint64_t wall)
{
        const struct fencing_settings set = settings_of(f);
        struct fencing_witness *ws = calloc(rd->n_witnesses ? rd->n_witnesses : 1, sizeof(*ws));
        if (!ws)
                return NULL;
        for (size_t i = 0; i < rd->n_witnesses; i++) {
                const struct store_fence_witness *x = &rd->witnesses[i];
                json_int_t era = -1, above = -1, deadline = -1;
                json_t *v = json_loadb(x->value, x->len, 0, NULL);
                if (v && json_unpack(v, "{s:I, s:I, s:I}", "era", &era, "claims_above", &above,
                                     "deadline", &deadline) < 0)
                        era = above = deadline = -1;
                json_decref(v);
                ws[i] = (struct fencing_witness){
                        .era = era, .claims_above = above, .deadline = deadline};
                if (!fencing_witness_valid(&set, wall, &ws[i]))
                        fprintf(stderr, "snowid fence: the witness %s is not valid; not counted\n",
                                x->key);
        }
        return ws;
}

static void on_read(void *userdata, const struct store_answer *r, const struct store_fence_read *rd)
{
        struct fence_run *f = userdata;
        struct cluster_ident old = {0}, c;
        if (!rd->ok) {
                fprintf(stderr, "snowid fence: cannot read the cluster from %s: %s\n",
                        store_title(f->store), r->error ? r->error : "malformed answer");
                /* the client moves on to the next endpoint after a failure
                 * (PostgreSQL: one endpoint, tried 3 times too) */
                unsigned endpoints = f->cfg->n_etcd ? f->cfg->n_etcd : 1;
                if ((!r->answered || r->status >= 500) && ++f->tries < 3 * endpoints) {
                        send_read(f);
                        return;
                }
                done(f, 1);
                return;
        }
        bool fence_valid = rd->fence == 1 && fence_parse(rd->fence_bytes, rd->fence_len, &old) == 0;
        if (rd->fence == 1 && !fence_valid) {
                old = (struct cluster_ident){0};
                fprintf(stderr, "snowid fence: the stored fence is not valid; replacing it\n");
        }
        if (rd->floor < 0)
                fprintf(stderr, "snowid fence: the stored floor is not valid; replacing it\n");
        uint64_t wall = wall_unix_ms();
        struct fencing_witness *ws = witnesses_parse(f, rd, wall);
        if (!ws) {
                fprintf(stderr, "snowid fence: out of memory\n");
                done(f, 1);
                return;
        }
        const struct fencing_settings set = settings_of(f);
        const struct fencing_read in = {.cluster_id = r->cluster_id,
                                        .fence = fence_valid ? &old : NULL,
                                        .floor_present = rd->floor == 1,
                                        .floor = rd->floor_value,
                                        .highest = rd->highest,
                                        .n_witnesses = rd->n_witnesses,
                                        .witnesses = ws};
        struct fencing_decision d;
        fencing_decide(&set, wall, &in, &d);
        free(ws);
        if (d.verdict != FENCING_WRITE) {
                refuse(f, &old, &d, r->cluster_id);
                done(f, 1);
                return;
        }
        f->far_ahead_s = (double)d.far_ahead_ms / 1000;
        if (d.same_cluster && f->cfg->store == STORE_ETCD)
                fprintf(stderr,
                        "snowid fence: note: etcd's cluster ID (%" PRIu64 ") is unchanged since "
                        "the last fence. If etcd was restored from a snapshot, it was restored "
                        "with the same --initial-cluster-token: daemons that reached it before "
                        "this fence could not all tell. Restore with a new token "
                        "(docs/fences.md)\n",
                        r->cluster_id);
        else if (d.same_cluster)
                fprintf(stderr,
                        "snowid fence: note: PostgreSQL's cluster_id (%" PRIu64 ") is unchanged "
                        "since the last fence. If a backup was restored, it was restored on the "
                        "same server, which keeps it: daemons that reached it before this fence "
                        "could not all tell. Fence a restored database before daemons reach it "
                        "(docs/postgres.md)\n",
                        r->cluster_id);
        /* after every era a daemon may know: one that knew a lost fence
         * halts on an older one */
        if (fence_make(d.above, d.era, r->cluster_id, false, &c) < 0) {
                fprintf(stderr, "snowid fence: no random token\n");
                done(f, 1);
                return;
        }
        /* the layout and fence as read; the floor still at or below what
         * is put (daemons raise it meanwhile: then read again); no witness
         * written since the read (each one is covered, and deleted) */
        const snowid_layout *l = &f->cfg->layout;
        const struct store_fence_write fw = {
                .read = rd, .fence = c.fence, .floor = d.above, .layout = l};
        if (store_fence_write(f->store, &fw, on_write, f) < 0) {
                fprintf(stderr, "snowid fence: cannot send to %s\n", store_title(f->store));
                done(f, 1);
                return;
        }
        int n = snprintf(
                f->said, sizeof(f->said),
                "snowid fence: cluster %s fenced on store cluster ID %" PRIu64
                ": token %s, claims above %" PRIu64
                " (%+.1f s from this host's clock, %.1f s the last fence's lead, "
                "%.1f s a lost fence's; %zu marks, the highest %" PRIu64 ", floor was %" PRIu64
                "; %u witnesses, the highest deadline %" PRIu64 ")%s\n",
                f->cfg->cluster, r->cluster_id, c.token, d.above,
                ((double)d.above - (double)wall_id_ms(l)) / 1000,
                (double)(d.lead_left > d.witness_lead_left ? d.lead_left : d.witness_lead_left) /
                        1000,
                (double)d.lost_lead / 1000, rd->marks, rd->highest,
                rd->floor == 1 ? rd->floor_value : 0, d.witnesses, d.witness_deadline,
                rd->layout == 0 ? "; layout re-created from the configuration" : "");
        if (rd->layout == 0 && n > 0 && (size_t)n < sizeof(f->said))
                snprintf(f->said + n, sizeof(f->said) - (size_t)n,
                         "snowid fence: layout: epoch %" PRIu64 " ms, %u time, %u worker, %u "
                         "sequence bits\n",
                         l->epoch_ms, l->time_bits, l->worker_bits, l->seq_bits);
}

static void send_read(struct fence_run *f)
{
        if (store_fence_read(f->store, f->cfg->layout.time_bits, on_read, f) < 0) {
                fprintf(stderr, "snowid fence: cannot send to %s\n", store_title(f->store));
                done(f, 1);
        }
}

int cmd_fence(int argc, char **argv)
{
        struct fence_run f = {.ahead_ms = FENCE_AHEAD_MS, .lost_lead_ms = -1, .result = 1};
        struct settings cfg;
        if (trace_start("snowid fence") < 0)
                return 1;
        /* --ahead is ours; everything else is snowidd's settings */
        char **args = calloc((size_t)argc + 1, sizeof(char *));
        int n = 0;
        if (!args)
                return 1;
        for (int i = 0; i < argc; i++) {
                const char *v = NULL, *name = NULL;
                uint64_t *to = NULL;
                uint64_t lost;
                if (!strcmp(argv[i], "--ahead") || !strncmp(argv[i], "--ahead=", 8))
                        name = "--ahead", to = &f.ahead_ms;
                else if (!strcmp(argv[i], "--lost-lead") || !strncmp(argv[i], "--lost-lead=", 12))
                        name = "--lost-lead", to = &lost;
                if (name && argv[i][strlen(name)] == '=')
                        v = argv[i] + strlen(name) + 1;
                else if (name && i + 1 < argc)
                        v = argv[++i];
                else if (name) {
                        fprintf(stderr, "snowid fence: %s needs a value (ms)\n", name);
                        free(args);
                        return 2;
                } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("Usage: snowid fence [--ahead MS] [--lost-lead MS] [snowidd's "
                               "settings: --config "
                               "FILE, --etcd URLS\nor --store postgres --postgres CONNINFO, "
                               "--cluster NAME, --window S, TLS, user, layout]\n\n"
                               "After the store was restored (etcd from a snapshot, PostgreSQL "
                               "from a backup), or\nthe cluster's layout, fence or floor key was "
                               "lost: a new fence token, claims above\nmax(every mark, the "
                               "floor, this host's clock + ahead + window); a lost layout\n"
                               "re-created from the settings.\n"
                               "--ahead MS: how far any host's ID time may be ahead of this "
                               "host's clock (60000)\n"
                               "--lost-lead MS: after a restore, the leads of the fences made "
                               "after the snapshot\n(0: none was); required when the store was "
                               "restored or replaced, or holds no fence\n");
                        free(args);
                        return 0;
                }
                if (v) {
                        char *end;
                        errno = 0;
                        unsigned long long a = strtoull(v, &end, 10);
                        if (errno || end == v || *end || *v == '-' || a > 86400000ULL * 365) {
                                fprintf(stderr, "snowid fence: bad %s '%s' (ms, at most a year)\n",
                                        name, v);
                                free(args);
                                return 2;
                        }
                        *to = a;
                        if (to == &lost)
                                f.lost_lead_ms = (int64_t)lost;
                } else
                        args[n++] = argv[i];
        }
        log_setup();
        int r = settings_load(&cfg, &settings_checks_postgres, n, args);
        free(args);
        if (r != 0)
                return settings_exit_status(r);
        f.cfg = &cfg;
        snprintf(f.prefix, sizeof(f.prefix), "/snowid/%s/", cfg.cluster);
        if (sd_event_new(&f.event) < 0 || store_new(f.event, &cfg, &f.store) < 0) {
                fprintf(stderr, "snowid fence: cannot set up the store's client\n");
                goto out;
        }
        store_set_prefix(f.store, f.prefix);
        send_read(&f);
        sd_event_loop(f.event);
out:
        f.store = store_free(f.store);
        sd_event_unref(f.event);
        settings_free(&cfg);
        return f.result;
}
