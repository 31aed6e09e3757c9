/* SPDX-License-Identifier: MIT */
/*
 * snowid-taker: a client for the integration tests.  Takes IDs in a loop
 * (one thread per --threads, each writing every ID it took as 8 bytes,
 * native order, to OUT.<thread>) until SIGTERM or --count per thread, then
 * prints one JSON line: how many IDs, how many calls failed and with what,
 * and the longest stretch (ms) between two IDs.
 *
 * With -r a thread takes at most RATE IDs a second (a share every
 * millisecond); with -g every stretch of at least GAP_MS with no ID is
 * written to OUT.<thread>.gaps as "start end" in CLOCK_MONOTONIC ms, with the
 * first and last ID's times as "first"/"last" lines, so that a test can tell
 * when no client on any host was getting IDs.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "snowid.h"

static atomic_int stop;
static const char *out_prefix = "ids";
static uint64_t per_thread = UINT64_MAX, wait_us = 100000;
static unsigned batch = 1;
static uint64_t rate, gap_log_ms;
static snowid *s;

enum { MAX_ERRNO = 256 };

struct result {
        uint64_t ids, eagain, other;
        int last_error;
        uint64_t max_gap_ms;
        uint64_t by_errno[MAX_ERRNO];
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_term(int sig)
{
        (void)sig;
        atomic_store(&stop, 1);
}

struct thread {
        pthread_t t;
        unsigned index;
        struct result res;
};

static void *taker(void *p)
{
        struct thread *th = p;
        struct result *res = &th->res;
        char path[4096];
        snprintf(path, sizeof(path), "%s.%u", out_prefix, th->index);
        FILE *f = fopen(path, "we");
        if (!f) {
                perror(path);
                exit(3);
        }
        FILE *gaps = NULL;
        if (gap_log_ms) {
                snprintf(path, sizeof(path), "%s.%u.gaps", out_prefix, th->index);
                gaps = fopen(path, "we");
                if (!gaps) {
                        perror(path);
                        exit(3);
                }
        }
        uint64_t *ids = malloc(sizeof(uint64_t) * batch), last_ok = now_ms(), first = 0;
        /* with a rate: at most per_ms IDs each millisecond (rate / 1000, rounded up) */
        uint64_t tick = now_ms(), in_tick = 0, per_ms = rate / 1000 + (rate % 1000 != 0);
        while (!atomic_load(&stop) && res->ids < per_thread) {
                if (rate && in_tick >= per_ms) {
                        struct timespec ts = {.tv_sec = (time_t)((tick + 1) / 1000),
                                              .tv_nsec = (long)((tick + 1) % 1000) * 1000000};
                        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                        tick = now_ms();
                        in_tick = 0;
                }
                int r = batch == 1 ? snowid_next(s, ids) : snowid_next_batch(s, ids, batch);
                uint64_t now = now_ms();
                if (r < 0) {
                        if (r == -EAGAIN)
                                res->eagain++;
                        else
                                res->other++;
                        res->last_error = -r;
                        res->by_errno[-r < MAX_ERRNO ? -r : 0]++;
                        continue;
                }
                if (!first) {
                        first = now;
                        if (gaps)
                                fprintf(gaps, "first %" PRIu64 "\n", now);
                } else if (gaps && now - last_ok >= gap_log_ms) {
                        fprintf(gaps, "%" PRIu64 " %" PRIu64 "\n", last_ok, now);
                }
                if (now - last_ok > res->max_gap_ms)
                        res->max_gap_ms = now - last_ok;
                last_ok = now;
                in_tick += batch;
                fwrite(ids, sizeof(uint64_t), batch, f);
                res->ids += batch;
        }
        if (gaps) {
                fprintf(gaps, "last %" PRIu64 "\nend %" PRIu64 "\n", last_ok, now_ms());
                fclose(gaps);
        }
        free(ids);
        fclose(f);
        return NULL;
}

int main(int argc, char **argv)
{
        const char *instance = NULL;
        unsigned threads = 1;
        int c;
        while ((c = getopt(argc, argv, "i:o:t:n:w:b:r:g:")) >= 0) {
                switch (c) {
                case 'i':
                        instance = optarg;
                        break;
                case 'o':
                        out_prefix = optarg;
                        break;
                case 't':
                        threads = (unsigned)atoi(optarg);
                        break;
                case 'n':
                        per_thread = strtoull(optarg, NULL, 10);
                        break;
                case 'w':
                        wait_us = strtoull(optarg, NULL, 10);
                        break;
                case 'b':
                        batch = (unsigned)atoi(optarg);
                        break;
                case 'r':
                        rate = strtoull(optarg, NULL, 10);
                        break;
                case 'g':
                        gap_log_ms = strtoull(optarg, NULL, 10);
                        break;
                default:
                        fprintf(stderr,
                                "usage: snowid-taker -i INSTANCE -o PREFIX [-t THREADS] "
                                "[-n PER_THREAD] [-w WAIT_US] [-b BATCH] [-r RATE] [-g GAP_MS]\n");
                        return 2;
                }
        }
        if (threads < 1 || threads > 16 || batch < 1)
                return 2;
        signal(SIGTERM, on_term);
        signal(SIGINT, on_term);
        int r = snowid_open(instance, &s);
        if (r < 0) {
                fprintf(stderr, "snowid-taker: open: %s\n", strerror(-r));
                return 1;
        }
        snowid_set_max_wait(s, wait_us);
        struct thread th[16] = {0};
        for (unsigned i = 0; i < threads; i++) {
                th[i].index = i;
                pthread_create(&th[i].t, NULL, taker, &th[i]);
        }
        /* tell the test we are taking */
        printf("{\"started\":true}\n");
        fflush(stdout);
        uint64_t ids = 0, eagain = 0, other = 0, gap = 0, by_errno[MAX_ERRNO] = {0};
        int last = 0;
        for (unsigned i = 0; i < threads; i++) {
                pthread_join(th[i].t, NULL);
                for (unsigned e = 0; e < MAX_ERRNO; e++)
                        by_errno[e] += th[i].res.by_errno[e];
                ids += th[i].res.ids;
                eagain += th[i].res.eagain;
                other += th[i].res.other;
                if (th[i].res.max_gap_ms > gap)
                        gap = th[i].res.max_gap_ms;
                if (th[i].res.last_error)
                        last = th[i].res.last_error;
        }
        printf("{\"ids\":%" PRIu64 ",\"eagain\":%" PRIu64 ",\"other_errors\":%" PRIu64
               ",\"last_error\":\"%s\",\"max_gap_ms\":%" PRIu64 ",\"errors\":{",
               ids, eagain, other, last ? strerror(last) : "", gap);
        const char *sep = "";
        for (unsigned e = 0; e < MAX_ERRNO; e++) {
                if (by_errno[e]) {
                        const char *name = e ? strerrorname_np((int)e) : NULL;
                        printf("%s\"%s\":%" PRIu64, sep, name ? name : "other", by_errno[e]);
                        sep = ",";
                }
        }
        printf("}}\n");
        snowid_close(s);
        return 0;
}
