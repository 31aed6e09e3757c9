/* SPDX-License-Identifier: MIT */
/*
 * The cluster's verbs (verbs.h) on PostgreSQL: reading and making the
 * cluster, witnesses, regions' records, the alarm, and `snowid fence`'s
 * read and write, each a prepared call of its function in
 * daemon/store/postgres.sql, its row read into the verb's typed result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg-verbs.h"
#include "values.h"

/* ---- the cluster ---- */

int pg_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                    void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96];
        struct verb *v = new_verb(s, V_CLUSTER, (void (*)(void))cb, userdata, NULL);
        if (v) {
                v->own = own_worker >= 0;
                v->own_worker = own_worker;
        }
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_bool(&a, marks);
        arg_i64(&a, own_worker);
        return send_verb(v, "snowid_read_cluster", &a, true, tag);
}

static int hex_value(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* hex digits [from, to) decoded into a new string; NULL if not hex */
static char *unhex(const char *from, const char *to, size_t *len)
{
        size_t n = (size_t)(to - from);
        char *out = n % 2 ? NULL : malloc(n / 2 + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n / 2; i++) {
                int hi = hex_value(from[2 * i]), lo = hex_value(from[2 * i + 1]);
                if (hi < 0 || lo < 0) {
                        free(out);
                        return NULL;
                }
                out[i] = (char)(hi << 4 | lo);
        }
        out[n / 2] = 0;
        if (len)
                *len = n / 2;
        return out;
}

/* "hex:hex,hex:hex" as PostgreSQL's rows give a list of pairs, decoded. */
struct pairs {
        char **first, **second;
        size_t *len; /* of each second */
        size_t size; /* allocated */
        long n;      /* decoded; -1: malformed */
};

static void pairs_parse(const char *t, struct pairs *p)
{
        *p = (struct pairs){.size = 1};
        for (const char *c = t; c && *c; c++)
                p->size += *c == ',';
        p->first = calloc(p->size, sizeof(char *));
        p->second = calloc(p->size, sizeof(char *));
        p->len = calloc(p->size, sizeof(size_t));
        if (!p->first || !p->second || !p->len) {
                p->n = -1;
                return;
        }
        while (t && *t) {
                const char *end = strchr(t, ','), *colon = strchr(t, ':');
                if (!end)
                        end = t + strlen(t);
                if (!colon || colon > end) {
                        p->n = -1;
                        return;
                }
                p->first[p->n] = unhex(t, colon, NULL);
                p->second[p->n] = unhex(colon + 1, end, &p->len[p->n]);
                if (!p->first[p->n] || !p->second[p->n]) {
                        p->n = -1;
                        return;
                }
                p->n++;
                t = *end ? end + 1 : end;
        }
}

static void pairs_free(struct pairs *p)
{
        for (size_t i = 0; i < p->size; i++) {
                if (p->first)
                        free(p->first[i]);
                if (p->second)
                        free(p->second[i]);
        }
        free(p->first);
        free(p->second);
        free(p->len);
}

static void cluster_row(struct verb *v, const struct store_reply *r, const PGresult *res)
{
        const struct store_answer an = store_answer_of(r);
        struct store_cluster c = {
                .ok = answered(r, res), .own_worker = v->own_worker, .creating = -1};
        struct store_record *records = NULL;
        struct pairs rec = {0};
        if (!c.ok)
                goto done;
        if (!col_null(res, "layout_rev")) {
                c.l = (snowid_layout){(uint64_t)col_i64(res, "epoch_ms", 0),
                                      (unsigned)col_i64(res, "time_bits", 0),
                                      (unsigned)col_i64(res, "worker_bits", 0),
                                      (unsigned)col_i64(res, "seq_bits", 0)};
                c.layout = snowid_layout_check(&c.l) < 0 ? -1 : 1;
                c.layout_rev = col_i64(res, "layout_rev", 0);
                snprintf(c.layout_text, sizeof(c.layout_text),
                         "{\"epoch_ms\":%" PRIu64 ",\"time_bits\":%u,\"worker_bits\":%u,"
                         "\"seq_bits\":%u}",
                         c.l.epoch_ms, c.l.time_bits, c.l.worker_bits, c.l.seq_bits);
        }
        const char *f = col_text(res, "fence");
        if (f)
                c.fence = fence_parse(f, strlen(f), &c.c) < 0 ? -1 : 1;
        c.c.layout_rev = c.layout_rev;
        if (!col_null(res, "floor")) {
                c.floor = 1;
                c.floor_value = (uint64_t)col_i64(res, "floor", 0);
        }
        c.held = col_bool(res, "held");
        c.marks_zero = col_bool(res, "marks_zero");
        c.witnessed = col_bool(res, "witnessed");
        c.records_rev = col_i64(res, "records_rev", 0);
        const char *ck = col_text(res, "creating");
        c.creating = ck != NULL;
        if (ck) {
                snprintf(c.creating_value, sizeof(c.creating_value), "%s", ck);
                c.creating_rev = col_i64(res, "creating_rev", 0);
        }
        pairs_parse(col_text(res, "records"), &rec);
        records = calloc(rec.n > 0 ? (size_t)rec.n : 1, sizeof(*records));
        if (rec.n < 0 || !records) {
                c.malformed = true;
                goto done;
        }
        for (long i = 0; i < rec.n; i++)
                records[i] = (struct store_record){
                        .region = rec.first[i],
                        .key = rec.first[i],
                        .value = rec.second[i],
                        .value_len = rec.len[i],
                };
        c.n_records = (size_t)rec.n;
        c.records = records;
        if (v->own) {
                int64_t own = col_i64(res, "own_rev", -1);
                c.own_read = own >= 0;
                c.own_mark_rev = own > 0 ? own : 0;
        }
done:
        ((verb_cluster_cb)v->cb)(v->userdata, &an, &c);
        pairs_free(&rec);
        free(records);
}

int pg_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96];
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_bool(&a, false); /* poll: only earlier releases ask it (postgres.sql) */
        arg_str(&a, value ? value : "");
        arg_i64(&a, stale_rev);
        return send_verb(new_verb(s, V_CREATING, (void (*)(void))cb, userdata, NULL),
                         "snowid_creating", &a, true, tag);
}

int pg_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata)
{
        struct args a = {0};
        char name[96];
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_u64(&a, from);
        arg_u64(&a, to);
        return send_verb(new_verb(s, V_DONE, (void (*)(void))cb, userdata, NULL),
                         "snowid_init_marks", &a, true, 0);
}

int pg_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                    bool marked, verb_done_cb cb, void *userdata)
{
        struct args a = {0};
        char name[96];
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_u64(&a, l->epoch_ms);
        arg_u64(&a, l->time_bits);
        arg_u64(&a, l->worker_bits);
        arg_u64(&a, l->seq_bits);
        arg_str(&a, fence);
        arg_u64(&a, floor);
        arg_bool(&a, marked);
        return send_verb(new_verb(s, V_DONE, (void (*)(void))cb, userdata, NULL),
                         "snowid_make_cluster", &a, true, 0);
}

static int witness_send(struct store *s, const char *token, const char *value, verb_done_cb cb,
                        void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96];
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_str(&a, token);
        arg_str(&a, value);
        return send_verb(new_verb(s, V_DONE, (void (*)(void))cb, userdata, NULL), "snowid_witness",
                         &a, true, tag);
}

int pg_witness_put(struct store *s, const char *token, const struct store_witness *w,
                   verb_done_cb cb, void *userdata, uint64_t tag)
{
        char *text = witness_text(w);
        if (!text)
                return -ENOMEM;
        int r = witness_send(s, token, text, cb, userdata, tag);
        free(text);
        return r;
}

int pg_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata)
{
        return witness_send(s, token, NULL, cb, userdata, 0);
}

int pg_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                    int64_t layout_rev, verb_done_cb cb, void *userdata)
{
        struct args a = {0};
        char name[96];
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_str(&a, region);
        arg_str(&a, value);
        arg_i64(&a, rev);
        arg_i64(&a, layout_rev);
        return send_verb(new_verb(s, V_DONE, (void (*)(void))cb, userdata, NULL),
                         "snowid_record_range", &a, true, 0);
}

/* The server's disk is full (SQLSTATE 53100) and no write went through
 * since: said as etcd's NOSPACE alarm would be. */
int pg_alarms(struct store *s, verb_alarms_cb cb, void *userdata)
{
        struct args a = {0};
        return send_verb(new_verb(s, V_ALARMS, (void (*)(void))cb, userdata, NULL), "snowid_alarm",
                         &a, false, 0);
}

/* ---- `snowid fence` ---- */

int pg_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata)
{
        struct args a = {0};
        char name[96];
        struct verb *v = new_verb(s, V_FENCE, (void (*)(void))cb, userdata, NULL);
        if (v)
                v->time_bits = time_bits;
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_u64(&a, time_bits);
        return send_verb(v, "snowid_fence_read", &a, true, 0);
}

static void fence_row(struct verb *v, const struct store_reply *r, const PGresult *res)
{
        const struct store_answer an = store_answer_of(r);
        struct store_fence_read f = {.ok = answered(r, res)};
        struct pairs ws = {0};
        if (!f.ok)
                goto done;
        f.layout_rev = col_i64(res, "layout_rev", 0);
        f.layout = f.layout_rev != 0;
        const char *fence = col_text(res, "fence");
        f.fence = fence != NULL;
        if (fence && strlen(fence) <= sizeof(f.fence_bytes)) {
                f.fence_len = strlen(fence);
                memcpy(f.fence_bytes, fence, f.fence_len);
        }
        f.fence_rev = col_i64(res, "fence_rev", 0);
        if (!col_null(res, "floor")) {
                f.floor = 1;
                f.floor_value = (uint64_t)col_i64(res, "floor", 0);
                if (f.floor_value >> v->time_bits)
                        f.floor = -1;
        }
        f.marks = (size_t)col_i64(res, "marks", 0);
        f.highest = (uint64_t)col_i64(res, "highest", 0);
        if (f.highest >> v->time_bits)
                f.highest = 0;
        snprintf(f.digest, sizeof(f.digest), "%s",
                 col_text(res, "digest") ? col_text(res, "digest") : "");
        pairs_parse(col_text(res, "witnesses"), &ws);
        f.witnesses = calloc(ws.n > 0 ? (size_t)ws.n : 1, sizeof(*f.witnesses));
        if (ws.n < 0 || !f.witnesses) {
                f.ok = false;
                goto done;
        }
        for (long i = 0; i < ws.n; i++) {
                snprintf(f.witnesses[i].key, sizeof(f.witnesses[i].key), "witness/%s", ws.first[i]);
                f.witnesses[i].value = ws.second[i];
                f.witnesses[i].len = ws.len[i];
                ws.second[i] = NULL;
        }
        f.n_witnesses = (size_t)ws.n;
done:
        ((verb_fence_read_cb)v->cb)(v->userdata, &an, &f);
        fence_read_clear(&f);
        pairs_free(&ws);
}

int pg_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                   void *userdata)
{
        struct args a = {0};
        char name[96];
        const struct store_fence_read *rd = w->read;
        arg_str(&a, cluster_name(s, name, sizeof(name)));
        arg_str(&a, w->fence);
        arg_u64(&a, w->floor);
        arg_i64(&a, rd->layout_rev);
        arg_i64(&a, rd->fence_rev);
        arg_bool(&a, rd->floor != 0);
        arg_str(&a, rd->digest);
        arg_u64(&a, w->layout->epoch_ms);
        arg_u64(&a, w->layout->time_bits);
        arg_u64(&a, w->layout->worker_bits);
        arg_u64(&a, w->layout->seq_bits);
        return send_verb(new_verb(s, V_DONE, (void (*)(void))cb, userdata, NULL),
                         "snowid_fence_write", &a, true, 0);
}

/* ---- answers ---- */

void pg_cluster_row(struct verb *v, const struct store_reply *r, const PGresult *res)
{
        const struct store_answer a = store_answer_of(r);
        bool ok = answered(r, res);
        switch (v->kind) {
        case V_CLUSTER:
                cluster_row(v, r, res);
                break;
        case V_CREATING: {
                struct store_creating c = {.ok = ok,
                                           .succeeded = ok && col_bool(res, "ok"),
                                           .layout = ok ? col_bool(res, "layout") : -1,
                                           .creating = -1};
                if (ok) {
                        const char *t = col_text(res, "creating");
                        c.creating = t != NULL;
                        if (t) {
                                snprintf(c.value, sizeof(c.value), "%s", t);
                                c.mod_rev = col_i64(res, "creating_rev", 0);
                        }
                }
                ((verb_creating_cb)v->cb)(v->userdata, &a, &c);
                break;
        }
        case V_DONE:
                ((verb_done_cb)v->cb)(v->userdata, &a, ok, ok && col_bool(res, "ok"));
                break;
        case V_ALARMS: {
                struct pg *p = store_backend(v->store);
                ((verb_alarms_cb)v->cb)(v->userdata, &a, ok,
                                        ok && pg_disk_full(p) ? pg_endpoint(p) : NULL);
                break;
        }
        case V_FENCE:
                fence_row(v, r, res);
                break;
        default:
                break;
        }
}
