/* SPDX-License-Identifier: MIT */
/*
 * clock-calls.so: counts clock_gettime() calls, for `snowid-bench
 * --windows`.  Preloaded (LD_PRELOAD=build/bench/clock-calls.so), it stands
 * in front of libc's clock_gettime() and passes every call on; the bench
 * reads snowid_bench_clock_calls, so that a window can tell whether
 * snowid_next() read the vDSO instead of the TSC line.
 */
#include <dlfcn.h>
#include <time.h>

unsigned long snowid_bench_clock_calls;

int clock_gettime(clockid_t clock, struct timespec *ts)
{
        static int (*real)(clockid_t, struct timespec *);
        if (!real)
                real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
        __atomic_fetch_add(&snowid_bench_clock_calls, 1, __ATOMIC_RELAXED);
        return real(clock, ts);
}
