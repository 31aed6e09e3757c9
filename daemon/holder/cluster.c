/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does when the store forgets (docs/fences.md): the cluster's
 * layout, fence and floor; halting on a restored cluster or a lost key;
 * leaving a witness; and, on a store that holds no cluster, making it, as
 * the driver of the pure core daemon/core/create.c.
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
#include "verdict.h"

#define REREAD_MS 1000

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
        /* the creation's core says whether to read the cluster or only ask
         * whether another host's creation ended */
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
                                     .poll = r->tag == 1,
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
                if (store_creating(h->store, t->b, value, (int64_t)t->a, on_create_lock, h, t->b) <
                    0)
                        create_drive(h, &(const struct create_in){.kind = CREATE_IN_LOCKED,
                                                                  .poll = t->b,
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
 * made while they are done (a verb not sent) is stepped after them. */
static void create_drive(struct holder *h, const struct create_in *in)
{
        if (h->create_driving) {
                if (in->value)
                        log_error("The store answered within its call; the answer is dropped");
                else if (h->create_queued < CREATE_QUEUE_MAX)
                        h->create_queue[h->create_queued++] = *in;
                else
                        log_error("The creation's inputs overflow; one is dropped");
                return;
        }
        h->create_driving = true;
        struct create_in next = *in;
        for (;;) {
                const struct create_view v = {.mono_ms = holder_mono_ms(),
                                              .wall_ms = (uint64_t)(shm_realtime_ns() / 1000000)};
                struct create_ready out;
                create_step(&h->create, &v, &next, &out);
                for (unsigned i = 0; i < out.n; i++)
                        create_run(h, &out.a[i]);
                if (!h->create_queued)
                        break;
                next = h->create_queue[0];
                memmove(h->create_queue, h->create_queue + 1,
                        --h->create_queued * sizeof(*h->create_queue));
        }
        h->create_driving = false;
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
}

/* ---- a witness: what a halted daemon knew, for the fence to cover ---- */

static void on_witness(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct holder *h = userdata;
        (void)succeeded;
        h->witness_sending = false;
        /* an answer for an earlier halt, or none: sent again at the next
         * read of the cluster while halted */
        if (!ok || r->tag != h->witness_gen || h->halted == HALT_NONE || h->witnessed)
                return;
        h->witnessed = true;
        log_notice("Left a witness at %switness/%s: the fence this daemon knew and its "
                   "highest deadline, for `snowid fence` to claim above",
                   h->prefix, h->token);
}

/* A daemon halted on a cluster it knew (the store restored or replaced,
 * its layout or fence gone) writes down what the store may have forgotten
 * and a fence must cover: the fence it knew (a lead that hosts which
 * claimed under it may still run, where the fence is lost) and the
 * highest deadline it published.  No lease and no compare: a restored
 * store keeps it whatever it holds, until `snowid fence` reads and deletes
 * it, and a daemon that finds it on a store without the cluster does not
 * make the cluster anew (cluster_verdict()). */
static void witness_send(struct holder *h)
{
        if (h->witnessed || h->witness_sending || !h->layout_ready || h->halted == HALT_NONE ||
            h->halted == HALT_CHECKING)
                return;
        const struct store_witness w = {
                .host = h->host,
                .instance = h->cfg->instance,
                .era = h->cl.era,
                .claims_above = h->cl.claims_above,
                .deadline = marks_highest(h),
                .wall_ms = (uint64_t)(shm_realtime_ns() / 1000000),
        };
        h->witness_sending =
                store_witness_put(h->store, h->token, &w, on_witness, h, h->witness_gen) >= 0;
}

static void on_witness_deleted(void *userdata, const struct store_answer *r, bool ok,
                               bool succeeded)
{
        struct holder *h = userdata;
        /* a witness left behind only asks more of the next fence */
        (void)r;
        (void)ok;
        (void)succeeded;
        h->witness_sending = false;
}

/* A halt ends (a fence adopted, or the cluster as it was): the witness is
 * gone with the fence that covered it, or, where the halt ended without
 * one (a key put back by hand), is deleted here, so that no witness of a
 * halt long over outlives it in the store and its snapshots. */
void cluster_witness_done(struct holder *h)
{
        bool left = h->witnessed || h->witness_sending;
        h->witnessed = false;
        h->witness_gen++;
        if (!left)
                return;
        h->witness_sending = store_witness_delete(h->store, h->token, on_witness_deleted, h) >= 0;
}

static void on_cluster(void *userdata, const struct store_answer *r, const struct store_cluster *cr)
{
        struct holder *h = userdata;
        const struct cluster_ident *c = &cr->c;
        const snowid_layout *l = &cr->l;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id; /* the cluster a fence made here names */
        if (!cr->ok) {
                if (r->err == STORE_ERR_NONE) /* a refusal is said once, by refusal.c */
                        log_warning("Cannot read the cluster's layout from %s: %s",
                                    store_endpoint(h->store), r->error);
                reread_in(h, claim_failure_backoff(h, r));
                return;
        }
        const struct cluster_known k = {
                .cl = h->layout_ready ? &h->cl : NULL,
                /* a restore once seen (however) lasts until a new fence */
                .restore_seen = r->went_back || h->halted == HALT_RESTORED,
                .halted = h->halted != HALT_NONE,
                /* the mark of the number held when the read was sent, whose
                 * last write by this daemon the store had acknowledged at
                 * revision r->tag */
                .acked_rev = (int64_t)r->tag,
                .answer_cluster = r->cluster_id,
        };
        switch (cluster_verdict(cr, &k)) {
        case CLUSTER_MALFORMED:
                log_warning("%s's answer about the layout is malformed; asking again",
                            store_title(h->store));
                break;
        case CLUSTER_MAKE:
                /* a layout the range does not fit is not made */
                if (!region_range_fits(h, h->cfg->layout.worker_bits))
                        return;
                create_drive(h, &(const struct create_in){.kind = CREATE_IN_MAKE});
                return;
        case CLUSTER_LAYOUT_LOST:
                if (h->halted != HALT_LAYOUT_LOST)
                        log_error("The cluster's layout key is gone (%slayout), but the cluster "
                                  "has been used%s: not re-creating it, and extending nothing. "
                                  "Run `snowid fence` with this cluster's layout to restore it",
                                  h->prefix,
                                  cr->witnessed ? " (a daemon that knew it left a witness: the "
                                                  "store forgot it)"
                                                : "");
                cluster_halt(h, HALT_LAYOUT_LOST);
                break;
        case CLUSTER_LAYOUT_BAD:
                log_error("The layout stored at %slayout is not valid: '%s'", h->prefix,
                          cr->layout_text);
                holder_fatal(h, EX_CONFIG_);
                return;
        case CLUSTER_FENCE_LOST:
                if (h->halted != HALT_FENCE_LOST)
                        log_error("The cluster's %s key is %s (%s): the cluster was made by an "
                                  "earlier snowid, or keys were deleted. Extending nothing until "
                                  "`snowid fence` has run",
                                  cr->fence != 1 ? "fence" : "floor",
                                  cr->fence == 0 || cr->floor != 1 ? "missing" : "not valid",
                                  h->prefix);
                cluster_halt(h, HALT_FENCE_LOST);
                break;
        case CLUSTER_FOREIGN:
                /* a fence written on another cluster: the store was restored
                 * (etcd with a new cluster token, as the procedure says) or
                 * replaced, and not fenced since.  Nothing is acted on until
                 * a fence names this cluster */
                if (h->halted != HALT_RESTORED)
                        log_error("The fence at %sfence was written on cluster %" PRIu64
                                  ", but %s answers as cluster %" PRIu64 ": it was restored "
                                  "or replaced, and not fenced since. Claiming and extending "
                                  "nothing on it until `snowid fence` has run there",
                                  h->prefix, c->cluster_id, store_title(h->store), r->cluster_id);
                cluster_halt(h, HALT_RESTORED);
                break;
        case CLUSTER_FORGOTTEN:
                holder_forgotten(h, cr->own_worker, k.acked_rev, cr->own_mark_rev,
                                 "reading the cluster");
                return;
        case CLUSTER_RESTORED:
                /* an older fence, a cluster's first fence to a daemon that
                 * knew the cluster (its prefix wiped, or the store restored to
                 * a snapshot without it), or the known one with a restore
                 * seen: a restore not yet fenced */
                if ((c->fence_len != h->cl.fence_len ||
                     memcmp(c->fence, h->cl.fence, c->fence_len)) &&
                    h->halted != HALT_RESTORED)
                        log_error("%s in %s (era %" PRIu64 ", this daemon knows era %" PRIu64 ")",
                                  fence_first(c) ? "The cluster was made anew"
                                                 : "An older fence is back",
                                  store_title(h->store), c->era, h->cl.era);
                cluster_halt(h, HALT_RESTORED);
                break;
        case CLUSTER_GO: {
                /* once, before the first claim; a layout other than the one
                 * given is refused first (holder_layout_read), with nothing
                 * recorded */
                const snowid_layout *given = &h->cfg->layout;
                bool given_differs =
                        h->cfg->layout_given &&
                        (l->epoch_ms != given->epoch_ms || l->time_bits != given->time_bits ||
                         l->worker_bits != given->worker_bits || l->seq_bits != given->seq_bits);
                if (!h->layout_ready && !given_differs &&
                    region_check(h, r->revision, cr->records, cr->n_records, l->worker_bits,
                                 cr->layout_rev) <= 0)
                        return;
                holder_layout_read(h, l, c);
                return;
        }
        }
        /* halted, or the answer did not say: what this daemon knew is left
         * for the fence, and the cluster read again */
        witness_send(h);
        reread_in(h, REREAD_MS);
}

void cluster_read(struct holder *h)
{
        /* the highest mark is read only by the host that holds `creating`
         * (check_marks); and the mark of the number held, to check that the
         * store still has this daemon's last write of it (tag: the revision
         * it was acknowledged at) */
        bool own = h->halted == HALT_NONE && h->hold.cur.state != H_NONE && h->hold.cur.mark_rev;
        if (store_read_cluster(h->store, create_marks(&h->create), own ? h->hold.cur.worker : -1,
                               on_cluster, h, own ? (uint64_t)h->hold.cur.mark_rev : 0) < 0)
                reread_in(h, REREAD_MS);
}

/* ---- halting, and acting only on answers from the cluster we know ---- */

void cluster_halt(struct holder *h, enum halt why)
{
        if (h->halted == why)
                return;
        if (why == HALT_RESTORED) {
                h->stats.restores_seen++;
                log_error("%s was restored from a snapshot or replaced (its revision went back, "
                          "its cluster ID changed, or it forgot what it acknowledged to this "
                          "daemon): extending nothing and claiming nothing on it. "
                          "Run `snowid fence` against the cluster (docs/fences.md); this daemon "
                          "goes on by itself once the fence has changed",
                          store_title(h->store));
        }
        h->halted = why;
        holder_halted(h);
        if (why == HALT_RESTORED)
                marks_protect(h);
        holder_update_status(h);
}

/* Whether to act on an answer: not from a restored cluster, and not one
 * that names another fence or layout than h->cl (ok and same, as a verb's
 * result says them; same 1 for an answer that compared none).  Otherwise
 * it halts or reads the cluster again, and the answer is ignored. */
bool cluster_ok(struct holder *h, const struct store_answer *r, bool ok, int same)
{
        if (h->halted != HALT_NONE)
                return false;
        if (r->went_back) {
                cluster_halt(h, HALT_RESTORED);
                reread_in(h, REREAD_MS);
                return false;
        }
        if (!ok || same == 1)
                return true;
        if (same == 0) {
                log_notice("%s's answer names another fence or layout; reading them",
                           store_title(h->store));
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
        }
        return false;
}

/* ---- the pause after a fence (rule 6) ---- */

uint64_t holder_settle_ms(const struct holder *h)
{
        return rule6_settle_ms(h->cfg->mark_step_s, h->cfg->renew_ms, h->cfg->store_timeout_ms);
}
