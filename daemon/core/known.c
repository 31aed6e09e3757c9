/* SPDX-License-Identifier: MIT */
/*
 * What this daemon knows of the cluster, as a pure core (known.h).
 */
#include <string.h>

#include "acquire.h"
#include "known.h"
#include "rules.h"

static struct known_action *act(struct known_ready *out, enum known_do what)
{
        /* at most KNOWN_ACTIONS_MAX per step: a full list is a bug of this
         * file, kept from overflowing */
        unsigned i = out->n < KNOWN_ACTIONS_MAX ? out->n++ : KNOWN_ACTIONS_MAX - 1;
        out->a[i] = (struct known_action){.what = what};
        return &out->a[i];
}

static struct known_action *say(struct known_ready *out, enum known_ev ev)
{
        struct known_action *t = act(out, KNOWN_DO_SAY);
        t->ev = ev;
        return t;
}

static void reread(struct known_ready *out, uint64_t ms)
{
        act(out, KNOWN_DO_REREAD)->a = ms;
}

static bool layout_same(const snowid_layout *a, const snowid_layout *b)
{
        return a->epoch_ms == b->epoch_ms && a->time_bits == b->time_bits &&
               a->worker_bits == b->worker_bits && a->seq_bits == b->seq_bits;
}

/* The cluster read now, with the mark of the number held, to check that
 * the store still has this daemon's last write of it (rule 5); not while
 * halted, where the answer is read for the fence alone. */
static void read_cluster(const struct known *k, const struct known_view *v, struct known_ready *out)
{
        struct known_action *t = act(out, KNOWN_DO_READ);
        bool own = k->halted == HALT_NONE && v->cur->state != H_NONE && v->cur->mark_rev;
        t->worker = own ? v->cur->worker : -1;
        t->a = own ? (uint64_t)v->cur->mark_rev : 0;
}

/* Halted: nothing is extended or claimed; the segment runs out at its
 * deadline, saying why; a restore raises every mark published again. */
static void halt(struct known *k, const struct known_view *v, struct known_ready *out,
                 enum halt why)
{
        /* a restore seen lasts until a new fence: a check read of the
         * cluster meanwhile halts for nothing less */
        if (k->halted == why || (k->restored && why == HALT_CHECKING))
                return;
        if (why == HALT_RESTORED && !k->restored)
                say(out, KNOWN_EV_RESTORE_SEEN);
        if (why == HALT_RESTORED)
                k->restored = true;
        k->halted = why;
        struct known_action *t = act(out, KNOWN_DO_HALTED);
        t->why = why;
        t->b = v->cur->state != H_NONE && why != HALT_CHECKING; /* the segment told */
        if (why == HALT_RESTORED)
                act(out, KNOWN_DO_PROTECT);
        act(out, KNOWN_DO_STATUS);
}

/* A daemon halted on a cluster it knew (the store restored or replaced,
 * its layout or fence gone) writes down what the store may have forgotten
 * and a fence must cover: the fence it knew and the highest deadline it
 * published (rule 7).  Once per halt; not while only checking. */
static void witness(struct known *k, const struct known_view *v, struct known_ready *out)
{
        if (k->witness != WITNESS_NONE || !k->layout_ready || k->halted == HALT_NONE ||
            k->halted == HALT_CHECKING)
                return;
        k->witness = WITNESS_PUTTING;
        struct known_action *t = act(out, KNOWN_DO_WITNESS);
        t->a = k->cl.era;
        t->b = k->cl.claims_above;
        t->c = v->highest;
        t->tag = k->witness_gen;
}

/* A halt ends: the witness left for it (or on its way) is deleted, so that
 * none of a halt long over outlives it in the store and its snapshots. */
static void witness_done(struct known *k, struct known_ready *out)
{
        k->witness_gen++;
        if (k->witness == WITNESS_NONE)
                return;
        k->witness = WITNESS_DELETING;
        act(out, KNOWN_DO_UNWITNESS);
}

static void forgotten(struct known *k, const struct known_view *v, struct known_ready *out,
                      enum forgot why, int32_t worker, int64_t a, int64_t b, const char *where)
{
        if (k->restored)
                return; /* said already */
        struct known_action *t = say(out, KNOWN_EV_FORGOTTEN);
        t->forgot = why;
        t->worker = worker;
        t->a = (uint64_t)a;
        t->b = (uint64_t)b;
        t->text = where;
        halt(k, v, out, HALT_RESTORED);
        reread(out, KNOWN_REREAD_MS);
}

/* Rule 6: a fence other than the one known, adopted.  The number held
 * belongs to the old history: given up once its mark is confirmed at or
 * above its deadline under the new fence (rule 4), its clients going on to
 * that deadline meanwhile; then claimed again, after the settle pause in
 * which other live daemons see the fence and raise their marks. */
static void adopt(const struct known_view *v, const struct cluster_ident *c,
                  struct known_ready *out, uint64_t settle_ms)
{
        say(out, KNOWN_EV_NEW_FENCE)->a = c->claims_above;
        /* an acquisition under way (a wait, a grant in flight) would claim
         * under the new fence before the pause: given up, started again */
        act(out, KNOWN_DO_DROP);
        act(out, KNOWN_DO_FORGET);
        if (c->cluster_id)
                act(out, KNOWN_DO_EXPECT)->a = c->cluster_id;
        const struct holding was = *v->cur;
        if (was.state != H_NONE) {
                bool held = was.state == H_HELD;
                if (held)
                        act(out, KNOWN_DO_DROPPED)->worker = was.worker;
                act(out, KNOWN_DO_FENCED);
                struct known_action *t = act(out, KNOWN_DO_RETIRED);
                t->worker = was.worker;
                t->a = was.mark;
                if (held) {
                        t = act(out, KNOWN_DO_RAISE); /* it revokes the lease */
                        t->worker = was.worker;
                        t->a = was.mark;
                        t->lease = was.lease;
                        act(out, KNOWN_DO_PREFER)->worker = was.worker;
                }
        }
        act(out, KNOWN_DO_RERAISE);
        act(out, KNOWN_DO_PAUSE)->a = v->mono_ms + settle_ms;
}

/* The layout and fence as read: the first time, start; after a halt, go on
 * if the layout is the same one. */
static void layout_read(struct known *k, const struct known_view *v, const snowid_layout *l,
                        const struct cluster_ident *c, struct known_ready *out)
{
        const snowid_layout *want = k->layout_ready ? &k->layout : &k->set.given;
        if ((k->layout_ready || k->set.layout_given) && !layout_same(want, l)) {
                struct known_action *t = say(out, KNOWN_EV_LAYOUT_DIFFERS);
                t->layout = l;
                t->other = want;
                t->a = k->layout_ready;
                act(out, KNOWN_DO_FATAL);
                return;
        }
        bool new_fence =
                k->layout_ready && (!fence_same(&k->cl, c) || c->layout_rev != k->cl.layout_rev);
        bool was_halted = k->halted != HALT_NONE;
        /* only a new fence (or the first) ends a restore: the same fence
         * again is refused as restored before this (rule6_fence_read()) */
        if (new_fence || !k->layout_ready)
                k->restored = false;
        k->cl = *c;
        k->halted = HALT_NONE;
        witness_done(k, out);
        k->backoff_ms = 0;
        if (k->layout_ready) {
                if (new_fence)
                        adopt(v, c, out, k->set.settle_ms);
                else if (was_halted)
                        say(out, KNOWN_EV_AS_WAS);
                /* a new fence gave the number up (FENCED) */
                act(out, v->cur->state == H_HELD && !new_fence ? KNOWN_DO_LEASED : KNOWN_DO_CLAIM);
                act(out, KNOWN_DO_STATUS);
                return;
        }
        k->layout = *l;
        k->layout_ready = true;
        if (c->cluster_id)
                act(out, KNOWN_DO_EXPECT)->a = c->cluster_id;
        act(out, KNOWN_DO_FIRST);
        /* a fence younger than the settle pause: live daemons may not have
         * raised their marks yet */
        uint64_t left = rule6_settle_left_ms(c, v->wall_ms, k->set.settle_ms);
        if (left) {
                struct known_action *t = say(out, KNOWN_EV_SETTLE_LEFT);
                t->a = k->set.settle_ms - left;
                t->b = left;
                act(out, KNOWN_DO_PAUSE)->a = v->mono_ms + left;
        }
        act(out, KNOWN_DO_CLAIM);
}

static void on_cluster(struct known *k, const struct known_view *v, const struct known_in *in,
                       struct known_ready *out)
{
        const struct store_cluster *cr = in->cr;
        const struct cluster_ident *c = &cr->c;
        if (!cr->ok) {
                if (!in->refused) /* a refusal is said once, by its driver */
                        say(out, KNOWN_EV_UNREADABLE)->text = in->error;
                unsigned max = acq_failure_max_ms(k->set.lease_ttl_s, in->answered, in->status);
                reread(out, acq_backoff(&k->backoff_ms, max, core_draw(&k->rng)));
                return;
        }
        const struct cluster_known known = {
                .cl = k->layout_ready ? &k->cl : NULL,
                /* a restore once seen (however) lasts until a new fence */
                .restore_seen = in->went_back || k->restored,
                .halted = k->halted != HALT_NONE,
                .acked_rev = in->acked_rev,
                .answer_cluster = in->cluster,
        };
        switch (cluster_verdict(cr, &known)) {
        case CLUSTER_MALFORMED:
                say(out, KNOWN_EV_MALFORMED);
                break;
        case CLUSTER_MAKE:
                act(out, KNOWN_DO_MAKE)->cr = cr;
                return;
        case CLUSTER_LAYOUT_LOST:
                if (k->halted != HALT_LAYOUT_LOST)
                        say(out, KNOWN_EV_LAYOUT_LOST)->a = cr->witnessed;
                halt(k, v, out, HALT_LAYOUT_LOST);
                break;
        case CLUSTER_LAYOUT_BAD:
                say(out, KNOWN_EV_LAYOUT_BAD)->text = cr->layout_text;
                act(out, KNOWN_DO_FATAL);
                return;
        case CLUSTER_FENCE_LOST:
                if (k->halted != HALT_FENCE_LOST) {
                        struct known_action *t = say(out, KNOWN_EV_FENCE_LOST);
                        t->a = (uint64_t)cr->fence;
                        t->b = (uint64_t)cr->floor;
                }
                halt(k, v, out, HALT_FENCE_LOST);
                break;
        case CLUSTER_FOREIGN:
                /* a fence written on another cluster: the store was restored
                 * or replaced, and not fenced since; nothing is acted on
                 * until a fence names this cluster */
                if (!k->restored) {
                        struct known_action *t = say(out, KNOWN_EV_FOREIGN);
                        t->a = c->cluster_id;
                        t->b = in->cluster;
                }
                halt(k, v, out, HALT_RESTORED);
                break;
        case CLUSTER_FORGOTTEN:
                forgotten(k, v, out, FORGOT_MARK, cr->own_worker, in->acked_rev, cr->own_mark_rev,
                          "reading the cluster");
                return;
        case CLUSTER_RESTORED:
                /* an older fence, a cluster's first fence to a daemon that
                 * knew the cluster, or the known one with a restore seen: a
                 * restore not yet fenced */
                if (!fence_same(&k->cl, c) && !k->restored) {
                        struct known_action *t = say(out, KNOWN_EV_RESTORED);
                        t->a = c->era;
                        t->b = k->cl.era;
                        t->c = fence_first(c);
                }
                halt(k, v, out, HALT_RESTORED);
                break;
        case CLUSTER_GO:
                /* before the first claim, the range is checked against the
                 * regions' records (a layout other than the one given is
                 * refused first, with nothing recorded) */
                if (!k->layout_ready &&
                    !(k->set.layout_given && !layout_same(&k->set.given, &cr->l))) {
                        k->ranging = *c;
                        k->ranging_layout = cr->l;
                        k->ranging_set = true;
                        struct known_action *t = act(out, KNOWN_DO_RANGE);
                        t->cr = cr;
                        t->a = (uint64_t)cr->records_rev;
                        return;
                }
                layout_read(k, v, &cr->l, c, out);
                return;
        }
        /* halted, or the answer did not say: what this daemon knew is left
         * for the fence, and the cluster read again */
        witness(k, v, out);
        reread(out, KNOWN_REREAD_MS);
}

/* Rule 1: an answer is acted on only from the cluster known: not from a
 * restored one, and not one that names another fence or layout (then the
 * cluster is read, halted meanwhile). */
static void gate(struct known *k, const struct known_view *v, const struct known_in *in,
                 struct known_ready *out)
{
        if (k->halted != HALT_NONE)
                return;
        if (in->went_back) {
                halt(k, v, out, HALT_RESTORED);
                reread(out, KNOWN_REREAD_MS);
                return;
        }
        if (!in->ok || in->same == 1) {
                out->current = true;
                return;
        }
        if (in->same == 0) {
                say(out, KNOWN_EV_NAMES_OTHER);
                halt(k, v, out, HALT_CHECKING);
                read_cluster(k, v, out);
        }
}

/* Any answer: a lease answer from another history halts (rule 5); one
 * that lags has the cluster read. */
static void seen(struct known *k, const struct known_view *v, const struct known_in *in,
                 struct known_ready *out)
{
        struct answer_seen a = in->seen;
        a.layout_ready = k->layout_ready;
        a.halted = k->halted != HALT_NONE;
        const struct answer_verdict r = answer_verdict(&a);
        out->skip = r.skip;
        out->reachable = r.reachable;
        out->full = r.full;
        if (r.skip)
                return;
        if (r.halt_restored) {
                halt(k, v, out, HALT_RESTORED);
                reread(out, KNOWN_REREAD_MS);
        }
        if (r.check_cluster) {
                say(out, KNOWN_EV_LAGGING)->a = (uint64_t)in->revision;
                read_cluster(k, v, out);
        }
}

void known_step(struct known *k, const struct known_view *v, const struct known_in *in,
                struct known_ready *out)
{
        out->n = 0;
        out->current = out->skip = out->reachable = out->full = false;
        switch (in->kind) {
        case KNOWN_IN_READ:
                if (in->unsent)
                        reread(out, KNOWN_REREAD_MS);
                else
                        read_cluster(k, v, out);
                return;
        case KNOWN_IN_CLUSTER:
                on_cluster(k, v, in, out);
                return;
        case KNOWN_IN_RANGED:
                if (!k->ranging_set)
                        return;
                k->ranging_set = false;
                layout_read(k, v, &k->ranging_layout, &k->ranging, out);
                return;
        case KNOWN_IN_SEEN:
                seen(k, v, in, out);
                return;
        case KNOWN_IN_GATE:
                gate(k, v, in, out);
                return;
        case KNOWN_IN_CHECK:
                halt(k, v, out, HALT_CHECKING);
                read_cluster(k, v, out);
                return;
        case KNOWN_IN_FORGOTTEN:
                forgotten(k, v, out, in->forgot, in->worker, in->a, in->b, in->where);
                return;
        case KNOWN_IN_WITNESSED:
                /* the halt ended meanwhile (its deletion under way), or an
                 * answer for an earlier halt's put: this put's answer is to come */
                if (k->witness != WITNESS_PUTTING || (!in->unsent && in->tag != k->witness_gen))
                        return;
                k->witness = WITNESS_NONE;
                /* none: sent again at the next read of the cluster while halted */
                if (in->unsent || !in->ok || k->halted == HALT_NONE)
                        return;
                k->witness = WITNESS_LEFT;
                say(out, KNOWN_EV_WITNESS_LEFT);
                return;
        case KNOWN_IN_UNWITNESSED:
                /* a witness left behind only asks more of the next fence */
                if (k->witness == WITNESS_DELETING)
                        k->witness = WITNESS_NONE;
                return;
        }
}

enum halt known_reason(const struct known *k)
{
        return k->restored && k->halted != HALT_NONE ? HALT_RESTORED : k->halted;
}

void known_init(struct known *k, const struct known_settings *set)
{
        *k = (struct known){.set = *set, .halted = HALT_NONE, .rng = set->seed | 1};
}
