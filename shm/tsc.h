/* SPDX-License-Identifier: MIT */
/*
 * The TSC clock: CLOCK_MONOTONIC read as a straight line over the CPU's time
 * stamp counter, a line that snowidd calibrates and publishes in the control
 * segment (struct shm_tsc) for every client on the host.
 *
 *   ns(tsc) = ns0 + ((tsc - base) * mult >> shift)   for 0 <= tsc - base < span
 *
 * The product is taken in 128 bits, so no TSC value can overflow it; a sum
 * past INT64_MAX, a TSC behind the base (another CPU's, or a counter reset by
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
        unsigned __int128 t = ((unsigned __int128)d * l->mult >> (l->shift & 63)) + (uint64_t)l->ns;
        /* a negative ns0 is ≥ 2^63 as unsigned, so it fails here too */
        if (d >= l->span || t > INT64_MAX)
                return 0;
        *ret = (int64_t)t;
        return 1;
}
#endif
