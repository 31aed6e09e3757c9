/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock: CLOCK_MONOTONIC read as a straight line over the CPU's time
 * stamp counter, a line that snowidd calibrates and publishes in the control
 * segment (struct shm_tsc) for every client on the host.
 *
 *   ns(tsc) = ns0 + ((tsc - base) * mult >> shift)   for 0 <= tsc - base < span
 *
 * The product is taken in 128 bits, so no TSC value can overflow it; a sum
 * outside 0..INT64_MAX, a TSC behind the base (another CPU's, or a counter reset by
 * a suspend) and one past the span (snowidd gone, or stalled) all read as
 * "no answer", and the caller uses the vDSO.  span 0 is "off".
 *
 * Clocks never decide uniqueness in snowid: the counter only grows and the
 * deadline is fenced.  A wrong line can only cost ordering (IDs a little
 * early or late in time) or a wait at the lead bound, never a duplicate.
 *
 * Only x86-64 has it for now.  Other architectures keep the vDSO; each has a
 * counter that could serve later: aarch64's CNTVCT_EL0 (constant rate, read
 * at EL0), riscv64's rdtime, powerpc64's timebase (mftb).
 */
#pragma once

#include <stdint.h>

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)
#define SHM_HAVE_TSC 1
#include <x86intrin.h>
#else
#define SHM_HAVE_TSC 0
#endif

/* Every line's shift: mult is ns per cycle in 32.32 fixed point. */
#define TSC_SHIFT 32

/* One line, as published. */
struct tsc_line {
        uint64_t base;
        uint64_t span; /* 0: off */
        uint64_t mult;
        unsigned shift;
        int64_t ns;
};

/*
 * The TSC now.  Plain RDTSC, no fence: the CPU may read it a few dozen
 * cycles early or late against the loads and the atomic operation around
 * it, which moves the reading by nanoseconds, far inside the line's own
 * error bound.  Nothing relies on its order: the counter's RMW makes a value
 * unique and keeps a thread's values increasing whatever the clock reads,
 * and the generation check after the RMW (next.c) does not involve the clock.
 */
static inline uint64_t tsc_read(void)
{
#if SHM_HAVE_TSC
        return __rdtsc();
#else
        return 0;
#endif
}

#ifdef __SIZEOF_INT128__
/* The line's CLOCK_MONOTONIC ns at tsc: 1 and *ret, or 0 outside the line
 * (off, behind its base, past its span, or a sum that would overflow). */
static inline __attribute__((always_inline)) int tsc_line_ns(const struct tsc_line *l, uint64_t tsc,
                                                             int64_t *ret)
{
        /* behind the base wraps to a huge d: one unsigned compare for both ends */
        uint64_t d = tsc - l->base;
        unsigned __int128 p = (unsigned __int128)d * l->mult;
        /* the shift is always TSC_SHIFT (a constant shift is one instruction);
         * the product past 2^95 would not fit the 63 bits kept below */
        uint64_t delta = (uint64_t)(p >> TSC_SHIFT);
        int64_t t;
        if (__builtin_expect(d >= l->span || l->shift != TSC_SHIFT ||
                                     (uint64_t)(p >> 64) >> (63 - TSC_SHIFT) ||
                                     __builtin_add_overflow(l->ns, (int64_t)delta, &t) || t < 0,
                             0))
                return 0;
        *ret = t;
        return 1;
}
#endif
