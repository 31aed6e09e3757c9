/* SPDX-License-Identifier: MIT */
/*
 * The cluster's verbs (verbs.h): reading the layout, fence and floor (and,
 * while there is none, whether the cluster was ever used), making it,
 * witnesses, regions' records and the store's alarms, said as the
 * transactions both backends speak today and read back into typed results.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txn.h"
#include "values.h"
#include "verbs-int.h"

static json_t *layout_value(const snowid_layout *l)
{
        char buf[160];
        snprintf(buf, sizeof(buf),
                 "{\"epoch_ms\":%" PRIu64 ",\"time_bits\":%u,\"worker_bits\":%u,\"seq_bits\":%u}",
                 l->epoch_ms, l->time_bits, l->worker_bits, l->seq_bits);
        return store_b64("%s", buf);
}

static int layout_parse(const struct kv *kv, snowid_layout *ret)
{
        json_error_t err;
        json_t *v = json_loadb(kv->value, kv->value_len, 0, &err);
        json_int_t e = -1, tb = -1, wb = -1, sb = -1;
        int bad = !v || json_unpack(v, "{s:I, s:I, s:I, s:I}", "epoch_ms", &e, "time_bits", &tb,
                                    "worker_bits", &wb, "seq_bits", &sb) < 0;
        json_decref(v);
        if (bad || e < 0 || tb < 0 || tb >= 64 || wb < 0 || wb >= 64 || sb < 0 || sb >= 64)
                return -EBADMSG;
        *ret = (snowid_layout){(uint64_t)e, (unsigned)tb, (unsigned)wb, (unsigned)sb};
        return snowid_layout_check(ret) < 0 ? -EBADMSG : 0;
}

/* ---- reading the cluster ---- */

static bool range_at(const json_t *root, size_t i)
{
        return json_is_object(json_object_get(json_array_get(json_object_get(root, "responses"), i),
                                              "response_range"));
}

/* [layout, fence, floor, workers/, hwm/, ranges/, witness/, creating, hwm/<own>] */
static void cluster_answer(struct verb *v, const struct store_reply *r)
{
        const struct store_answer a = store_answer_of(r);
        struct store_cluster c = {.ok = store_ok(r),
                                  .own_worker = v->own_worker,
                                  .records_rev = r->revision,
                                  .creating = -1};
        struct kv lk = {0}, fk = {0}, flk = {0}, ck = {0}, *kvs = NULL;
        struct store_record *records = NULL;
        const char *prefix = store_prefix(v->store);
        if (!c.ok)
                goto done;
        int rl = txn_kv(r->json, 0, &lk), rf = txn_kv(r->json, 1, &fk),
            rfl = txn_kv(r->json, 2, &flk);
        /* every op a range's answer: one that is not says nothing, and is
         * never taken for keys absent */
        for (size_t op = 3; op <= (v->own ? 8u : 7u); op++)
                c.malformed |= !range_at(r->json, op);
        if (rl < 0 || rf < 0 || rfl < 0 || c.malformed) {
                c.malformed = true;
                goto done;
        }
        if (rl == 1) {
                c.layout = layout_parse(&lk, &c.l) < 0 ? -1 : 1;
                c.layout_rev = lk.create_revision;
                snprintf(c.layout_text, sizeof(c.layout_text), "%.200s", lk.value);
        }
        if (rf == 1)
                c.fence = fence_parse(fk.value, fk.value_len, &c.c) < 0 ? -1 : 1;
        c.c.layout_rev = c.layout_rev;
        if (rfl == 1)
                c.floor = parse_mark(flk.value, flk.value_len, &c.floor_value) < 0 ? -1 : 1;
        /* while there is no layout: one holder, and the highest mark */
        c.held = json_array_size(txn_kvs(r->json, 3)) > 0;
        c.marks_zero = true;
        json_t *j, *marks = txn_kvs(r->json, 4), *ranges = txn_kvs(r->json, 5);
        size_t i;
        json_array_foreach(marks, i, j)
        {
                struct kv kv;
                uint64_t m;
                c.marks_zero &= kv_parse(j, &kv) == 0 &&
                                parse_mark(kv.value, kv.value_len, &m) == 0 && m == 0;
                kv_clear(&kv);
        }
        c.witnessed = json_array_size(txn_kvs(r->json, 6)) > 0;
        c.creating = txn_kv(r->json, 7, &ck);
        if (c.creating == 1) {
                snprintf(c.creating_value, sizeof(c.creating_value), "%s", ck.value);
                c.creating_rev = ck.mod_revision;
        }
        size_t n = json_array_size(ranges), pl = strlen(prefix);
        kvs = calloc(n ? n : 1, sizeof(*kvs));
        records = calloc(n ? n : 1, sizeof(*records));
        if (!kvs || !records) {
                c.malformed = true;
                goto done;
        }
        json_array_foreach(ranges, i, j)
        {
                if (kv_parse(j, &kvs[c.n_records]) < 0) {
                        /* a record that cannot be read could hide another
                         * region's range: not checked without it */
                        c.malformed = true;
                        goto done;
                }
                struct kv *kv = &kvs[c.n_records];
                bool record = !strncmp(kv->key, prefix, pl) && !strncmp(kv->key + pl, "ranges/", 7);
                records[c.n_records++] = (struct store_record){
                        .region = record ? kv->key + pl + 7 : NULL,
                        .key = kv->key,
                        .value = kv->value,
                        .value_len = kv->value_len,
                };
        }
        c.records = records;
        struct kv own = {0};
        if (v->own && txn_kv(r->json, 8, &own) == 1) {
                c.own_read = true;
                c.own_mark_rev = own.mod_revision;
        }
        kv_clear(&own);
done:
        ((verb_cluster_cb)v->cb)(v->userdata, &a, &c);
        for (size_t k = 0; kvs && k < c.n_records; k++)
                kv_clear(&kvs[k]);
        free(kvs);
        free(records);
        kv_clear(&lk);
        kv_clear(&fk);
        kv_clear(&flk);
        kv_clear(&ck);
}

int txn_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                     void *userdata, uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_CLUSTER, (void (*)(void))cb, userdata);
        if (v) {
                v->own = own_worker >= 0;
                v->own_worker = own_worker;
        }
        /* [layout, fence, floor, workers/, hwm/, ranges/, witness/,
         * creating]: while there is no layout, workers/, hwm/ and witness/
         * say whether the cluster was ever used: whether any number is held, the highest
         * mark, and whether a daemon that knew the cluster said the store
         * forgot it (one key each; marks are 20 digits: their order is
         * their value's).  Once there is a layout they are not needed, and
         * reading the highest mark would cost the store every number's key
         * on every read of every host: the failure branch reads three keys
         * that never exist instead, so that the answer has the same shape.
         * The highest mark is read only when asked (marks: by the host that
         * makes the cluster); a fleet starting on a cluster not made yet
         * would otherwise read every mark once per host, which a store that
         * serves one call at a time cannot carry.  `creating` is read in
         * both branches: a host waiting for another's creation reads the
         * cluster, and whether the creation is still under way, at once */
        json_t *body =
                json_pack("{s:[o], s:[o, o, o, o, o, o, o, o], s:[o, o, o, o, o, o, o, o]}",
                          "compare", txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                          "success", txn_range(txn_key(p, "layout", -1), NULL, false),
                          txn_range(txn_key(p, "fence", -1), NULL, false),
                          txn_range(txn_key(p, "floor", -1), NULL, false),
                          txn_range(txn_key(p, "workers/", -1), txn_key(p, "workers0", -1), true),
                          txn_range(txn_key(p, "hwm/", -1), txn_key(p, "hwm0", -1), false),
                          txn_range(txn_key(p, "ranges/", -1), txn_key(p, "ranges0", -1), false),
                          txn_range(txn_key(p, "witness/", -1), txn_key(p, "witness0", -1), true),
                          txn_range(txn_key(p, "creating", -1), NULL, false), "failure",
                          txn_range(txn_key(p, "layout", -1), NULL, false),
                          txn_range(txn_key(p, "fence", -1), NULL, false),
                          txn_range(txn_key(p, "floor", -1), NULL, false),
                          txn_range(txn_key(p, "workers/", -1), NULL, true),
                          txn_range(txn_key(p, "hwm/", -1), NULL, false),
                          txn_range(txn_key(p, "ranges/", -1), txn_key(p, "ranges0", -1), false),
                          txn_range(txn_key(p, "witness/", -1), NULL, true),
                          txn_range(txn_key(p, "creating", -1), NULL, false));
        json_t *ops = json_object_get(body, "success");
        json_t *held = json_object_get(json_array_get(ops, 3), "request_range");
        json_object_set_new(json_object_get(json_array_get(ops, 6), "request_range"), "limit",
                            json_integer(1));
        json_t *top = json_object_get(json_array_get(ops, 4), "request_range");
        json_object_set_new(held, "limit", json_integer(1));
        if (marks) {
                json_object_set_new(top, "limit", json_integer(1));
                json_object_set_new(top, "sort_order", json_string("DESCEND"));
                json_object_set_new(top, "sort_target", json_string("VALUE"));
        } else
                json_object_del(top, "range_end"); /* the key hwm/ alone: never there */
        /* and the mark of the number held, to check that the store still
         * has this daemon's last write of it */
        if (own_worker >= 0) {
                json_array_append_new(ops, txn_range(txn_key(p, "hwm/", own_worker), NULL, false));
                json_array_append_new(json_object_get(body, "failure"),
                                      txn_range(txn_key(p, "hwm/", own_worker), NULL, false));
        }
        return verb_send(v, "/v3/kv/txn", body, tag);
}

/* ---- making the cluster ---- */

/* [layout, creating]: the failure branch */
static void creating_answer(struct verb *v, const struct store_reply *r)
{
        const struct store_answer a = store_answer_of(r);
        struct store_creating c = {
                .ok = store_ok(r), .succeeded = verb_succeeded(r), .layout = -1, .creating = -1};
        struct kv lk = {0}, ck = {0};
        if (c.ok) {
                c.layout = txn_kv(r->json, 0, &lk);
                c.creating = txn_kv(r->json, 1, &ck);
                if (c.creating == 1) {
                        snprintf(c.value, sizeof(c.value), "%s", ck.value);
                        c.mod_rev = ck.mod_revision;
                }
        }
        ((verb_creating_cb)v->cb)(v->userdata, &a, &c);
        kv_clear(&lk);
        kv_clear(&ck);
}

int txn_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                 void *userdata, uint64_t tag)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_CREATING, (void (*)(void))cb, userdata);
        json_t *body = json_pack(
                "{s:[o, o], s:[o], s:[o, o]}", "compare",
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                stale_rev ? txn_cmp(txn_key(p, "creating", -1), "MOD", "EQUAL", NULL, stale_rev)
                          : txn_cmp(txn_key(p, "creating", -1), "CREATE", "EQUAL", NULL, 0),
                "success", txn_put(txn_key(p, "creating", -1), store_b64("%s", value), 0),
                "failure", txn_range(txn_key(p, "layout", -1), NULL, true),
                txn_range(txn_key(p, "creating", -1), NULL, false));
        return verb_send(v, "/v3/kv/txn", body, tag);
}

int txn_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata)
{
        const char *p = store_prefix(s);
        json_t *ops = json_array();
        for (uint64_t n = from; n < to; n++)
                json_array_append_new(
                        ops, json_pack("{s:{s:[o], s:[o]}}", "request_txn", "compare",
                                       txn_cmp(txn_key(p, "hwm/", (int64_t)n), "CREATE", "EQUAL",
                                               NULL, 0),
                                       "success",
                                       txn_put(txn_key(p, "hwm/", (int64_t)n), txn_mark(0), 0)));
        json_t *body = json_pack("{s:[o, o], s:o}", "compare",
                                 txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                                 txn_cmp(txn_key(p, "floor", -1), "CREATE", "EQUAL", NULL, 0),
                                 "success", ops);
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn", body, 0);
}

int txn_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                     bool marked, verb_done_cb cb, void *userdata)
{
        const char *p = store_prefix(s);
        json_t *body =
                json_pack("{s:[o, o, o, o, o, o], s:[o, o, o, {s:{s:o}}]}", "compare",
                          txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                          txn_cmp(txn_key(p, "fence", -1), "CREATE", "EQUAL", NULL, 0),
                          txn_cmp(txn_key(p, "floor", -1), "CREATE", "EQUAL", NULL, 0),
                          txn_cmp(txn_key(p, "workers/", -1), "CREATE", "EQUAL", NULL, 0),
                          txn_cmp(txn_key(p, "witness/", -1), "CREATE", "EQUAL", NULL, 0),
                          marked ? txn_cmp(txn_key(p, "hwm/", -1), "VALUE", "EQUAL", txn_mark(0), 0)
                                 : txn_cmp(txn_key(p, "hwm/", -1), "CREATE", "EQUAL", NULL, 0),
                          "success", txn_put(txn_key(p, "layout", -1), layout_value(l), 0),
                          txn_put(txn_key(p, "fence", -1), store_b64("%s", fence), 0),
                          txn_put(txn_key(p, "floor", -1), txn_mark(floor), 0),
                          "request_delete_range", "key", txn_key(p, "creating", -1));
        /* range compares: no holder and no witness at all; every mark 0 */
        json_t *cmp = json_object_get(body, "compare");
        json_object_set_new(json_array_get(cmp, 3), "range_end", txn_key(p, "workers0", -1));
        json_object_set_new(json_array_get(cmp, 4), "range_end", txn_key(p, "witness0", -1));
        json_object_set_new(json_array_get(cmp, 5), "range_end", txn_key(p, "hwm0", -1));
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn", body, 0);
}

static void fence_answer(struct verb *v, const struct store_reply *r);

/* ---- witnesses, regions' records, alarms ---- */

static json_t *witness_key(struct store *s, const char *token)
{
        char what[40];
        snprintf(what, sizeof(what), "witness/%s", token);
        return txn_key(store_prefix(s), what, -1);
}

int txn_witness_put(struct store *s, const char *token, const struct store_witness *w,
                    verb_done_cb cb, void *userdata, uint64_t tag)
{
        char *text = witness_text(w);
        if (!text)
                return -ENOMEM;
        json_t *body = json_pack("{s:[o]}", "success",
                                 txn_put(witness_key(s, token), store_b64("%s", text), 0));
        free(text);
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn", body,
                         tag);
}

int txn_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata)
{
        json_t *body = json_pack("{s:[{s:{s:o}}]}", "success", "request_delete_range", "key",
                                 witness_key(s, token));
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn", body, 0);
}

int txn_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                     int64_t layout_rev, verb_done_cb cb, void *userdata)
{
        const char *p = store_prefix(s);
        json_t *any = txn_cmp(txn_key(p, "ranges/", -1), "MOD", "LESS", NULL, rev + 1);
        json_object_set_new(any, "range_end", txn_key(p, "ranges0", -1));
        json_t *body = json_pack(
                "{s:[o, o], s:[o]}", "compare", any,
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, layout_rev), "success",
                txn_put(store_b64("%sranges/%s", p, region), store_b64("%s", value), 0));
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn", body, 0);
}

static void alarms_answer(struct verb *v, const struct store_reply *r)
{
        const struct store_answer a = store_answer_of(r);
        const char *member = NULL;
        json_t *al;
        size_t i;
        if (store_ok(r))
                json_array_foreach(json_object_get(r->json, "alarms"), i, al)
                {
                        const char *kind = json_string_value(json_object_get(al, "alarm"));
                        if (kind && !strcmp(kind, "NOSPACE"))
                                member = json_string_value(json_object_get(al, "memberID"));
                }
        ((verb_alarms_cb)v->cb)(v->userdata, &a, store_ok(r), member);
}

int txn_alarms(struct store *s, verb_alarms_cb cb, void *userdata)
{
        return verb_send(verb_new(s, V_ALARMS, (void (*)(void))cb, userdata),
                         "/v3/maintenance/alarm", json_pack("{s:s}", "action", "GET"), 0);
}

void verb_cluster_answer(struct verb *v, const struct store_reply *r)
{
        const struct store_answer a = store_answer_of(r);
        switch (v->kind) {
        case V_CLUSTER:
                cluster_answer(v, r);
                break;
        case V_CREATING:
                creating_answer(v, r);
                break;
        case V_DONE:
                ((verb_done_cb)v->cb)(v->userdata, &a, store_ok(r), verb_succeeded(r));
                break;
        case V_ALARMS:
                alarms_answer(v, r);
                break;
        case V_FENCE:
                fence_answer(v, r);
                break;
        default:
                break;
        }
}

/* ---- `snowid fence` ---- */

void fence_read_clear(struct store_fence_read *f)
{
        for (size_t i = 0; f->witnesses && i < f->n_witnesses; i++)
                free(f->witnesses[i].value);
        free(f->witnesses);
        f->witnesses = NULL;
        f->n_witnesses = 0;
}

/* [layout, fence, floor, hwm/..., witness/...] */
static void fence_answer(struct verb *v, const struct store_reply *r)
{
        const struct store_answer a = store_answer_of(r);
        struct store_fence_read f = {.ok = store_ok(r), .since = r->revision};
        struct kv lk = {0}, fk = {0}, flk = {0}, kv;
        if (!f.ok)
                goto done;
        int rl = txn_kv(r->json, 0, &lk), rf = txn_kv(r->json, 1, &fk),
            rfl = txn_kv(r->json, 2, &flk);
        if (rl < 0 || rf < 0 || rfl < 0) {
                f.ok = false;
                goto done;
        }
        f.layout = rl;
        f.layout_rev = rl ? lk.create_revision : 0;
        f.fence = rf;
        f.fence_rev = rf ? fk.mod_revision : 0;
        if (rf && fk.value_len <= sizeof(f.fence_bytes)) {
                memcpy(f.fence_bytes, fk.value, fk.value_len);
                f.fence_len = fk.value_len;
        }
        f.floor = rfl;
        if (rfl == 1 && (parse_mark(flk.value, flk.value_len, &f.floor_value) < 0 ||
                         f.floor_value >> v->time_bits))
                f.floor = -1;
        json_t *j;
        size_t i;
        json_array_foreach(txn_kvs(r->json, 3), i, j)
        {
                uint64_t m;
                if (kv_parse(j, &kv) < 0)
                        continue;
                if (parse_mark(kv.value, kv.value_len, &m) == 0 && !(m >> v->time_bits)) {
                        f.marks++;
                        f.highest = m > f.highest ? m : f.highest;
                }
                kv_clear(&kv);
        }
        json_t *ws = txn_kvs(r->json, 4);
        f.witnesses = calloc(json_array_size(ws) + 1, sizeof(*f.witnesses));
        if (!f.witnesses) {
                f.ok = false;
                goto done;
        }
        json_array_foreach(ws, i, j)
        {
                if (kv_parse(j, &kv) < 0)
                        continue;
                struct store_fence_witness *w = &f.witnesses[f.n_witnesses++];
                snprintf(w->key, sizeof(w->key), "%s", kv.key);
                w->value = kv.value;
                w->len = kv.value_len;
                kv.value = NULL;
                kv_clear(&kv);
        }
done:
        ((verb_fence_read_cb)v->cb)(v->userdata, &a, &f);
        fence_read_clear(&f);
        kv_clear(&lk);
        kv_clear(&fk);
        kv_clear(&flk);
}

int txn_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata)
{
        const char *p = store_prefix(s);
        struct verb *v = verb_new(s, V_FENCE, (void (*)(void))cb, userdata);
        if (v)
                v->time_bits = time_bits;
        json_t *body = json_pack(
                "{s:[o, o, o, o, o]}", "success", txn_range(txn_key(p, "layout", -1), NULL, false),
                txn_range(txn_key(p, "fence", -1), NULL, false),
                txn_range(txn_key(p, "floor", -1), NULL, false),
                txn_range(txn_key(p, "hwm/", -1), txn_key(p, "hwm0", -1), false),
                txn_range(txn_key(p, "witness/", -1), txn_key(p, "witness0", -1), false));
        return verb_send(v, "/v3/kv/txn", body, 0);
}

int txn_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                    void *userdata)
{
        const char *p = store_prefix(s);
        const struct store_fence_read *rd = w->read;
        /* the layout and fence as read; the floor still at or below what
         * is put (daemons raise it meanwhile: then read again) */
        json_t *cmp = json_pack(
                "[o, o, o]",
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, rd->layout_rev),
                txn_cmp(txn_key(p, "fence", -1), "MOD", "EQUAL", NULL, rd->fence_rev),
                rd->floor ? txn_cmp(txn_key(p, "floor", -1), "VALUE", "LESS",
                                    txn_mark(w->floor + 1), 0)
                          : txn_cmp(txn_key(p, "floor", -1), "CREATE", "EQUAL", NULL, 0));
        /* no witness written since the read: every one is covered, and
         * deleted */
        json_t *c = txn_cmp(txn_key(p, "witness/", -1), "MOD", "LESS", NULL, rd->since + 1);
        json_object_set_new(c, "range_end", txn_key(p, "witness0", -1));
        json_array_append_new(cmp, c);
        if (!rd->floor) {
                /* no floor: mark writes raise none, so no mark may have
                 * moved since it was read */
                c = txn_cmp(txn_key(p, "hwm/", -1), "MOD", "LESS", NULL, rd->since + 1);
                json_object_set_new(c, "range_end", txn_key(p, "hwm0", -1));
                json_array_append_new(cmp, c);
        }
        json_t *ops =
                json_pack("[o, o]", txn_put(txn_key(p, "fence", -1), store_b64("%s", w->fence), 0),
                          txn_put(txn_key(p, "floor", -1), txn_mark(w->floor), 0));
        if (!rd->layout)
                json_array_append_new(
                        ops, txn_put(txn_key(p, "layout", -1), layout_value(w->layout), 0));
        json_array_append_new(ops, json_pack("{s:{s:o, s:o}}", "request_delete_range", "key",
                                             txn_key(p, "witness/", -1), "range_end",
                                             txn_key(p, "witness0", -1)));
        return verb_send(verb_new(s, V_DONE, (void (*)(void))cb, userdata), "/v3/kv/txn",
                         json_pack("{s:o, s:o}", "compare", cmp, "success", ops), 0);
}
