/* SPDX-License-Identifier: MIT */
/*
 * Renewing a held number (docs/design.md rules 2 and 3): the lease's
 * keepalive, and the guarded extension of the mark, each renew-ms; a lease
 * unknown before its TTL could have run out is told apart (a restore, or a
 * revocation) by reading the mark; a number lost is given up to its mark.
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
#include "schedule.h"
#include "trace.h"

void holder_lost(struct holder *h, const char *why)
{
        if (h->cur.state != H_HELD)
                return;
        int64_t left = (int64_t)h->cur.mark - (int64_t)holder_id_ms(h, false);
        if (left > 0)
                log_warning("Lost worker number %" PRId32 ": %s; IDs continue until the deadline, "
                            "%" PRId64 " ms from now",
                            h->cur.worker, why, left);
        else
                log_warning("Lost worker number %" PRId32 ": %s; its deadline passed %" PRId64
                            " ms ago",
                            h->cur.worker, why, -left);
        h->cur.state = H_LOST;
        TRACE_STEP("dropped", h->cur.worker);
        h->stats.leases_lost++;
        /* a lease gone with a restore (granted after the backup, or its
         * expiry restored with it) leaves the restore as the thing to say */
        bool halted = h->halted != HALT_NONE && h->halted != HALT_CHECKING;
        shm_pub_set_state(h->pub, halted ? holder_halted_state(h) : SHM_STATE_NO_LEASE);
        marks_retired(h, h->cur.worker, h->cur.mark);
        marks_raise(h, h->cur.worker, h->cur.mark, 0, 0, h->cur.mark_rev);
        claim_start(h, false);
        holder_update_status(h);
}

/* ---- renewing: keepalive, and the guarded extension of the mark ---- */

static void lease_check(struct holder *h, struct holding *g);
static void keepalive_send(struct holder *h, struct holding *g, bool now);

/* Whether the number g holds, read back once the store said it did not know
 * the lease before its TTL could run out, shows the store forgot this
 * daemon's writes (then halted as restored): another holder's claim (other)
 * sits on it (a claim needs the number free, and only the lease's end frees
 * it); or its mark (present, stored) reads below the value the store
 * acknowledged, a mark never going down under its holder. */
static bool taken_back(struct holder *h, const struct holding *g, bool other, bool present,
                       uint64_t stored)
{
        if (!rule5_taken_back(other, present, stored, g->mark))
                return false;
        if (h->halted == HALT_RESTORED)
                return true; /* said already */
        if (other)
                log_error("%s shows another holder's claim on worker %" PRId32 ", whose lease "
                          "it forgot before its TTL could run out: it forgot this daemon's "
                          "claim. It was restored from a snapshot or backup",
                          store_name(h->store), g->worker);
        else
                log_error("%s forgot a write it acknowledged: hwm/%" PRId32 " reads %" PRIu64
                          ", below the %" PRIu64 " it acknowledged to this daemon, and its "
                          "lease is unknown. It was restored from a snapshot or backup",
                          store_name(h->store), g->worker, stored, g->mark);
        cluster_halt(h, HALT_RESTORED);
        cluster_read_in(h, 1000);
        return true;
}

static void on_lease_check(void *userdata, const struct store_answer *r,
                           const struct store_read *rd)
{
        struct holder *h = userdata;
        struct holding *g = holder_by_tag(h, r->tag);
        holder_note_answer(h, r);
        if (!g || g != &h->cur || !g->lease_checking)
                return;
        /* a read: its fence is looked at unless it succeeded, as for a
         * transaction that compared it */
        if (!cluster_ok(h, r, rd->ok, rd->succeeded ? 1 : rd->same))
                return;
        if (!rd->ok || rd->n.malformed) {
                lease_check(h, g); /* again, at the next answer */
                return;
        }
        int64_t modrev = rd->n.mark_rev;
        uint64_t stored = rd->n.mark_valid ? rd->n.mark : 0;
        bool present = rd->n.marked && rd->n.mark_valid;
        /* workers/n there, under another lease: somebody claimed it */
        bool other = rd->n.held && rd->n.lease != g->lease;
        g->lease_checking = false;
        if (g->state != H_HELD ||
            holder_forgotten(h, g->worker, g->own_rev, modrev, "its lease unknown") ||
            taken_back(h, g, other, present, stored))
                return;
        /* the write that came after the grant is there: so would the lease
         * be, after a restore */
        holder_lost(h,
                    "its lease was revoked before its TTL ran out (by hand, or by the store); its "
                    "mark is as this daemon wrote it");
}

/* Reads the held number's mark: a write of it forgotten is a restore. */
static void lease_check(struct holder *h, struct holding *g)
{
        g->lease_checking = true;
        g->own_rev = g->mark_rev;
        if (store_read_number(h->store, &h->cl, (uint32_t)g->worker, g->value, on_lease_check, h,
                              g->id) < 0)
                holder_lost(h, "its lease is unknown and its mark could not be read");
}

static void on_keepalive(void *userdata, const struct store_answer *r, int64_t id, int64_t ttl)
{
        struct holder *h = userdata;
        struct holding *g = holder_by_tag(h, r->tag);
        (void)id;
        holder_note_answer(h, r);
        if (!g)
                return;
        g->keepalive_busy = false;
        if (g != &h->cur || g->state != H_HELD || h->halted == HALT_RESTORED)
                return;
        if (ttl < 0) {
                g->keepalive_next_ms = 0; /* again at the next renewal */
                h->stats.renewal_failures++;
                log_debug("Keepalive failed: %s", r->error ? r->error : "malformed answer");
                return;
        }
        enum rule5_lease lease = rule5_lease_answer(ttl, holder_boot_ms(), g->lease_until_ms);
        if (lease == RULE5_LEASE_LIVES) {
                holder_lease_lives(g, ttl);
                if (g->taken_seen) {
                        g->taken_seen = false;
                        holder_lost(h, "another holder's key is on it, under this daemon's live "
                                       "lease (written over by hand)");
                }
                return;
        }
        if (lease == RULE5_LEASE_UNKNOWN_EARLY) {
                /* never revoked by this daemon, and its TTL cannot have run
                 * out: a restore (the lease granted after the snapshot), or
                 * a lease revoked early (by hand, or by an etcd leader that
                 * stalled).  Not a lease to claim again after until its mark
                 * shows which */
                log_warning("%s does not know the lease of worker %" PRId32 ", which it gave "
                            "%" PRIu64 " ms more to live and this daemon never revoked: "
                            "reading its mark to tell a restore from a lease revoked early",
                            store_name(h->store), g->worker, g->lease_until_ms - holder_boot_ms());
                lease_check(h, g);
                return;
        }
        holder_lost(h, "its lease expired");
}

static void on_extend(void *userdata, const struct store_answer *r, const struct store_extended *e)
{
        struct holder *h = userdata;
        struct holding *g = holder_by_tag(h, r->tag);
        holder_note_answer(h, r);
        if (!g)
                return;
        g->extend_busy = false;
        if (g != &h->cur || g->state != H_HELD || !cluster_ok(h, r, e->ok, e->same))
                return;
        uint64_t v = g->pending; /* the mark this request asked for */
        if (!e->ok) {
                /* no answer, or an error: publish nothing; a higher mark in
                 * the store than the deadline is harmless */
                h->stats.renewal_failures++;
                log_debug("Extending the mark failed: %s", r->error);
                return;
        }
        bool ours = true, succeeded = e->succeeded;
        uint64_t stored = v;
        int64_t modrev = 0;
        if (!succeeded) {
                ours = holder_ours(g, &e->n);
                stored = e->n.mark;
                modrev = e->n.mark_rev;
                if (holder_read_malformed(&e->n)) {
                        h->stats.renewal_failures++;
                        log_warning("%s's answer to a mark extension is malformed",
                                    store_title(h->store));
                        return;
                }
                if (holder_forgotten(h, g->worker, g->mark_rev, modrev, "extending the mark"))
                        return;
        }
        switch (rule4_extension(succeeded, ours, stored, v)) {
        case RULE4_NOT_OURS:
                /* its lease may live (the key written over by hand), or a
                 * restore may have lost it and another daemon claimed the
                 * number: the lease's answer tells, and then lease_check
                 * reads the rest */
                if (holder_boot_ms() < g->lease_until_ms) {
                        if (!g->taken_seen) {
                                g->taken_seen = true;
                                keepalive_send(h, g, true);
                        }
                        return;
                }
                holder_lost(h, "another holder has it, or its lease is gone");
                return;
        case RULE4_RAISE:
                /* ours, yet the guard failed: the mark is absent (deleted,
                 * or lost by the store).  Raised again before anything else. */
                g->raising = true;
                marks_raise(h, g->worker, g->mark, 0, g->id, g->mark_rev);
                return;
        case RULE4_EXTENDED:
                break;
        }
        h->stats.renewals++;
        TRACE_STEP("marked", g->worker, (int64_t)v);
        if (v > g->mark)
                g->mark = v;
        if (succeeded && e->revision > g->mark_rev)
                g->mark_rev = e->revision; /* the put's mod revision is the txn's */
        shm_pub_extend(h->pub, g->mark);
        TRACE_STEP("extend", g->worker, (int64_t)g->mark);
        if (h->store_full)
                holder_store_full(h, false, NULL); /* a write went through */
        shm_pub_set_state(h->pub, SHM_STATE_LEASED);
}

/* What renew_decide() plans for g now (keepalive_now: a keepalive at once). */
static struct renew_plan plan(const struct holder *h, const struct holding *g, bool keepalive_now)
{
        const struct renew_in in = {
                .now = holder_id_ms(h, false),
                .mark = g->mark,
                .window_ms = (uint64_t)h->cfg->window_s * 1000,
                .step_ms = (uint64_t)h->cfg->mark_step_s * 1000,
                .time_bits = h->layout.time_bits,
                .extend_busy = g->extend_busy,
                .raising = g->raising,
                .halted = h->halted != HALT_NONE,
                .mono = holder_mono_ms(),
                .keepalive_next = g->keepalive_next_ms,
                .keepalive_busy = g->keepalive_busy,
                .lease_checking = g->lease_checking,
                .keepalive_now = keepalive_now,
                .ttl_ms = h->cfg->lease_ttl_s * 1000,
        };
        return renew_decide(&in);
}

static void keepalive_go(struct holder *h, struct holding *g, const struct renew_plan *p)
{
        if (!p->keepalive)
                return;
        g->keepalive_next_ms = p->keepalive_next;
        g->lease_asked_ms = holder_boot_ms();
        g->keepalive_busy = store_keepalive(h->store, g->lease, on_keepalive, h, g->id) == 0;
}

/* The lease kept alive as planned (now: at once). */
static void keepalive_send(struct holder *h, struct holding *g, bool now)
{
        const struct renew_plan p = plan(h, g, now);
        keepalive_go(h, g, &p);
}

void renew_send(struct holder *h)
{
        struct holding *g = &h->cur;
        if (g->state != H_HELD)
                return;
        /* the lease is kept while halted: it writes no mark, and keeps the
         * number from a daemon that reaches the cluster before it is fenced */
        const struct renew_plan p = plan(h, g, false);
        keepalive_go(h, g, &p);
        if (!p.extend)
                return;
        g->pending = p.extend_to;
        g->extend_busy = store_extend(h->store, &h->cl, (uint32_t)g->worker, g->lease, g->value,
                                      p.extend_to, g->mark_rev, on_extend, h, g->id) == 0;
}

int renew_on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        renew_send(h);
        if (h->store_full)
                holder_check_alarms(h); /* disarmed yet? */
        /* a backstop: nothing held and nothing under way is never a state
         * to stay in */
        if (h->cur.state != H_HELD && acq_idle(&h->acq))
                claim_start(h, false);
        holder_update_status(h);
        sd_event_source_set_time(s, usec + (uint64_t)h->cfg->renew_ms * 1000);
        return 0;
}
