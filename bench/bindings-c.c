/* SPDX-License-Identifier: MIT */
/*
 * snowid-bench-c: C's row of bench/bindings.sh.  ns per ID of snowid_next()
 * and snowid_next_batch() of 64 through the shared library, beside a
 * textbook lock-free Snowflake generator (CAS on one word, its ms from
 * CLOCK_REALTIME) in the same process and run, on 1 and 2 threads: the
 * method of the bindings' benchmarks (bindings/rust/src/bin/bench.rs), so
 * that each binding's cost can be set against C's.  Prints "c ROW THREADS
 * NS IDS_PER_S", tab-separated.  Runs beside a snowidd
 * (bindings/with_daemon.py).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snowid.h"

enum row { SNOWID, BATCH64, TEXTBOOK, NROWS };
static const char *const row_names[] = {"snowid", "snowid-batch64", "textbook"};

static snowid *handle;
static snowid_layout layout;
static _Atomic uint64_t tb_state;
static atomic_bool stop;
static _Atomic uint64_t sink;

static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* the textbook generator: one word of (ms << seq_bits | seq), advanced by
 * compare-and-swap */
static uint64_t textbook_next(void)
{
        unsigned sb = layout.seq_bits, wb = layout.worker_bits;
        uint64_t mask = (UINT64_C(1) << sb) - 1;
        for (;;) {
                uint64_t now = wall_ms() - layout.epoch_ms;
                uint64_t old = atomic_load_explicit(&tb_state, memory_order_relaxed), new;
                if (now > old >> sb)
                        new = now << sb;
                else if ((old & mask) < mask)
                        new = old + 1;
                else
                        continue; /* this ms is spent: wait for the next */
                if (atomic_compare_exchange_weak_explicit(
                            &tb_state, &old, new, memory_order_relaxed, memory_order_relaxed))
                        return (new >> sb) << (wb + sb) | UINT64_C(1) << sb | (new &mask);
        }
}

static void die(const char *what, int r)
{
        fprintf(stderr, "snowid-bench-c: %s: %s\n", what, strerror(-r));
        exit(1);
}

struct worker {
        pthread_t t;
        enum row row;
        pthread_barrier_t *ready;
        uint64_t n;
};

static void *work(void *p)
{
        struct worker *w = p;
        uint64_t x = 0, buf[64], n = 0;
        pthread_barrier_wait(w->ready);
        while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
                if (w->row == SNOWID) {
                        for (int i = 0; i < 64; i++) {
                                int r = snowid_next(handle, &buf[0]);
                                if (r < 0)
                                        die("snowid_next", r);
                                x ^= buf[0];
                        }
                } else if (w->row == BATCH64) {
                        int r = snowid_next_batch(handle, buf, 64);
                        if (r < 0)
                                die("snowid_next_batch", r);
                        x ^= buf[63];
                } else {
                        for (int i = 0; i < 64; i++)
                                x ^= textbook_next();
                }
                n += 64;
        }
        atomic_fetch_xor_explicit(&sink, x, memory_order_relaxed);
        w->n = n;
        return NULL;
}

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* threads workers of row for ns: adds wall ns and IDs to *el and *ids */
static void measure(enum row row, int threads, int64_t ns, double *el, double *ids)
{
        struct worker w[2];
        pthread_barrier_t ready;
        pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
        atomic_store(&stop, false);
        for (int i = 0; i < threads; i++) {
                w[i] = (struct worker){.row = row, .ready = &ready};
                if (pthread_create(&w[i].t, NULL, work, &w[i]) != 0)
                        die("pthread_create", -EAGAIN);
        }
        pthread_barrier_wait(&ready);
        int64_t t0 = now_ns();
        struct timespec d = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
        nanosleep(&d, NULL);
        atomic_store(&stop, true);
        for (int i = 0; i < threads; i++) {
                pthread_join(w[i].t, NULL);
                *ids += (double)w[i].n;
        }
        *el += (double)(now_ns() - t0);
        pthread_barrier_destroy(&ready);
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
        double seconds = 2;
        if (argc == 3 && strcmp(argv[1], "--seconds") == 0) {
                char *end;
                seconds = strtod(argv[2], &end);
                if (*end || !(seconds > 0.05 && seconds < 600))
                        return 2;
        } else if (argc != 1) {
                fprintf(stderr, "usage: snowid-bench-c [--seconds S]\n");
                return 2;
        }
        int r = snowid_open(NULL, &handle);
        if (r < 0)
                die("snowid_open", r);
        snowid_set_max_wait(handle, 1000000);
        if ((r = snowid_get_layout(handle, &layout)) < 0)
                die("snowid_get_layout", r);
        fprintf(stderr, "snowid-bench-c: layout %u/%u/%u bits: at most %llu IDs per ms\n",
                layout.time_bits, layout.worker_bits, layout.seq_bits, 1ULL << layout.seq_bits);
        int64_t slice = (int64_t)(seconds / 5 * 1e9);
        double res[NROWS][2][3];
        /* 3 runs of 5 slices a row and thread count, the rows taking turns */
        for (int k = 0; k < 3; k++) {
                double el[NROWS][2] = {{0}}, ids[NROWS][2] = {{0}};
                for (int s = 0; s < 5; s++)
                        for (int i = 0; i < NROWS; i++)
                                for (int j = 0; j < 2; j++)
                                        measure((enum row)i, j + 1, slice, &el[i][j], &ids[i][j]);
                for (int i = 0; i < NROWS; i++)
                        for (int j = 0; j < 2; j++)
                                res[i][j][k] = el[i][j] / ids[i][j];
        }
        for (int i = 0; i < NROWS; i++)
                for (int j = 0; j < 2; j++) {
                        qsort(res[i][j], 3, sizeof(double), cmp_double);
                        double ns = res[i][j][1];
                        printf("c\t%s\t%d\t%.1f\t%.0f\n", row_names[i], j + 1, ns, 1e9 / ns);
                }
        snowid_close(handle);
        return (int)(atomic_load(&sink) & 0);
}
