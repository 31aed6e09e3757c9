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

#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 1000
#define FULL_RETRY_MAX_MS 30000
#define FRESH_THROTTLE_MS 10000
#define LOWEST_SPREAD_MS 1000

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
unsigned claim_failure_backoff(struct holder *h, const struct store_reply *r)
{
        bool overloaded = !r->answered || r->http >= 500;
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

static void on_grant(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        struct holding *g = holder_by_tag(h, r->tag);
        int64_t id = 0, ttl = 0;
        holder_note_answer(h, r);
        if (!g || g != &h->next || g->state != H_GRANT) {
                if (store_ok(r) && store_int64(r->json, "ID", &id) == 0)
                        holder_give_up_lease(h, id); /* granted for nobody */
                return;
        }
        if (!store_ok(r) || store_int64(r->json, "ID", &id) < 0 ||
            store_int64(r->json, "TTL", &ttl) < 0 || id == 0 || ttl <= 0) {
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
        json_t *body = json_pack("{s:I}", "TTL", (json_int_t)h->cfg->lease_ttl_s);
        if (store_call(h->store, "/v3/lease/grant", body, on_grant, h, g->id) < 0)
                retry_in(h, claim_next_backoff(h, RETRY_MAX_MS));
}

static void step_claim(struct holder *h, uint32_t worker, uint64_t hwm, int64_t modrev,
                       uint64_t floor);

/* Parses "<prefix><what><n>" into n < workers; -1 if it is not such a key. */
static int64_t key_number(const struct holder *h, const char *key, const char *what,
                          uint64_t workers)
{
        size_t pl = strlen(h->prefix), wl = strlen(what);
        if (strncmp(key, h->prefix, pl) || strncmp(key + pl, what, wl))
                return -1;
        const char *d = key + pl + wl;
        uint64_t n = 0;
        if (!*d || (*d == '0' && d[1]))
                return -1;
        for (; *d; d++) {
                if (*d < '0' || *d > '9' || n >= workers)
                        return -1;
                n = n * 10 + (uint64_t)(*d - '0');
        }
        return n < workers ? (int64_t)n : -1;
}

static void on_scan(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_SCAN);
        struct kv kv = {0};
        if (!g || !cluster_ok(h, r, -1))
                return;
        /* [workers/ (k ranges), hwm/ (k ranges), floor, fence, layout]: k is
         * 1 for a full scan, the sample's size else */
        bool sampled = g->sampled > 0;
        unsigned k = sampled ? g->sampled : 1;
        int same = store_ok(r) ? txn_cluster_same(r->json, 2 * k + 1, &h->cl) : -1;
        uint64_t floor = 0;
        int rf = store_ok(r) ? txn_kv(r->json, 2 * k, &kv) : -1;
        if (rf == 1 &&
            (parse_mark(kv.value, kv.value_len, &floor) < 0 || floor >> h->layout.time_bits))
                rf = 0; /* damaged: as if lost (the re-read halts) */
        kv_clear(&kv);
        if (same == 0 || rf == 0) {
                log_notice("The cluster's fence, layout or floor changed; reading them");
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
                return;
        }
        if (!store_ok(r) || !json_is_true(json_object_get(r->json, "succeeded")) || same < 0 ||
            rf < 0) {
                if (r->err == STORE_ERR_NONE)
                        log_warning("Cannot read the worker numbers: %s",
                                    r->error ? r->error : "malformed answer");
                claim_restart(h, claim_failure_backoff(h, r));
                return;
        }
        uint64_t workers = UINT64_C(1) << h->layout.worker_bits;
        /* per number: 0 free, 1 taken (held, its mark unreadable, or not
         * in the sample) */
        uint8_t *taken = malloc(workers);
        uint64_t *mark = calloc(workers, sizeof(uint64_t));
        int64_t *modrev = calloc(workers, sizeof(int64_t));
        if (!taken || !mark || !modrev)
                goto out;
        memset(taken, sampled, workers);
        for (unsigned s = 0; s < g->sampled; s++)
                taken[g->sample[s]] = 0;
        /* ops [0, k) read workers/, ops [k, 2k) read hwm/ */
        json_t *kvs, *j;
        size_t i;
        for (unsigned op = 0; op < 2 * k; op++) {
                bool marks = op >= k;
                kvs = txn_kvs(r->json, op);
                json_array_foreach(kvs, i, j)
                {
                        if (kv_parse(j, &kv) < 0)
                                continue;
                        int64_t n = key_number(h, kv.key, marks ? "hwm/" : "workers/", workers);
                        if (n >= 0 && !marks)
                                taken[n] = 1;
                        else if (n >= 0) {
                                modrev[n] = kv.mod_revision;
                                if (parse_mark(kv.value, kv.value_len, &mark[n]) < 0 ||
                                    mark[n] >> h->layout.time_bits) {
                                        log_warning("The mark of worker %" PRId64 " is not 20 "
                                                    "digits of an ID time this layout holds; "
                                                    "skipping the number",
                                                    n);
                                        taken[n] = 1;
                                }
                        }
                        kv_clear(&kv);
                }
        }
        /* a number without a mark is taken as above the floor (never as 0);
         * only numbers of this daemon's range (another region claims the rest) */
        uint64_t first = h->range_from, last = h->range_to;
        for (uint64_t n = first; n <= last; n++)
                mark[n] = rule3_mark(modrev[n] != 0, mark[n], floor);
        /* free numbers whose mark is behind the clock: one at random, which
         * spreads daemons that start together; else one at random of those
         * within LOWEST_SPREAD_MS of the lowest mark (a fleet restarted at
         * once finds every mark ahead: the lowest alone would be the one
         * number all of them try) */
        uint64_t now = holder_id_ms(h, g->fresh), past = 0, lowest = UINT64_MAX;
        int64_t pick = -1, low = -1;
        for (uint64_t n = first; n <= last; n++) {
                if (taken[n])
                        continue;
                if (mark[n] < now && (uint64_t)random() % ++past == 0)
                        pick = (int64_t)n;
                if (mark[n] < lowest)
                        lowest = mark[n], low = (int64_t)n;
        }
        /* the number held when a fence came, once given up: again, when
         * it costs no more ID time ahead than any claim does now */
        int32_t pref = h->prefer;
        h->prefer = -1;
        if (pref >= 0 && (uint64_t)pref >= first && (uint64_t)pref <= last && taken[pref] &&
            marks_handing_over(h, pref)) {
                /* still held by this host's own old lease, its mark not yet
                 * confirmed: look again shortly rather than search */
                h->prefer = pref;
                claim_restart(h, 100 + (unsigned)(random() % 100));
                goto out;
        }
        if (pref >= 0 && !g->fresh && (uint64_t)pref >= first && (uint64_t)pref <= last &&
            !taken[pref] && modrev[pref] &&
            mark[pref] < (now > h->cl.claims_above ? now : h->cl.claims_above + 1))
                pick = pref;
        if (sampled && pick < 0) {
                /* nothing free and behind the clock in the sample: look at
                 * every number before claiming ahead or waiting */
                log_debug("No free number behind the clock among %u sampled; reading all", k);
                scan(h, true);
                goto out;
        }
        if (pick < 0 && low >= 0 && g->fresh) {
                log_warning("No free worker number has its mark behind the wall clock; ID time "
                            "stays ahead of it and is brought back gradually");
                h->fresh_not_before_ms = holder_mono_ms() + FRESH_THROTTLE_MS;
                holder_give_up_lease(h, g->lease);
                h->next = (struct holding){.state = H_NONE, .worker = -1};
                goto out;
        }
        if (pick < 0 && low >= 0) {
                uint64_t near = 0;
                for (uint64_t n = first; n <= last; n++)
                        if (!taken[n] && mark[n] <= lowest + LOWEST_SPREAD_MS &&
                            (uint64_t)random() % ++near == 0)
                                low = (int64_t)n;
                lowest = mark[low];
                log_notice("Every free worker number's mark is ahead of the clock; taking %" PRId64
                           ", %" PRIu64 " ms ahead",
                           low, lowest - now);
                pick = low;
        }
        if (pick < 0) {
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
                goto out;
        }
        step_claim(h, (uint32_t)pick, mark[pick], modrev[pick], floor);
out:
        free(taken);
        free(mark);
        free(modrev);
}

/* full: every number of the range; else a fresh sample of distinct numbers */
static void scan(struct holder *h, bool full)
{
        struct holding *g = &h->next;
        uint64_t span = h->range_to - h->range_from + 1;
        json_t *ops = json_array();
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
                for (unsigned i = 0; i < g->sampled; i++)
                        json_array_append_new(
                                ops, txn_range(txn_key(h->prefix, "workers/", g->sample[i]), NULL,
                                               true));
                for (unsigned i = 0; i < g->sampled; i++)
                        json_array_append_new(
                                ops,
                                txn_range(txn_key(h->prefix, "hwm/", g->sample[i]), NULL, false));
        } else {
                json_array_append_new(ops, txn_range(txn_key(h->prefix, "workers/", -1),
                                                     txn_key(h->prefix, "workers0", -1), true));
                json_array_append_new(ops, txn_range(txn_key(h->prefix, "hwm/", -1),
                                                     txn_key(h->prefix, "hwm0", -1), false));
        }
        json_array_append_new(ops, txn_range(txn_key(h->prefix, "floor", -1), NULL, false));
        txn_cluster_reads(ops, h->prefix);
        json_t *body = json_pack("{s:o}", "success", ops);
        if (store_call(h->store, "/v3/kv/txn", body, on_scan, h, h->next.id) < 0)
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
        holder_publish(h);
}

static void on_claim(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_CLAIM);
        /* failure: [workers/n, hwm/n, fence, layout] */
        if (!g || !cluster_ok(h, r, 2))
                return;
        if (!r->answered || r->http >= 500 || (r->http == 200 && !r->json)) {
                /* the answer never came: the claim may or may not be applied */
                log_warning("The claim of worker %" PRId32 " got no answer (%s); reading back",
                            g->worker, r->error);
                g->state = H_SETTLE;
                step_settle(h);
                return;
        }
        if (store_ok(r) && json_is_true(json_object_get(r->json, "succeeded"))) {
                g->mark_rev = r->revision; /* the put's mod revision is the txn's */
                claimed(h);
                return;
        }
        /* failure read 4: the mark of the number held when the claim was
         * sent, whose last write by this daemon it compared */
        struct kv own = {0};
        if (store_ok(r) && g->own_worker >= 0 && txn_kv(r->json, 4, &own) >= 0) {
                int64_t modrev = own.key ? own.mod_revision : 0;
                uint64_t m = 0;
                bool low = !own.key || parse_mark(own.value, own.value_len, &m) < 0;
                kv_clear(&own);
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
                  r->http == 200 ? "taken" : r->error);
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
        json_t *body = json_pack(
                "{s:[o, o], s:[o, o, o], s:[o, o]}", "compare",
                txn_cmp(txn_key(h->prefix, "workers/", worker), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(h->prefix, "hwm/", worker), "MOD", "EQUAL", NULL, modrev),
                "success",
                txn_put(txn_key(h->prefix, "workers/", worker), store_b64("%s", g->value),
                        g->lease),
                txn_put(txn_key(h->prefix, "hwm/", worker), txn_mark(g->mark), 0),
                txn_raise_floor(h->prefix, g->mark), "failure",
                txn_range(txn_key(h->prefix, "workers/", worker), NULL, false),
                txn_range(txn_key(h->prefix, "hwm/", worker), NULL, false));
        json_t *cmp = json_object_get(body, "compare");
        txn_cluster_compares(cmp, h->prefix, &h->cl);
        txn_cluster_reads(json_object_get(body, "failure"), h->prefix);
        /* this daemon's last acknowledged write of the number it holds is
         * still there: a restore that took it back refuses the claim (its
         * revisions refilled or not), and the failure branch shows it */
        g->own_worker = -1;
        if (h->cur.state != H_NONE && h->cur.mark_rev) {
                g->own_worker = h->cur.worker;
                g->own_rev = h->cur.mark_rev;
                json_array_append_new(cmp, txn_cmp(txn_key(h->prefix, "hwm/", h->cur.worker), "MOD",
                                                   "GREATER", NULL, h->cur.mark_rev - 1));
                json_array_append_new(
                        json_object_get(body, "failure"),
                        txn_range(txn_key(h->prefix, "hwm/", h->cur.worker), NULL, false));
        }
        /* no mark: the floor, which is at or above every deadline ever
         * published, must still be below the start */
        if (!modrev)
                json_array_append_new(cmp, txn_cmp(txn_key(h->prefix, "floor", -1), "VALUE", "LESS",
                                                   txn_mark(g->start_ms), 0));
        if (store_call(h->store, "/v3/kv/txn", body, on_claim, h, g->id) < 0) {
                g->state = H_SETTLE;
                step_settle(h);
        }
}

static void on_settle_retry_timer(struct holder *h);

static void on_settle(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        struct holding *g = holder_acquiring(h, r, H_SETTLE);
        bool ours;
        uint64_t stored;
        int64_t modrev;
        if (!g || !cluster_ok(h, r, -1))
                return;
        int same = store_ok(r) ? txn_cluster_same(r->json, 2, &h->cl) : -1;
        if (same == 0) {
                /* the claim compared the fence it knew: it was not applied */
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
                return;
        }
        if (!store_ok(r) || same < 0 || holder_read_back(g, r->json, &ours, &stored, &modrev) < 0) {
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
        json_t *body = json_pack("{s:[o, o]}", "success",
                                 txn_range(txn_key(h->prefix, "workers/", g->worker), NULL, false),
                                 txn_range(txn_key(h->prefix, "hwm/", g->worker), NULL, false));
        txn_cluster_reads(json_object_get(body, "success"), h->prefix);
        if (store_call(h->store, "/v3/kv/txn", body, on_settle, h, g->id) < 0)
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
