/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "claim.h"
#include "cluster.h"
#include "holder-int.h"
#include "log.h"
#include "marks.h"
#include "macro.h"
#include "refused.h"
#include "renew.h"
#include "steps.h"
#include "verdict.h"
#include "trace.h"

#define RETRY_MAX_MS 1000

/* ---- time ---- */

void holder_timer_in(struct holder *h, sd_event_source **src, unsigned ms,
                     sd_event_time_handler_t cb)
{
        uint64_t when = (uint64_t)shm_monotonic_ns() / 1000 + (uint64_t)ms * 1000;
        if (!*src)
                sd_event_add_time(h->event, src, CLOCK_MONOTONIC, when, 1000, cb, h);
        else {
                sd_event_source_set_time(*src, when);
                sd_event_source_set_enabled(*src, SD_EVENT_ONESHOT);
        }
}

uint64_t holder_mono_ms(void)
{
        return (uint64_t)shm_monotonic_ns() / 1000000;
}

struct clock_reading holder_clock_read(const struct holder *h)
{
        return (struct clock_reading){
                .mono_ns = shm_monotonic_ns(),
                .wall_ns = shm_realtime_ns() - (int64_t)h->known.layout.epoch_ms * 1000000,
                .can_move = h->hold.cur.state != H_NONE && acq_idle(&h->acq) &&
                            h->known.halted == HALT_NONE &&
                            holder_mono_ms() >= h->fresh_not_before_ms,
                .counter_ms =
                        h->hold.cur.state == H_HELD ? (int64_t)shm_pub_counter_ms(h->pub) : -1,
        };
}

static int64_t wall_offset(const struct holder *h)
{
        return shm_offset_for_wall(h->known.layout.epoch_ms);
}

/* ID time now, in ms; with the wall clock's offset when fresh. */
uint64_t holder_id_ms(const struct holder *h, bool wall)
{
        int64_t t = shm_monotonic_ns() + (wall ? wall_offset(h) : h->clock.offset_ns);
        return t > 0 ? (uint64_t)t / 1000000 : 0;
}

uint64_t holder_boot_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- a full store (etcd's NOSPACE alarm, PostgreSQL's disk) ---- */

void holder_store_full(struct holder *h, bool full, const char *member)
{
        if (full && !h->store_full) {
                h->stats.store_full_seen++;
                int64_t left = h->hold.cur.state == H_NONE
                                       ? 0
                                       : (int64_t)shm_pub_deadline(h->pub) -
                                                 (int64_t)holder_id_ms(h, false);
                char text[768];
                store_full_text(h->store, member, left, text, sizeof(text));
                log_error("%s", text);
        } else if (!full && h->store_full)
                log_notice("%s takes writes again: extending the mark", store_title(h->store));
        h->store_full = full;
        if (h->hold.cur.state == H_HELD && h->known.halted == HALT_NONE)
                shm_pub_set_state(h->pub, full ? SHM_STATE_STORE_FULL : SHM_STATE_LEASED);
        holder_update_status(h);
}

static void on_alarms(void *userdata, const struct store_answer *r, bool ok, const char *member)
{
        struct holder *h = userdata;
        (void)r;
        h->alarm_busy = false;
        if (!ok)
                return; /* not allowed (the store's users), or unreachable: the writes tell */
        if (member && !h->store_full)
                holder_store_full(h, true, member);
        else if (member)
                log_debug("%s is still full (member %s)", store_title(h->store), member);
        else if (h->store_full)
                holder_store_full(h, false, NULL);
}

void holder_check_alarms(struct holder *h)
{
        if (h->alarm_busy)
                return;
        h->alarm_busy = store_alarms(h->store, on_alarms, h) == 0;
}

/* ---- the cluster (cluster.c reads it) ---- */

/* The holder is done: its owner says what that means (snowidd: the loop
 * exits). */
static void done(struct holder *h)
{
        if (h->done_said)
                return;
        h->done_said = true;
        if (h->cb.done)
                h->cb.done(h, h->exit_code, h->cb.userdata);
        else
                sd_event_exit(h->event, h->exit_code);
}

void holder_fatal(struct holder *h, int code)
{
        h->exit_code = code;
        done(h);
}

/* What the segment says while halted: the reason an operator must act on. */
enum shm_state holder_halted_state(const struct holder *h)
{
        return h->known.restored ? SHM_STATE_RESTORED : SHM_STATE_LAYOUT_LOST;
}

/* ---- acquiring a number: grant, scan, claim, settle ---- */

static void on_revoke(void *userdata, const struct store_answer *r, bool gone)
{
        struct holder *h = userdata;
        if (!gone)
                log_debug("Revoking a lease failed: %s (it expires by itself)", r->error);
        holder_stop_check(h);
}

void holder_stop_check(struct holder *h)
{
        if (!h->stopping || store_in_flight(h->store) > 0)
                return;
        if (raise_active(&h->raises))
                return;
        done(h);
}

/* Revokes a lease that no holding uses any more; its claim (if the store ever
 * applies it) dies with it.  Marks stay and fence its number. */
void holder_give_up_lease(struct holder *h, int64_t lease)
{
        if (lease)
                store_revoke(h->store, lease, on_revoke, h);
}

/* ---- publishing ---- */

void holder_publish(struct holder *h)
{
        const struct holding *g = acq_holding(&h->acq);
        /* a fresh number: ID time back on the wall clock; else the counter
         * follows, and a start ahead of the clock raises ID time to it (a
         * lead the daemon chose: slewed back, never answered by a move) */
        struct clock_reading now = holder_clock_read(h);
        struct clock_state c = h->clock;
        bool follow = clock_chose(&c, &now, g->start_ms, h->cfg->lead_ms, g->fresh);
        struct shm_publication p = {
                .layout = h->known.layout,
                .worker = (uint32_t)g->worker,
                .start_ms = g->start_ms,
                .deadline = g->mark,
                .offset_ns = c.offset_ns,
                .lead_ms = (uint8_t)h->cfg->lead_ms,
                .follow = follow,
        };
        int r = shm_pub_switch(h->pub, &p);
        if (r < 0) {
                log_error_errno(r, "Cannot publish worker %" PRId32 ": %m", g->worker);
                TRACE_STEP("dropped", g->worker);
                claim_published(h, false);
                return;
        }
        /* the segment shows g's number now, not cur's */
        if (h->hold.cur.state == H_HELD)
                TRACE_STEP("dropped", h->hold.cur.worker);
        TRACE_STEP("publish", g->worker, (int64_t)p.start_ms, (int64_t)p.deadline);
        if (h->pub->replaced != h->pub_replaced) {
                h->pub_replaced = h->pub->replaced;
                h->stats.segments_replaced++;
                log_warning("Every counter line was far ahead of ID time (written by a client): "
                            "published into a fresh segment; clients move to it");
                if (h->cb.segment_replaced)
                        h->cb.segment_replaced(h, h->cb.userdata);
        }
        h->clock = c;
        h->stats.switches++;
        /* the old number is given up once the store confirms its mark at or above
         * the last deadline published for it; the mark then fences it */
        if (h->hold.cur.state != H_NONE) {
                marks_retired(h, h->hold.cur.worker, h->hold.cur.mark);
                /* the same number again (after a fence): the claim just
                 * acknowledged its mark above the old deadline (its start is
                 * above acq_own_last(), which counts the old one) */
                if (h->hold.cur.worker != g->worker || h->hold.cur.lease)
                        marks_raise(h, h->hold.cur.worker, h->hold.cur.mark, h->hold.cur.lease, 0,
                                    h->hold.cur.mark_rev);
        }
        renew_published(h, g);
        claim_published(h, true);
        log_info("Publishing worker %" PRId32 ", deadline %" PRIu64 " (%" PRId64 " ms ahead)",
                 h->hold.cur.worker, h->hold.cur.mark,
                 (int64_t)h->hold.cur.mark - (int64_t)holder_id_ms(h, false));
        if (!h->ready_sent) {
                sd_notify(0, "READY=1");
                h->ready_sent = true;
        }
        holder_update_status(h);
}

/* ---- status ---- */

void holder_update_status(struct holder *h)
{
        char buf[512], said[320];
        if (h->cb.change)
                h->cb.change(h, h->cb.userdata);
        if (h->store_err != STORE_ERR_NONE)
                snprintf(said, sizeof(said), "refused (%s: %s)",
                         store_err_name(h->store, h->store_err), h->store_err_message);
        else
                snprintf(said, sizeof(said), "%s",
                         h->store_reachable ? "reachable" : "unreachable");
        int64_t headroom = h->hold.cur.state == H_NONE ? 0
                                                       : (int64_t)shm_pub_deadline(h->pub) -
                                                                 (int64_t)holder_id_ms(h, false);
        const char *store = store_name(h->store);
        if (h->hold.cur.state == H_HELD)
                snprintf(buf, sizeof(buf),
                         "STATUS=worker %" PRId32 ", headroom %" PRId64 " ms, %s %s",
                         h->hold.cur.worker, headroom, store, said);
        else if (h->hold.cur.state == H_LOST)
                snprintf(buf, sizeof(buf),
                         "STATUS=lost worker %" PRId32 ", headroom %" PRId64
                         " ms, claiming another; %s %s",
                         h->hold.cur.worker, headroom, store, said);
        else
                snprintf(buf, sizeof(buf), "STATUS=claiming a worker number; %s %s", store, said);
        sd_notify(0, buf);
}

/* ---- start and stop ---- */

static int start(struct holder *h, sd_event *event, const struct settings *cfg, struct shm_pub *pub,
                 const struct store_ops *store_ops)
{
        *h = (struct holder){
                .cfg = cfg,
                .event = event,
                .pub = pub,
                .store_reachable = true,
        };
        uint64_t seed;
        if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
                return -errno;
        srandom((unsigned)(seed ^ (seed >> 32)));
        snprintf(h->token, sizeof(h->token), "%016" PRIx64, seed);
        if (gethostname(h->host, sizeof(h->host)) < 0)
                snprintf(h->host, sizeof(h->host), "unknown");
        for (char *c = h->host; *c; c++)
                if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                        *c = '_';
        claim_init(h);
        renew_init(h);
        marks_init(h);
        cluster_init(h);
        snprintf(h->prefix, sizeof(h->prefix), "/snowid/%s/", cfg->cluster);
        int r = store_ops ? store_new_with(store_ops, event, cfg, &h->store)
                          : store_new(event, cfg, &h->store);
        if (r < 0)
                return r;
        store_set_prefix(h->store, h->prefix);
        store_on_problem(h->store, refused_problem, h);
        refused_file(h); /* an earlier daemon's is stale */
        r = sd_event_add_time_relative(event, &h->renew_timer, CLOCK_MONOTONIC,
                                       (uint64_t)cfg->renew_ms * 1000, 1000, renew_on_timer, h);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->renew_timer, SD_EVENT_ON);
        if (r >= 0)
                r = sd_event_add_time_relative(event, &h->clock_timer, CLOCK_MONOTONIC,
                                               CLOCK_TICK_MS * 1000, 1000, steps_on_tick, h);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->clock_timer, SD_EVENT_ON);
        if (r < 0)
                return r;
        _cleanup_(closep) int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
        if (fd < 0 || steps_arm_setclock(fd) < 0)
                return -errno;
        r = sd_event_add_io(event, &h->setclock_io, fd, EPOLLIN, steps_on_setclock, h);
        if (r < 0)
                return r;
        /* the source owns the timer from here */
        sd_event_source_set_io_fd_own(h->setclock_io, 1);
        take_fd(&fd);
        return 0;
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        for (unsigned i = 0; i < RAISES_MAX; i++)
                if (h->raises.r[i].active && h->raises.r[i].lease)
                        log_warning("The mark of worker %" PRId32 " was not confirmed at or above "
                                    "%" PRIu64 " in time: its lease is left to expire, not "
                                    "revoked",
                                    h->raises.r[i].worker, h->raises.r[i].mark);
        if (store_in_flight(h->store))
                log_warning("%s did not answer in time; leases not revoked expire by themselves",
                            store_name(h->store));
        done(h);
        return 0;
}

static int on_stop_post(sd_event_source *s, void *userdata)
{
        (void)s;
        holder_stop_check(userdata);
        return 0;
}

/* Rule 4 at a stop: the number is given up (its lease revoked) only once
 * the store has confirmed its mark at or above the last deadline published,
 * raising it if it was lowered; otherwise the lease expires by itself. */
void holder_stop(struct holder *h)
{
        if (h->stopping)
                return;
        h->stopping = true;
        sd_notify(0, "STOPPING=1");
        sd_event_source_set_enabled(h->renew_timer, SD_EVENT_OFF);
        sd_event_source_set_enabled(h->clock_timer, SD_EVENT_OFF);
        if (h->hold.cur.state != H_NONE)
                shm_pub_set_state(h->pub, SHM_STATE_NO_LEASE);
        claim_drop(h); /* nothing was published under its lease */
        if (h->hold.cur.state == H_HELD && h->known.halted == HALT_NONE) {
                log_info("Stopping: confirming worker %" PRId32 "'s mark at or above its deadline "
                         "%" PRIu64 ", then revoking the lease; the segment stays valid until "
                         "its deadline",
                         h->hold.cur.worker, h->hold.cur.mark);
                marks_raise(h, h->hold.cur.worker, h->hold.cur.mark, h->hold.cur.lease, 0,
                            h->hold.cur.mark_rev);
        } else if (h->hold.cur.state == H_HELD)
                log_info("Stopping: %s is not trusted now; the lease is left to expire",
                         store_name(h->store));
        else
                log_info("Stopping; the segment stays valid until its deadline");
        renew_stop(h);
        /* done once nothing is in flight and no raise is left, checked
         * after every event; at most a request's timeout (capped at 2 s,
         * so that the whole stop fits systemd's TimeoutStopSec) and a
         * second */
        sd_event_add_post(h->event, &h->stop_post, on_stop_post, h);
        unsigned ms = h->cfg->store_timeout_ms < 2000 ? h->cfg->store_timeout_ms : 2000;
        sd_event_add_time_relative(h->event, &h->stop_timer, CLOCK_MONOTONIC,
                                   (uint64_t)ms * 1000 + 1000000, 1000, on_stop_timer, h);
        holder_stop_check(h);
}

int holder_new(sd_event *event, const struct settings *cfg, struct shm_pub *pub,
               const struct store_ops *store_ops, const struct holder_callbacks *cb,
               struct holder **ret)
{
        struct holder *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        int r = start(h, event, cfg, pub, store_ops);
        if (r < 0) {
                holder_free(h);
                return r;
        }
        if (cb)
                h->cb = *cb;
        holder_update_status(h);
        cluster_read(h);
        *ret = h;
        return 0;
}

static const char *step_name(const struct holder *h)
{
        static const char *const names[] = {
                [H_NONE] = "none",
                [H_HELD] = "held",
                [H_LOST] = "lost",
        };
        if (!acq_idle(&h->acq))
                return acq_state_name(&h->acq);
        if (h->hold.cur.state != H_NONE)
                return names[h->hold.cur.state];
        return h->known.layout_ready ? "none" : "layout";
}

int holder_exit_code(const struct holder *h)
{
        return h->exit_code;
}

void holder_status(const struct holder *h, struct holder_status *st)
{
        *st = (struct holder_status){
                .layout = h->known.layout,
                .layout_ready = h->known.layout_ready,
                .worker = h->hold.cur.state == H_HELD ? h->hold.cur.worker : -1,
                .lease = h->hold.cur.state == H_HELD   ? "held"
                         : h->hold.cur.state == H_LOST ? "lost"
                                                       : "claiming",
                .step = step_name(h),
                .store_reachable = h->store_reachable,
                .halted = holder_halt_name(known_reason(&h->known)),
                .store_full = h->store_full,
                .store_name = store_name(h->store),
                .store_title = store_title(h->store),
                .store_error = store_err_name(h->store, h->store_err),
                .offset_ns = h->clock.offset_ns,
                .stats = h->stats,
                .store = *store_stats(h->store),
        };
        snprintf(st->store_error_message, sizeof(st->store_error_message), "%s",
                 h->store_err_message);
}

struct holder *holder_free(struct holder *h)
{
        if (!h)
                return NULL;
        sd_event_source_disable_unref(h->renew_timer);
        sd_event_source_disable_unref(h->clock_timer);
        sd_event_source_disable_unref(h->retry_timer);
        sd_event_source_disable_unref(h->setclock_io);
        sd_event_source_disable_unref(h->stop_timer);
        sd_event_source_disable_unref(h->stop_post);
        sd_event_source_disable_unref(h->reread_timer);
        sd_event_source_disable_unref(h->raise_timer);
        sd_event_source_disable_unref(h->raise_keep_timer);
        h->store = store_free(h->store);
        free(h);
        return NULL;
}
