/* SPDX-License-Identifier: MIT */
/*
 * etcd's answers, fed to the holder's state machine (daemon/holder/holder.c) in
 * place of libcurl: this file is the etcd client the holder talks to, and
 * each request it sends gets the next part of the input as the answer's
 * body, through store_reply_parse() as the real client does.
 *
 * Input: answers separated by a line "----".  An answer that starts with
 * "#NNN\n" has HTTP status NNN (else 200); one that is just "!" is a request
 * that never got an answer (a timeout).  The holder is started afresh for
 * each input, over one segment shared by all inputs (as a restarted daemon
 * finds its segment), and runs until the input or its requests run out.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz-dir.h"
#include "holder.h"
#include "publish.h"
#include "store.h"

struct call {
        store_cb cb;
        void *userdata;
        uint64_t tag;
        int64_t rev_at_send;
        unsigned gen_at_send;
        bool is_kv, is_lease;
        struct call *next;
};

/* The backend: each request queued until the input answers it. */
struct fake {
        struct call *head, **tail;
        unsigned in_flight;
        struct store_stats stats;
        struct store_history hist;
        store_problem_cb problem_cb;
        void *problem_userdata;
};

/* the backend of the holder now running (one at a time) */
static struct fake *current;

static int fake_new(sd_event *event, const struct settings *cfg, void **ret)
{
        (void)event;
        (void)cfg;
        struct fake *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->tail = &e->head;
        *ret = current = e;
        return 0;
}

static void fake_free(void *b)
{
        struct fake *e = b;
        while (e->head) {
                struct call *c = e->head;
                e->head = c->next;
                free(c);
        }
        if (current == e)
                current = NULL;
        free(e);
}

static int fake_call(void *b, const char *path, json_t *body, store_cb cb, void *userdata,
                     uint64_t tag, unsigned timeout_ms)
{
        struct fake *e = b;
        (void)timeout_ms;
        /* what the real client sends: the body must be JSON it can print */
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (!text)
                abort();
        free(text);
        json_decref(body);
        struct call *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (struct call){.cb = cb,
                           .userdata = userdata,
                           .tag = tag,
                           .rev_at_send = e->hist.max_rev,
                           .gen_at_send = e->hist.gen,
                           .is_kv = !strncmp(path, "/v3/kv/", 7),
                           .is_lease = !strncmp(path, "/v3/lease/", 10)};
        *e->tail = c;
        e->tail = &c->next;
        e->in_flight++;
        return 0;
}

static void fake_history_reset(void *b)
{
        struct fake *e = b;
        e->hist = (struct store_history){.gen = e->hist.gen + 1};
}

static void fake_expect_cluster(void *b, uint64_t cluster_id)
{
        struct fake *e = b;
        e->hist.cluster_id = cluster_id;
}

static unsigned fake_in_flight(const void *b)
{
        const struct fake *e = b;
        return e->in_flight;
}

static const char *fake_endpoint(const void *b)
{
        (void)b;
        return "http://fuzz:2379";
}

static const struct store_stats *fake_stats(const void *b)
{
        const struct fake *e = b;
        return &e->stats;
}

static void fake_on_problem(void *b, store_problem_cb cb, void *userdata)
{
        struct fake *e = b;
        e->problem_cb = cb;
        e->problem_userdata = userdata;
}

/* etcd's own words for what the answers say: the rest of the table is
 * etcd's backend's */
static const struct store_ops *fake_ops(void)
{
        static struct store_ops ops;
        ops = store_etcd_ops;
        ops.new = fake_new;
        ops.free = fake_free;
        ops.call = fake_call;
        ops.in_flight = fake_in_flight;
        ops.history_reset = fake_history_reset;
        ops.expect_cluster = fake_expect_cluster;
        ops.endpoint = fake_endpoint;
        ops.stats = fake_stats;
        ops.on_problem = fake_on_problem;
        return &ops;
}

static struct settings cfg;
static struct shm_pub *pub;

static void cleanup(void)
{
        shm_pub_close(pub);
        settings_free(&cfg);
}

static void setup(void)
{
        char inst[64];
        snprintf(inst, sizeof(inst), "fuzz-etcd-%d", (int)getpid());
        char *argv[] = {"snowidd",     "--config", "/dev/null",     "--instance",       inst,
                        "--log-level", "err",      "--runtime-dir", (char *)fuzz_dir(), NULL};
        if (settings_load(&cfg, NULL, (int)(sizeof(argv) / sizeof(*argv)) - 1, argv) != 0)
                abort();
        if (shm_pub_open(cfg.runtime_dir, cfg.instance, -1, -1, &pub) < 0)
                abort();
        atexit(cleanup);
}

/* Delivers the oldest request's answer; false when none is waiting. */
static bool answer(struct fake *e, const char *part, size_t len)
{
        struct call *c = e->head;
        if (!c)
                return false;
        e->head = c->next;
        if (!e->head)
                e->tail = &e->head;
        e->in_flight--;
        struct store_reply r = {.tag = c->tag, .usec = 1000, .kv = c->is_kv};
        long http = 200;
        if (len == 1 && part[0] == '!') {
                r.error = "Timeout was reached";
        } else {
                if (len >= 5 && part[0] == '#' && part[4] == '\n') {
                        http = 0;
                        for (int i = 1; i < 4; i++)
                                http = http * 10 +
                                       (part[i] >= '0' && part[i] <= '9' ? part[i] - '0' : 0);
                        part += 5;
                        len -= 5;
                }
                store_reply_parse(&r, http, part, len);
                if ((c->is_kv || c->is_lease) && store_ok(&r))
                        store_history_note(&e->hist, c->rev_at_send, c->gen_at_send, c->is_kv, &r);
        }
        /* a refusal (auth, roles, a certificate), as the real client reports it */
        if (r.err != STORE_ERR_NONE && e->problem_cb) {
                struct store_problem p = {
                        .err = r.err, .endpoint = "http://fuzz:2379", .in_row = 1, .members = 1};
                snprintf(p.message, sizeof(p.message), "%s", r.error);
                e->problem_cb(e->problem_userdata, &p);
        }
        c->cb(c->userdata, &r);
        json_decref(r.json);
        free(c);
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!pub)
                setup();
        sd_event *ev;
        if (sd_event_new(&ev) < 0)
                abort();
        struct holder *h;
        if (holder_new(ev, &cfg, pub, fake_ops(), NULL, &h) < 0)
                abort();
        const char *p = (const char *)data, *end = p + size;
        while (p <= end) {
                const char *sep = memmem(p, (size_t)(end - p), "\n----\n", 6);
                size_t len = sep ? (size_t)(sep - p) : (size_t)(end - p);
                /* let the loop run what is due now (not the timers ahead) */
                for (int i = 0; i < 4 && !current->head; i++)
                        sd_event_run(ev, 0);
                if (!answer(current, p, len))
                        break;
                p += len + 6;
        }
        holder_free(h);
        sd_event_unref(ev);
        return 0;
}
