/* SPDX-License-Identifier: MIT */
/*
 * Acquiring a worker number: the driver of the pure core in
 * daemon/core/acquire.c, which decides every step (grant, scan, claim,
 * settle; docs/design.md rules 3, 8 and 9; docs/fences.md rules 1 and 3).
 * Here each store answer and timer becomes an input, and each action the
 * core returns is done: a verb sent, a timer armed, a lease revoked, the
 * number published, an event worded in the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"
#include "trace.h"

/* ---- the driver ---- */

static struct acq_view view(const struct holder *h)
{
        int32_t pref = acq_prefer(&h->acq);
        return (struct acq_view){
                .mono_ms = holder_mono_ms(),
                .boot_ms = holder_boot_ms(),
                .id_ms = holder_id_ms(h, false),
                .wall_id_ms = holder_id_ms(h, true),
                .layout_ready = h->known.layout_ready,
                .halted = h->known.halted != HALT_NONE,
                .stopping = h->stopping,
                .range_from = h->range_from,
                .range_to = h->range_to,
                .worker_bits = h->known.layout.worker_bits,
                .time_bits = h->known.layout.time_bits,
                .claims_above = h->known.cl.claims_above,
                .claims_not_before_ms = h->claims_not_before_ms,
                .prefer_handing_over = pref >= 0 && marks_handing_over(h, pref),
                .cur = &h->hold.cur,
                .published = h->raises.published,
                .n_published = h->raises.n_published,
        };
}

static struct acq_answer answer(const struct store_answer *r)
{
        return (struct acq_answer){
                .tag = r->tag,
                .answered = r->answered,
                .status = r->status,
                .refused = r->err != STORE_ERR_NONE,
        };
}

static void drive(struct holder *h, const struct acq_in *in, const struct store_answer *r);

/* A verb that could not be sent: its answer, at once. */
static void unsent(struct holder *h, enum acq_in_kind kind)
{
        const struct acq_in in = {.kind = kind,
                                  .r = {.tag = acq_holding(&h->acq)->id, .unsent = true}};
        drive(h, &in, NULL);
}

static const char *why(const struct store_answer *r)
{
        return r && r->error ? r->error : "malformed answer";
}

/* The core's events, in words. */
static void word(struct holder *h, const struct acq_action *t, const struct acq_in *in,
                 const struct store_answer *r)
{
        switch (t->say) {
        case ACQ_SAY_GRANT_FAILED:
                log_warning("Cannot get a lease from %s: %s", store_endpoint(h->store), why(r));
                return;
        case ACQ_SAY_SCAN_FAILED:
                log_warning("Cannot read the worker numbers: %s", why(r));
                return;
        case ACQ_SAY_FENCE_CHANGED:
                log_notice("The cluster's fence, layout or floor changed; reading them");
                return;
        case ACQ_SAY_MARKS_INVALID:
                for (uint64_t n = t->a; in->scan && n <= t->b; n++)
                        if (in->scan->numbers[n].marked && !in->scan->numbers[n].mark_valid)
                                log_warning("The mark of worker %" PRIu64 " is not 20 digits of an "
                                            "ID time this layout holds; skipping the number",
                                            n);
                return;
        case ACQ_SAY_SCAN_ALL:
                log_debug("No free number behind the clock among %" PRIu64 " sampled; reading all",
                          t->a);
                return;
        case ACQ_SAY_NONE_FRESH:
                log_warning("No free worker number has its mark behind the wall clock; ID time "
                            "stays ahead of it and is brought back gradually");
                return;
        case ACQ_SAY_ALL_TAKEN:
                log_warning("All %" PRIu64 " worker numbers are taken (range %" PRIu64 "-%" PRIu64
                            "); looking again every renewal interval",
                            t->b - t->a + 1, t->a, t->b);
                return;
        case ACQ_SAY_AHEAD:
                log_notice("Every free worker number's mark is ahead of the clock; taking %" PRId32
                           ", %" PRIu64 " ms ahead",
                           t->worker, t->a);
                return;
        case ACQ_SAY_CAME_FREE:
                log_notice("A worker number came free");
                return;
        case ACQ_SAY_CLAIMED:
                log_info("Claimed worker number %" PRId32 " (lease %" PRIx64 ", mark %" PRIu64 ")",
                         t->worker, t->a, t->b);
                return;
        case ACQ_SAY_NO_ANSWER:
                log_warning("The claim of worker %" PRId32 " got no answer (%s); reading back",
                            t->worker, why(r));
                return;
        case ACQ_SAY_NOT_CLAIMED:
                log_debug("Worker %" PRId32 " could not be claimed (%s)", t->worker,
                          r && r->status == 200 ? "taken" : why(r));
                return;
        case ACQ_SAY_APPLIED:
                log_info("The claim of worker %" PRId32 " was applied", t->worker);
                return;
        case ACQ_SAY_NOT_APPLIED:
                log_info("The claim of worker %" PRId32 " was not applied; claiming again under "
                         "a new lease",
                         t->worker);
                return;
        }
}

static void on_grant(void *userdata, const struct store_answer *r, int64_t lease, int64_t ttl);
static void on_scan(void *userdata, const struct store_answer *r, const struct store_scan *sc);
static void on_claim(void *userdata, const struct store_answer *r, const struct store_claimed *c);
static void on_settle(void *userdata, const struct store_answer *r, const struct store_read *rd);
static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void claim_send(struct holder *h, const struct holding *g)
{
        TRACE_STEP("claiming", g->worker, (int64_t)g->start_ms);
        const struct store_claim_req req = {
                .cl = &h->known.cl,
                .worker = (uint32_t)g->worker,
                .lease = g->lease,
                .value = g->value,
                .start = g->start_ms,
                .mark = g->mark,
                .modrev = g->hwm_modrev,
                .own_worker = g->own_worker,
                .own_rev = g->own_rev,
        };
        if (store_claim(h->store, &req, on_claim, h, g->id) < 0)
                unsent(h, ACQ_IN_CLAIMED);
}

/* Does one action; false: the holder is done, nothing more is done. */
static bool run(struct holder *h, const struct acq_action *t, const struct acq_in *in,
                const struct store_answer *r)
{
        const struct holding *g = acq_holding(&h->acq);
        switch (t->what) {
        case ACQ_DO_GRANT:
                if (store_grant(h->store, h->cfg->lease_ttl_s, on_grant, h, g->id) < 0)
                        unsent(h, ACQ_IN_GRANTED);
                break;
        case ACQ_DO_SCAN:
                if (store_scan(h->store, &h->known.cl, UINT64_C(1) << h->known.layout.worker_bits,
                               g->sampled ? g->sample : NULL, g->sampled, h->known.layout.time_bits,
                               on_scan, h, g->id) < 0)
                        unsent(h, ACQ_IN_SCANNED);
                break;
        case ACQ_DO_CLAIM:
                claim_send(h, g);
                break;
        case ACQ_DO_READ:
                if (store_read_number(h->store, &h->known.cl, (uint32_t)g->worker, g->value,
                                      on_settle, h, g->id) < 0)
                        unsent(h, ACQ_IN_READ);
                break;
        case ACQ_DO_WAIT:
                holder_timer_in(h, &h->retry_timer, t->ms, on_timer);
                break;
        case ACQ_DO_REVOKE:
                holder_give_up_lease(h, t->lease);
                break;
        case ACQ_DO_PUBLISH:
                TRACE_STEP("claimed", g->worker, (int64_t)g->start_ms, (int64_t)g->mark);
                holder_publish(h);
                break;
        case ACQ_DO_CHECK_CLUSTER:
                cluster_check(h);
                break;
        case ACQ_DO_RESTORED:
                cluster_forgotten(h, FORGOT_MARK, t->worker, (int64_t)t->a, (int64_t)t->b,
                                  "claiming another number");
                break;
        case ACQ_DO_RAISE:
                marks_raise(h, t->worker, t->a, 0, 0, 0);
                break;
        case ACQ_DO_FRESH_LATER:
                h->fresh_not_before_ms = t->a;
                break;
        case ACQ_DO_FATAL:
                log_error("ID time %" PRIu64 " ms has run past the layout's %u time bits", t->a,
                          h->known.layout.time_bits);
                holder_fatal(h, EX_CONFIG_);
                return false;
        case ACQ_DO_SAY:
                word(h, t, in, r);
                break;
        }
        return true;
}

/* Steps the core with in, and does what it returns.  An input made while
 * its actions are done (a verb not sent, the publication's outcome, a
 * halt) is stepped after them, in order. */
static void drive(struct holder *h, const struct acq_in *in, const struct store_answer *r)
{
        if (h->acq_driving) {
                /* no backend answers within its call: an answer's result
                 * lives only as long as its callback, so it cannot wait */
                if (in->scan || in->claimed || in->read)
                        log_error("The store answered within its call; the answer is dropped");
                else if (h->acq_queued < ACQ_QUEUE_MAX)
                        h->acq_queue[h->acq_queued++] = *in;
                else
                        log_error("The acquisition's inputs overflow; one is dropped");
                return;
        }
        h->acq_driving = true;
        struct acq_in next = *in;
        for (;;) {
                const struct acq_view v = view(h);
                struct acq_ready out;
                acq_step(&h->acq, &v, &next, &out);
                for (unsigned i = 0; i < out.n; i++)
                        if (!run(h, &out.a[i], &next, r)) {
                                h->acq_driving = false;
                                h->acq_queued = 0;
                                return;
                        }
                if (!h->acq_queued)
                        break;
                next = h->acq_queue[0];
                memmove(h->acq_queue, h->acq_queue + 1, --h->acq_queued * sizeof(*h->acq_queue));
                r = NULL;
        }
        h->acq_driving = false;
}

static void on_grant(void *userdata, const struct store_answer *r, int64_t lease, int64_t ttl)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        const struct acq_in in = {
                .kind = ACQ_IN_GRANTED, .r = answer(r), .lease = lease, .ttl_s = ttl};
        drive(h, &in, r);
}

/* The answers after a grant go through rule 1 first (cluster_ok()): one
 * naming another fence or layout, or seen restored, halts. */
static void on_scan(void *userdata, const struct store_answer *r, const struct store_scan *sc)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        if (!acq_expects(&h->acq, r->tag, ACQ_IN_SCANNED) || !cluster_ok(h, r, true, 1))
                return;
        const struct acq_in in = {.kind = ACQ_IN_SCANNED, .r = answer(r), .scan = sc};
        drive(h, &in, r);
}

static void on_claim(void *userdata, const struct store_answer *r, const struct store_claimed *c)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        if (!acq_expects(&h->acq, r->tag, ACQ_IN_CLAIMED))
                return;
        /* a halt (another fence, a restore) drops the acquisition first */
        struct acq_in in = {.kind = ACQ_IN_CLAIMED, .r = answer(r), .claimed = c};
        in.r.not_current = !cluster_ok(h, r, c->ok, c->same);
        drive(h, &in, r);
}

static void on_settle(void *userdata, const struct store_answer *r, const struct store_read *rd)
{
        struct holder *h = userdata;
        holder_note_answer(h, r);
        if (!acq_expects(&h->acq, r->tag, ACQ_IN_READ) || !cluster_ok(h, r, true, 1))
                return;
        const struct acq_in in = {.kind = ACQ_IN_READ, .r = answer(r), .read = rd};
        drive(h, &in, r);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        (void)s;
        (void)usec;
        drive(userdata, &(const struct acq_in){.kind = ACQ_IN_TIMER}, NULL);
        return 0;
}

void claim_start(struct holder *h, bool fresh)
{
        drive(h, &(const struct acq_in){.kind = ACQ_IN_START, .fresh = fresh}, NULL);
}

void claim_prefer(struct holder *h, int32_t worker)
{
        drive(h, &(const struct acq_in){.kind = ACQ_IN_PREFER, .worker = worker}, NULL);
}

void claim_drop(struct holder *h)
{
        drive(h, &(const struct acq_in){.kind = ACQ_IN_DROP}, NULL);
}

void claim_published(struct holder *h, bool published)
{
        const struct acq_in in = {.kind = published ? ACQ_IN_PUBLISHED : ACQ_IN_UNPUBLISHED};
        drive(h, &in, NULL);
}

void claim_init(struct holder *h)
{
        uint64_t seed = ((uint64_t)random() << 32) ^ (uint64_t)random();
        const struct acq_settings set = {
                .lease_ttl_s = h->cfg->lease_ttl_s,
                .renew_ms = h->cfg->renew_ms,
                .window_s = h->cfg->window_s,
                .mark_step_s = h->cfg->mark_step_s,
                .host = h->host,
                .instance = h->cfg->instance,
                .token = h->token,
                .pid = (int)getpid(),
                .seed = seed | 1,
        };
        acq_init(&h->acq, &set);
}
