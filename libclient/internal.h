/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <time.h>

#include "barrier.h"
#include "handshake.h"
#include "segment.h"
#include "snowid.h"
#include "tsc.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* One segment, as handed out by snowidd.  A handle keeps every segment it
 * ever mapped until snowid_close(): a thread may still be inside take() on
 * an older one (a few KiB each; a handle follows a new one only when the
 * daemon made one). */
struct seg {
        const struct shm_ctl *ctl; /* mapped read-only */
        struct shm_ctr *ctr;
        struct seg *older;
};

struct snowid {
        _Atomic(struct seg *) seg; /* the newest: store_release in follow() */
        _Atomic uint64_t max_wait_ns;
        _Atomic int64_t next_follow_ns; /* no new handshake before this (rate limit) */
        _Atomic int follower;           /* pid of the process whose thread follows, or 0 */
        uint64_t uuid_key;              /* of UUIDs' random bits (uuid7.c); set once at open */
        char path[SHM_SOCK_PATH_MAX];
};

/* What take() read from one generation (next.c): everything a value needs
 * to become an ID or a UUID. */
struct snap {
        uint64_t gen;
        uint32_t worker;
        unsigned worker_bits, seq_bits;
};

/* n consecutive counter values (the first in *ret_x), the generation they
 * belong to and its epoch: the fast path of snowid_next(), for the UUID forms. */
int snowid_take(snowid *s, uint64_t n, uint64_t *ret_x, struct snap *ret_sn, uint64_t *ret_epoch);

/* Asks the socket for the segment, if g (the caller's) is retired or its
 * daemon gone; 1 if the handle has moved to a newer segment, else 0.
 * Rate-limited; waits at most budget_ns (nothing below a millisecond). */
int snowid_follow(snowid *s, const struct seg *g, int64_t budget_ns);

/* 1: this process may read the TSC clock; 0: it refuses it (SNOWID_NO_TSC
 * set).  Set at each open (snowid.c). */
extern _Atomic int snowid_tsc_allowed __attribute__((visibility("hidden")));

/* Per thread, since prctl(PR_SET_TSC) is: 1 once checked that RDTSC works in
 * this thread; -1 when it faults (PR_TSC_SIGSEGV), and so may the vDSO, which
 * reads the TSC itself on a host whose clocksource is tsc: this thread's
 * clocks then come from the system call; 0 not checked yet (at the thread's
 * first clock read, and again at each open in the thread). */
extern __thread int snowid_thread_tsc
        __attribute__((visibility("hidden"), tls_model("initial-exec")));
int snowid_thread_tsc_check(void) __attribute__((visibility("hidden")));

static inline __attribute__((always_inline)) int thread_tsc(void)
{
        int t = snowid_thread_tsc;
        return likely(t != 0) ? t : snowid_thread_tsc_check();
}

#ifdef SNOWID_FAKE_CLOCK
/* Tests build the library a second time with a clock of their own. */
int64_t snowid_fake_monotonic_ns(void);
static inline int64_t monotonic_ns(void)
{
        return snowid_fake_monotonic_ns();
}
#else
int64_t snowid_syscall_monotonic_ns(void);
static inline int64_t monotonic_ns(void)
{
        if (unlikely(thread_tsc() < 0))
                return snowid_syscall_monotonic_ns();
        struct timespec ts;
        /* the vDSO: no system call */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#endif

/* monotonic_ns() as a call: the clock of take()'s fallback.  Not inlined,
 * so that the fast path around it keeps its values in registers instead of
 * saving them across the vDSO's call (next.c's loop stays one straight run
 * of code on the TSC clock). */
int64_t snowid_monotonic_ns_call(void) __attribute__((visibility("hidden"), noinline));

/* CLOCK_MONOTONIC: from the TSC line snowidd publishes (shm/tsc.h) when it
 * is on and good for this TSC, else from the vDSO. */
static inline __attribute__((always_inline)) int64_t clock_ns(const struct shm_ctl *ctl)
{
#if SHM_HAVE_TSC && !defined(SNOWID_FAKE_CLOCK)
        if (likely(READ_ONCE(snowid_tsc_allowed) > 0) && likely(thread_tsc() > 0)) {
                const struct shm_tsc *t = &ctl->tsc;
                /* pairs with store_release(tsc.seq) in shm_pub_set_tsc():
                 * an even seq comes with the line written before it */
                uint32_t seq = load_acquire(t->seq);
                uint64_t span = READ_ONCE(t->span);
                /* off (span 0): straight to the vDSO, not even the RDTSC */
                if (likely(span != 0)) {
                        struct tsc_line l = {.base = READ_ONCE(t->base),
                                             .span = span,
                                             .mult = READ_ONCE(t->mult),
                                             .shift = READ_ONCE(t->shift),
                                             .ns = READ_ONCE(t->ns)};
                        /* pairs with smp_wmb() in shm_pub_set_tsc(): a field
                         * from a newer line shows up as an odd or newer seq */
                        smp_rmb();
                        int64_t ns;
                        if (likely(tsc_line_ns(&l, tsc_read(), &ns) & !(seq & 1) &
                                   (READ_ONCE(t->seq) == seq)))
                                return ns;
                }
        }
        return snowid_monotonic_ns_call();
#else
        (void)ctl;
        return monotonic_ns();
#endif
}

/* ID time in ms: CLOCK_MONOTONIC plus the offset that snowidd publishes.
 * Before the epoch (nothing published yet) it reads as 0. */
static inline __attribute__((always_inline)) uint64_t id_time_ms(const struct shm_ctl *ctl)
{
        int64_t offset = READ_ONCE(ctl->offset_ns), t;
        /* a damaged offset must not overflow: past either end reads as that end */
        if (__builtin_add_overflow(clock_ns(ctl), offset, &t))
                t = offset > 0 ? INT64_MAX : 0;
        return t > 0 ? (uint64_t)t / 1000000 : 0;
}
