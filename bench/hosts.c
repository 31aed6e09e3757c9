/* SPDX-License-Identifier: MIT */
/*
 * snowid-hosts: many hosts' holders in one process, on one event loop (of
 * loops: a loop per group of hosts, see GROUP_HOSTS).
 * Each host is what snowidd's core is on a host of its own (the same claim,
 * renewal, mark and fence code; its own settings, store client and
 * segment), without a process start-up each: so that N hosts cost the
 * store what N hosts cost it.  bench/hosts.py drives it.
 *
 *   snowid-hosts --hosts N [--serve] [--floor] -- SNOWIDD FLAGS (the store's, --cluster, ...)
 *
 * --serve: each host also serves its segment on its socket, <dir>/hNNNN.sock
 * (the "started" event names dir), so that clients can take IDs from it.
 *
 * Every host's store verbs are timed (store_observe()) by the step its
 * holder is at (layout, grant, scan, claim, settle, renew, stop).
 * Every 50 ms the harness checks that no worker number is published by two
 * hosts, and measures how long each host's clients would get EAGAIN (ID
 * time at or past its segment's deadline, once it first published).
 *
 * Commands on stdin, one per line; answers are JSON lines on stdout:
 *   report            the figures so far (and resets the interval counters)
 *   reset             the calls' durations and the EAGAIN stretches forgotten
 *   mark              from now, each host's next switch (a new publication:
 *                     another number, or the same one claimed again) is
 *                     counted; the report says how many switched since, and
 *                     when the last did
 *   kill I..J         holders I..J freed without a stop (as kill -9: their
 *                     leases run out), then started again
 *   retire I          holder I stopped as snowidd stops (its number given up),
 *                     and not started again
 *   stop              every holder stopped as snowidd stops; exits when done
 * Events: {"event":"ready","host":I,"t":S} once per host start.
 *
 * --floor: instead of holders, each host makes the calls an acquisition
 * cannot do without (one lease grant, one claim of a number of its own, on
 * a cluster of the floor's made beforehand) once, all at once, through the
 * same store client and verbs: the store's floor.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "barrier.h"
#include "config.h"
#include "handshake.h"
#include "holder.h"
#include "log.h"
#include "publish.h"
#include "serve.h"
#include "store.h"
#include "values.h"
#include "verbs.h"

enum kind { K_LAYOUT, K_GRANT, K_SCAN, K_CLAIM, K_SETTLE, K_RENEW, K_OTHER, K_MAX };
static const char *const kind_names[K_MAX] = {"layout", "grant", "scan", "claim",
                                              "settle", "renew", "other"};

/* Durations of one kind of call: a log-scale histogram (0.1 ms steps
 * doubling), enough for medians and tails. */
#define BUCKETS 40
struct dist {
        uint64_t n, sum_us, max_us;
        uint64_t lost; /* calls that got no answer (a timeout, the connection gone) */
        uint64_t b[BUCKETS];
};

static void dist_add(struct dist *d, uint64_t us)
{
        unsigned i = 0;
        for (uint64_t lim = 100; i < BUCKETS - 1 && us > lim; i++, lim = lim * 3 / 2)
                ;
        d->n++;
        d->sum_us += us;
        d->b[i]++;
        if (us > d->max_us)
                d->max_us = us;
}

/* the upper edge of the bucket holding quantile q, in ms */
static double dist_q(const struct dist *d, double q)
{
        if (!d->n)
                return 0;
        uint64_t want = (uint64_t)(q * (double)d->n + 0.5), seen = 0;
        uint64_t lim = 100;
        for (unsigned i = 0; i < BUCKETS; i++, lim = lim * 3 / 2) {
                seen += d->b[i];
                if (seen >= want)
                        return (double)(i == BUCKETS - 1 || lim > d->max_us ? d->max_us : lim) /
                               1000.0;
        }
        return (double)d->max_us / 1000.0;
}

struct host {
        int i;
        struct settings cfg;
        struct shm_pub *pub;
        struct serve *serve;
        struct holder *h;
        bool started, ready;
        uint64_t t_start_us, t_ready_us;
        uint64_t eagain_since_us; /* 0: none now */
        uint64_t eagain_max_us;
        int64_t worker;
        uint64_t gen;         /* the segment's generation when last looked at */
        uint64_t switched_us; /* when it last changed */
        int64_t worker_at_mark;
        /* --floor */
        struct store *floor_store;
        bool floor_done;
        int64_t floor_lease;    /* the floor's lease, once granted */
        unsigned floor_tries;   /* the floor's claims sent */
        unsigned floor_resends; /* the floor's calls sent again */
};

static struct host *hosts;
static unsigned n_hosts;
static sd_event *event;

/* Each host's holder, store client and server run on the loop of its
 * group of GROUP_HOSTS, nested in the main loop through the group loop's
 * own descriptor.  One loop for every host would cost this process what
 * no host pays: sd-event dispatches one source per iteration and polls
 * every ready descriptor again at each, so with the answers of a thousand
 * hosts waiting, the harness spends its time in epoll_wait() (80% of it,
 * measured with perf in a storm of 1,024) and reads answers and fires
 * timers late.  A group's loop is run until it has nothing
 * pending, when its descriptor is ready and before the main loop polls
 * (which arms the group's timers, also those set from the main loop). */
#define GROUP_HOSTS 32

struct group {
        sd_event *e;
        sd_event_source *watch;
};

static struct group *groups;
static unsigned n_groups;
/* a group left with work pending: the main loop goes round again at once */
static sd_event_source *groups_more;

static int on_more(sd_event_source *s, void *userdata)
{
        (void)s;
        (void)userdata;
        return 0;
}

/* At most GROUP_RUN dispatches at a time, so that no group, and not the
 * groups together, keep the main loop's own sources (stdin, the checks)
 * waiting. */
#define GROUP_RUN 64

static int group_run(sd_event_source *s, void *userdata)
{
        struct group *g = userdata;
        (void)s;
        for (unsigned i = 0; sd_event_run(g->e, 0) > 0;)
                if (++i == GROUP_RUN) {
                        sd_event_source_set_enabled(groups_more, SD_EVENT_ONESHOT);
                        break;
                }
        return 0;
}

static int on_group(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        (void)fd;
        (void)revents;
        return group_run(s, userdata);
}

static int groups_make(unsigned n)
{
        n_groups = (n + GROUP_HOSTS - 1) / GROUP_HOSTS;
        groups = calloc(n_groups, sizeof(*groups));
        if (!groups)
                return -ENOMEM;
        int r = sd_event_add_defer(event, &groups_more, on_more, NULL);
        if (r < 0)
                return r;
        sd_event_source_set_enabled(groups_more, SD_EVENT_OFF);
        for (unsigned i = 0; i < n_groups; i++) {
                r = sd_event_new(&groups[i].e);
                if (r < 0)
                        return r;
                r = sd_event_add_io(event, &groups[i].watch, sd_event_get_fd(groups[i].e), EPOLLIN,
                                    on_group, &groups[i]);
                if (r < 0)
                        return r;
                r = sd_event_source_set_prepare(groups[i].watch, group_run);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void groups_free(void)
{
        for (unsigned i = 0; groups && i < n_groups; i++) {
                sd_event_source_disable_unref(groups[i].watch);
                sd_event_unref(groups[i].e);
        }
        free(groups);
        sd_event_source_disable_unref(groups_more);
}

static sd_event *loop_of(const struct host *host)
{
        return groups[(unsigned)host->i / GROUP_HOSTS].e;
}
static char rundir[64];
static bool floor_mode, serving, stopping;
static uint64_t mark_us;
static struct dist dists[K_MAX];
static uint64_t calls_total, calls_interval, answers_failed;
static int64_t max_revision, revision_at_interval;
static uint64_t t0_us, t_interval_us;
static unsigned ready_count, done_count;

static uint64_t now_us(void)
{
        return (uint64_t)shm_monotonic_ns() / 1000;
}

static double secs(uint64_t us)
{
        return (double)(us - t0_us) / 1e6;
}

/* ---- every verb timed by its holder's step (store_observe()) ---- */

/* Each host's store backend, made by the holder through host_ops.new:
 * the backend object says which host a verb's store is (a hash of
 * HOST_SLOTS by its address). */
#define HOST_SLOTS 8192
static struct {
        const void *b;
        struct host *host;
} by_backend[HOST_SLOTS];
static const struct store_ops *real_ops;
static struct store_ops host_ops;

static size_t slot_of(const void *b)
{
        return ((uintptr_t)b >> 4) * 2654435761u % HOST_SLOTS;
}

static struct host *host_of(struct store *s)
{
        const void *b = store_backend(s);
        for (size_t i = slot_of(b), n = 0; n < HOST_SLOTS && by_backend[i].b;
             i = (i + 1) % HOST_SLOTS, n++)
                if (by_backend[i].b == b)
                        return by_backend[i].host;
        return NULL;
}

static int host_backend_new(sd_event *ev, const struct settings *cfg, void **ret)
{
        struct host *host = (struct host *)((char *)cfg - offsetof(struct host, cfg));
        int r = real_ops->new (ev, cfg, ret);
        if (r < 0)
                return r;
        size_t i = slot_of(*ret);
        while (by_backend[i].b && by_backend[i].b != *ret)
                i = (i + 1) % HOST_SLOTS;
        by_backend[i].b = *ret;
        by_backend[i].host = host;
        return 0;
}

static void host_backend_free(void *b)
{
        size_t i = slot_of(b);
        for (size_t n = 0; n < HOST_SLOTS && by_backend[i].b; i = (i + 1) % HOST_SLOTS, n++)
                if (by_backend[i].b == b) {
                        /* its run of slots stays whole: marked gone, not emptied */
                        by_backend[i].host = NULL;
                        by_backend[i].b = (const void *)~(uintptr_t)0;
                        break;
                }
        real_ops->free(b);
}

static bool lease_verb(const char *verb)
{
        return !strcmp(verb, "grant") || !strcmp(verb, "keepalive") || !strcmp(verb, "revoke");
}

static enum kind kind_of(const struct host *host, const char *verb)
{
        if (floor_mode)
                return !strcmp(verb, "grant") ? K_GRANT : K_CLAIM;
        if (!host || !host->h) /* the call holder_new() makes: the cluster read */
                return K_LAYOUT;
        struct holder_status st;
        holder_status(host->h, &st);
        if (!strcmp(st.step, "layout"))
                return K_LAYOUT;
        if (!strcmp(st.step, "grant"))
                return !strcmp(verb, "grant") ? K_GRANT : K_OTHER;
        if (!strcmp(st.step, "scan")) /* a read, or a wait to read again */
                return lease_verb(verb) ? K_OTHER : K_SCAN;
        if (!strcmp(st.step, "claim"))
                return K_CLAIM;
        if (!strcmp(st.step, "settle"))
                return K_SETTLE;
        if (!strcmp(st.step, "held"))
                return K_RENEW;
        return K_OTHER;
}

static void verb_sent(void *userdata, struct store *s, const char *verb)
{
        (void)userdata;
        (void)s;
        (void)verb;
        calls_total++;
        calls_interval++;
}

static void verb_answered(void *userdata, struct store *s, const char *verb, uint64_t usec,
                          const struct store_answer *a)
{
        (void)userdata;
        struct dist *d = &dists[kind_of(host_of(s), verb)];
        dist_add(d, usec);
        d->lost += !a->answered;
        if (!a->answered || a->status != 200)
                answers_failed++;
        if (a->revision > max_revision)
                max_revision = a->revision;
}

static void host_ops_make(const struct store_ops *real)
{
        real_ops = real;
        host_ops = *real;
        host_ops.new = host_backend_new;
        host_ops.free = host_backend_free;
        store_observe(&(const struct store_observer){.sent = verb_sent, .answered = verb_answered});
}

/* ---- holders ---- */

static void on_change(struct holder *h, void *userdata)
{
        struct host *host = userdata;
        (void)h;
        if (host->ready || !host->h)
                return;
        struct holder_status st;
        holder_status(host->h, &st);
        if (st.worker < 0)
                return;
        host->ready = true;
        host->t_ready_us = now_us();
        ready_count++;
        printf("{\"event\":\"ready\",\"host\":%d,\"worker\":%" PRId32
               ",\"t\":%.3f,\"took\":%.3f}\n",
               host->i, st.worker, secs(host->t_ready_us),
               (double)(host->t_ready_us - host->t_start_us) / 1e6);
        fflush(stdout);
}

static void on_done(struct holder *h, int code, void *userdata)
{
        struct host *host = userdata;
        (void)h;
        if (!stopping) { /* retired: its number given up */
                if (host->ready)
                        ready_count--;
                host->ready = false;
                printf("{\"event\":\"retired\",\"host\":%d,\"t\":%.3f}\n", host->i, secs(now_us()));
                fflush(stdout);
        }
        if (code && !stopping)
                fprintf(stderr, "snowid-hosts: host %d is done with exit code %d\n", host->i, code);
        done_count++;
        if (stopping && done_count == n_hosts)
                sd_event_exit(event, 0);
}

static int host_start(struct host *host)
{
        char inst[32];
        snprintf(inst, sizeof(inst), "h%04d", host->i);
        int r = shm_pub_open(rundir, inst, -1, -1, &host->pub);
        if (r < 0)
                return r;
        host->ready = false;
        host->worker = -1;
        host->eagain_since_us = 0;
        host->t_start_us = now_us();
        host->started = true;
        host->h = NULL;
        host->gen = 0;
        if (serving) {
                int fd = -1;
                r = shm_listen(rundir, inst, &fd);
                if (r >= 0)
                        r = serve_start(loop_of(host), &host->cfg, host->pub, fd, &host->serve);
                if (r < 0)
                        return r;
        }
        struct holder *h;
        r = holder_new(
                loop_of(host), &host->cfg, host->pub, &host_ops,
                &(struct holder_callbacks){.change = on_change, .done = on_done, .userdata = host},
                &h);
        if (r < 0)
                return r;
        host->h = h;
        return 0;
}

/* As kill -9: nothing revoked, nothing confirmed; the segment dropped. */
static void host_kill(struct host *host)
{
        host->h = holder_free(host->h);
        host->serve = serve_free(host->serve);
        host->pub = shm_pub_close(host->pub);
        if (host->ready)
                ready_count--;
        host->ready = false;
        host->started = false;
}

/* ---- the floor: one grant and one claim per host ---- */

static void reset_dists(void);

/* The cluster the floor's claims name: made once, before the floor is
 * timed, by host 0's store, and read back for its fence and layout. */
static struct cluster_ident floor_cluster;
static unsigned floor_failed; /* hosts whose grant or claim was refused */
static uint64_t floor_resent; /* the floor's calls that got no answer, sent again */

static void floor_done(struct host *host)
{
        host->floor_done = host->ready = true;
        host->t_ready_us = now_us();
        ready_count++;
        if (ready_count == n_hosts)
                sd_event_exit(event, 0);
}

static void floor_claim(struct host *host);

/* A call that got no answer (the host's connection not made in time, a
 * call given up on) is sent again, as a daemon would, a few times: the
 * floor is the time until every host holds a lease and a number.  A store
 * that refuses (a setting) or is not there fails the floor. */
#define FLOOR_RESENDS 8

static bool floor_resend(struct host *host, const struct store_answer *r)
{
        if (r->answered || r->err != STORE_ERR_NONE || host->floor_resends >= FLOOR_RESENDS)
                return false;
        host->floor_resends++;
        floor_resent++;
        return true;
}
static void floor_claimed(void *userdata, const struct store_answer *r,
                          const struct store_claimed *c)
{
        struct host *host = userdata;
        if (floor_resend(host, r)) {
                floor_claim(host);
                return;
        }
        /* refused after a claim that got no answer: that one landed */
        if ((!c->ok || !c->succeeded) && host->floor_tries < 2) {
                fprintf(stderr, "snowid-hosts: host %d: floor claim failed: %s\n", host->i,
                        r->error ? r->error : "not succeeded");
                floor_failed++;
        }
        floor_done(host);
}

static void floor_claim(struct host *host)
{
        /* a claim that succeeds, as an acquisition's does: each raises the
         * floor to its mark, and a claim of a number with no mark must start
         * above the floor, so every mark is below every start */
        const struct store_claim_req c = {.cl = &floor_cluster,
                                          .worker = (uint32_t)host->i,
                                          .lease = host->floor_lease,
                                          .value = "floor",
                                          .start = 2,
                                          .mark = 1,
                                          .own_worker = -1};
        host->floor_tries++;
        if (store_claim(host->floor_store, &c, floor_claimed, host, 0) < 0) {
                fprintf(stderr, "snowid-hosts: host %d: cannot send\n", host->i);
                exit(1);
        }
}

static void floor_granted(void *userdata, const struct store_answer *r, int64_t lease,
                          int64_t ttl_s)
{
        struct host *host = userdata;
        (void)ttl_s;
        if (!lease && floor_resend(host, r)) {
                if (store_grant(host->floor_store, host->cfg.lease_ttl_s, floor_granted, host, 0) <
                    0) {
                        fprintf(stderr, "snowid-hosts: host %d: cannot send\n", host->i);
                        exit(1);
                }
                return;
        }
        if (!lease) {
                fprintf(stderr, "snowid-hosts: host %d: no lease: %s\n", host->i,
                        r->error ? r->error : "malformed");
                floor_failed++;
                floor_done(host);
                return;
        }
        host->floor_lease = lease;
        floor_claim(host);
}

static void floor_read(void *userdata, const struct store_answer *r, const struct store_cluster *c)
{
        (void)userdata;
        if (!c->ok || c->fence != 1 || c->layout != 1) {
                fprintf(stderr, "snowid-hosts: the floor's cluster cannot be read: %s\n",
                        r->error ? r->error : "no fence or layout");
                exit(1);
        }
        floor_cluster = c->c;
        /* the floor itself, timed from here */
        t0_us = t_interval_us = now_us();
        reset_dists();
        calls_total = calls_interval = 0;
        for (unsigned h = 0; h < n_hosts; h++) {
                hosts[h].t_start_us = now_us();
                if (store_grant(hosts[h].floor_store, hosts[h].cfg.lease_ttl_s, floor_granted,
                                &hosts[h], 0) < 0) {
                        fprintf(stderr, "snowid-hosts: host %u: cannot send\n", h);
                        exit(1);
                }
        }
}

static void floor_made(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        (void)succeeded; /* made by an earlier run: read as it is */
        if (!ok || store_read_cluster(userdata, false, -1, floor_read, NULL, 0) < 0) {
                fprintf(stderr, "snowid-hosts: the floor's cluster cannot be made: %s\n",
                        r->error ? r->error : "cannot send");
                exit(1);
        }
}

/* Each host's store made and the floor's cluster made (untimed); then the
 * floor runs in the loop. */
static int floor_setup(void)
{
        char fence[FENCE_MAX];
        struct cluster_ident made;
        for (unsigned h = 0; h < n_hosts; h++) {
                int r = store_new(loop_of(&hosts[h]), &hosts[h].cfg, &hosts[h].floor_store);
                if (r < 0)
                        return r;
                char prefix[160];
                snprintf(prefix, sizeof(prefix), "/snowid/%s-floor/", hosts[h].cfg.cluster);
                store_set_prefix(hosts[h].floor_store, prefix);
        }
        if (fence_make(0, 0, 0, true, &made) < 0)
                return -EIO;
        snprintf(fence, sizeof(fence), "%s", made.fence);
        return store_make_cluster(hosts[0].floor_store, &hosts[0].cfg.layout, fence, 0, false,
                                  floor_made, hosts[0].floor_store);
}

/* ---- every 50 ms: numbers held once, EAGAIN stretches ---- */

static unsigned dup_seen, dup_max;

static void check_hosts(void)
{
        uint64_t now = now_us();
        static int32_t *owner;
        static size_t owner_n;
        if (!owner) {
                owner_n = (size_t)1 << 22;
                owner = calloc(owner_n, sizeof(*owner));
        }
        unsigned dups = 0;
        for (unsigned i = 0; i < n_hosts; i++) {
                struct host *host = &hosts[i];
                if (!host->h || !host->ready)
                        continue;
                struct holder_status st;
                holder_status(host->h, &st);
                if (st.worker >= 0 && (size_t)st.worker < owner_n) {
                        if (owner[st.worker] && owner[st.worker] != (int32_t)i + 1)
                                dups++;
                        owner[st.worker] = (int32_t)i + 1;
                }
                host->worker = st.worker;
                uint64_t gen = load_acquire(host->pub->ctl->gen);
                if (gen != host->gen && !(gen & 1)) {
                        host->gen = gen;
                        host->switched_us = now;
                }
                /* clients get EAGAIN once ID time reaches the deadline */
                int64_t id_ms = (shm_monotonic_ns() + shm_pub_offset_ns(host->pub)) / 1000000;
                bool eagain = id_ms >= (int64_t)shm_pub_deadline(host->pub);
                if (eagain && !host->eagain_since_us)
                        host->eagain_since_us = now;
                else if (!eagain && host->eagain_since_us) {
                        uint64_t d = now - host->eagain_since_us;
                        if (d > host->eagain_max_us)
                                host->eagain_max_us = d;
                        host->eagain_since_us = 0;
                }
        }
        for (unsigned i = 0; i < n_hosts; i++)
                if (hosts[i].h && hosts[i].ready && hosts[i].worker >= 0 &&
                    (size_t)hosts[i].worker < owner_n)
                        owner[hosts[i].worker] = 0;
        if (dups) {
                dup_seen++;
                if (dups > dup_max)
                        dup_max = dups;
                fprintf(stderr, "snowid-hosts: %u worker numbers published by two hosts\n", dups);
        }
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)userdata;
        check_hosts();
        sd_event_source_set_time(s, usec + 50000);
        return 0;
}

/* ---- commands ---- */

static void report(void)
{
        uint64_t now = now_us();
        double interval = (double)(now - t_interval_us) / 1e6;
        uint64_t first = 0, last = 0, eagain_max = 0, last_switch = 0;
        unsigned held = 0, switched = 0, same = 0;
        for (unsigned i = 0; i < n_hosts; i++) {
                struct host *h = &hosts[i];
                if (h->ready) {
                        held++;
                        uint64_t took = h->t_ready_us - h->t_start_us;
                        if (!first || took < first)
                                first = took;
                        if (took > last)
                                last = took;
                }
                if (mark_us && h->switched_us >= mark_us) {
                        switched++;
                        same += h->worker == h->worker_at_mark;
                        if (h->switched_us - mark_us > last_switch)
                                last_switch = h->switched_us - mark_us;
                }
                uint64_t e = h->eagain_max_us;
                if (h->eagain_since_us && now - h->eagain_since_us > e)
                        e = now - h->eagain_since_us;
                if (e > eagain_max)
                        eagain_max = e;
        }
        printf("{\"event\":\"report\",\"t\":%.3f,\"hosts\":%u,\"ready\":%u,\"first_s\":%.3f,"
               "\"last_s\":%.3f,\"calls\":%" PRIu64 ",\"failed\":%" PRIu64
               ",\"interval_s\":%.3f,\"calls_per_s_per_host\":%.4f,"
               "\"revisions_per_s_per_host\":%.4f,\"revision\":%" PRId64
               ",\"dup_ticks\":%u,\"dup_max\":%u,\"eagain_max_ms\":%.1f,"
               "\"switched_since_mark\":%u,\"same_worker_since_mark\":%u,\"floor_failed\":%u,"
               "\"floor_resent\":%" PRIu64 ","
               "\"last_switch_after_mark_s\":%.3f,\"phases\":{",
               secs(now), n_hosts, held, (double)first / 1e6, (double)last / 1e6, calls_total,
               answers_failed, interval,
               interval > 0 ? (double)calls_interval / interval / n_hosts : 0,
               interval > 0 && revision_at_interval
                       ? (double)(max_revision - revision_at_interval) / interval / n_hosts
                       : 0,
               max_revision, dup_seen, dup_max, (double)eagain_max / 1000, switched, same,
               floor_failed, floor_resent, (double)last_switch / 1e6);
        bool comma = false;
        for (int k = 0; k < K_MAX; k++) {
                const struct dist *d = &dists[k];
                if (!d->n)
                        continue;
                printf("%s\"%s\":{\"n\":%" PRIu64 ",\"lost\":%" PRIu64
                       ",\"median_ms\":%.2f,\"p99_ms\":%.2f,"
                       "\"max_ms\":%.2f,\"mean_ms\":%.2f}",
                       comma ? "," : "", kind_names[k], d->n, d->lost, dist_q(d, 0.5),
                       dist_q(d, 0.99), (double)d->max_us / 1000,
                       (double)d->sum_us / (double)d->n / 1000);
                comma = true;
        }
        printf("}}\n");
        fflush(stdout);
        t_interval_us = now;
        calls_interval = 0;
        revision_at_interval = max_revision;
}

static void reset_dists(void)
{
        memset(dists, 0, sizeof(dists));
        for (unsigned i = 0; i < n_hosts; i++)
                hosts[i].eagain_max_us = 0;
        dup_seen = dup_max = 0;
}

static int on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        static char buf[4096];
        static size_t have;
        (void)s;
        (void)revents;
        (void)userdata;
        ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (n <= 0) {
                sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
                *nl = 0;
                unsigned a, b;
                if (!strcmp(line, "report")) {
                        report();
                } else if (!strcmp(line, "reset")) {
                        reset_dists();
                        printf("{\"event\":\"reset\",\"t\":%.3f}\n", secs(now_us()));
                        fflush(stdout);
                } else if (!strcmp(line, "mark")) {
                        mark_us = now_us();
                        for (unsigned i = 0; i < n_hosts; i++)
                                hosts[i].worker_at_mark = hosts[i].ready ? hosts[i].worker : -1;
                        printf("{\"event\":\"mark\",\"t\":%.3f}\n", secs(now_us()));
                        fflush(stdout);
                } else if (sscanf(line, "kill %u %u", &a, &b) == 2 && a <= b && b < n_hosts) {
                        for (unsigned i = a; i <= b; i++)
                                host_kill(&hosts[i]);
                        for (unsigned i = a; i <= b; i++)
                                if (host_start(&hosts[i]) < 0)
                                        fprintf(stderr, "snowid-hosts: host %u: cannot start\n", i);
                        printf("{\"event\":\"killed\",\"from\":%u,\"to\":%u,\"t\":%.3f}\n", a, b,
                               secs(now_us()));
                        fflush(stdout);
                } else if (sscanf(line, "retire %u", &a) == 1 && a < n_hosts) {
                        if (hosts[a].h)
                                holder_stop(hosts[a].h);
                } else if (!strcmp(line, "stop")) {
                        stopping = true;
                        done_count = 0;
                        for (unsigned i = 0; i < n_hosts; i++)
                                if (hosts[i].h)
                                        holder_stop(hosts[i].h);
                                else
                                        done_count++;
                        if (done_count == n_hosts)
                                sd_event_exit(event, 0);
                } else if (*line) {
                        fprintf(stderr, "snowid-hosts: unknown command: %s\n", line);
                }
                line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        return 0;
}

static void raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        rlim_t want = (rlim_t)n_hosts * 12 + 4096;
        if (rl.rlim_max < want) {
                rl.rlim_max = want;
                if (setrlimit(RLIMIT_NOFILE, &(struct rlimit){want, want}) == 0)
                        return;
                getrlimit(RLIMIT_NOFILE, &rl);
        }
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
}

static void cleanup_rundir(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", rundir);
        if (rundir[0] && system(cmd) != 0)
                fprintf(stderr, "snowid-hosts: cannot remove %s\n", rundir);
}

int main(int argc, char **argv)
{
        int i = 1;
        for (; i < argc && strcmp(argv[i], "--"); i++) {
                if (!strcmp(argv[i], "--hosts") && i + 1 < argc)
                        n_hosts = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (!strcmp(argv[i], "--floor"))
                        floor_mode = true;
                else if (!strcmp(argv[i], "--serve"))
                        serving = true;
                else if (!strcmp(argv[i], "--rundir") && i + 1 < argc &&
                         strlen(argv[i + 1]) < sizeof(rundir))
                        snprintf(rundir, sizeof(rundir), "%s", argv[++i]);
                else {
                        fprintf(stderr, "usage: snowid-hosts --hosts N [--serve] [--floor] "
                                        "[--rundir DIR] -- SNOWIDD FLAGS\n");
                        return 2;
                }
        }
        if (!n_hosts || n_hosts > 1u << 20) {
                fprintf(stderr, "snowid-hosts: --hosts N (1 or more) is needed\n");
                return 2;
        }
        int nflags = i < argc ? argc - i - 1 : 0;
        char **flags = i < argc ? argv + i + 1 : NULL;
        raise_nofile();
        /* the hosts' segments and lock files: a directory of the caller's,
         * kept (a fleet restarted over its own lock files), or one of ours */
        if (!rundir[0]) {
                snprintf(rundir, sizeof(rundir), "/tmp/snowid-hosts.XXXXXX");
                if (!mkdtemp(rundir) || chmod(rundir, 0755) < 0) {
                        perror("snowid-hosts: mkdtemp");
                        return 1;
                }
                atexit(cleanup_rundir);
        }
        log_setup();
        curl_global_init(CURL_GLOBAL_DEFAULT);
        signal(SIGPIPE, SIG_IGN);
        hosts = calloc(n_hosts, sizeof(*hosts));
        if (!hosts)
                return 1;
        for (unsigned h = 0; h < n_hosts; h++) {
                char inst[32];
                snprintf(inst, sizeof(inst), "h%04u", h);
                char **av = calloc((size_t)nflags + 10, sizeof(char *));
                int ac = 0;
                av[ac++] = "snowidd";
                av[ac++] = "--config";
                av[ac++] = "/dev/null";
                av[ac++] = "--log-level";
                av[ac++] = "warning";
                for (int f = 0; f < nflags; f++)
                        av[ac++] = flags[f];
                av[ac++] = "--instance";
                av[ac++] = inst;
                av[ac++] = "--runtime-dir";
                av[ac++] = rundir;
                hosts[h].i = (int)h;
                int r = settings_load(&hosts[h].cfg, &settings_checks_postgres, ac, av);
                free(av);
                if (r)
                        return settings_exit_status(r);
        }
        log_max_level = hosts[0].cfg.log_level;
        host_ops_make(hosts[0].cfg.store == STORE_POSTGRES ? &store_pg_ops : &store_etcd_ops);
        if (sd_event_default(&event) < 0)
                return 1;
        sd_event_source *tick = NULL, *in = NULL;
        sd_event_add_time_relative(event, &tick, CLOCK_MONOTONIC, 50000, 1000, on_tick, NULL);
        sd_event_source_set_enabled(tick, SD_EVENT_ON);
        sd_event_add_io(event, &in, STDIN_FILENO, EPOLLIN, on_stdin, NULL);
        /* ahead of the groups: each turn of the main loop runs every group
         * with work, and the commands and checks must not wait for them */
        sd_event_source_set_priority(tick, SD_EVENT_PRIORITY_IMPORTANT);
        sd_event_source_set_priority(in, SD_EVENT_PRIORITY_IMPORTANT);
        if (groups_make(n_hosts) < 0)
                return 1;

        t0_us = t_interval_us = now_us();
        int r = 0;
        if (floor_mode) {
                r = floor_setup();
        } else {
                for (unsigned h = 0; h < n_hosts && r >= 0; h++)
                        r = host_start(&hosts[h]);
        }
        if (r < 0) {
                fprintf(stderr, "snowid-hosts: cannot start: %s\n", strerror(-r));
                return 1;
        }
        printf("{\"event\":\"started\",\"hosts\":%u,\"dir\":\"%s\",\"t\":%.3f}\n", n_hosts, rundir,
               secs(now_us()));
        fflush(stdout);
        r = sd_event_loop(event);
        if (floor_mode)
                report();
        for (unsigned h = 0; h < n_hosts; h++) {
                hosts[h].floor_store = store_free(hosts[h].floor_store);
                holder_free(hosts[h].h);
                serve_free(hosts[h].serve);
                shm_pub_close(hosts[h].pub);
                settings_free(&hosts[h].cfg);
        }
        sd_event_source_disable_unref(tick);
        sd_event_source_disable_unref(in);
        groups_free();
        sd_event_unref(event);
        free(hosts);
        return r < 0 ? 1 : 0;
}
