/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does when the store forgets (docs/fences.md): the cluster's
 * layout, fence and floor; halting on a restored cluster or a lost key;
 * adopting a new fence; raising marks that read back low.
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
#define INIT_BATCH 100      /* marks made per transaction (etcd allows 128 ops) */
#define INIT_MAX (1u << 14) /* more numbers than this: none made; absent means unmarked */
#define INIT_IN_FLIGHT 16   /* batches sent at once */
/* creating a cluster: one host does it, holding the key `creating`; the
 * others read again after a wait that starts at CREATE_WAIT_MS and doubles
 * to CREATE_WAIT_MAX_MS (jittered), so that a fleet waiting does not keep
 * the store from the creation, and take over a creation not finished
 * within CREATE_STALE_MS (its host gone) */
#define CREATE_WAIT_MS 250
#define CREATE_WAIT_MAX_MS 2000
#define CREATE_STALE_MS 15000

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

static void create_lock(struct holder *h, int64_t stale_rev, bool poll);

static int on_reread_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        /* a host waiting for another's creation asks only whether it has
         * ended (two keys): the full read of a cluster without a layout
         * reads every mark, and a fleet waiting would keep the store from
         * the creation with it */
        if (h->create_waiting)
                create_lock(h, 0, true);
        else
                cluster_read(h);
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

static void create_cluster(struct holder *h);
static void init_marks(struct holder *h);

/* Whether this host creates the cluster.  Creating it is idempotent (every
 * step compares), so the key only spares the store a fleet's worth of the
 * same work when a fleet starts on a cluster that does not exist yet. */
static void on_create_lock(void *userdata, const struct store_answer *r,
                           const struct store_creating *ck)
{
        struct holder *h = userdata;
        bool poll = r->tag == 1;
        /* a poll that got no answer polls again */
        h->create_waiting = poll && !ck->ok;
        /* a fleet waiting asks at most a quarter of the time: each host
         * waits at least 4 times as long as its last answer took, so a
         * store slowed by the fleet's own questions gets fewer of them */
        unsigned took = (unsigned)(holder_mono_ms() - h->create_sent_ms), least = 4 * took;
        if (!ck->ok) {
                unsigned wait = claim_failure_backoff(h, r);
                reread_in(h, wait > least ? wait : least);
                return;
        }
        int rl = ck->layout, rc = ck->creating;
        unsigned long long since = 0;
        int64_t now_ms = shm_realtime_ns() / 1000000;
        size_t tl = strlen(h->token);
        /* taken now, or taken by this host before (a round of its
         * creation failed): it creates */
        bool mine = rl == 0 && rc == 1 && strlen(ck->value) > tl &&
                    !strncmp(ck->value, h->token, tl) && ck->value[tl] == ' ';
        if ((!poll && ck->succeeded) || (!poll && mine)) {
                /* the creator, and only it, reads the marks too: whether
                 * the cluster was used (a mark above 0) before it creates */
                h->check_marks = true;
                reread_in(h, 0);
        } else if (rl != 0 || rc != 1) /* made meanwhile, or the creation just ended */
                reread_in(h, 0);
        else if (sscanf(ck->value, "%*16s %llu", &since) == 1 &&
                 now_ms - (int64_t)since > CREATE_STALE_MS)
                create_lock(h, ck->mod_rev, false);
        else {
                unsigned wait = claim_next_backoff(h, CREATE_WAIT_MAX_MS) + CREATE_WAIT_MS;
                h->create_waiting = true;
                reread_in(h, wait > least ? wait : least);
        }
}

/* Takes the key `creating` (stale_rev: over an abandoned creation at that
 * mod revision), while there is no layout.  poll: only reads both keys, a
 * read that the store serves without a write (a transaction that may put
 * is a write whichever branch it takes) */
static void create_lock(struct holder *h, int64_t stale_rev, bool poll)
{
        char value[64];
        h->create_sent_ms = holder_mono_ms();
        snprintf(value, sizeof(value), "%s %" PRId64, h->token, shm_realtime_ns() / 1000000);
        if (store_creating(h->store, poll, value, stale_rev, on_create_lock, h, poll) < 0)
                reread_in(h, REREAD_MS);
}

static int init_batch(struct holder *h, uint64_t from);

/* Sends batches until INIT_IN_FLIGHT are in flight; once every batch has
 * succeeded, makes the cluster (its transaction checks every mark anyway). */
static void init_more(struct holder *h)
{
        uint64_t workers = UINT64_C(1) << h->cfg->layout.worker_bits;
        while (!h->init_failed && h->init_pending < INIT_IN_FLIGHT && h->init_next < workers) {
                if (init_batch(h, h->init_next) < 0)
                        h->init_failed = 2;
                else
                        h->init_pending++;
                h->init_next += INIT_BATCH;
        }
        if (h->init_pending > 0)
                return;
        if (h->init_failed)
                reread_in(h, h->init_failed == 1 ? 0 : REREAD_MS);
        else
                create_cluster(h);
}

/* the batches answer in any order */
static void on_init(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct holder *h = userdata;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id;
        if (!ok || !succeeded)
                h->init_failed = ok ? 1 : 2; /* created meanwhile, or no answer */
        h->init_pending--;
        init_more(h);
}

/* Before the cluster exists: every number's mark, 0, where it is absent, so
 * that later an absent mark means a deleted one (rule 3).  Only while there
 * is no layout and no floor, so never over a mark deleted after use.  Up to
 * INIT_IN_FLIGHT batches at once: a creation of the default layout's 1,024
 * marks costs the fleet waiting for it one round trip, not one per batch,
 * and no batch of a larger layout waits behind so many others that it times
 * out unsent. */
static void init_marks(struct holder *h)
{
        h->init_pending = 0;
        h->init_next = 0;
        h->init_failed = 0;
        init_more(h);
}

static int init_batch(struct holder *h, uint64_t from)
{
        uint64_t workers = UINT64_C(1) << h->cfg->layout.worker_bits, to = from + INIT_BATCH;
        return store_init_marks(h->store, from, to < workers ? to : workers, on_init, h);
}

static void on_create(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct holder *h = userdata;
        (void)r;
        if (ok && succeeded)
                log_notice("Created the cluster's layout, fence, floor and marks at %s", h->prefix);
        reread_in(h, ok ? 0 : REREAD_MS);
}

/* Layout, fence and floor together, only if the cluster is still unused */
static void create_cluster(struct holder *h)
{
        bool marked = (UINT64_C(1) << h->cfg->layout.worker_bits) <= INIT_MAX;
        struct cluster_ident c;
        /* A store that holds no cluster may have forgotten one (restored
         * from a snapshot taken before it was made, or its prefix wiped)
         * whose hosts' clients still take IDs up to their deadlines: the
         * new cluster claims above the clock bound a fence would, and its
         * floor is there too.  The fence names the cluster it is made on
         * (the last answer's) */
        uint64_t above =
                rule7_made_above(h->cfg->layout.epoch_ms, (uint64_t)(shm_realtime_ns() / 1000000),
                                 h->cfg->window_s, h->cfg->mark_step_s);
        if (fence_make(above, 0, h->cluster_id, true, &c) < 0) {
                reread_in(h, REREAD_MS);
                return;
        }
        if (store_make_cluster(h->store, &h->cfg->layout, c.fence, above, marked, on_create, h) < 0)
                reread_in(h, REREAD_MS);
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
                if (!h->check_marks)
                        create_lock(h, 0, false);
                else if ((UINT64_C(1) << h->cfg->layout.worker_bits) <= INIT_MAX)
                        init_marks(h); /* holding `creating`, every mark read */
                else                   /* too many numbers: unmarked ones start above the floor */
                        create_cluster(h);
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
        if (store_read_cluster(h->store, h->check_marks, own ? h->hold.cur.worker : -1, on_cluster,
                               h, own ? (uint64_t)h->hold.cur.mark_rev : 0) < 0)
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
