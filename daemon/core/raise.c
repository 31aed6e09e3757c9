/* SPDX-License-Identifier: MIT */
/*
 * The marks this daemon published, and raising them, as a pure core
 * (raise.h).
 */
#include "raise.h"
#include "rules.h"

static struct raise_action *act(struct raise_ready *out, enum raise_do what, enum raise_say say)
{
        /* at most RAISE_ACTIONS_MAX per step: a full list is a bug of this
         * file, kept from overflowing */
        unsigned i = out->n < RAISE_ACTIONS_MAX ? out->n++ : RAISE_ACTIONS_MAX - 1;
        out->a[i] = (struct raise_action){.what = what, .say = say};
        return &out->a[i];
}

static void say(struct raise_ready *out, enum raise_say s, int32_t worker, uint64_t a, uint64_t b)
{
        struct raise_action *t = act(out, RAISE_DO_SAY, s);
        t->worker = worker;
        t->a = a;
        t->b = b;
}

static void revoke(struct raise_ready *out, int64_t lease)
{
        if (lease)
                act(out, RAISE_DO_REVOKE, RAISE_SAY_NONE)->lease = lease;
}

static void raised_for(struct raise_ready *out, uint64_t holding)
{
        if (holding)
                act(out, RAISE_DO_RAISED, RAISE_SAY_NONE)->a = holding;
}

/* The leases waiting for a confirmation are kept alive a third of their
 * TTL apart: another daemon claims the number only after the mark fences
 * it, however long the confirmation takes (a store slow to answer, a mark
 * lowered by hand).  Stopping keeps them alive too, until the raises end
 * or the stop's time runs out. */
static void keep_arm(struct raises *m, struct raise_ready *out)
{
        if (m->keep_armed)
                return;
        m->keep_armed = true;
        act(out, RAISE_DO_KEEP_IN, RAISE_SAY_NONE)->a = m->keep_ms;
}

static void later(struct raise_ready *out)
{
        act(out, RAISE_DO_WAIT, RAISE_SAY_NONE)->a = 500;
}

/* The raise is over: confirmed (ok: its leases revoked), or given up to a
 * fence or a restore. */
static void done(const struct raise_view *v, struct mark_raise *r, struct raise_ready *out, bool ok)
{
        if (ok && r->lease) {
                if (v->stopping)
                        say(out, RAISE_SAY_REVOKING, r->worker, r->mark, 0);
                revoke(out, r->lease);
                revoke(out, r->lease2);
        }
        raised_for(out, r->for_holding);
        r->active = false;
        act(out, RAISE_DO_ENDED, RAISE_SAY_NONE);
}

/* cas: put the mark comparing modrev (0: absent); else read it */
static void send(struct mark_raise *r, struct raise_ready *out, bool cas, int64_t modrev)
{
        r->acked_sent = r->acked_rev;
        if (cas)
                r->sent = r->mark;
        struct raise_action *t = act(out, RAISE_DO_SEND, RAISE_SAY_NONE);
        t->id = r->id;
        t->worker = r->worker;
        t->a = r->mark;
        t->b = cas;
        t->modrev = modrev;
}

static void raise(struct raises *m, struct raise_ready *out, int32_t worker, uint64_t mark,
                  int64_t lease, uint64_t for_holding, int64_t acked_rev)
{
        /* one raise per number, to the highest mark asked for */
        for (unsigned i = 0; i < RAISES_MAX; i++) {
                struct mark_raise *o = &m->r[i];
                if (!o->active || o->worker != worker)
                        continue;
                o->mark = mark > o->mark ? mark : o->mark;
                o->acked_rev = acked_rev > o->acked_rev ? acked_rev : o->acked_rev;
                /* two holdings of one number retiring at once (the number
                 * claimed again after a fence, retiring before the first
                 * raise ended): both leases wait for the confirmation of the
                 * higher mark */
                if (lease)
                        keep_arm(m, out);
                if (lease && !o->lease)
                        o->lease = lease, lease = 0;
                if (lease && lease != o->lease && !o->lease2)
                        o->lease2 = lease, lease = 0;
                if (for_holding)
                        o->for_holding = for_holding;
                if (lease && lease != o->lease && lease != o->lease2)
                        say(out, RAISE_SAY_THREE_TIMES, worker, (uint64_t)lease, 0);
                return;
        }
        struct mark_raise *r = NULL;
        for (unsigned i = 0; i < RAISES_MAX && !r; i++)
                if (!m->r[i].active)
                        r = &m->r[i];
        if (!r) {
                /* more numbers than slots (more than the published list
                 * holds): cannot happen with one raise per number */
                say(out, RAISE_SAY_TOO_MANY, worker, 0, 0);
                revoke(out, lease);
                raised_for(out, for_holding);
                return;
        }
        *r = (struct mark_raise){.id = ++m->ids,
                                 .worker = worker,
                                 .mark = mark,
                                 .lease = lease,
                                 .for_holding = for_holding,
                                 .acked_rev = acked_rev,
                                 .active = true};
        if (lease)
                keep_arm(m, out);
        send(r, out, false, 0);
}

static struct mark_raise *by_tag(struct raises *m, uint64_t tag)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (m->r[i].active && m->r[i].id == tag)
                        return &m->r[i];
        return NULL;
}

static unsigned published_n(const struct raises *m)
{
        return m->n_published < PUBLISHED_MAX ? m->n_published : PUBLISHED_MAX;
}

static void on_answer(const struct raise_view *v, struct mark_raise *r, const struct raise_in *in,
                      struct raise_ready *out)
{
        const struct store_raised *rs = in->raised;
        if (in->unsent) {
                r->tries++;
                r->waiting = true;
                later(out);
                return;
        }
        /* [hwm, fence, layout] read in either branch.  Once a restore is
         * seen, the raise goes on against the store as it is (a higher mark
         * only fences more) until a fence other than the one it compares
         * is found there: that fence's adoption raises again */
        if (in->restored) {
                if (rs->ok && !rs->succeeded && rs->same != 1) {
                        done(v, r, out, false);
                        return;
                }
        } else if (in->not_current) {
                if (in->halted) {
                        done(v, r, out, false); /* a new fence re-raises what it must */
                        return;
                }
                r->waiting = true; /* a malformed answer: again */
                later(out);
                return;
        }
        if (!rs->put && (!rs->ok || rs->n.malformed)) {
                /* no answer: again until the store answers (a raise is never
                 * abandoned while the cluster is the one it was for) */
                r->tries++;
                r->waiting = true;
                later(out);
                return;
        }
        bool present = rs->n.marked, valid = present && rs->n.mark_valid;
        /* a mark this daemon wrote, back below that write: the store forgot
         * it.  Writing it again would erase what shows the restore */
        if (!rs->put && present && rule5_forgotten(r->acked_sent, rs->n.mark_rev)) {
                struct raise_action *t = act(out, RAISE_DO_RESTORED, RAISE_SAY_NONE);
                t->worker = r->worker;
                t->a = (uint64_t)r->acked_sent;
                t->b = (uint64_t)rs->n.mark_rev;
                done(v, r, out, false);
                return;
        }
        if (rs->put) {
                say(out, RAISE_SAY_RAISED_BACK, r->worker, r->sent, 0);
                if (rule4_confirmed(true, r->sent, r->mark)) {
                        done(v, r, out, true);
                        return;
                }
                send(r, out, false, 0); /* raised further meanwhile: check again */
                return;
        }
        if (rule4_confirmed(valid, rs->n.mark, r->mark)) {
                done(v, r, out, true);
                return;
        }
        r->tries++;
        say(out, RAISE_SAY_READS_LOW, r->worker, r->mark, !present ? 0 : valid ? 1 : 2);
        send(r, out, true, present ? rs->n.mark_rev : 0);
}

void raise_step(struct raises *m, const struct raise_view *v, const struct raise_in *in,
                struct raise_ready *out)
{
        out->n = 0;
        switch (in->kind) {
        case RAISE_IN_RAISE:
                raise(m, out, in->worker, in->mark, in->lease, in->for_holding, in->acked_rev);
                return;
        case RAISE_IN_RETIRED: {
                unsigned i = m->n_published++ % PUBLISHED_MAX;
                m->published[i] = (struct published){
                        .worker = in->worker, .mark = in->mark, .mono_ms = v->mono_ms};
                return;
        }
        case RAISE_IN_FENCED:
                /* every mark this daemon published above the new fence's
                 * claims_above is raised again (claims start above it anyway);
                 * the revisions known are of the old history */
                for (unsigned i = 0; i < RAISES_MAX; i++)
                        m->r[i].acked_rev = 0;
                for (unsigned i = 0; i < published_n(m); i++) {
                        const struct published *p = &m->published[i];
                        if (rule6_reraise(p->mark, v->claims_above) &&
                            v->mono_ms - p->mono_ms < PUBLISHED_KEEP_MS) {
                                say(out, RAISE_SAY_PAST_FENCE, p->worker, p->mark, v->claims_above);
                                raise(m, out, p->worker, p->mark, 0, 0, 0);
                        }
                }
                return;
        case RAISE_IN_PROTECT:
                if (v->cur && v->cur->state != H_NONE)
                        raise(m, out, v->cur->worker, v->cur->mark, 0, 0, 0);
                for (unsigned i = 0; i < published_n(m); i++) {
                        const struct published *p = &m->published[i];
                        if (v->mono_ms - p->mono_ms < PUBLISHED_KEEP_MS)
                                raise(m, out, p->worker, p->mark, 0, 0, 0);
                }
                return;
        case RAISE_IN_ANSWER: {
                struct mark_raise *r = by_tag(m, in->tag);
                if (r)
                        on_answer(v, r, in, out);
                return;
        }
        case RAISE_IN_TIMER:
                for (unsigned i = 0; i < RAISES_MAX; i++)
                        if (m->r[i].active && m->r[i].waiting) {
                                m->r[i].waiting = false;
                                send(&m->r[i], out, false, 0);
                        }
                return;
        case RAISE_IN_KEEP: {
                m->keep_armed = false;
                bool any = false;
                for (unsigned i = 0; i < RAISES_MAX; i++) {
                        const struct mark_raise *r = &m->r[i];
                        const int64_t leases[2] = {r->lease, r->lease2};
                        for (unsigned k = 0; k < 2 && r->active; k++)
                                if (leases[k]) {
                                        struct raise_action *t =
                                                act(out, RAISE_DO_KEEPALIVE, RAISE_SAY_NONE);
                                        t->lease = leases[k];
                                        t->id = r->id;
                                        any = true;
                                }
                }
                if (any)
                        keep_arm(m, out);
                return;
        }
        case RAISE_IN_KEPT: {
                struct mark_raise *r = by_tag(m, in->tag);
                if (r && in->ttl_s == 0 && !r->lease_gone) {
                        /* expired or revoked meanwhile: the mark alone fences
                         * the number now, as soon as it is raised */
                        r->lease_gone = true;
                        say(out, RAISE_SAY_LEASE_GONE, r->worker, r->mark, 0);
                }
                act(out, RAISE_DO_ENDED, RAISE_SAY_NONE);
                return;
        }
        }
}

void raise_init(struct raises *m, unsigned lease_ttl_s)
{
        /* raises' ids apart from holdings' ids, whatever either counts to */
        *m = (struct raises){.ids = UINT64_C(1) << 62, .keep_ms = lease_ttl_s * 1000 / 3};
}

bool raise_expects(const struct raises *m, uint64_t tag)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (m->r[i].active && m->r[i].id == tag)
                        return true;
        return false;
}

bool raise_active(const struct raises *m)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (m->r[i].active)
                        return true;
        return false;
}

bool raise_handing_over(const struct raises *m, int32_t worker)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (m->r[i].active && m->r[i].worker == worker && m->r[i].lease)
                        return true;
        return false;
}

uint64_t raise_highest(const struct raises *m, const struct holding *cur, uint64_t mono_ms)
{
        uint64_t h = cur && cur->state != H_NONE ? cur->mark : 0;
        for (unsigned i = 0; i < published_n(m); i++)
                if (mono_ms - m->published[i].mono_ms < PUBLISHED_KEEP_MS &&
                    m->published[i].mark > h)
                        h = m->published[i].mark;
        return h;
}
