/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does when the store forgets (docs/fences.md): the cluster's
 * layout, fence and floor; halting on a restored cluster or a lost key;
 * leaving a witness; and, on a store that holds no cluster, making it: the
 * driver of the pure cores daemon/core/known.c and daemon/core/create.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"
#include "region.h"
#include "renew.h"
#include "trace.h"
#include "verdict.h"

const char *holder_halt_name(enum halt why)
{
        switch (why) {
        case HALT_NONE:
                return NULL;
        case HALT_CHECKING:
                return "checking";
        case HALT_RESTORED:
                return "store-restored";
        case HALT_LAYOUT_LOST:
                return "layout-lost";
        case HALT_FENCE_LOST:
                return "fence-lost";
        }
        return "unknown";
}

/* ---- reading (and, on a cluster never used, creating) layout, fence, floor ---- */

static void create_drive(struct holder *h, const struct create_in *in);

static int on_reread_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        create_drive(userdata, &(const struct create_in){.kind = CREATE_IN_REREAD});
        return 0;
}

static void reread_in(struct holder *h, unsigned ms)
{
        holder_timer_in(h, &h->reread_timer, ms, on_reread_timer);
}

void cluster_read_in(struct holder *h, unsigned ms)
{
        reread_in(h, ms);
}

static void on_create_lock(void *userdata, const struct store_answer *r,
                           const struct store_creating *ck)
{
        const struct create_in in = {.kind = CREATE_IN_LOCKED,
                                     .ok = ck->ok,
                                     .succeeded = ck->succeeded,
                                     .answered = r->answered,
                                     .status = r->status,
                                     .layout = ck->layout,
                                     .creating = ck->creating,
                                     .value = ck->value,
                                     .mod_rev = ck->mod_rev};
        create_drive(userdata, &in);
}

/* the batches answer in any order */
static void on_init(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct holder *h = userdata;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id;
        create_drive(h, &(const struct create_in){
                                .kind = CREATE_IN_MARKED, .ok = ok, .succeeded = succeeded});
}

static void on_create(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        (void)r;
        create_drive(userdata, &(const struct create_in){
                                       .kind = CREATE_IN_MADE, .ok = ok, .succeeded = succeeded});
}

static void create_run(struct holder *h, const struct create_action *t)
{
        switch (t->what) {
        case CREATE_DO_LOCK: {
                char value[64];
                snprintf(value, sizeof(value), "%s %" PRId64, h->token,
                         shm_realtime_ns() / 1000000);
                if (store_creating(h->store, value, (int64_t)t->a, on_create_lock, h, 0) < 0)
                        create_drive(h, &(const struct create_in){.kind = CREATE_IN_LOCKED,
                                                                  .unsent = true});
                return;
        }
        case CREATE_DO_READ:
                cluster_read(h);
                return;
        case CREATE_DO_REREAD:
                reread_in(h, (unsigned)t->a);
                return;
        case CREATE_DO_MARK:
                if (store_init_marks(h->store, t->a, t->b, on_init, h) < 0)
                        create_drive(h, &(const struct create_in){.kind = CREATE_IN_MARKED,
                                                                  .unsent = true});
                return;
        case CREATE_DO_MAKE: {
                /* the fence names the cluster it is made on (the last
                 * answer's) */
                struct cluster_ident c;
                if (fence_make(t->a, 0, h->cluster_id, true, &c) < 0 ||
                    store_make_cluster(h->store, &h->cfg->layout, c.fence, t->a, t->b, on_create,
                                       h) < 0)
                        create_drive(h, &(const struct create_in){.kind = CREATE_IN_MADE,
                                                                  .unsent = true});
                return;
        }
        case CREATE_DO_MADE:
                log_notice("Created the cluster's layout, fence, floor and marks at %s", h->prefix);
                return;
        }
}

/* Steps the creation's core with in, and does what it returns; an input
 * made while they are done (a verb not sent) is stepped after them, with a
 * copy of its value. */
static void create_drive(struct holder *h, const struct create_in *in)
{
        if (h->create_driving) {
                if (h->create_queued == CREATE_QUEUE_MAX) {
                        /* more than a step can make: a bug of the core,
                         * and the cluster read again later, so that no host
                         * stops waiting on it */
                        log_error("The creation's inputs came faster than it stepped; reading "
                                  "the cluster again in %u ms",
                                  KNOWN_REREAD_MS);
                        reread_in(h, KNOWN_REREAD_MS);
                        return;
                }
                struct create_queued *q = &h->create_queue[h->create_queued++];
                q->in = *in;
                if (in->value)
                        snprintf(q->value, sizeof(q->value), "%s", in->value);
                return;
        }
        h->create_driving = true;
        struct create_in next = *in;
        char value[sizeof(h->create_queue[0].value)];
        for (;;) {
                const struct create_view v = {.mono_ms = holder_mono_ms(),
                                              .wall_ms = (uint64_t)(shm_realtime_ns() / 1000000)};
                struct create_ready out;
                create_step(&h->create, &v, &next, &out);
                for (unsigned i = 0; i < out.n; i++)
                        create_run(h, &out.a[i]);
                if (!h->create_queued)
                        break;
                next = h->create_queue[0].in;
                if (next.value) {
                        memcpy(value, h->create_queue[0].value, sizeof(value));
                        next.value = value;
                }
                memmove(h->create_queue, h->create_queue + 1,
                        --h->create_queued * sizeof(*h->create_queue));
        }
        h->create_driving = false;
}

/* ---- what the daemon knows of the cluster: the driver of daemon/core/known.c ---- */

static void known_drive(struct holder *h, const struct known_in *in, struct known_ready *first);

static struct known_view known_view(const struct holder *h)
{
        return (struct known_view){.mono_ms = holder_mono_ms(),
                                   .wall_ms = (uint64_t)(shm_realtime_ns() / 1000000),
                                   .cur = &h->hold.cur,
                                   .highest = marks_highest(h)};
}

static void on_cluster(void *userdata, const struct store_answer *r, const struct store_cluster *cr)
{
        struct holder *h = userdata;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id; /* the cluster a fence made here names */
        if (h->known_driving) {
                /* its pointers live only in this call: read again instead */
                log_error("The cluster's read answered within a step; reading it again");
                reread_in(h, KNOWN_REREAD_MS);
                return;
        }
        const struct known_in in = {.kind = KNOWN_IN_CLUSTER,
                                    .cr = cr,
                                    .refused = r->err != STORE_ERR_NONE,
                                    .answered = r->answered,
                                    .status = r->status,
                                    .went_back = r->went_back,
                                    .cluster = r->cluster_id,
                                    /* the revision the held mark's write was
                                     * acknowledged at when the read was sent */
                                    .acked_rev = (int64_t)r->tag,
                                    .revision = r->revision,
                                    .error = r->error};
        struct known_ready out; /* an answer is stepped at once or not at all */
        known_drive(h, &in, &out);
}

static void on_witness(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        (void)succeeded;
        known_drive(userdata,
                    &(const struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = ok, .tag = r->tag},
                    NULL);
}

static void on_witness_deleted(void *userdata, const struct store_answer *r, bool ok,
                               bool succeeded)
{
        (void)r;
        (void)ok;
        (void)succeeded;
        known_drive(userdata, &(const struct known_in){.kind = KNOWN_IN_UNWITNESSED}, NULL);
}

/* The layout read first: ID time starts on the wall clock; a restart over
 * a segment of the same epoch, or one that finds where the last daemon's
 * ID time stood (the lock file: a restart without the fd store, whose
 * clients carry their IDs over), keeps it from going back (it may run
 * ahead, slewing).  The number the last daemon published (the lock file
 * again) is the one claimed first, if it is free: a fleet restarted at
 * once takes its numbers back instead of racing for each other's. */
static void first_read(struct holder *h)
{
        const snowid_layout *l = &h->known.layout;
        log_info("Cluster layout: epoch %" PRIu64 " ms, %u time, %u worker, %u sequence bits; "
                 "claims above %" PRIu64,
                 l->epoch_ms, l->time_bits, l->worker_bits, l->seq_bits, h->known.cl.claims_above);
        struct clock_reading now = holder_clock_read(h);
        int64_t remembered;
        clock_reset(&h->clock, &now);
        if (h->pub->reused && shm_pub_epoch_ms(h->pub) == l->epoch_ms)
                clock_raise(&h->clock, &now, shm_pub_offset_ns(h->pub));
        if (shm_pub_remembered(h->pub, l->epoch_ms, &remembered))
                clock_raise(&h->clock, &now, remembered);
        int32_t last = shm_pub_remembered_worker(h->pub, l->epoch_ms);
        if (last >= 0 && !((uint64_t)last >> l->worker_bits))
                claim_prefer(h, last);
}

static void known_say(struct holder *h, const struct known_action *t)
{
        switch (t->ev) {
        case KNOWN_EV_UNREADABLE:
                log_warning("Cannot read the cluster's layout from %s: %s",
                            store_endpoint(h->store), t->text);
                return;
        case KNOWN_EV_MALFORMED:
                log_warning("%s's answer about the layout is malformed; asking again",
                            store_title(h->store));
                return;
        case KNOWN_EV_LAYOUT_LOST:
                log_error("The cluster's layout key is gone (%slayout), but the cluster has been "
                          "used%s: not re-creating it, and extending nothing. Run `snowid fence` "
                          "with this cluster's layout to restore it",
                          h->prefix,
                          t->a ? " (a daemon that knew it left a witness: the store forgot it)"
                               : "");
                return;
        case KNOWN_EV_LAYOUT_BAD:
                log_error("The layout stored at %slayout is not valid: '%s'", h->prefix, t->text);
                return;
        case KNOWN_EV_FENCE_LOST:
                log_error("The cluster's %s key is %s (%s): the cluster was made by an earlier "
                          "snowid, or keys were deleted. Extending nothing until `snowid fence` "
                          "has run",
                          t->a != 1 ? "fence" : "floor",
                          t->a == 0 || t->b != 1 ? "missing" : "not valid", h->prefix);
                return;
        case KNOWN_EV_FOREIGN:
                log_error("The fence at %sfence was written on cluster %" PRIu64 ", but %s "
                          "answers as cluster %" PRIu64 ": it was restored or replaced, and not "
                          "fenced since. Claiming and extending nothing on it until `snowid "
                          "fence` has run there",
                          h->prefix, t->a, store_title(h->store), t->b);
                return;
        case KNOWN_EV_RESTORED:
                log_error("%s in %s (era %" PRIu64 ", this daemon knows era %" PRIu64 ")",
                          t->c ? "The cluster was made anew" : "An older fence is back",
                          store_title(h->store), t->a, t->b);
                return;
        case KNOWN_EV_RESTORE_SEEN:
                h->stats.restores_seen++;
                log_error("%s was restored from a snapshot or replaced (its revision went back, "
                          "its cluster ID changed, or it forgot what it acknowledged to this "
                          "daemon): extending nothing and claiming nothing on it. "
                          "Run `snowid fence` against the cluster (docs/fences.md); this daemon "
                          "goes on by itself once the fence has changed",
                          store_title(h->store));
                return;
        case KNOWN_EV_FORGOTTEN:
                if (t->forgot == FORGOT_CLAIM)
                        log_error("%s shows another holder's claim on worker %" PRId32 ", whose "
                                  "lease it forgot before its TTL could run out: it forgot this "
                                  "daemon's claim. It was restored from a snapshot or backup",
                                  store_name(h->store), t->worker);
                else if (t->forgot == FORGOT_LOW)
                        log_error("%s forgot a write it acknowledged: hwm/%" PRId32 " reads "
                                  "%" PRIu64 ", below the %" PRIu64 " it acknowledged to this "
                                  "daemon, and its lease is unknown. It was restored from a "
                                  "snapshot or backup",
                                  store_name(h->store), t->worker, t->a, t->b);
                else
                        log_error("%s forgot a write it acknowledged: hwm/%" PRId32 " was written "
                                  "by this daemon at revision %" PRId64 " and now reads as of "
                                  "revision %" PRId64 " (%s). It was restored from a snapshot or "
                                  "backup",
                                  store_name(h->store), t->worker, (int64_t)t->a, (int64_t)t->b,
                                  t->text);
                return;
        case KNOWN_EV_NAMES_OTHER:
                log_notice("%s's answer names another fence or layout; reading them",
                           store_title(h->store));
                return;
        case KNOWN_EV_LAGGING:
                log_debug("A lease answer at revision %" PRId64 ", below one seen: checking",
                          (int64_t)t->a);
                return;
        case KNOWN_EV_LAYOUT_DIFFERS: {
                const snowid_layout *l = t->layout, *want = t->other;
                log_error("The cluster's layout differs from the %s: stored epoch %" PRIu64
                          " ms, %u/%u/%u bits; %s epoch %" PRIu64 " ms, %u/%u/%u bits",
                          t->a ? "one in use" : "one given", l->epoch_ms, l->time_bits,
                          l->worker_bits, l->seq_bits, t->a ? "in use" : "given", want->epoch_ms,
                          want->time_bits, want->worker_bits, want->seq_bits);
                return;
        }
        case KNOWN_EV_AS_WAS:
                log_notice("The cluster is as it was; going on");
                return;
        case KNOWN_EV_NEW_FENCE:
                log_notice("A new fence on the cluster (claims above %" PRIu64 "): raising the "
                           "marks this daemon published past it, then claiming again",
                           t->a);
                return;
        case KNOWN_EV_SETTLE_LEFT:
                log_notice("The cluster's fence was made %" PRIu64 " ms ago: claiming in %" PRIu64
                           " ms, once live daemons can have raised their marks past it",
                           t->a, t->b);
                return;
        case KNOWN_EV_WITNESS_LEFT:
                log_notice("Left a witness at %switness/%s: the fence this daemon knew and its "
                           "highest deadline, for `snowid fence` to claim above",
                           h->prefix, h->token);
                return;
        }
}

static void known_run(struct holder *h, const struct known_action *t)
{
        switch (t->what) {
        case KNOWN_DO_READ:
                /* the highest mark is read only by the host that holds
                 * `creating`; the held number's, to check that the store
                 * still has this daemon's last write of it (tag: the
                 * revision it was acknowledged at) */
                if (store_read_cluster(h->store, create_marks(&h->create), t->worker, on_cluster, h,
                                       t->a) < 0)
                        known_drive(h,
                                    &(const struct known_in){.kind = KNOWN_IN_READ, .unsent = true},
                                    NULL);
                return;
        case KNOWN_DO_REREAD:
                reread_in(h, (unsigned)t->a);
                return;
        case KNOWN_DO_MAKE:
                /* a layout the range does not fit is not made */
                if (region_range_fits(h, h->cfg->layout.worker_bits))
                        create_drive(h,
                                     &(const struct create_in){
                                             .kind = CREATE_IN_MAKE,
                                             .creating = t->cr->creating,
                                             .value = t->cr->creating == 1 ? t->cr->creating_value
                                                                           : NULL,
                                             .mod_rev = t->cr->creating_rev});
                return;
        case KNOWN_DO_RANGE:
                if (region_check(h, (int64_t)t->a, t->cr->records, t->cr->n_records,
                                 t->cr->l.worker_bits, t->cr->layout_rev) > 0)
                        known_drive(h, &(const struct known_in){.kind = KNOWN_IN_RANGED}, NULL);
                return;
        case KNOWN_DO_FATAL:
                holder_fatal(h, EX_CONFIG_);
                return;
        case KNOWN_DO_HALTED:
                claim_drop(h);
                if (t->b)
                        shm_pub_set_state(h->pub, holder_halted_state(h));
                return;
        case KNOWN_DO_DROP:
                claim_drop(h);
                return;
        case KNOWN_DO_PROTECT:
                marks_protect(h);
                return;
        case KNOWN_DO_WITNESS: {
                const struct store_witness w = {
                        .host = h->host,
                        .instance = h->cfg->instance,
                        .era = t->a,
                        .claims_above = t->b,
                        .deadline = t->c,
                        .wall_ms = (uint64_t)(shm_realtime_ns() / 1000000),
                };
                if (store_witness_put(h->store, h->token, &w, on_witness, h, t->tag) < 0)
                        known_drive(h,
                                    &(const struct known_in){.kind = KNOWN_IN_WITNESSED,
                                                             .unsent = true},
                                    NULL);
                return;
        }
        case KNOWN_DO_UNWITNESS:
                if (store_witness_delete(h->store, h->token, on_witness_deleted, h) < 0)
                        known_drive(h, &(const struct known_in){.kind = KNOWN_IN_UNWITNESSED},
                                    NULL);
                return;
        case KNOWN_DO_FIRST:
                first_read(h);
                return;
        case KNOWN_DO_EXPECT:
                store_expect_cluster(h->store, t->a);
                return;
        case KNOWN_DO_FORGET:
                store_history_reset(h->store);
                return;
        case KNOWN_DO_FENCED:
                renew_fenced(h);
                return;
        case KNOWN_DO_DROPPED:
                TRACE_STEP("dropped", t->worker);
                return;
        case KNOWN_DO_RETIRED:
                marks_retired(h, t->worker, t->a);
                return;
        case KNOWN_DO_RAISE:
                marks_raise(h, t->worker, t->a, t->lease, 0, 0);
                return;
        case KNOWN_DO_PREFER:
                claim_prefer(h, t->worker);
                return;
        case KNOWN_DO_RERAISE:
                marks_fence_adopted(h);
                return;
        case KNOWN_DO_PAUSE:
                h->claims_not_before_ms = t->a;
                return;
        case KNOWN_DO_LEASED:
                shm_pub_set_state(h->pub, SHM_STATE_LEASED);
                return;
        case KNOWN_DO_CLAIM:
                claim_start(h, false);
                return;
        case KNOWN_DO_STATUS:
                holder_update_status(h);
                return;
        case KNOWN_DO_SAY:
                known_say(h, t);
                return;
        }
}

/* Steps the core with in, and does what it returns; an input made while
 * they are done (a verb not sent, another part's) is stepped after them.
 * first, if not NULL, gets what the step of in said of it (GATE, SEEN):
 * those come from answers, never from within a step. */
static void known_drive(struct holder *h, const struct known_in *in, struct known_ready *first)
{
        if (h->known_driving) {
                /* an answer within a step (no store answers within its call
                 * today) is stepped after it, and not acted on meanwhile */
                if (first)
                        *first = (struct known_ready){.skip = true};
                if (h->known_queued < KNOWN_QUEUE_MAX) {
                        h->known_queue[h->known_queued++] = *in;
                        return;
                }
                /* a halt dropped could let the daemon act on a cluster it
                 * does not trust: it stops instead (systemd restarts it) */
                log_error("The cluster's inputs overflow; stopping");
                holder_fatal(h, EX_SOFTWARE_);
                return;
        }
        h->known_driving = true;
        struct known_in next = *in;
        for (bool top = true;; top = false) {
                const struct known_view v = known_view(h);
                struct known_ready out;
                known_step(&h->known, &v, &next, &out);
                if (top && first)
                        *first = out;
                for (unsigned i = 0; i < out.n; i++)
                        known_run(h, &out.a[i]);
                if (!h->known_queued)
                        break;
                next = h->known_queue[0];
                memmove(h->known_queue, h->known_queue + 1,
                        --h->known_queued * sizeof(*h->known_queue));
        }
        h->known_driving = false;
}

void cluster_read(struct holder *h)
{
        known_drive(h, &(const struct known_in){.kind = KNOWN_IN_READ}, NULL);
}

void cluster_check(struct holder *h)
{
        known_drive(h, &(const struct known_in){.kind = KNOWN_IN_CHECK}, NULL);
}

void cluster_forgotten(struct holder *h, enum forgot why, int32_t worker, int64_t a, int64_t b,
                       const char *where)
{
        const struct known_in in = {.kind = KNOWN_IN_FORGOTTEN,
                                    .forgot = why,
                                    .worker = worker,
                                    .a = a,
                                    .b = b,
                                    .where = where};
        known_drive(h, &in, NULL);
}

/* Whether to act on an answer (rule 1): not from a restored cluster, and
 * not one that names another fence or layout than the one known (ok and
 * same, as a verb's result says them; same 1 for an answer that compared
 * none).  Otherwise the core halts or reads the cluster again, and the
 * answer is ignored. */
bool cluster_ok(struct holder *h, const struct store_answer *r, bool ok, int same)
{
        const struct known_in in = {
                .kind = KNOWN_IN_GATE, .ok = ok, .same = same, .went_back = r->went_back};
        struct known_ready out;
        known_drive(h, &in, &out);
        return out.current;
}

void holder_note_answer(struct holder *h, const struct store_answer *r)
{
        const struct known_in in = {
                .kind = KNOWN_IN_SEEN,
                .seen = {.refused = r->err != STORE_ERR_NONE, /* refused.c says why */
                         .answered = r->answered,
                         .status = r->status,
                         .kv = r->kv,
                         .went_back = r->went_back,
                         .behind = r->behind,
                         .nospace = r->nospace},
                .revision = r->revision,
        };
        if (r->err == STORE_ERR_NONE && r->cluster_id)
                h->cluster_id = r->cluster_id;
        struct known_ready v;
        known_drive(h, &in, &v);
        if (v.skip)
                return;
        if (v.reachable != h->store_reachable)
                log_notice("%s is %s", store_name(h->store),
                           v.reachable ? "reachable again" : "unreachable");
        h->store_reachable = v.reachable;
        if (v.full && !h->store_full) {
                holder_store_full(h, true, NULL);
                holder_check_alarms(h); /* which member: for the log */
        }
}

void cluster_init(struct holder *h)
{
        uint64_t seed = ((uint64_t)random() << 32) ^ (uint64_t)random();
        const struct create_settings set = {.worker_bits = h->cfg->layout.worker_bits,
                                            .window_s = h->cfg->window_s,
                                            .mark_step_s = h->cfg->mark_step_s,
                                            .lease_ttl_s = h->cfg->lease_ttl_s,
                                            .epoch_ms = h->cfg->layout.epoch_ms,
                                            .token = h->token,
                                            .seed = seed | 1};
        create_init(&h->create, &set);
        const struct known_settings ks = {
                .given = h->cfg->layout,
                .layout_given = h->cfg->layout_given,
                .lease_ttl_s = h->cfg->lease_ttl_s,
                .settle_ms = holder_settle_ms(h),
                .seed = (seed >> 1) ^ UINT64_C(0x9e3779b97f4a7c15),
        };
        known_init(&h->known, &ks);
}

/* ---- the pause after a fence (rule 6) ---- */

uint64_t holder_settle_ms(const struct holder *h)
{
        return rule6_settle_ms(h->cfg->mark_step_s, h->cfg->renew_ms, h->cfg->store_timeout_ms);
}
