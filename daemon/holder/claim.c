/* SPDX-License-Identifier: MIT */
/*
 * Acquiring a worker number: grant a lease, scan workers/ and hwm/, claim
 * one number under that lease (one attempt per lease), and settle a claim
 * whose answer never came (docs/design.md rules 3, 8 and 9; docs/fences.md
 * rules 1 and 3).
 *
 * The scan first reads a sample of SCAN_SAMPLE numbers at random (their
 * workers/ keys and marks: a constant cost, however many hosts hold
 * numbers); only when none of them is free with its mark behind the clock
 * does it read every number of the range.  A claim's transaction compares
 * exactly what its scan read of the number it claims, so which numbers the
 * scan read changes nothing of its safety.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "choose.h"
#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"
#include "trace.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 1000
#define FULL_RETRY_MAX_MS 30000
#define FRESH_THROTTLE_MS 10000

static void step_grant(struct holder *h);

/* ---- retries ---- */

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        if (h->next.state == H_GRANT)
                step_grant(h);
        return 0;
}

static void retry_in(struct holder *h, unsigned ms)
{
        holder_timer_in(h, &h->retry_timer, ms, on_retry);
}

static unsigned full_retry_max(const struct holder *h)
{
        unsigned half_ttl = h->cfg->lease_ttl_s * 500;
        return half_ttl < FULL_RETRY_MAX_MS ? half_ttl : FULL_RETRY_MAX_MS;
}

unsigned claim_next_backoff(struct holder *h, unsigned max)
{
        unsigned ms = h->backoff_ms ? h->backoff_ms : RETRY_MIN_MS;
        h->backoff_ms = ms * 2 > max ? max : ms * 2;
        /* jitter, so that many daemons do not retry in step */
        return ms / 2 + (unsigned)(random() % (ms / 2 + 1));
}

/* The wait after a failed request: an answer that never came, or a store
 * too busy to serve (5xx), backs off up to half a lease TTL, so that a
 * fleet starting at once does not keep an overloaded store overloaded with
 * retries; any other failure retries within a second. */
unsigned claim_failure_backoff(struct holder *h, const struct store_answer *r)
{
        bool overloaded = !r->answered || r->status >= 500;
        return claim_next_backoff(h, overloaded ? full_retry_max(h) : RETRY_MAX_MS);
}

/* This holding's attempt is over: abandon its lease, start again. */
void claim_restart(struct holder *h, unsigned delay_ms)
{
        bool fresh = h->next.fresh;
        holder_give_up_lease(h, h->next.lease);
        h->next = (struct holding){.state = H_GRANT, .id = ++h->ids, .fresh = fresh, .worker = -1};
        retry_in(h, delay_ms);
}

static void scan(struct holder *h, bool full);

static void on_grant(void *userdata, const struct store_answer *r, int64_t id, int64_t ttl)
{
        struct holder *h = userdata;
        struct holding *g = holder_by_tag(h, r->tag);
        holder_note_answer(h, r);
        if (!g || g != &h->next || g->state != H_GRANT) {
                holder_give_up_lease(h, id); /* granted for nobody */
                return;
        }
        if (id == 0 || ttl <= 0) {
                if (r->err == STORE_ERR_NONE) /* a refusal is said once, by refusal.c */
                        log_warning("Cannot get a lease from %s: %s", store_endpoint(h->store),
                                    r->error ? r->error : "malformed answer");
                retry_in(h, claim_failure_backoff(h, r));
                return;
        }
        g->lease = id;
        holder_lease_lives(g, ttl);
        g->state = H_SCAN;
        scan(h, false);
}

static void step_grant(struct holder *h)
{
        struct holding *g = &h->next;
        g->state = H_GRANT;
        g->lease_asked_ms = holder_boot_ms();
        if (store_grant(h->store, h->cfg->lease_ttl_s, on_grant, h, g->id) < 0)
                retry_in(h, claim_next_backoff(h, RETRY_MAX_MS));
}

static void step_claim(struct holder *h, uint32_t worker, uint64_t hwm, int64_t modrev,
                       uint64_t floor);

/* random()'s draw in [0, n) */
static uint64_t draw(void *state, uint64_t n)
{
        (void)state;
        return (uint64_t)random() % n;
}

static void on_scan(void *userdata, const struct store_answer *r, const struct store_scan *sc)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_SCAN);
        if (!g || !cluster_ok(h, r, true, 1))
                return;
        bool sampled = g->sampled > 0;
        unsigned k = sampled ? g->sampled : 1;
        if (sc->same == 0 || sc->floor_read == 0) {
                log_notice("The cluster's fence, layout or floor changed; reading them");
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
                return;
        }
        if (!sc->ok || !sc->succeeded || sc->same < 0 || sc->floor_read < 0) {
                if (r->err == STORE_ERR_NONE)
                        log_warning("Cannot read the worker numbers: %s",
                                    r->error ? r->error : "malformed answer");
                claim_restart(h, claim_failure_backoff(h, r));
                return;
        }
        uint64_t workers = UINT64_C(1) << h->layout.worker_bits;
        if (!sc->numbers || sc->workers != workers) {
                claim_restart(h, claim_next_backoff(h, RETRY_MAX_MS));
                return;
        }
        uint64_t first = h->range_from, last = h->range_to;
        for (uint64_t n = first; n <= last; n++)
                if (sc->numbers[n].marked && !sc->numbers[n].mark_valid)
                        log_warning("The mark of worker %" PRIu64 " is not 20 digits of an ID "
                                    "time this layout holds; skipping the number",
                                    n);
        int32_t pref = h->prefer;
        h->prefer = -1;
        const struct choose_in in = {
                .numbers = sc->numbers,
                .first = first,
                .last = last,
                .floor = sc->floor,
                .now = holder_id_ms(h, g->fresh),
                .claims_above = h->cl.claims_above,
                .prefer = pref,
                .prefer_handing_over = pref >= 0 && marks_handing_over(h, pref),
                .fresh = g->fresh,
                .sampled = sampled,
                .draw = draw,
        };
        const struct choice c = claim_choose(&in);
        switch (c.kind) {
        case CHOOSE_WAIT:
                /* still held by this host's own old lease, its mark not yet
                 * confirmed: look again shortly rather than search */
                h->prefer = pref;
                claim_restart(h, 100 + (unsigned)(random() % 100));
                return;
        case CHOOSE_SCAN_ALL:
                /* nothing free and behind the clock in the sample: look at
                 * every number before claiming ahead or waiting */
                log_debug("No free number behind the clock among %u sampled; reading all", k);
                scan(h, true);
                return;
        case CHOOSE_NONE_FRESH:
                log_warning("No free worker number has its mark behind the wall clock; ID time "
                            "stays ahead of it and is brought back gradually");
                h->fresh_not_before_ms = holder_mono_ms() + FRESH_THROTTLE_MS;
                holder_give_up_lease(h, g->lease);
                h->next = (struct holding){.state = H_NONE, .worker = -1};
                return;
        case CHOOSE_ALL_TAKEN:
                /* said once while it lasts: a host beyond the space waits */
                if (!h->said_full)
                        log_warning("All %" PRIu64 " worker numbers are taken (range %" PRIu64
                                    "-%" PRIu64 "); looking again every renewal interval",
                                    last - first + 1, first, last);
                h->said_full = true;
                /* a number frees when its holder stops or its lease expires:
                 * look again each renewal interval (jittered), so that it is
                 * claimed within one of coming free */
                claim_restart(h, h->cfg->renew_ms / 2 +
                                         (unsigned)random() % (h->cfg->renew_ms / 2 + 1));
                return;
        case CHOOSE_CLAIM:
                break;
        }
        if (c.ahead)
                log_notice("Every free worker number's mark is ahead of the clock; taking %" PRIu32
                           ", %" PRIu64 " ms ahead",
                           c.worker, c.mark - in.now);
        step_claim(h, c.worker, c.mark, sc->numbers[c.worker].mark_rev, sc->floor);
}

/* full: every number of the range; else a fresh sample of distinct numbers */
static void scan(struct holder *h, bool full)
{
        struct holding *g = &h->next;
        uint64_t span = h->range_to - h->range_from + 1;
        g->sampled = 0;
        if (!full && span > 4 * SCAN_SAMPLE) {
                if (h->prefer >= (int64_t)h->range_from && h->prefer <= (int64_t)h->range_to)
                        g->sample[g->sampled++] = (uint32_t)h->prefer;
                while (g->sampled < SCAN_SAMPLE) {
                        uint32_t n = (uint32_t)(h->range_from + (uint64_t)random() % span);
                        bool dup = false;
                        for (unsigned i = 0; i < g->sampled; i++)
                                dup |= g->sample[i] == n;
                        if (!dup)
                                g->sample[g->sampled++] = n;
                }
        }
        if (store_scan(h->store, &h->cl, UINT64_C(1) << h->layout.worker_bits,
                       g->sampled ? g->sample : NULL, g->sampled, h->layout.time_bits, on_scan, h,
                       g->id) < 0)
                claim_restart(h, claim_next_backoff(h, RETRY_MAX_MS));
}

static void step_settle(struct holder *h);

static void claimed(struct holder *h)
{
        struct holding *g = &h->next;
        if (h->said_full)
                log_notice("A worker number came free");
        h->said_full = false;
        log_info("Claimed worker number %" PRId32 " (lease %" PRIx64 ", mark %" PRIu64 ")",
                 g->worker, (uint64_t)g->lease, g->mark);
        g->state = H_HELD;
        h->backoff_ms = 0;
        TRACE_STEP("claimed", g->worker, (int64_t)g->start_ms, (int64_t)g->mark);
        holder_publish(h);
}

static void on_claim(void *userdata, const struct store_answer *r, const struct store_claimed *c)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_CLAIM);
        if (!g || !cluster_ok(h, r, c->ok, c->same))
                return;
        if (c->no_answer) {
                /* the answer never came: the claim may or may not be applied */
                log_warning("The claim of worker %" PRId32 " got no answer (%s); reading back",
                            g->worker, r->error);
                g->state = H_SETTLE;
                step_settle(h);
                return;
        }
        if (c->succeeded) {
                g->mark_rev = c->revision; /* the put's mod revision is the txn's */
                claimed(h);
                return;
        }
        /* the mark of the number held when the claim was sent, whose last
         * write by this daemon it compared */
        if (c->ok && g->own_worker >= 0 && c->own_read) {
                int64_t modrev = c->own.mark_rev;
                uint64_t m = c->own.mark;
                bool low = !c->own.marked || !c->own.mark_valid;
                if (holder_forgotten(h, g->own_worker, g->own_rev, modrev,
                                     "claiming another number"))
                        return;
                /* deleted or lowered since (by hand): raised back, or every
                 * claim would fail on it */
                if ((low || m < h->cur.mark) && h->cur.state != H_NONE &&
                    h->cur.worker == g->own_worker) {
                        marks_raise(h, h->cur.worker, h->cur.mark, 0, 0, 0);
                        claim_restart(h, claim_next_backoff(h, RETRY_MAX_MS));
                        return;
                }
        }
        /* taken by another daemon, the mark moved, or the lease died */
        log_debug("Worker %" PRId32 " could not be claimed (%s)", g->worker,
                  r->status == 200 ? "taken" : r->error);
        claim_restart(h, 10 + (unsigned)(random() % 50));
}

/* hwm is the mark read at mod revision modrev (0: no mark), floor the floor
 * read with it */
static void step_claim(struct holder *h, uint32_t worker, uint64_t hwm, int64_t modrev,
                       uint64_t floor)
{
        struct holding *g = &h->next;
        g->worker = (int32_t)worker;
        /* above the mark (or the floor), above what a fence set, above what
         * this daemon itself published for the number (which a restore may
         * have lost) */
        const struct rule3_claim claim = {
                .now = holder_id_ms(h, g->fresh),
                .marked = modrev != 0,
                .mark = hwm,
                .floor = floor,
                .claims_above = h->cl.claims_above,
                .own_last = marks_own(h, (int32_t)worker),
        };
        g->start_ms = rule3_claim_start(&claim);
        TRACE_STEP("claiming", g->worker, (int64_t)g->start_ms);
        g->mark = g->start_ms + (uint64_t)(h->cfg->window_s + h->cfg->mark_step_s) * 1000;
        g->hwm_modrev = modrev;
        g->state = H_CLAIM;
        snprintf(g->value, sizeof(g->value),
                 "{\"host\":\"%s\",\"instance\":\"%s\",\"pid\":%d,\"token\":\"%s-%" PRIu64 "\"}",
                 h->host, h->cfg->instance, (int)getpid(), h->token, g->id);
        if (g->mark >> h->layout.time_bits) {
                log_error("ID time %" PRIu64 " ms has run past the layout's %u time bits", g->mark,
                          h->layout.time_bits);
                holder_fatal(h, EX_CONFIG_);
                return;
        }
        g->own_worker = -1;
        if (h->cur.state != H_NONE && h->cur.mark_rev) {
                g->own_worker = h->cur.worker;
                g->own_rev = h->cur.mark_rev;
        }
        const struct store_claim_req req = {
                .cl = &h->cl,
                .worker = worker,
                .lease = g->lease,
                .value = g->value,
                .start = g->start_ms,
                .mark = g->mark,
                .modrev = modrev,
                .own_worker = g->own_worker,
                .own_rev = g->own_worker >= 0 ? g->own_rev : 0,
        };
        if (store_claim(h->store, &req, on_claim, h, g->id) < 0) {
                g->state = H_SETTLE;
                step_settle(h);
        }
}

static void on_settle_retry_timer(struct holder *h);

static void on_settle(void *userdata, const struct store_answer *r, const struct store_read *rd)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_SETTLE);
        if (!g || !cluster_ok(h, r, true, 1))
                return;
        if (rd->same == 0) {
                /* the claim compared the fence it knew: it was not applied */
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
                return;
        }
        bool ours = holder_ours(g, &rd->n);
        uint64_t stored = rd->n.mark;
        int64_t modrev = rd->n.mark_rev;
        if (!rd->ok || rd->same < 0 || holder_read_malformed(&rd->n)) {
                /* keep asking: the lease may expire meanwhile, which settles it too */
                on_settle_retry_timer(h);
                return;
        }
        if (ours && stored == g->mark) {
                log_info("The claim of worker %" PRId32 " was applied", g->worker);
                g->mark_rev = modrev;
                claimed(h);
                return;
        }
        log_info("The claim of worker %" PRId32 " was not applied; claiming again under a new "
                 "lease",
                 g->worker);
        claim_restart(h, 10);
}

static void step_settle(struct holder *h)
{
        struct holding *g = &h->next;
        if (store_read_number(h->store, &h->cl, (uint32_t)g->worker, g->value, on_settle, h,
                              g->id) < 0)
                on_settle_retry_timer(h);
}

static int on_settle_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        if (h->next.state == H_SETTLE)
                step_settle(h);
        return 0;
}

static void on_settle_retry_timer(struct holder *h)
{
        holder_timer_in(h, &h->settle_timer, claim_next_backoff(h, RETRY_MAX_MS), on_settle_timer);
}

void claim_start(struct holder *h, bool fresh)
{
        if (h->next.state != H_NONE || h->stopping || h->halted != HALT_NONE || !h->layout_ready)
                return;
        h->next = (struct holding){.state = H_GRANT, .id = ++h->ids, .fresh = fresh, .worker = -1};
        uint64_t now = holder_mono_ms();
        if (now < h->claims_not_before_ms) {
                retry_in(h, (unsigned)(h->claims_not_before_ms - now));
                return;
        }
        step_grant(h);
}
