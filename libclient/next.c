/* SPDX-License-Identifier: MIT */
/*
 * Taking IDs: the algorithm of docs/design.md, "The shared counter" (and its
 * rule 12: no ID time past the deadline).
 *
 * take() is the fast path: one acquire load of gen, a few relaxed loads from
 * the same cache line, a clock read (the TSC line snowidd publishes, checked
 * by its own seqlock, or the vDSO: clock_ns() in internal.h), and one atomic
 * operation on the live counter line.  Everything that waits lives in wait_step(), which the
 * fast path never enters while the counter is within the lead bound of the
 * clock, before the deadline, and the generation is even.
 */
#include <errno.h>
#include <sched.h>

#include "internal.h"

enum wait_verdict { GO = 0, RETRY = 1 };

static void count(_Atomic uint64_t *counter)
{
        fetch_add_relaxed(*counter, 1); /* statistics only; no ordering */
}

/* The budget's end, set on the first wait of a call. */
static int budget_spent(snowid *s, int64_t *until)
{
        int64_t now = monotonic_ns();
        /* a budget past INT64_MAX ns from now saturates: it never runs out */
        if (*until == 0 && __builtin_add_overflow(now, (int64_t)READ_ONCE(s->max_wait_ns), until))
                *until = INT64_MAX;
        return now >= *until;
}

/* What is left of the budget, in ns (all of it before the first wait). */
static int64_t budget_left(snowid *s, const int64_t *until)
{
        if (*until == 0) {
                uint64_t b = READ_ONCE(s->max_wait_ns);
                return b > INT64_MAX ? INT64_MAX : (int64_t)b;
        }
        int64_t left = *until - monotonic_ns();
        return left > 0 ? left : 0;
}

static void pause_briefly(int64_t ahead_ns)
{
        /* short waits (the clock reaching the next ms) spin; long ones sleep */
        if (ahead_ns < 200000) {
                for (int i = 0; i < 64; i++)
                        cpu_relax();
                return;
        }
        struct timespec ts = {.tv_nsec = 100000};
        nanosleep(&ts, NULL);
}

/*
 * Slow path of take(): the counter's ms (last_ms: of a value held, or of the
 * one about to be taken) is past the deadline or more than lead_ms ahead of
 * ID time.  A value held stays good (it is unique), so this waits for the
 * clock or the deadline to catch up, re-reading gen all along.  GO: the
 * value may be used; RETRY: gen changed, drop it.
 */
static int wait_step(snowid *s, const struct seg *g, const struct snap *sn, uint64_t last_ms,
                     int64_t *until)
{
        const struct shm_ctl *ctl = g->ctl;
        struct shm_stats *st = &g->ctr->stats;
        int counted = 0;

        for (;;) {
                if (READ_ONCE(ctl->gen) != sn->gen)
                        return RETRY;
                uint64_t deadline = READ_ONCE(ctl->deadline);
                uint64_t now = id_time_ms(ctl);
                uint64_t lead = READ_ONCE(ctl->lead_ms);
                if (last_ms <= deadline && last_ms <= now + lead)
                        return GO;
                if (!counted) {
                        count(last_ms > deadline ? &st->waits_deadline : &st->waits_ceiling);
                        counted = 1;
                }
                /* past the deadline of a segment whose daemon is gone or
                 * that was replaced: the socket may have a newer one */
                if (last_ms > deadline && snowid_follow(s, g, budget_left(s, until)))
                        return RETRY;
                if (budget_spent(s, until)) {
                        count(&st->eagain);
                        return -EAGAIN;
                }
                int64_t ahead =
                        last_ms > deadline ? 1000000000 : (int64_t)(last_ms - lead - now) * 1000000;
                pause_briefly(ahead);
        }
}

static int wait_switch(snowid *s, const struct seg *g, int64_t *until)
{
        /* a retired segment, or one left odd by a daemon that is gone */
        if (snowid_follow(s, g, budget_left(s, until)))
                return 0;
        count(&g->ctr->stats.waits_switch);
        if (budget_spent(s, until)) {
                count(&g->ctr->stats.eagain);
                return -EAGAIN;
        }
        pause_briefly(1000000);
        return 0;
}

/* Takes n consecutive counter values; returns the first, and the snapshot
 * of the generation they belong to, and its epoch when ret_epoch is not NULL.
 * ret_epoch is a constant at each call: only the UUID forms read the epoch,
 * so snowid_next() compiles to what it was without it. */
static inline __attribute__((always_inline)) int take(snowid *s, uint64_t n, uint64_t *ret_x,
                                                      struct snap *ret_sn, uint64_t *ret_epoch)
{
        int64_t until = 0;

        for (;;) {
                /* pairs with the store_release in snowid_follow(): a newer
                 * segment is seen mapped */
                const struct seg *g = load_acquire(s->seg);
                const struct shm_ctl *ctl = g->ctl;
                struct snap sn;
                /* pairs with store_release(gen) in shm_pub_switch(): we see
                 * the worker, layout and line that this generation published */
                sn.gen = load_acquire(ctl->gen);
                if (unlikely(sn.gen & 1)) {
                        int r = wait_switch(s, g, &until);
                        if (r < 0)
                                return r;
                        continue;
                }
                /* the clock first: what follows need not live across the
                 * vDSO's call, when the clock falls back to it */
                uint64_t now = id_time_ms(ctl);
                sn.worker = READ_ONCE(ctl->worker);
                sn.worker_bits = READ_ONCE(ctl->worker_bits);
                sn.seq_bits = READ_ONCE(ctl->seq_bits);
                /* read between the two reads of gen, like the worker: the
                 * epoch of this generation (it changes only in a switch) */
                uint64_t epoch = ret_epoch ? READ_ONCE(ctl->epoch_ms) : 0;
                uint64_t deadline = READ_ONCE(ctl->deadline);
                uint64_t limit = now + READ_ONCE(ctl->lead_ms);
                unsigned sb = sn.seq_bits, wb = sn.worker_bits;
                if (limit > deadline)
                        limit = deadline;
                if (unlikely(sb > 31 || wb > 31 || sn.worker >> wb || deadline >> (63 - wb - sb) ||
                             n > (UINT64_C(1) << sb)))
                        return n > (UINT64_C(1) << (sb & 31)) ? -EINVAL : -EPROTO;

                _Atomic uint64_t *line = &g->ctr->line[shm_line_index(sn.gen)].state;
                uint64_t x = READ_ONCE(*line), x_ms = x >> sb;
                if (unlikely(x_ms > limit || now > deadline)) {
                        /* no room (the counter at the lead bound, or the
                         * clock past the deadline): wait before taking
                         * anything, so that a caller that gives up does not
                         * push the counter on */
                        int r = wait_step(s, g, &sn, x_ms > now ? x_ms : now, &until);
                        if (r < 0)
                                return r;
                        continue;
                }
                /* relaxed RMWs: the value's uniqueness comes from the RMW
                 * itself; ordering against gen is the smp_rmb() below */
                uint64_t mask = (UINT64_C(1) << sb) - 1;
                if (likely(x_ms >= now) || !cas_relaxed(*line, &x, (now << sb) + n)) {
                        x = fetch_add_relaxed(*line, n);
                        /* this call took the last value of a ms: it closes */
                        if (unlikely((x & mask) + n > mask))
                                fetch_add_relaxed(g->ctr->stats.issued, mask + 1);
                } else {
                        /* the counter moved on from x's ms: it closes with seq(x) taken */
                        if (x & mask)
                                fetch_add_relaxed(g->ctr->stats.issued, x & mask);
                        x = now << sb;
                        /* a batch of a whole ms: it closes at once */
                        if (unlikely(n > mask))
                                fetch_add_relaxed(g->ctr->stats.issued, mask + 1);
                }

                uint64_t last_ms = (x + n - 1) >> sb;
                if (unlikely(last_ms > limit)) {
                        int r = wait_step(s, g, &sn, last_ms, &until);
                        if (r < 0)
                                return r;
                        if (r == RETRY) {
                                count(&g->ctr->stats.dropped);
                                continue;
                        }
                }
                /* pairs with smp_wmb() in shm_pub_switch(): if any load or
                 * RMW above saw the work of a later switch, gen reads newer */
                smp_rmb();
                if (unlikely(READ_ONCE(ctl->gen) != sn.gen)) {
                        count(&g->ctr->stats.dropped);
                        continue;
                }
                *ret_x = x;
                *ret_sn = sn;
                if (ret_epoch)
                        *ret_epoch = epoch;
                return 0;
        }
}

static inline uint64_t compose(const struct snap *sn, uint64_t x)
{
        unsigned sb = sn->seq_bits;
        return ((x >> sb) << (sn->worker_bits + sb)) | ((uint64_t)sn->worker << sb) |
               (x & ((UINT64_C(1) << sb) - 1));
}

SNOWID_EXPORT int snowid_next(snowid *s, uint64_t *ret_id)
{
        struct snap sn;
        uint64_t x;

        if (unlikely(!s || !ret_id))
                return -EINVAL;
        int r = take(s, 1, &x, &sn, NULL);
        if (unlikely(r < 0))
                return r;
        *ret_id = compose(&sn, x);
        return 0;
}

SNOWID_EXPORT int snowid_next_batch(snowid *s, uint64_t *ret_ids, size_t n)
{
        struct snap sn;
        uint64_t x;

        if (!s || !ret_ids || n == 0)
                return -EINVAL;
        int r = take(s, n, &x, &sn, NULL);
        if (r < 0)
                return r;
        /* values within one ms compose to consecutive IDs: fill runs */
        unsigned sb = sn.seq_bits;
        uint64_t v = x, end = x + n;
        size_t i = 0;
        while (v < end) {
                uint64_t run_end = ((v >> sb) + 1) << sb;
                if (run_end > end)
                        run_end = end;
                uint64_t id = compose(&sn, v);
                size_t len = (size_t)(run_end - v);
                for (size_t k = 0; k < len; k++)
                        ret_ids[i + k] = id + k;
                i += len;
                v = run_end;
        }
        return 0;
}

/* The UUID forms (uuid7.c) take their values here, through exactly the
 * checks and fences of snowid_next(), with the epoch of the same generation. */
int snowid_take(snowid *s, uint64_t n, uint64_t *ret_x, struct snap *ret_sn, uint64_t *ret_epoch)
{
        return take(s, n, ret_x, ret_sn, ret_epoch);
}
