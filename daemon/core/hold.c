/* SPDX-License-Identifier: MIT */
/*
 * Holding the published number, as a pure core (hold.h).
 *
 * SNOWID_MUTANT is defined only by the core's tests, as in rules.c: mutant
 * 18 of model/snowid.pml (the deadline raised before the store
 * acknowledged the mark), which tests/test-hold.c must catch.
 */
#include "hold.h"
#include "rules.h"
#include "schedule.h"

static struct hold_action *act(struct hold_ready *out, enum hold_do what, enum hold_say say)
{
        /* at most HOLD_ACTIONS_MAX per step: a full list is a bug of this
         * file, kept from overflowing */
        unsigned i = out->n < HOLD_ACTIONS_MAX ? out->n++ : HOLD_ACTIONS_MAX - 1;
        out->a[i] = (struct hold_action){.what = what, .say = say};
        return &out->a[i];
}

/* The number is lost: given up to its mark (the driver raises it there and
 * acquires another). */
static void lost(struct hold *k, struct hold_ready *out, enum hold_say why)
{
        if (k->cur.state != H_HELD)
                return;
        k->cur.state = H_LOST;
        act(out, HOLD_DO_LOST, why);
}

/* What renew_decide() plans now (keepalive_now: a keepalive at once). */
static struct renew_plan plan(const struct hold *k, const struct hold_view *v, bool keepalive_now)
{
        const struct holding *g = &k->cur;
        const struct renew_in in = {
                .now = v->id_ms,
                .mark = g->mark,
                .window_ms = (uint64_t)k->set.window_s * 1000,
                .step_ms = (uint64_t)k->set.mark_step_s * 1000,
                .time_bits = v->time_bits,
                .extend_busy = g->marking == MARK_EXTENDING,
                .raising = g->marking == MARK_RAISING,
                .halted = v->halted,
                .mono = v->mono_ms,
                .keepalive_next = g->keepalive_next_ms,
                .keepalive_busy = g->leasing == LEASE_ASKED,
                .lease_checking = g->leasing == LEASE_CHECKING,
                .keepalive_now = keepalive_now,
                .ttl_ms = k->set.lease_ttl_s * 1000,
        };
        return renew_decide(&in);
}

static void keepalive(struct hold *k, const struct hold_view *v, struct hold_ready *out,
                      const struct renew_plan *p)
{
        if (!p->keepalive)
                return;
        k->cur.keepalive_next_ms = p->keepalive_next;
        k->cur.lease_asked_ms = v->boot_ms;
        k->cur.leasing = LEASE_ASKED;
        act(out, HOLD_DO_KEEPALIVE, HOLD_SAY_NONE);
}

/* The lease kept alive, the mark extended, as planned. */
static void renew(struct hold *k, const struct hold_view *v, struct hold_ready *out)
{
        if (k->cur.state != H_HELD)
                return;
        /* the lease is kept while halted: it writes no mark, and keeps the
         * number from a daemon that reaches the cluster before it is fenced */
        const struct renew_plan p = plan(k, v, false);
        keepalive(k, v, out, &p);
        if (!p.extend)
                return;
        k->cur.pending = p.extend_to;
        k->cur.marking = MARK_EXTENDING;
        act(out, HOLD_DO_EXTEND, HOLD_SAY_NONE);
#if SNOWID_MUTANT == 18 /* the deadline raised before the store acknowledged the mark */
        k->cur.mark = p.extend_to;
        act(out, HOLD_DO_DEADLINE, HOLD_SAY_NONE)->a = p.extend_to;
#endif
}

/* Rule 5: the lease unknown before its TTL could run out; reading the mark
 * tells a restore from a lease revoked early. */
static void lease_check(struct hold *k, struct hold_ready *out)
{
        k->cur.leasing = LEASE_CHECKING;
        k->cur.own_rev = k->cur.mark_rev;
        act(out, HOLD_DO_CHECK, HOLD_SAY_NONE);
}

static void on_kept(struct hold *k, const struct hold_view *v, const struct hold_in *in,
                    struct hold_ready *out)
{
        struct holding *g = &k->cur;
        if (g->leasing == LEASE_ASKED)
                g->leasing = LEASE_QUIET;
        if (in->unsent || g->state != H_HELD || v->restored)
                return;
        if (in->ttl_s < 0) {
                g->keepalive_next_ms = 0; /* again at the next renewal */
                act(out, HOLD_DO_SAY, HOLD_SAY_KEEPALIVE_FAILED);
                return;
        }
        switch (rule5_lease_answer(in->ttl_s, v->boot_ms, g->lease_until_ms)) {
        case RULE5_LEASE_LIVES:
                g->lease_until_ms = rule5_lease_until(g->lease_asked_ms, in->ttl_s);
                if (g->taken_seen) {
                        g->taken_seen = false;
                        lost(k, out, HOLD_SAY_WRITTEN_OVER);
                }
                return;
        case RULE5_LEASE_UNKNOWN_EARLY:
                /* never revoked by this daemon, and its TTL cannot have run
                 * out: a restore (the lease granted after the snapshot), or
                 * a lease revoked early (by hand, or by an etcd leader that
                 * stalled).  Not a lease to claim again after until its mark
                 * shows which */
                act(out, HOLD_DO_SAY, HOLD_SAY_UNKNOWN_EARLY)->a = g->lease_until_ms - v->boot_ms;
                lease_check(k, out);
                return;
        case RULE5_LEASE_EXPIRED:
                break;
        }
        lost(k, out, HOLD_SAY_EXPIRED);
}

static void on_checked(struct hold *k, const struct hold_in *in, struct hold_ready *out)
{
        struct holding *g = &k->cur;
        const struct store_read *rd = in->read;
        if (in->unsent) {
                g->leasing = LEASE_QUIET;
                lost(k, out, HOLD_SAY_CHECK_UNSENT);
                return;
        }
        if (in->not_current) {
                /* rule 1 ignores it (a halt, or another fence): the next
                 * keepalive asks for the lease again, and an unknown one
                 * leads to the same read */
                g->leasing = LEASE_QUIET;
                return;
        }
        if (!rd->ok || rd->n.malformed) {
                lease_check(k, out); /* again, at the next answer */
                return;
        }
        int64_t modrev = rd->n.mark_rev;
        uint64_t stored = rd->n.mark_valid ? rd->n.mark : 0;
        bool present = rd->n.marked && rd->n.mark_valid;
        /* workers/n there, under another lease: somebody claimed it */
        bool other = rd->n.held && rd->n.lease != g->lease;
        g->leasing = LEASE_QUIET;
        if (g->state != H_HELD)
                return;
        if (rule5_forgotten(g->own_rev, modrev)) {
                struct hold_action *t = act(out, HOLD_DO_RESTORED, HOLD_SAY_AT_LEASE_CHECK);
                t->a = (uint64_t)g->own_rev;
                t->b = (uint64_t)modrev;
                return;
        }
        if (rule5_taken_back(other, present, stored, g->mark)) {
                struct hold_action *t = act(out, HOLD_DO_TAKEN_BACK, HOLD_SAY_NONE);
                t->a = stored;
                t->b = other;
                return;
        }
        /* the write that came after the grant is there: so would the lease
         * be, after a restore */
        lost(k, out, HOLD_SAY_REVOKED_EARLY);
}

static void on_extended(struct hold *k, const struct hold_view *v, const struct hold_in *in,
                        struct hold_ready *out)
{
        struct holding *g = &k->cur;
        const struct store_extended *e = in->extended;
        g->marking = MARK_STILL;
        if (in->unsent || in->not_current || g->state != H_HELD)
                return;
        uint64_t asked = g->pending; /* the mark this request asked for */
        if (!e->ok) {
                /* no answer, or an error: publish nothing; a higher mark in
                 * the store than the deadline is harmless */
                act(out, HOLD_DO_SAY, HOLD_SAY_EXTEND_FAILED);
                return;
        }
        bool ours = true;
        uint64_t stored = asked;
        if (!e->succeeded) {
                ours = e->n.held && e->n.lease == g->lease && e->n.value_is;
                stored = e->n.mark;
                if (e->n.malformed || (e->n.marked && !e->n.mark_valid)) {
                        act(out, HOLD_DO_SAY, HOLD_SAY_MALFORMED);
                        return;
                }
                if (rule5_forgotten(g->mark_rev, e->n.mark_rev)) {
                        struct hold_action *t = act(out, HOLD_DO_RESTORED, HOLD_SAY_AT_EXTENSION);
                        t->a = (uint64_t)g->mark_rev;
                        t->b = (uint64_t)e->n.mark_rev;
                        return;
                }
        }
        switch (rule4_extension(e->succeeded, ours, stored, asked)) {
        case RULE4_NOT_OURS:
                /* its lease may live (the key written over by hand), or a
                 * restore may have lost it and another daemon claimed the
                 * number: the lease's answer tells, and then the lease
                 * check reads the rest */
                if (v->boot_ms < g->lease_until_ms) {
                        if (!g->taken_seen) {
                                g->taken_seen = true;
                                const struct renew_plan p = plan(k, v, true);
                                keepalive(k, v, out, &p);
                        }
                        return;
                }
                lost(k, out, HOLD_SAY_TAKEN);
                return;
        case RULE4_RAISE:
                /* ours, yet the guard failed: the mark is absent (deleted,
                 * or lost by the store).  Raised again before anything else. */
                g->marking = MARK_RAISING;
                act(out, HOLD_DO_RAISE, HOLD_SAY_NONE);
                return;
        case RULE4_EXTENDED:
                break;
        }
        /* rule 10: the deadline only ever rises to a mark acknowledged */
        if (asked > g->mark)
                g->mark = asked;
        if (e->succeeded && e->revision > g->mark_rev)
                g->mark_rev = e->revision; /* the put's mod revision is the txn's */
        act(out, HOLD_DO_DEADLINE, HOLD_SAY_NONE)->a = asked;
}

void hold_step(struct hold *k, const struct hold_view *v, const struct hold_in *in,
               struct hold_ready *out)
{
        out->n = 0;
        switch (in->kind) {
        case HOLD_IN_PUBLISHED:
                k->cur = *in->published;
                k->cur.marking = MARK_STILL;
                k->cur.leasing = LEASE_QUIET;
                return;
        case HOLD_IN_TICK:
                renew(k, v, out);
                return;
        case HOLD_IN_KEPT:
                if (hold_expects(k, in->tag, in->kind))
                        on_kept(k, v, in, out);
                return;
        case HOLD_IN_EXTENDED:
                if (hold_expects(k, in->tag, in->kind))
                        on_extended(k, v, in, out);
                return;
        case HOLD_IN_CHECKED:
                if (hold_expects(k, in->tag, in->kind))
                        on_checked(k, in, out);
                return;
        case HOLD_IN_RAISED:
                if (k->cur.state != H_NONE && k->cur.id == in->holding &&
                    k->cur.marking == MARK_RAISING)
                        k->cur.marking = MARK_STILL;
                return;
        case HOLD_IN_FENCED:
                /* its workers/<n> belongs to the old history: given up once
                 * the mark is confirmed at or above its deadline under the
                 * new fence (rule 4), by a raise that revokes its lease */
                if (k->cur.state == H_HELD)
                        k->cur.lease = 0;
                if (k->cur.state != H_NONE) {
                        k->cur.state = H_LOST;
                        k->cur.mark_rev = 0; /* of the old history too */
                }
                return;
        case HOLD_IN_STOP:
                k->cur.state = H_NONE;
                return;
        }
}

void hold_init(struct hold *k, const struct hold_settings *set)
{
        *k = (struct hold){.set = *set, .cur = {.state = H_NONE, .worker = -1}};
}

bool hold_expects(const struct hold *k, uint64_t tag, enum hold_in_kind kind)
{
        if (k->cur.state == H_NONE || tag != k->cur.id)
                return false;
        switch (kind) {
        case HOLD_IN_KEPT:
                return true;
        case HOLD_IN_EXTENDED:
                return k->cur.state == H_HELD && k->cur.marking == MARK_EXTENDING;
        case HOLD_IN_CHECKED:
                return k->cur.leasing == LEASE_CHECKING;
        default:
                return false;
        }
}
