/* SPDX-License-Identifier: MIT */
/*
 * The store's verbs (verbs.h) said as the transactions both backends speak
 * today (txn.h: etcd's v3 JSON shape), and their answers read back into
 * typed results.  Each call keeps what reading its answer needs (the
 * number, the lease and value asked about, where the fence was read) until
 * the answer comes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monotonic.h"
#include "txn.h"
#include "verbs-int.h"

static struct store_observer observer;
static const char *const verb_names[] = {
        [V_GRANT] = "grant",       [V_KEEPALIVE] = "keepalive", [V_REVOKE] = "revoke",
        [V_SCAN] = "scan",         [V_CLAIM] = "claim",         [V_READ] = "read",
        [V_EXTEND] = "extend",     [V_RAISE] = "raise",         [V_CLUSTER] = "cluster",
        [V_CREATING] = "creating", [V_DONE] = "write",          [V_ALARMS] = "alarms",
        [V_FENCE] = "fence",
};

/* Whether a verb's call waits as long as the store's answers take
 * (patience.h): the acquisition's (a grant, a scan, a claim, its read-back),
 * the cluster's reads and its creation's `creating` key, the alarms and
 * `snowid fence`'s read.  A held number's keepalive, extension and raise
 * wait store-timeout: one keepalive is in flight at a time, and the next
 * is due a third of the TTL later; rule 6's settle pause counts on the
 * others.  So do the writes of a cluster, a witness and a range. */
static bool patient(enum verb_kind kind)
{
        switch (kind) {
        case V_GRANT:
        case V_SCAN:
        case V_CLAIM:
        case V_READ:
        case V_CLUSTER:
        case V_CREATING:
        case V_ALARMS:
        case V_FENCE:
                return true;
        default:
                return false;
        }
}

/* ---- reading answers ---- */

/* whether ops i (fence) and i + 1 (layout) of an ok answer name cl */
int verb_same_at(const struct store_reply *r, const struct verb *v, size_t i)
{
        return store_ok(r) ? txn_cluster_same(r->json, i, v->cl) : -1;
}

bool verb_succeeded(const struct store_reply *r)
{
        return store_ok(r) && json_is_true(json_object_get(r->json, "succeeded"));
}

/* a write's: 1 if its compares held, else where its failure read the fence */
static int write_same(const struct store_reply *r, const struct verb *v, size_t i)
{
        return !store_ok(r) ? -1 : verb_succeeded(r) ? 1 : txn_cluster_same(r->json, i, v->cl);
}

/* workers/<n> at op wi and hwm/<n> at op mi (-1: not read).  An op that is
 * missing or not a range's answer is malformed, as a key that cannot be
 * read: never taken for an absent key. */
static void number_at(const struct store_reply *r, const struct verb *v, int wi, int mi,
                      struct store_number *n)
{
        struct kv kv;
        *n = (struct store_number){0};
        int rw = store_ok(r) && wi >= 0 ? txn_kv(r->json, (size_t)wi, &kv) : 0;
        if (rw == 1) {
                n->held = true;
                n->lease = kv.lease;
                n->value_is = !strcmp(kv.value, v->value);
                kv_clear(&kv);
        }
        int rm = store_ok(r) && mi >= 0 ? txn_kv(r->json, (size_t)mi, &kv) : 0;
        if (rm == 1) {
                n->marked = true;
                n->mark_rev = kv.mod_revision;
                n->mark_valid = parse_mark(kv.value, kv.value_len, &n->mark) == 0;
                if (!n->mark_valid)
                        n->mark = 0;
                kv_clear(&kv);
        }
        n->malformed = !store_ok(r) || rw < 0 || rm < 0;
}

/* "<prefix><what><n>" into n < workers; -1 if it is not such a key */
static int64_t key_number(const char *prefix, const char *key, const char *what, uint64_t workers)
{
        size_t pl = strlen(prefix), wl = strlen(what);
        if (strncmp(key, prefix, pl) || strncmp(key + pl, what, wl))
                return -1;
        const char *d = key + pl + wl;
        uint64_t n = 0;
        if (!*d || (*d == '0' && d[1]))
                return -1;
        for (; *d; d++) {
                if (*d < '0' || *d > '9' || n >= workers)
                        return -1;
                n = n * 10 + (uint64_t)(*d - '0');
        }
        return n < workers ? (int64_t)n : -1;
}

/* [workers/ (k ranges), hwm/ (k ranges), floor, fence, layout] */
static void scan_read(const struct store_reply *r, const struct verb *v, struct store_scan *sc)
{
        const char *prefix = store_prefix(v->store);
        unsigned k = v->sampled ? v->sampled : 1;
        struct kv kv = {0};
        sc->ok = store_ok(r);
        sc->succeeded = verb_succeeded(r);
        sc->same = verb_same_at(r, v, 2 * k + 1);
        sc->floor_read = sc->ok ? txn_kv(r->json, 2 * k, &kv) : -1;
        if (sc->floor_read == 1 &&
            (parse_mark(kv.value, kv.value_len, &sc->floor) < 0 || sc->floor >> v->time_bits))
                sc->floor_read = 0; /* damaged: as if lost */
        kv_clear(&kv);
        sc->workers = v->workers;
        if (!sc->ok || !sc->succeeded || sc->same != 1 || sc->floor_read != 1)
                return;
        sc->numbers = calloc(v->workers, sizeof(*sc->numbers));
        if (!sc->numbers)
                return;
        /* not in the sample: as if held */
        for (uint64_t n = 0; n < v->workers; n++)
                sc->numbers[n].held = v->sampled > 0;
        for (unsigned i = 0; i < v->sampled; i++)
                if (v->sample[i] < v->workers)
                        sc->numbers[v->sample[i]].held = false;
        /* ops [0, k) read workers/, ops [k, 2k) read hwm/ */
        for (unsigned op = 0; op < 2 * k; op++) {
                bool marks = op >= k;
                json_t *kvs = txn_kvs(r->json, op), *j;
                size_t i;
                json_array_foreach(kvs, i, j)
                {
                        if (kv_parse(j, &kv) < 0)
                                continue;
                        int64_t n =
                                key_number(prefix, kv.key, marks ? "hwm/" : "workers/", v->workers);
                        if (n >= 0 && !marks)
                                sc->numbers[n].held = true;
                        else if (n >= 0) {
                                struct store_number *x = &sc->numbers[n];
                                x->marked = true;
                                x->mark_rev = kv.mod_revision;
                                x->mark_valid = parse_mark(kv.value, kv.value_len, &x->mark) == 0 &&
                                                !(x->mark >> v->time_bits);
                        }
                        kv_clear(&kv);
                }
        }
}

static void on_answer(void *userdata, const struct store_reply *r)
{
        struct verb *v = userdata;
        const struct store_answer a = store_answer_of(r);
        verb_answered(v, &a);
        int64_t id = 0, ttl = -1;
        switch (v->kind) {
        case V_GRANT:
                if (!store_ok(r) || store_int64(r->json, "ID", &id) < 0)
                        id = 0;
                if (!store_ok(r) || store_int64(r->json, "TTL", &ttl) < 0)
                        ttl = -1;
                ((verb_lease_cb)v->cb)(v->userdata, &a, id, ttl);
                break;
        case V_KEEPALIVE: {
                json_t *res = r->json ? json_object_get(r->json, "result") : NULL;
                if (!store_ok(r) || !json_is_object(res) || store_int64(res, "TTL", &ttl) < 0)
                        ttl = -1;
                else if (ttl < 0)
                        ttl = 0; /* unknown, said as a negative TTL */
                ((verb_lease_cb)v->cb)(v->userdata, &a, v->lease, ttl);
                break;
        }
        case V_REVOKE:
                ((verb_revoke_cb)v->cb)(v->userdata, &a,
                                        store_ok(r) || (r->answered && r->http == 404));
                break;
        case V_SCAN: {
                struct store_scan sc = {0};
                scan_read(r, v, &sc);
                ((verb_scan_cb)v->cb)(v->userdata, &a, &sc);
                free(sc.numbers);
                break;
        }
        case V_CLAIM: {
                /* failure: [workers/n, hwm/n, fence, layout, hwm/<own>] */
                struct store_claimed c = {
                        .no_answer = !r->answered || r->http >= 500 || (r->http == 200 && !r->json),
                        .ok = store_ok(r),
                        .succeeded = verb_succeeded(r),
                        .revision = r->revision,
                        .same = write_same(r, v, 2),
                };
                if (c.ok && !c.succeeded && v->own) {
                        number_at(r, v, -1, 4, &c.own);
                        c.own_read = !c.own.malformed;
                }
                ((verb_claim_cb)v->cb)(v->userdata, &a, &c);
                break;
        }
        case V_READ: {
                /* [workers/n, hwm/n, fence, layout] */
                struct store_read rd = {.ok = store_ok(r),
                                        .succeeded = verb_succeeded(r),
                                        .same = verb_same_at(r, v, 2)};
                number_at(r, v, 0, 1, &rd.n);
                ((verb_read_cb)v->cb)(v->userdata, &a, &rd);
                break;
        }
        case V_EXTEND: {
                /* failure: [workers/n, hwm/n, fence, layout] */
                struct store_extended e = {.ok = store_ok(r),
                                           .succeeded = verb_succeeded(r),
                                           .revision = r->revision,
                                           .same = write_same(r, v, 2)};
                if (e.ok && !e.succeeded)
                        number_at(r, v, 0, 1, &e.n);
                ((verb_extend_cb)v->cb)(v->userdata, &a, &e);
                break;
        }
        case V_RAISE: {
                /* [hwm, fence, layout] in either branch but a put's success */
                struct store_raised rs = {.ok = store_ok(r),
                                          .succeeded = verb_succeeded(r),
                                          .same = write_same(r, v, 1)};
                rs.put = rs.succeeded &&
                         json_object_get(json_array_get(json_object_get(r->json, "responses"), 0),
                                         "response_put");
                if (!rs.put)
                        number_at(r, v, -1, 0, &rs.n);
                ((verb_raise_cb)v->cb)(v->userdata, &a, &rs);
                break;
        }
        default:
                verb_cluster_answer(v, r);
                break;
        }
        verb_free(v);
}

void verb_free(struct verb *v)
{
        struct verb **head = store_verbs(v->store);
        if (v->prev)
                v->prev->next = v->next;
        else
                *head = v->next;
        if (v->next)
                v->next->prev = v->prev;
        free(v);
}

struct verb *verb_new(struct store *s, enum verb_kind kind, void (*cb)(void), void *userdata)
{
        struct verb **head = store_verbs(s), *v = calloc(1, sizeof(*v));
        if (!v)
                return NULL;
        bool connecting = store_connecting(s);
        *v = (struct verb){.kind = kind,
                           .store = s,
                           .cb = cb,
                           .userdata = userdata,
                           .next = *head,
                           .sent_us = now_usec(),
                           .wait_ms = store_wait_ms(s, patient(kind), connecting),
                           .connecting = connecting};
        if (*head)
                (*head)->prev = v;
        *head = v;
        if (observer.sent)
                observer.sent(observer.userdata, s, verb_names[kind]);
        return v;
}

void verb_answered(const struct verb *v, const struct store_answer *a)
{
        uint64_t usec = now_usec() - v->sent_us;
        /* a call made behind the first connection waited for it too: its
         * time is not the store's answers' (one that got no answer still
         * counts, and doubles the next wait) */
        if (!v->connecting || !a->answered)
                store_waited(v->store, patient(v->kind), v->wait_ms, usec, a->answered);
        if (observer.answered)
                observer.answered(observer.userdata, v->store, verb_names[v->kind], usec, a);
}

void store_observe(const struct store_observer *o)
{
        observer = o ? *o : (struct store_observer){0};
}

void store_verbs_drop(struct store *s)
{
        struct verb **head = store_verbs(s);
        while (*head)
                verb_free(*head);
}

int verb_send(struct verb *v, const char *path, json_t *body, uint64_t tag)
{
        if (!v) {
                json_decref(body);
                return -ENOMEM;
        }
        int r = store_call(v->store, path, body, on_answer, v, tag, v->wait_ms);
        if (r < 0)
                verb_free(v);
        return r;
}

/* ---- leases ---- */

int txn_grant(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata, uint64_t tag)
{
        return verb_send(verb_new(s, V_GRANT, (void (*)(void))cb, userdata), "/v3/lease/grant",
                         json_pack("{s:I}", "TTL", (json_int_t)ttl_s), tag);
}

static json_t *lease_body(int64_t lease)
{
        char l[24];
        snprintf(l, sizeof(l), "%" PRId64, lease);
        return json_pack("{s:s}", "ID", l);
}

int txn_keepalive(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata, uint64_t tag)
{
        struct verb *v = verb_new(s, V_KEEPALIVE, (void (*)(void))cb, userdata);
        if (v)
                v->lease = lease;
        return verb_send(v, "/v3/lease/keepalive", lease_body(lease), tag);
}

int txn_revoke(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata)
{
        return verb_send(verb_new(s, V_REVOKE, (void (*)(void))cb, userdata), "/v3/lease/revoke",
                         lease_body(lease), 0);
}

/* ---- numbers ---- */

int txn_scan(struct store *s, const struct cluster_ident *cl, uint64_t workers,
             const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
             void *userdata, uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_SCAN, (void (*)(void))cb, userdata);
        json_t *ops = json_array();
        if (sampled > STORE_SAMPLE_MAX)
                sampled = STORE_SAMPLE_MAX;
        if (v) {
                v->cl = cl;
                v->workers = workers;
                v->time_bits = time_bits;
                v->sampled = sample ? sampled : 0;
                for (unsigned i = 0; i < v->sampled; i++)
                        v->sample[i] = sample[i];
        }
        if (sample && sampled) {
                for (unsigned i = 0; i < sampled; i++)
                        json_array_append_new(
                                ops, txn_range(txn_key(p, "workers/", sample[i]), NULL, true));
                for (unsigned i = 0; i < sampled; i++)
                        json_array_append_new(
                                ops, txn_range(txn_key(p, "hwm/", sample[i]), NULL, false));
        } else {
                json_array_append_new(ops, txn_range(txn_key(p, "workers/", -1),
                                                     txn_key(p, "workers0", -1), true));
                json_array_append_new(
                        ops, txn_range(txn_key(p, "hwm/", -1), txn_key(p, "hwm0", -1), false));
        }
        json_array_append_new(ops, txn_range(txn_key(p, "floor", -1), NULL, false));
        txn_cluster_reads(ops, p);
        return verb_send(v, "/v3/kv/txn", json_pack("{s:o}", "success", ops), tag);
}

int txn_claim(struct store *s, const struct store_claim_req *c, verb_claim_cb cb, void *userdata,
              uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_CLAIM, (void (*)(void))cb, userdata);
        if (v) {
                v->cl = c->cl;
                v->own = c->own_rev > 0;
        }
        json_t *body = json_pack(
                "{s:[o, o], s:[o, o, o], s:[o, o]}", "compare",
                txn_cmp(txn_key(p, "workers/", c->worker), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(p, "hwm/", c->worker), "MOD", "EQUAL", NULL, c->modrev), "success",
                txn_put(txn_key(p, "workers/", c->worker), store_b64("%s", c->value), c->lease),
                txn_put(txn_key(p, "hwm/", c->worker), txn_mark(c->mark), 0),
                txn_raise_floor(p, c->mark), "failure",
                txn_range(txn_key(p, "workers/", c->worker), NULL, false),
                txn_range(txn_key(p, "hwm/", c->worker), NULL, false));
        json_t *cmp = json_object_get(body, "compare");
        txn_cluster_compares(cmp, p, c->cl);
        txn_cluster_reads(json_object_get(body, "failure"), p);
        /* this daemon's last acknowledged write of the number it holds is
         * still there: a restore that took it back refuses the claim (its
         * revisions refilled or not), and the failure branch shows it */
        if (c->own_rev > 0) {
                json_array_append_new(cmp, txn_cmp(txn_key(p, "hwm/", c->own_worker), "MOD",
                                                   "GREATER", NULL, c->own_rev - 1));
                json_array_append_new(json_object_get(body, "failure"),
                                      txn_range(txn_key(p, "hwm/", c->own_worker), NULL, false));
        }
        /* no mark: the floor, which is at or above every deadline ever
         * published, must still be below the start */
        if (!c->modrev)
                json_array_append_new(cmp, txn_cmp(txn_key(p, "floor", -1), "VALUE", "LESS",
                                                   txn_mark(c->start), 0));
        return verb_send(v, "/v3/kv/txn", body, tag);
}

int txn_read_number(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                    const char *value, verb_read_cb cb, void *userdata, uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_READ, (void (*)(void))cb, userdata);
        if (v) {
                v->cl = cl;
                snprintf(v->value, sizeof(v->value), "%s", value);
        }
        json_t *body = json_pack("{s:[o, o]}", "success",
                                 txn_range(txn_key(p, "workers/", worker), NULL, false),
                                 txn_range(txn_key(p, "hwm/", worker), NULL, false));
        txn_cluster_reads(json_object_get(body, "success"), p);
        return verb_send(v, "/v3/kv/txn", body, tag);
}

int txn_extend(struct store *s, const struct cluster_ident *cl, uint32_t worker, int64_t lease,
               const char *value, uint64_t mark, int64_t own_rev, verb_extend_cb cb, void *userdata,
               uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_EXTEND, (void (*)(void))cb, userdata);
        if (v) {
                v->cl = cl;
                snprintf(v->value, sizeof(v->value), "%s", value);
        }
        json_t *body =
                json_pack("{s:[o, o, o, o], s:[o, o], s:[o, o]}", "compare",
                          txn_cmp(txn_key(p, "workers/", worker), "LEASE", "EQUAL", NULL, lease),
                          txn_cmp(txn_key(p, "workers/", worker), "VALUE", "EQUAL",
                                  store_b64("%s", value), 0),
                          txn_cmp(txn_key(p, "hwm/", worker), "VALUE", "LESS", txn_mark(mark), 0),
                          /* this daemon's last write of it still there (a restore
                           * takes it back: then the failure branch shows it) */
                          txn_cmp(txn_key(p, "hwm/", worker), "MOD", "GREATER", NULL,
                                  own_rev > 0 ? own_rev - 1 : 0),
                          "success", txn_put(txn_key(p, "hwm/", worker), txn_mark(mark), 0),
                          txn_raise_floor(p, mark), "failure",
                          txn_range(txn_key(p, "workers/", worker), NULL, false),
                          txn_range(txn_key(p, "hwm/", worker), NULL, false));
        txn_cluster_compares(json_object_get(body, "compare"), p, cl);
        txn_cluster_reads(json_object_get(body, "failure"), p);
        return verb_send(v, "/v3/kv/txn", body, tag);
}

int txn_raise(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
              uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_RAISE, (void (*)(void))cb, userdata);
        if (v)
                v->cl = cl;
        json_t *cmp = json_array(), *success = json_array(), *failure = json_array();
        txn_cluster_compares(cmp, p, cl);
        if (put) {
                json_array_append_new(
                        cmp, txn_cmp(txn_key(p, "hwm/", worker), "MOD", "EQUAL", NULL, modrev));
                json_array_append_new(success,
                                      txn_put(txn_key(p, "hwm/", worker), txn_mark(mark), 0));
                json_array_append_new(success, txn_raise_floor(p, mark));
        } else {
                json_array_append_new(success, txn_range(txn_key(p, "hwm/", worker), NULL, false));
                txn_cluster_reads(success, p);
        }
        json_array_append_new(failure, txn_range(txn_key(p, "hwm/", worker), NULL, false));
        txn_cluster_reads(failure, p);
        return verb_send(v, "/v3/kv/txn",
                         json_pack("{s:o, s:o, s:o}", "compare", cmp, "success", success, "failure",
                                   failure),
                         tag);
}

const struct store_verb_ops store_txn_verbs = {
        .grant = txn_grant,
        .keepalive = txn_keepalive,
        .revoke = txn_revoke,
        .scan = txn_scan,
        .claim = txn_claim,
        .read_number = txn_read_number,
        .extend = txn_extend,
        .raise = txn_raise,
        .read_cluster = txn_read_cluster,
        .creating = txn_creating,
        .init_marks = txn_init_marks,
        .make_cluster = txn_make_cluster,
        .witness_put = txn_witness_put,
        .witness_delete = txn_witness_delete,
        .record_range = txn_record_range,
        .alarms = txn_alarms,
        .fence_read = txn_fence_read,
        .fence_write = txn_fence_write,
};
