/* SPDX-License-Identifier: MIT */
/*
 * Acquiring a worker number, as a pure core (acquire.h).
 *
 * The scan first reads a sample of SCAN_SAMPLE numbers at random (their
 * workers/ keys and marks: a constant cost, however many hosts hold
 * numbers); only when none of them is free with its mark behind the clock
 * does it read every number of the range.  A claim's transaction compares
 * exactly what its scan read of the number it claims, so which numbers the
 * scan read changes nothing of its safety.
 */
#include <inttypes.h>
#include <stdio.h>

#include "acquire.h"
#include "choose.h"
#include "rules.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 1000
#define FULL_RETRY_MAX_MS 30000
#define FRESH_THROTTLE_MS 10000
/* claims one lease may carry, each after the last was refused outright */
#define CLAIMS_PER_LEASE 4

/* ---- draws (core_draw(): xorshift64*, seeded once) ---- */

uint64_t core_draw(uint64_t *rng)
{
        *rng ^= *rng >> 12;
        *rng ^= *rng << 25;
        *rng ^= *rng >> 27;
        return *rng * UINT64_C(2685821657736338717);
}

static uint64_t draw(struct acquire *a)
{
        return core_draw(&a->rng);
}

static uint64_t draw_below(void *state, uint64_t n)
{
        return draw(state) % n;
}

unsigned acq_backoff(unsigned *backoff_ms, unsigned max_ms, uint64_t d)
{
        unsigned ms = *backoff_ms ? *backoff_ms : RETRY_MIN_MS;
        ms = ms < max_ms ? ms : max_ms; /* a lower cap than the last applies at once */
        *backoff_ms = ms * 2 > max_ms ? max_ms : ms * 2;
        return ms / 2 + (unsigned)(d % (ms / 2 + 1));
}

unsigned acq_failure_max_ms(unsigned lease_ttl_s, bool answered, long status)
{
        if (answered && status < 500)
                return RETRY_MAX_MS;
        unsigned half_ttl = lease_ttl_s * 500;
        return half_ttl < FULL_RETRY_MAX_MS ? half_ttl : FULL_RETRY_MAX_MS;
}

uint64_t acq_own_last(const struct published *p, unsigned n, const struct holding *cur,
                      int32_t worker)
{
        uint64_t m = 0;
        n = n < PUBLISHED_MAX ? n : PUBLISHED_MAX;
        for (unsigned i = 0; i < n; i++)
                if (p[i].worker == worker && p[i].mark > m)
                        m = p[i].mark;
        if (cur && cur->state != H_NONE && cur->worker == worker && cur->mark > m)
                m = cur->mark;
        return m;
}

/* ---- the actions ---- */

static struct acq_action *act(struct acq_ready *out, enum acq_do what)
{
        /* every step emits at most ACQ_ACTIONS_MAX: a full list is a bug of
         * this file, kept from overflowing */
        unsigned i = out->n < ACQ_ACTIONS_MAX ? out->n++ : ACQ_ACTIONS_MAX - 1;
        out->a[i] = (struct acq_action){.what = what};
        return &out->a[i];
}

static void say(struct acq_ready *out, enum acq_say s, int32_t worker, uint64_t x, uint64_t y)
{
        struct acq_action *t = act(out, ACQ_DO_SAY);
        t->say = s;
        t->worker = worker;
        t->a = x;
        t->b = y;
}

static void wait_ms(struct acq_ready *out, unsigned ms)
{
        act(out, ACQ_DO_WAIT)->ms = ms;
}

static void revoke(struct acq_ready *out, int64_t lease)
{
        if (lease)
                act(out, ACQ_DO_REVOKE)->lease = lease;
}

static unsigned next_backoff(struct acquire *a, unsigned max_ms)
{
        return acq_backoff(&a->backoff_ms, max_ms, draw(a));
}

static unsigned failure_backoff(struct acquire *a, const struct acq_answer *r)
{
        return next_backoff(a, acq_failure_max_ms(a->set.lease_ttl_s, r->answered, r->status));
}

/* A new holding (its lease asked for after a wait), fresh as the last. */
static void begin(struct acquire *a, bool fresh)
{
        a->g = (struct holding){.id = ++a->ids, .fresh = fresh, .worker = -1};
}

/* Nothing acquired any more; the holding's lease given up. */
static void give_up(struct acquire *a, struct acq_ready *out)
{
        revoke(out, a->g.lease);
        a->g = (struct holding){.worker = -1};
        a->state = ACQ_IDLE;
}

/* This holding's attempt is over: its lease given up, a new one after delay. */
static void restart(struct acquire *a, struct acq_ready *out, unsigned delay_ms)
{
        revoke(out, a->g.lease);
        begin(a, a->g.fresh);
        a->state = ACQ_WAIT;
        wait_ms(out, delay_ms);
}

static void grant(struct acquire *a, const struct acq_view *v, struct acq_ready *out)
{
        a->state = ACQ_GRANT;
        a->lease_claims = 0;
        a->g.lease_asked_ms = v->boot_ms;
        act(out, ACQ_DO_GRANT);
}

/* full: every number of the range; else a fresh sample of distinct numbers */
static void scan(struct acquire *a, const struct acq_view *v, struct acq_ready *out, bool full)
{
        struct holding *g = &a->g;
        uint64_t span = (uint64_t)v->range_to - v->range_from + 1;
        a->state = ACQ_SCAN;
        g->sampled = 0;
        if (!full && span > 4 * SCAN_SAMPLE) {
                if (a->prefer >= (int64_t)v->range_from && a->prefer <= (int64_t)v->range_to)
                        g->sample[g->sampled++] = (uint32_t)a->prefer;
                while (g->sampled < SCAN_SAMPLE) {
                        uint32_t n = (uint32_t)(v->range_from + draw(a) % span);
                        bool dup = false;
                        for (unsigned i = 0; i < g->sampled; i++)
                                dup |= g->sample[i] == n;
                        if (!dup)
                                g->sample[g->sampled++] = n;
                }
        }
        act(out, ACQ_DO_SCAN);
}

/* The read-back of a claim whose answer never came. */
static void settle(struct acquire *a, struct acq_ready *out)
{
        a->state = ACQ_SETTLE;
        act(out, ACQ_DO_READ);
}

static void settle_later(struct acquire *a, struct acq_ready *out)
{
        a->state = ACQ_SETTLE_WAIT;
        wait_ms(out, next_backoff(a, RETRY_MAX_MS));
}

/* Rule 1: an answer naming another fence, layout or floor: the cluster is
 * read again, and nothing claimed under this holding. */
static void check_cluster(struct acquire *a, struct acq_ready *out)
{
        act(out, ACQ_DO_CHECK_CLUSTER);
        give_up(a, out);
}

/* hwm is the mark read at mod revision modrev (0: no mark), floor the floor
 * read with it */
static void claim(struct acquire *a, const struct acq_view *v, struct acq_ready *out,
                  uint32_t worker, uint64_t hwm, int64_t modrev, uint64_t floor)
{
        struct holding *g = &a->g;
        g->worker = (int32_t)worker;
        /* rule 3: above the mark (or the floor), above what a fence set,
         * above what this daemon itself published for the number (which a
         * restore may have lost) */
        const struct rule3_claim c = {
                .now = g->fresh ? v->wall_id_ms : v->id_ms,
                .marked = modrev != 0,
                .mark = hwm,
                .floor = floor,
                .claims_above = v->claims_above,
                .own_last = acq_own_last(v->published, v->n_published, v->cur, (int32_t)worker),
        };
        g->start_ms = rule3_claim_start(&c);
        g->mark = g->start_ms + (uint64_t)(a->set.window_s + a->set.mark_step_s) * 1000;
        g->hwm_modrev = modrev;
        if (g->mark >> v->time_bits) {
                uint64_t past = g->mark;
                give_up(a, out);
                a->state = ACQ_DONE; /* nothing more to acquire in this layout */
                act(out, ACQ_DO_FATAL)->a = past;
                return;
        }
        snprintf(g->value, sizeof(g->value),
                 "{\"host\":\"%s\",\"instance\":\"%s\",\"pid\":%d,\"token\":\"%s-%" PRIu64 "\"}",
                 a->set.host, a->set.instance, a->set.pid, a->set.token, g->id);
        /* the claim compares this daemon's last acknowledged write of the
         * number it publishes: a restore that forgot it fails the claim */
        g->own_worker = -1;
        g->own_rev = 0;
        if (v->cur && v->cur->state != H_NONE && v->cur->mark_rev) {
                g->own_worker = v->cur->worker;
                g->own_rev = v->cur->mark_rev;
        }
        a->state = ACQ_CLAIM;
        a->lease_claims++;
        act(out, ACQ_DO_CLAIM);
}

/* The numbers read again under the holding's lease, by a new holding
 * (so that a late answer to the last read is not taken for this one's),
 * after delay_ms: a read writes nothing, so a lease that carried only
 * reads, or claims the store refused outright, is as good as new.  Only
 * while the lease will then have half its TTL left (its grant's answer
 * or last keepalive said how long); else it is given up and another asked
 * for.  The store's work per lease stays a grant, its reads and claims,
 * and a revocation, however many of them fail. */
static void rescan(struct acquire *a, const struct acq_view *v, struct acq_ready *out,
                   unsigned delay_ms)
{
        const struct holding *g = &a->g;
        uint64_t half_ttl_ms = (uint64_t)a->set.lease_ttl_s * 500;
        if (!g->lease || v->boot_ms + delay_ms + half_ttl_ms > g->lease_until_ms) {
                restart(a, out, delay_ms);
                return;
        }
        int64_t lease = g->lease;
        uint64_t until = g->lease_until_ms, asked = g->lease_asked_ms;
        begin(a, g->fresh);
        a->g.lease = lease;
        a->g.lease_until_ms = until;
        a->g.lease_asked_ms = asked;
        if (!delay_ms) {
                scan(a, v, out, false);
                return;
        }
        a->state = ACQ_SCAN_WAIT;
        wait_ms(out, delay_ms);
}

/* Rule 9: a claim the store refused outright (its compares failed, so
 * it wrote nothing and never will) leaves its lease free to carry the
 * next attempt, which scans again, up to CLAIMS_PER_LEASE claims.  A claim
 * whose answer never came is settled instead, and one refused with an
 * error gives its lease up: a lease never carries two claims that may
 * both have been applied.  A lease gone shows only as such an error, once
 * a claim's compares hold (a put under a lease the store does not know is
 * never applied): until then it carries claims that fail. */
static bool claim_again(struct acquire *a, const struct acq_view *v, const struct store_claimed *c,
                        struct acq_ready *out)
{
        if (!c->ok || c->succeeded || a->lease_claims >= CLAIMS_PER_LEASE)
                return false;
        rescan(a, v, out, 0);
        return true;
}

static void claimed(struct acquire *a, struct acq_ready *out)
{
        struct holding *g = &a->g;
        if (a->said_full)
                say(out, ACQ_SAY_CAME_FREE, -1, 0, 0);
        a->said_full = false;
        say(out, ACQ_SAY_CLAIMED, g->worker, (uint64_t)g->lease, g->mark);
        g->state = H_HELD;
        a->backoff_ms = 0;
        a->state = ACQ_PUBLISH;
        act(out, ACQ_DO_PUBLISH);
}

/* ---- the inputs ---- */

static void on_start(struct acquire *a, const struct acq_view *v, bool fresh, struct acq_ready *out)
{
        if (a->state != ACQ_IDLE || v->stopping || v->halted || !v->layout_ready)
                return;
        begin(a, fresh);
        a->backoff_ms = 0;
        if (v->mono_ms < v->claims_not_before_ms) {
                a->state = ACQ_WAIT;
                wait_ms(out, (unsigned)(v->claims_not_before_ms - v->mono_ms));
                return;
        }
        grant(a, v, out);
}

static void on_granted(struct acquire *a, const struct acq_view *v, const struct acq_in *in,
                       struct acq_ready *out)
{
        if (!acq_expects(a, in->r.tag, ACQ_IN_GRANTED)) {
                revoke(out, in->lease); /* granted for nobody */
                return;
        }
        if (in->r.unsent) {
                a->state = ACQ_WAIT;
                wait_ms(out, next_backoff(a, RETRY_MAX_MS));
                return;
        }
        if (in->lease == 0 || in->ttl_s <= 0) {
                revoke(out, in->lease); /* a lease without a TTL to count on */
                if (!in->r.refused)     /* a refusal is said once, by refused.c */
                        say(out, ACQ_SAY_GRANT_FAILED, -1, 0, 0);
                a->state = ACQ_WAIT;
                wait_ms(out, failure_backoff(a, &in->r));
                return;
        }
        a->g.lease = in->lease;
        a->g.lease_until_ms = rule5_lease_until(a->g.lease_asked_ms, in->ttl_s);
        scan(a, v, out, false);
}

static void on_scanned(struct acquire *a, const struct acq_view *v, const struct acq_in *in,
                       struct acq_ready *out)
{
        const struct store_scan *sc = in->scan;
        if (in->r.unsent) {
                rescan(a, v, out, next_backoff(a, RETRY_MAX_MS));
                return;
        }
        if (sc->same == 0 || sc->floor_read == 0) {
                say(out, ACQ_SAY_FENCE_CHANGED, -1, 0, 0);
                check_cluster(a, out);
                return;
        }
        if (!sc->ok || !sc->succeeded || sc->same < 0 || sc->floor_read < 0) {
                if (!in->r.refused)
                        say(out, ACQ_SAY_SCAN_FAILED, -1, 0, 0);
                rescan(a, v, out, failure_backoff(a, &in->r));
                return;
        }
        uint64_t workers = UINT64_C(1) << v->worker_bits;
        if (!sc->numbers || sc->workers != workers || v->range_to >= workers) {
                restart(a, out, next_backoff(a, RETRY_MAX_MS));
                return;
        }
        uint64_t first = v->range_from, last = v->range_to;
        for (uint64_t n = first; n <= last; n++)
                if (sc->numbers[n].marked && !sc->numbers[n].mark_valid) {
                        say(out, ACQ_SAY_MARKS_INVALID, -1, first, last);
                        break;
                }
        bool sampled = a->g.sampled > 0;
        int32_t pref = a->prefer;
        a->prefer = -1;
        const struct choose_in ci = {
                .numbers = sc->numbers,
                .first = first,
                .last = last,
                .floor = sc->floor,
                .now = a->g.fresh ? v->wall_id_ms : v->id_ms,
                .claims_above = v->claims_above,
                .prefer = pref,
                .prefer_handing_over = pref >= 0 && v->prefer_handing_over,
                .fresh = a->g.fresh,
                .sampled = sampled,
                .lead_ms = (uint64_t)(a->set.window_s + a->set.mark_step_s) * 1000,
                .step_ms = (uint64_t)a->set.mark_step_s * 1000,
                .draw = draw_below,
                .draw_state = a,
        };
        const struct choice c = claim_choose(&ci);
        switch (c.kind) {
        case CHOOSE_WAIT:
                /* still held by this host's own old lease, its mark not yet
                 * confirmed: look again shortly rather than search */
                a->prefer = pref;
                rescan(a, v, out, 100 + (unsigned)(draw(a) % 100));
                return;
        case CHOOSE_SCAN_ALL:
                /* nothing free and behind the clock in the sample: look at
                 * every number before claiming ahead or waiting (the
                 * preferred one still first) */
                a->prefer = pref;
                say(out, ACQ_SAY_SCAN_ALL, -1, a->g.sampled, 0);
                scan(a, v, out, true);
                return;
        case CHOOSE_NONE_FRESH:
                say(out, ACQ_SAY_NONE_FRESH, -1, 0, 0);
                act(out, ACQ_DO_FRESH_LATER)->a = v->mono_ms + FRESH_THROTTLE_MS;
                give_up(a, out);
                return;
        case CHOOSE_ALL_TAKEN:
                /* said once while it lasts: a host beyond the space waits */
                if (!a->said_full)
                        say(out, ACQ_SAY_ALL_TAKEN, -1, first, last);
                a->said_full = true;
                /* a number frees when its holder stops or its lease expires:
                 * look again each renewal interval (jittered), so that it is
                 * claimed within one of coming free */
                rescan(a, v, out,
                       a->set.renew_ms / 2 + (unsigned)(draw(a) % (a->set.renew_ms / 2 + 1)));
                return;
        case CHOOSE_CLAIM:
                break;
        }
        if (c.ahead)
                say(out, ACQ_SAY_AHEAD, (int32_t)c.worker, c.mark - ci.now, 0);
        claim(a, v, out, c.worker, c.mark, sc->numbers[c.worker].mark_rev, sc->floor);
}

static void on_claimed(struct acquire *a, const struct acq_view *v, const struct acq_in *in,
                       struct acq_ready *out)
{
        const struct store_claimed *c = in->claimed;
        struct holding *g = &a->g;
        if (in->r.unsent) {
                settle(a, out);
                return;
        }
        if (in->r.not_current) {
                /* an answer rule 1 would not act on, while the cluster is
                 * not halted (a failed claim whose answer does not say
                 * which fence it compared): not applied, so tried again */
                restart(a, out, next_backoff(a, RETRY_MAX_MS));
                return;
        }
        if (c->no_answer) {
                /* the claim may or may not be applied */
                say(out, ACQ_SAY_NO_ANSWER, g->worker, 0, 0);
                settle(a, out);
                return;
        }
        if (c->succeeded) {
                g->mark_rev = c->revision; /* the put's mod revision is the claim's */
                claimed(a, out);
                return;
        }
        /* the mark of the number published when the claim was sent, whose
         * last write by this daemon it compared */
        if (c->ok && g->own_worker >= 0 && c->own_read) {
                if (rule5_forgotten(g->own_rev, c->own.mark_rev)) {
                        struct acq_action *t = act(out, ACQ_DO_RESTORED);
                        t->worker = g->own_worker;
                        t->a = (uint64_t)g->own_rev;
                        t->b = (uint64_t)c->own.mark_rev;
                        give_up(a, out);
                        return;
                }
                /* deleted or lowered since (by hand): raised back, or every
                 * claim would fail on it */
                bool low = !c->own.marked || !c->own.mark_valid;
                const struct holding *cur = v->cur;
                if (cur && cur->state != H_NONE && cur->worker == g->own_worker &&
                    (low || c->own.mark < cur->mark)) {
                        struct acq_action *t = act(out, ACQ_DO_RAISE);
                        t->worker = cur->worker;
                        t->a = cur->mark;
                        restart(a, out, next_backoff(a, RETRY_MAX_MS));
                        return;
                }
        }
        /* taken by another daemon, the mark moved, or the lease died */
        say(out, ACQ_SAY_NOT_CLAIMED, g->worker, 0, 0);
        if (!claim_again(a, v, c, out))
                restart(a, out, 10 + (unsigned)(draw(a) % 50));
}

static void on_read(struct acquire *a, const struct acq_in *in, struct acq_ready *out)
{
        const struct store_read *rd = in->read;
        struct holding *g = &a->g;
        if (in->r.unsent) {
                settle_later(a, out);
                return;
        }
        if (rd->same == 0) {
                /* the claim compared the fence it knew: it was not applied */
                check_cluster(a, out);
                return;
        }
        if (!rd->ok || rd->same < 0 || rd->n.malformed || (rd->n.marked && !rd->n.mark_valid)) {
                /* asked again: the lease may expire meanwhile, which settles it too */
                settle_later(a, out);
                return;
        }
        bool ours = rd->n.held && rd->n.lease == g->lease && rd->n.value_is;
        if (ours && rd->n.mark == g->mark) {
                say(out, ACQ_SAY_APPLIED, g->worker, 0, 0);
                g->mark_rev = rd->n.mark_rev;
                claimed(a, out);
                return;
        }
        say(out, ACQ_SAY_NOT_APPLIED, g->worker, 0, 0);
        restart(a, out, 10);
}

void acq_step(struct acquire *a, const struct acq_view *v, const struct acq_in *in,
              struct acq_ready *out)
{
        out->n = 0;
        switch (in->kind) {
        case ACQ_IN_START:
                on_start(a, v, in->fresh, out);
                return;
        case ACQ_IN_PREFER:
                a->prefer = in->worker;
                return;
        case ACQ_IN_TIMER:
                if (a->state == ACQ_WAIT)
                        grant(a, v, out);
                else if (a->state == ACQ_SCAN_WAIT)
                        scan(a, v, out, false);
                else if (a->state == ACQ_SETTLE_WAIT)
                        settle(a, out);
                return;
        case ACQ_IN_GRANTED:
                on_granted(a, v, in, out);
                return;
        case ACQ_IN_SCANNED:
                if (acq_expects(a, in->r.tag, in->kind))
                        on_scanned(a, v, in, out);
                return;
        case ACQ_IN_CLAIMED:
                if (acq_expects(a, in->r.tag, in->kind))
                        on_claimed(a, v, in, out);
                return;
        case ACQ_IN_READ:
                if (acq_expects(a, in->r.tag, in->kind))
                        on_read(a, in, out);
                return;
        case ACQ_IN_PUBLISHED:
                if (a->state == ACQ_PUBLISH) {
                        a->g = (struct holding){.worker = -1};
                        a->state = ACQ_IDLE;
                }
                return;
        case ACQ_IN_UNPUBLISHED:
                if (a->state == ACQ_PUBLISH)
                        restart(a, out, next_backoff(a, RETRY_MAX_MS));
                return;
        case ACQ_IN_DROP:
                if (a->state != ACQ_IDLE && a->state != ACQ_DONE)
                        give_up(a, out);
                return;
        }
}

void acq_init(struct acquire *a, const struct acq_settings *set)
{
        *a = (struct acquire){.set = *set, .g = {.worker = -1}, .prefer = -1, .rng = set->seed};
        if (!a->rng)
                a->rng = UINT64_C(0x9e3779b97f4a7c15);
}

bool acq_expects(const struct acquire *a, uint64_t tag, enum acq_in_kind kind)
{
        if (a->state == ACQ_IDLE || tag != a->g.id)
                return false;
        switch (kind) {
        case ACQ_IN_GRANTED:
                return a->state == ACQ_GRANT;
        case ACQ_IN_SCANNED:
                return a->state == ACQ_SCAN;
        case ACQ_IN_CLAIMED:
                return a->state == ACQ_CLAIM;
        case ACQ_IN_READ:
                return a->state == ACQ_SETTLE;
        default:
                return false;
        }
}

bool acq_idle(const struct acquire *a)
{
        return a->state == ACQ_IDLE || a->state == ACQ_DONE;
}

const struct holding *acq_holding(const struct acquire *a)
{
        return &a->g;
}

int32_t acq_prefer(const struct acquire *a)
{
        return a->prefer;
}

const char *acq_state_name(const struct acquire *a)
{
        static const char *const names[] = {
                [ACQ_IDLE] = NULL,       [ACQ_WAIT] = "grant",         [ACQ_GRANT] = "grant",
                [ACQ_SCAN] = "scan",     [ACQ_SCAN_WAIT] = "scan",     [ACQ_CLAIM] = "claim",
                [ACQ_SETTLE] = "settle", [ACQ_SETTLE_WAIT] = "settle", [ACQ_PUBLISH] = "held",
                [ACQ_DONE] = NULL,
        };
        return names[a->state];
}
