/* SPDX-License-Identifier: MIT */
/*
 * Renewing a held number: the driver of the pure core in
 * daemon/core/hold.c, which decides the keepalive, the guarded extension of
 * the mark, the lease check and the loss (docs/design.md rules 2, 4, 10
 * and 11).  Here each answer and the renewal timer become inputs, and each
 * action the core returns is done: a verb sent, the deadline published, the
 * number given up, an event worded in the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"
#include "renew.h"
#include "trace.h"

static const char *lost_why(enum hold_say why)
{
        switch (why) {
        case HOLD_SAY_WRITTEN_OVER:
                return "another holder's key is on it, under this daemon's live lease (written "
                       "over by hand)";
        case HOLD_SAY_EXPIRED:
                return "its lease expired";
        case HOLD_SAY_TAKEN:
                return "another holder has it, or its lease is gone";
        case HOLD_SAY_REVOKED_EARLY:
                return "its lease was revoked before its TTL ran out (by hand, or by the store); "
                       "its mark is as this daemon wrote it";
        case HOLD_SAY_CHECK_UNSENT:
                return "its lease is unknown and its mark could not be read";
        default:
                return "lost";
        }
}

/* The number lost, as the core decided: given up to its mark, which is
 * raised there, and another acquired. */
static void lost(struct holder *h, const char *why)
{
        const struct holding *g = &h->hold.cur;
        int64_t left = (int64_t)g->mark - (int64_t)holder_id_ms(h, false);
        if (left > 0)
                log_warning("Lost worker number %" PRId32 ": %s; IDs continue until the deadline, "
                            "%" PRId64 " ms from now",
                            g->worker, why, left);
        else
                log_warning("Lost worker number %" PRId32 ": %s; its deadline passed %" PRId64
                            " ms ago",
                            g->worker, why, -left);
        TRACE_STEP("dropped", g->worker);
        h->stats.leases_lost++;
        /* a lease gone with a restore (granted after the backup, or its
         * expiry restored with it) leaves the restore as the thing to say */
        bool halted = h->known.halted != HALT_NONE && h->known.halted != HALT_CHECKING;
        shm_pub_set_state(h->pub, halted ? holder_halted_state(h) : SHM_STATE_NO_LEASE);
        marks_retired(h, g->worker, g->mark);
        marks_raise(h, g->worker, g->mark, 0, 0, g->mark_rev);
        claim_start(h, false);
        holder_update_status(h);
}

static struct hold_view view(const struct holder *h)
{
        return (struct hold_view){
                .mono_ms = holder_mono_ms(),
                .boot_ms = holder_boot_ms(),
                .id_ms = holder_id_ms(h, false),
                .time_bits = h->known.layout.time_bits,
                .halted = h->known.halted != HALT_NONE,
                .restored = h->known.restored,
        };
}

static void drive(struct holder *h, const struct hold_in *in, const struct store_answer *r);

static void unsent(struct holder *h, enum hold_in_kind kind)
{
        const struct hold_in in = {.kind = kind, .tag = h->hold.cur.id, .unsent = true};
        drive(h, &in, NULL);
}

static void on_keepalive(void *userdata, const struct store_answer *r, int64_t id, int64_t ttl);
static void on_extend(void *userdata, const struct store_answer *r, const struct store_extended *e);
static void on_lease_check(void *userdata, const struct store_answer *r,
                           const struct store_read *rd);

static void run(struct holder *h, const struct hold_action *t, const struct store_answer *r)
{
        const struct holding *g = &h->hold.cur;
        switch (t->what) {
        case HOLD_DO_KEEPALIVE:
                if (store_keepalive(h->store, g->lease, on_keepalive, h, g->id) < 0)
                        unsent(h, HOLD_IN_KEPT);
                return;
        case HOLD_DO_EXTEND:
                if (store_extend(h->store, &h->known.cl, (uint32_t)g->worker, g->lease, g->value,
                                 g->pending, g->mark_rev, on_extend, h, g->id) < 0)
                        unsent(h, HOLD_IN_EXTENDED);
                return;
        case HOLD_DO_CHECK:
                if (store_read_number(h->store, &h->known.cl, (uint32_t)g->worker, g->value,
                                      on_lease_check, h, g->id) < 0)
                        unsent(h, HOLD_IN_CHECKED);
                return;
        case HOLD_DO_DEADLINE:
                h->stats.renewals++;
                TRACE_STEP("marked", g->worker, (int64_t)t->a);
                shm_pub_extend(h->pub, g->mark);
                TRACE_STEP("extend", g->worker, (int64_t)g->mark);
                if (h->store_full)
                        holder_store_full(h, false, NULL); /* a write went through */
                shm_pub_set_state(h->pub, SHM_STATE_LEASED);
                return;
        case HOLD_DO_LOST:
                lost(h, lost_why(t->say));
                return;
        case HOLD_DO_RAISE:
                marks_raise(h, g->worker, g->mark, 0, g->id, g->mark_rev);
                return;
        case HOLD_DO_RESTORED:
                cluster_forgotten(h, FORGOT_MARK, g->worker, (int64_t)t->a, (int64_t)t->b,
                                  t->say == HOLD_SAY_AT_EXTENSION ? "extending the mark"
                                                                  : "its lease unknown");
                return;
        case HOLD_DO_TAKEN_BACK:
                /* rule 5's restore, from what the lease check read:
                 * another holder's claim on the number, or its mark below
                 * the value acknowledged */
                cluster_forgotten(h, t->b ? FORGOT_CLAIM : FORGOT_LOW, g->worker, (int64_t)t->a,
                                  (int64_t)g->mark, NULL);
                return;
        case HOLD_DO_SAY:
                break;
        }
        switch (t->say) {
        case HOLD_SAY_KEEPALIVE_FAILED:
                h->stats.renewal_failures++;
                log_debug("Keepalive failed: %s", r && r->error ? r->error : "malformed answer");
                return;
        case HOLD_SAY_EXTEND_FAILED:
                h->stats.renewal_failures++;
                log_debug("Extending the mark failed: %s", r && r->error ? r->error : "no answer");
                return;
        case HOLD_SAY_MALFORMED:
                h->stats.renewal_failures++;
                log_warning("%s's answer to a mark extension is malformed", store_title(h->store));
                return;
        case HOLD_SAY_UNKNOWN_EARLY:
                log_warning("%s does not know the lease of worker %" PRId32 ", which it gave "
                            "%" PRIu64 " ms more to live and this daemon never revoked: "
                            "reading its mark to tell a restore from a lease revoked early",
                            store_name(h->store), g->worker, t->a);
                return;
        default:
                return;
        }
}

/* Steps the core with in, and does what it returns; an input made while
 * they are done (a verb not sent) is stepped after them. */
static void drive(struct holder *h, const struct hold_in *in, const struct store_answer *r)
{
        if (h->hold_driving) {
                if (in->extended || in->read || in->published)
                        log_error("The store answered within its call; the answer is dropped");
                else if (h->hold_queued < HOLD_QUEUE_MAX)
                        h->hold_queue[h->hold_queued++] = *in;
                else
                        log_error("The holding's inputs overflow; one is dropped");
                return;
        }
        h->hold_driving = true;
        struct hold_in next = *in;
        for (;;) {
                const struct hold_view v = view(h);
                struct hold_ready out;
                hold_step(&h->hold, &v, &next, &out);
                for (unsigned i = 0; i < out.n; i++)
                        run(h, &out.a[i], r);
                if (!h->hold_queued)
                        break;
                next = h->hold_queue[0];
                memmove(h->hold_queue, h->hold_queue + 1,
                        --h->hold_queued * sizeof(*h->hold_queue));
                r = NULL;
        }
        h->hold_driving = false;
}

static void on_keepalive(void *userdata, const struct store_answer *r, int64_t id, int64_t ttl)
{
        struct holder *h = userdata;
        (void)id;
        holder_note_answer(h, r);
        drive(h, &(const struct hold_in){.kind = HOLD_IN_KEPT, .tag = r->tag, .ttl_s = ttl}, r);
}

/* An extension's and a lease check's answers go through rule 1 first
 * (cluster_ok()), if they are the holding's. */
static void on_extend(void *userdata, const struct store_answer *r, const struct store_extended *e)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        if (!hold_expects(&h->hold, r->tag, HOLD_IN_EXTENDED))
                return;
        const struct hold_in in = {.kind = HOLD_IN_EXTENDED,
                                   .tag = r->tag,
                                   .not_current = !cluster_ok(h, r, e->ok, e->same),
                                   .extended = e};
        drive(h, &in, r);
}

static void on_lease_check(void *userdata, const struct store_answer *r,
                           const struct store_read *rd)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        if (!hold_expects(&h->hold, r->tag, HOLD_IN_CHECKED))
                return;
        /* a read: its fence is looked at unless it succeeded, as for a
         * transaction that compared it */
        const struct hold_in in = {
                .kind = HOLD_IN_CHECKED,
                .tag = r->tag,
                .not_current = !cluster_ok(h, r, rd->ok, rd->succeeded ? 1 : rd->same),
                .read = rd,
        };
        drive(h, &in, r);
}

void renew_send(struct holder *h)
{
        drive(h, &(const struct hold_in){.kind = HOLD_IN_TICK}, NULL);
}

void renew_published(struct holder *h, const struct holding *g)
{
        drive(h, &(const struct hold_in){.kind = HOLD_IN_PUBLISHED, .published = g}, NULL);
}

void renew_raised(struct holder *h, uint64_t holding)
{
        drive(h, &(const struct hold_in){.kind = HOLD_IN_RAISED, .holding = holding}, NULL);
}

void renew_fenced(struct holder *h)
{
        drive(h, &(const struct hold_in){.kind = HOLD_IN_FENCED}, NULL);
}

void renew_stop(struct holder *h)
{
        drive(h, &(const struct hold_in){.kind = HOLD_IN_STOP}, NULL);
}

void renew_init(struct holder *h)
{
        const struct hold_settings set = {
                .lease_ttl_s = h->cfg->lease_ttl_s,
                .window_s = h->cfg->window_s,
                .mark_step_s = h->cfg->mark_step_s,
        };
        hold_init(&h->hold, &set);
}

int renew_on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        renew_send(h);
        if (h->store_full)
                holder_check_alarms(h); /* disarmed yet? */
        /* a backstop: nothing held and nothing under way is never a state
         * to stay in */
        if (h->hold.cur.state != H_HELD && acq_idle(&h->acq))
                claim_start(h, false);
        holder_update_status(h);
        sd_event_source_set_time(s, usec + (uint64_t)h->cfg->renew_ms * 1000);
        return 0;
}
