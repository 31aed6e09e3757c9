/* SPDX-License-Identifier: MIT */
/*
 * The only place that names <stdatomic.h>.  Everything that touches the
 * shared segment goes through these wrappers, and so do the daemon's own
 * atomics (the HTTP threads' counters, rate buckets and read deadlines), so
 * every ordering decision in snowid is visible in one of a handful of
 * spellings.  Each use of an acquire or release says, beside it, what it
 * pairs with.
 *
 * The relaxed ones pair with nothing: they are for a word that guards only
 * itself (a counter, a bucket's time, a deadline), whose readers need no
 * other write to be visible with it.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define READ_ONCE(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define WRITE_ONCE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
#define load_acquire(x) atomic_load_explicit(&(x), memory_order_acquire)
#define store_release(x, v) atomic_store_explicit(&(x), (v), memory_order_release)
#define fetch_add_relaxed(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)
#define fetch_sub_relaxed(x, v) atomic_fetch_sub_explicit(&(x), (v), memory_order_relaxed)
#define cas_relaxed(x, expp, v)                                                                    \
        atomic_compare_exchange_strong_explicit(&(x), (expp), (v), memory_order_relaxed,           \
                                                memory_order_relaxed)
/* May fail spuriously: for a loop that retries anyway (cheaper on LL/SC). */
#define cas_weak_relaxed(x, expp, v)                                                               \
        atomic_compare_exchange_weak_explicit(&(x), (expp), (v), memory_order_relaxed,             \
                                              memory_order_relaxed)
#define smp_rmb() atomic_thread_fence(memory_order_acquire)
#define smp_wmb() atomic_thread_fence(memory_order_release)
#define smp_mb() atomic_thread_fence(memory_order_seq_cst)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#else
        atomic_signal_fence(memory_order_seq_cst);
#endif
}
