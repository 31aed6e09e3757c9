/* SPDX-License-Identifier: MIT */
/*
 * The marks this daemon published (docs/fences.md rule 4): the numbers it
 * held in the last hour and their last deadlines, raised again on a new
 * fence or a restore seen; and raising a mark found low, by reading it and
 * then putting it comparing the mod revision read, until the store has it
 * at or above its target.
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
#include "renew.h"

#define PUBLISHED_KEEP_MS (3600 * 1000)

/* ---- marks this daemon published ---- */

void marks_retired(struct holder *h, int32_t worker, uint64_t mark)
{
        unsigned i = h->n_published++ % PUBLISHED_MAX;
        h->published[i] =
                (struct published){.worker = worker, .mark = mark, .mono_ms = holder_mono_ms()};
}

bool marks_handing_over(const struct holder *h, int32_t worker)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (h->raises[i].active && h->raises[i].worker == worker && h->raises[i].lease)
                        return true;
        return false;
}

uint64_t marks_highest(const struct holder *h)
{
        unsigned n = h->n_published < PUBLISHED_MAX ? h->n_published : PUBLISHED_MAX;
        uint64_t now = holder_mono_ms(), m = h->hold.cur.state != H_NONE ? h->hold.cur.mark : 0;
        for (unsigned i = 0; i < n; i++)
                if (now - h->published[i].mono_ms < PUBLISHED_KEEP_MS && h->published[i].mark > m)
                        m = h->published[i].mark;
        return m;
}

/* A new fence: every mark this daemon published above claims_above is
 * raised again (claims start above claims_above anyway). */
void marks_fence_adopted(struct holder *h)
{
        unsigned n = h->n_published < PUBLISHED_MAX ? h->n_published : PUBLISHED_MAX;
        uint64_t now = holder_mono_ms();
        h->stats.fences_adopted++;
        for (unsigned i = 0; i < RAISES_MAX; i++)
                h->raises[i].acked_rev = 0; /* revisions of the old history */
        for (unsigned i = 0; i < n; i++) {
                struct published *p = &h->published[i];
                if (rule6_reraise(p->mark, h->cl.claims_above) &&
                    now - p->mono_ms < PUBLISHED_KEEP_MS) {
                        log_warning("Worker %" PRId32 "'s last deadline %" PRIu64
                                    " is past the new "
                                    "fence's claims_above %" PRIu64 ": raising its mark",
                                    p->worker, p->mark, h->cl.claims_above);
                        marks_raise(h, p->worker, p->mark, 0, 0, 0);
                }
        }
}

void marks_protect(struct holder *h)
{
        unsigned n = h->n_published < PUBLISHED_MAX ? h->n_published : PUBLISHED_MAX;
        uint64_t now = holder_mono_ms();
        if (h->hold.cur.state != H_NONE)
                marks_raise(h, h->hold.cur.worker, h->hold.cur.mark, 0, 0, 0);
        for (unsigned i = 0; i < n; i++) {
                struct published *p = &h->published[i];
                if (now - p->mono_ms < PUBLISHED_KEEP_MS)
                        marks_raise(h, p->worker, p->mark, 0, 0, 0);
        }
}

/* ---- raising a mark: read it, then compare its mod revision and put ---- */

static void raise_send(struct holder *h, struct mark_raise *m, bool cas, int64_t modrev);

static void raise_done(struct holder *h, struct mark_raise *m, bool ok)
{
        if (ok && m->lease) {
                if (h->stopping)
                        log_info("Worker %" PRId32 "'s mark confirmed at or above %" PRIu64
                                 "; revoking its lease",
                                 m->worker, m->mark);
                holder_give_up_lease(h, m->lease);
                holder_give_up_lease(h, m->lease2);
        }
        if (m->for_holding)
                renew_raised(h, m->for_holding);
        m->active = false;
        holder_stop_check(h);
}

static struct mark_raise *raise_by_tag(struct holder *h, uint64_t tag)
{
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (h->raises[i].active && h->raises[i].id == tag)
                        return &h->raises[i];
        return NULL;
}

static int on_raise_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (h->raises[i].active && h->raises[i].waiting) {
                        h->raises[i].waiting = false;
                        raise_send(h, &h->raises[i], false, 0);
                }
        return 0;
}

static void raise_later(struct holder *h)
{
        holder_timer_in(h, &h->raise_timer, 500, on_raise_timer);
}

/* ---- a number given up keeps its lease until its mark is confirmed ---- */

/* The lease of a number given up is revoked only once its mark is
 * confirmed (rule 4), and kept alive until then as a holding's is, every
 * third of its TTL: another daemon claims the number only after the mark
 * fences it, however long the confirmation takes (a store slow to answer,
 * a mark lowered by hand).  Stopping keeps them alive too, until the
 * raises end or the stop's time runs out. */
static void raise_keep_arm(struct holder *h);

static void on_raise_keepalive(void *userdata, const struct store_answer *r, int64_t lease,
                               int64_t ttl_s)
{
        struct holder *h = userdata;
        struct mark_raise *m = raise_by_tag(h, r->tag);
        (void)lease;
        holder_note_answer(h, r);
        if (m && ttl_s == 0 && !m->lease_gone) {
                /* expired or revoked meanwhile: the mark alone fences the
                 * number now, as soon as it is raised */
                m->lease_gone = true;
                log_warning("Worker %" PRId32 "'s lease ran out before its mark was confirmed "
                            "at or above %" PRIu64,
                            m->worker, m->mark);
        }
        holder_stop_check(h);
}

static int on_raise_keep_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        bool any = false;
        (void)s;
        (void)usec;
        for (unsigned i = 0; i < RAISES_MAX; i++) {
                struct mark_raise *m = &h->raises[i];
                int64_t leases[2] = {m->lease, m->lease2};
                for (unsigned k = 0; k < 2 && m->active; k++)
                        if (leases[k]) {
                                store_keepalive(h->store, leases[k], on_raise_keepalive, h, m->id);
                                any = true;
                        }
        }
        if (any)
                raise_keep_arm(h);
        return 0;
}

static void raise_keep_arm(struct holder *h)
{
        int on = SD_EVENT_OFF;
        if (h->raise_keep_timer)
                sd_event_source_get_enabled(h->raise_keep_timer, &on);
        if (on == SD_EVENT_OFF)
                holder_timer_in(h, &h->raise_keep_timer, h->cfg->lease_ttl_s * 1000 / 3,
                                on_raise_keep_timer);
}

static void on_raise(void *userdata, const struct store_answer *r, const struct store_raised *rs)
{
        struct holder *h = userdata;
        struct mark_raise *m = raise_by_tag(h, r->tag);
        if (!m)
                return;
        /* [hwm, fence, layout] read in either branch.  Once a restore is
         * seen, the raise goes on against the store as it is (a higher mark
         * only fences more) until a fence other than the one it compares
         * is found there: that fence's adoption raises again */
        if (h->halted == HALT_RESTORED) {
                if (rs->ok && !rs->succeeded && rs->same != 1) {
                        raise_done(h, m, false);
                        return;
                }
        } else if (!cluster_ok(h, r, rs->ok, rs->same)) {
                if (h->halted != HALT_NONE) {
                        raise_done(h, m, false); /* a new fence re-raises what it must */
                        return;
                }
                m->waiting = true; /* a malformed answer: again */
                raise_later(h);
                return;
        }
        bool put = rs->put;
        if (!put && (!rs->ok || rs->n.malformed)) {
                /* no answer: again until the store answers (a raise is never
                 * abandoned while the cluster is the one it was for) */
                m->tries++;
                m->waiting = true;
                raise_later(h);
                return;
        }
        bool present = rs->n.marked, valid = present && rs->n.mark_valid;
        uint64_t stored = rs->n.mark;
        int64_t modrev = rs->n.mark_rev;
        /* a mark this daemon wrote, back below that write: the store forgot it.
         * Writing it again would erase what shows the restore */
        if (!put && present &&
            holder_forgotten(h, m->worker, m->acked_sent, modrev, "raising its mark")) {
                raise_done(h, m, false);
                return;
        }
        if (put) {
                h->stats.marks_raised++;
                log_notice("Raised the mark of worker %" PRId32 " back to %" PRIu64, m->worker,
                           m->sent);
                if (rule4_confirmed(true, m->sent, m->mark)) {
                        raise_done(h, m, true);
                        return;
                }
                raise_send(h, m, false, 0); /* raised further meanwhile: check again */
                return;
        }
        if (rule4_confirmed(valid, stored, m->mark)) {
                raise_done(h, m, true);
                return;
        }
        m->tries++;
        log_warning("The mark of worker %" PRId32 " reads %s, below the %" PRIu64
                    " published: raising it",
                    m->worker,
                    !present ? "absent"
                    : valid  ? "lower"
                             : "damaged",
                    m->mark);
        raise_send(h, m, true, present ? modrev : 0);
}

static void raise_send(struct holder *h, struct mark_raise *m, bool cas, int64_t modrev)
{
        m->acked_sent = m->acked_rev;
        if (cas)
                m->sent = m->mark;
        if (store_raise(h->store, &h->cl, (uint32_t)m->worker, cas, m->mark, modrev, on_raise, h,
                        m->id) < 0) {
                m->tries++;
                m->waiting = true;
                raise_later(h);
        }
}

void marks_raise(struct holder *h, int32_t worker, uint64_t mark, int64_t lease,
                 uint64_t for_holding, int64_t acked_rev)
{
        struct mark_raise *m = NULL;
        /* one raise per number, to the highest mark asked for */
        for (unsigned i = 0; i < RAISES_MAX; i++) {
                struct mark_raise *o = &h->raises[i];
                if (o->active && o->worker == worker) {
                        o->mark = mark > o->mark ? mark : o->mark;
                        o->acked_rev = acked_rev > o->acked_rev ? acked_rev : o->acked_rev;
                        /* two holdings of one number retiring at once (the
                         * number claimed again after a fence, retiring
                         * before the first raise ended): both leases wait
                         * for the confirmation of the higher mark */
                        if (lease)
                                raise_keep_arm(h);
                        if (lease && !o->lease)
                                o->lease = lease, lease = 0;
                        if (lease && lease != o->lease && !o->lease2)
                                o->lease2 = lease, lease = 0;
                        if (for_holding)
                                o->for_holding = for_holding;
                        if (lease && lease != o->lease && lease != o->lease2)
                                log_warning("Worker %" PRId32 " retired three times at once; "
                                            "lease %" PRIx64 " is left to expire",
                                            worker, (uint64_t)lease);
                        return;
                }
        }
        for (unsigned i = 0; i < RAISES_MAX && !m; i++)
                if (!h->raises[i].active)
                        m = &h->raises[i];
        if (!m) {
                /* more numbers than slots (more than the published list
                 * holds): cannot happen with one raise per number */
                log_warning("Too many marks being raised; worker %" PRId32 "'s is not checked",
                            worker);
                if (lease)
                        holder_give_up_lease(h, lease);
                if (for_holding)
                        renew_raised(h, for_holding);
                return;
        }
        *m = (struct mark_raise){.id = ++h->ids,
                                 .worker = worker,
                                 .mark = mark,
                                 .lease = lease,
                                 .for_holding = for_holding,
                                 .acked_rev = acked_rev,
                                 .active = true};
        if (lease)
                raise_keep_arm(h);
        raise_send(h, m, false, 0);
}
