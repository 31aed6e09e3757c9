/* SPDX-License-Identifier: MIT */
/*
 * The marks this daemon published, and raising them: the driver of the
 * pure core in daemon/core/raise.c (docs/fences.md rule 4).  Here each
 * answer and timer becomes an input, and each action the core returns is
 * done: a raise or a keepalive sent, a lease revoked, a holding told its
 * mark is back, an event worded in the log.
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

static struct raise_view view(const struct holder *h)
{
        return (struct raise_view){
                .mono_ms = holder_mono_ms(),
                .stopping = h->stopping,
                .claims_above = h->known.cl.claims_above,
                .cur = &h->hold.cur,
        };
}

static void drive(struct holder *h, const struct raise_in *in);

static void on_raise(void *userdata, const struct store_answer *r, const struct store_raised *rs);
static void on_raise_keepalive(void *userdata, const struct store_answer *r, int64_t lease,
                               int64_t ttl_s);

static int on_raise_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        drive(userdata, &(const struct raise_in){.kind = RAISE_IN_TIMER});
        return 0;
}

static int on_raise_keep_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        drive(userdata, &(const struct raise_in){.kind = RAISE_IN_KEEP});
        return 0;
}

static void word(struct holder *h, const struct raise_action *t)
{
        switch (t->say) {
        case RAISE_SAY_REVOKING:
                log_info("Worker %" PRId32 "'s mark confirmed at or above %" PRIu64
                         "; revoking its lease",
                         t->worker, t->a);
                return;
        case RAISE_SAY_LEASE_GONE:
                log_warning("Worker %" PRId32 "'s lease ran out before its mark was confirmed "
                            "at or above %" PRIu64,
                            t->worker, t->a);
                return;
        case RAISE_SAY_RAISED_BACK:
                h->stats.marks_raised++;
                log_notice("Raised the mark of worker %" PRId32 " back to %" PRIu64, t->worker,
                           t->a);
                return;
        case RAISE_SAY_READS_LOW:
                log_warning("The mark of worker %" PRId32 " reads %s, below the %" PRIu64
                            " published: raising it",
                            t->worker,
                            t->b == 0   ? "absent"
                            : t->b == 1 ? "lower"
                                        : "damaged",
                            t->a);
                return;
        case RAISE_SAY_TOO_MANY:
                log_warning("Too many marks being raised; worker %" PRId32 "'s is not checked",
                            t->worker);
                return;
        case RAISE_SAY_THREE_TIMES:
                log_warning("Worker %" PRId32 " retired three times at once; lease %" PRIx64
                            " is left to expire",
                            t->worker, t->a);
                return;
        case RAISE_SAY_PAST_FENCE:
                log_warning("Worker %" PRId32 "'s last deadline %" PRIu64 " is past the new "
                            "fence's claims_above %" PRIu64 ": raising its mark",
                            t->worker, t->a, t->b);
                return;
        case RAISE_SAY_NONE:
                return;
        }
}

static void run(struct holder *h, const struct raise_action *t)
{
        switch (t->what) {
        case RAISE_DO_SEND:
                if (store_raise(h->store, &h->known.cl, (uint32_t)t->worker, t->b, t->a, t->modrev,
                                on_raise, h, t->id) < 0)
                        drive(h, &(const struct raise_in){
                                         .kind = RAISE_IN_ANSWER, .tag = t->id, .unsent = true});
                return;
        case RAISE_DO_WAIT:
                holder_timer_in(h, &h->raise_timer, (unsigned)t->a, on_raise_timer);
                return;
        case RAISE_DO_KEEP_IN:
                holder_timer_in(h, &h->raise_keep_timer, (unsigned)t->a, on_raise_keep_timer);
                return;
        case RAISE_DO_KEEPALIVE:
                store_keepalive(h->store, t->lease, on_raise_keepalive, h, t->id);
                return;
        case RAISE_DO_REVOKE:
                holder_give_up_lease(h, t->lease);
                return;
        case RAISE_DO_RAISED:
                renew_raised(h, t->a);
                return;
        case RAISE_DO_RESTORED:
                cluster_forgotten(h, FORGOT_MARK, t->worker, (int64_t)t->a, (int64_t)t->b,
                                  "raising its mark");
                return;
        case RAISE_DO_ENDED:
                holder_stop_check(h);
                return;
        case RAISE_DO_SAY:
                word(h, t);
                return;
        }
}

/* Steps the core with in, and does what it returns; an input made while
 * they are done (a raise not sent, a restore's protection) is stepped
 * after them, in order. */
static void drive(struct holder *h, const struct raise_in *in)
{
        if (h->raise_driving) {
                if (in->raised)
                        log_error("The store answered within its call; the answer is dropped");
                else if (h->raise_queued < RAISE_QUEUE_MAX)
                        h->raise_queue[h->raise_queued++] = *in;
                else
                        log_error("The marks' inputs overflow; one is dropped");
                return;
        }
        h->raise_driving = true;
        struct raise_in next = *in;
        for (;;) {
                const struct raise_view v = view(h);
                struct raise_ready out;
                raise_step(&h->raises, &v, &next, &out);
                for (unsigned i = 0; i < out.n; i++)
                        run(h, &out.a[i]);
                if (!h->raise_queued)
                        break;
                next = h->raise_queue[0];
                memmove(h->raise_queue, h->raise_queue + 1,
                        --h->raise_queued * sizeof(*h->raise_queue));
        }
        h->raise_driving = false;
}

/* A raise's answer goes through rule 1 first (cluster_ok()), unless the
 * cluster is halted as restored: the raise then goes on against the store
 * as it is. */
static void on_raise(void *userdata, const struct store_answer *r, const struct store_raised *rs)
{
        struct holder *h = userdata;
        if (!raise_expects(&h->raises, r->tag))
                return;
        bool restored = h->known.restored;
        /* a halt that cluster_ok() makes protects every mark (marks_protect()):
         * stepped after this answer, so that the raise this answer ends
         * does not swallow the protection's raise of the same number */
        h->raise_driving = true;
        bool current = restored || cluster_ok(h, r, rs->ok, rs->same);
        h->raise_driving = false;
        const struct raise_in in = {.kind = RAISE_IN_ANSWER,
                                    .tag = r->tag,
                                    .restored = restored,
                                    .not_current = !current,
                                    .halted = h->known.halted != HALT_NONE,
                                    .raised = rs};
        drive(h, &in);
}

static void on_raise_keepalive(void *userdata, const struct store_answer *r, int64_t lease,
                               int64_t ttl_s)
{
        struct holder *h = userdata;
        (void)lease;
        holder_note_answer(h, r);
        drive(h, &(const struct raise_in){.kind = RAISE_IN_KEPT, .tag = r->tag, .ttl_s = ttl_s});
}

void marks_init(struct holder *h)
{
        raise_init(&h->raises, h->cfg->lease_ttl_s);
}

void marks_retired(struct holder *h, int32_t worker, uint64_t mark)
{
        drive(h,
              &(const struct raise_in){.kind = RAISE_IN_RETIRED, .worker = worker, .mark = mark});
}

bool marks_handing_over(const struct holder *h, int32_t worker)
{
        return raise_handing_over(&h->raises, worker);
}

uint64_t marks_highest(const struct holder *h)
{
        return raise_highest(&h->raises, &h->hold.cur, holder_mono_ms());
}

void marks_fence_adopted(struct holder *h)
{
        h->stats.fences_adopted++;
        drive(h, &(const struct raise_in){.kind = RAISE_IN_FENCED});
}

void marks_protect(struct holder *h)
{
        drive(h, &(const struct raise_in){.kind = RAISE_IN_PROTECT});
}

void marks_raise(struct holder *h, int32_t worker, uint64_t mark, int64_t lease,
                 uint64_t for_holding, int64_t acked_rev)
{
        const struct raise_in in = {.kind = RAISE_IN_RAISE,
                                    .worker = worker,
                                    .mark = mark,
                                    .lease = lease,
                                    .for_holding = for_holding,
                                    .acked_rev = acked_rev};
        drive(h, &in);
}
