/* SPDX-License-Identifier: MIT */
/*
 * etcd's answers, fed to the holder's state machine (daemon/holder.c) in
 * place of libcurl: this file is the etcd client the holder talks to, and
 * each request it sends gets the next part of the input as the answer's
 * body, through etcd_reply_parse() as the real client does.
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
#include "etcd.h"
#include "fuzz-dir.h"
#include "holder.h"
#include "publish.h"

struct call {
        etcd_cb cb;
        void *userdata;
        uint64_t tag;
        int64_t rev_at_send;
        unsigned gen_at_send;
        bool is_kv, is_lease;
        struct call *next;
};

struct store {
        struct call *head, **tail;
        unsigned in_flight;
        struct etcd_stats stats;
        struct etcd_history hist;
        void (*problem_cb)(void *userdata, const struct etcd_problem *p);
        void *problem_userdata;
};

int store_new(sd_event *event, const struct settings *cfg, struct store **ret)
{
        (void)event;
        (void)cfg;
        struct store *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->tail = &e->head;
        *ret = e;
        return 0;
}

struct store *store_free(struct store *e)
{
        if (!e)
                return NULL;
        while (e->head) {
                struct call *c = e->head;
                e->head = c->next;
                free(c);
        }
        free(e);
        return NULL;
}

int store_call(struct store *e, const char *path, json_t *body, etcd_cb cb, void *userdata,
               uint64_t tag)
{
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

void store_history_reset(struct store *e)
{
        e->hist = (struct etcd_history){.gen = e->hist.gen + 1};
}

void store_expect_cluster(struct store *e, uint64_t cluster_id)
{
        e->hist.cluster_id = cluster_id;
}

unsigned store_in_flight(const struct store *e)
{
        return e->in_flight;
}

const char *store_endpoint(const struct store *e)
{
        (void)e;
        return "http://fuzz:2379";
}

const struct etcd_stats *store_stats(const struct store *e)
{
        return &e->stats;
}

void store_on_problem(struct store *e, void (*cb)(void *userdata, const struct etcd_problem *p),
                      void *userdata)
{
        e->problem_cb = cb;
        e->problem_userdata = userdata;
}

const char *store_name(const struct store *e)
{
        (void)e;
        return "etcd";
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
static bool answer(struct store *e, const char *part, size_t len)
{
        struct call *c = e->head;
        if (!c)
                return false;
        e->head = c->next;
        if (!e->head)
                e->tail = &e->head;
        e->in_flight--;
        struct etcd_reply r = {.tag = c->tag, .usec = 1000, .kv = c->is_kv};
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
                etcd_reply_parse(&r, http, part, len);
                if ((c->is_kv || c->is_lease) && etcd_ok(&r))
                        etcd_history_note(&e->hist, c->rev_at_send, c->gen_at_send, c->is_kv, &r);
        }
        /* a refusal (auth, roles, a certificate), as the real client reports it */
        if (r.err != ETCD_ERR_NONE && e->problem_cb) {
                struct etcd_problem p = {
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
        struct holder h;
        if (holder_start(&h, ev, &cfg, pub) < 0)
                abort();
        const char *p = (const char *)data, *end = p + size;
        while (p <= end) {
                const char *sep = memmem(p, (size_t)(end - p), "\n----\n", 6);
                size_t len = sep ? (size_t)(sep - p) : (size_t)(end - p);
                /* let the loop run what is due now (not the timers ahead) */
                for (int i = 0; i < 4 && !h.store->head; i++)
                        sd_event_run(ev, 0);
                if (!answer(h.store, p, len))
                        break;
                p += len + 6;
        }
        holder_free(&h);
        sd_event_unref(ev);
        return 0;
}
