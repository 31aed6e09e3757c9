/* SPDX-License-Identifier: MIT */
/*
 * The store's verbs (verbs.h) on PostgreSQL, those on leases and numbers
 * (pg-verbs-cluster.c: the cluster's): each one prepared statement,
 * a call of its function in daemon/store/postgres.sql with typed
 * arguments, answered with one row that is read here into the verb's
 * typed result.  docs/postgres.md argues each verb's guarantee.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg-int.h"
#include "values.h"
#include "pg-verbs.h"

/* ---- arguments ---- */

void arg_str(struct args *a, const char *s)
{
        a->v[a->n++] = s;
}

void arg_i64(struct args *a, int64_t x)
{
        snprintf(a->buf[a->n], sizeof(a->buf[a->n]), "%" PRId64, x);
        a->v[a->n] = a->buf[a->n];
        a->n++;
}

void arg_u64(struct args *a, uint64_t x)
{
        snprintf(a->buf[a->n], sizeof(a->buf[a->n]), "%" PRIu64, x);
        a->v[a->n] = a->buf[a->n];
        a->n++;
}

void arg_bool(struct args *a, bool b)
{
        arg_str(a, b ? "t" : "f");
}

/* The cluster's name: the verbs' prefix, "/snowid/<name>/". */
const char *cluster_name(struct store *s, char *buf, size_t size)
{
        const char *p = store_prefix(s);
        size_t skip = strncmp(p, "/snowid/", 8) ? 0 : 8, len = strlen(p + skip);
        if (len && p[skip + len - 1] == '/')
                len--;
        snprintf(buf, size, "%.*s", (int)len, p + skip);
        return buf;
}

/* The cluster's name, the fence's bytes and the layout's revision: how
 * every verb on numbers names the cluster it believes it talks to. */
static void arg_cluster(struct args *a, struct store *s, const struct cluster_ident *cl, char *name,
                        size_t size, char *fence)
{
        arg_str(a, cluster_name(s, name, size));
        memcpy(fence, cl->fence, cl->fence_len);
        fence[cl->fence_len] = 0;
        arg_str(a, fence);
        arg_i64(a, cl->layout_rev);
}

/* ---- reading the row ---- */

bool col_null(const PGresult *res, const char *name)
{
        int c = res ? PQfnumber(res, name) : -1;
        return c < 0 || PQgetisnull(res, 0, c);
}

const char *col_text(const PGresult *res, const char *name)
{
        int c = res ? PQfnumber(res, name) : -1;
        return c < 0 || PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
}

bool col_bool(const PGresult *res, const char *name)
{
        const char *t = col_text(res, name);
        return t && t[0] == 't';
}

int64_t col_i64(const PGresult *res, const char *name, int64_t absent)
{
        const char *t = col_text(res, name);
        return t ? strtoll(t, NULL, 10) : absent;
}

/* A bigint[] or int[] as PostgreSQL writes it, "{1,2,3}" ("NULL" items
 * as 0); -1 if malformed or longer than max. */
static long int_array(const char *t, int64_t *out, size_t max)
{
        size_t n = 0;
        if (!t)
                return 0;
        if (*t++ != '{')
                return -1;
        while (*t && *t != '}') {
                char *end;
                if (n == max)
                        return -1;
                if (!strncmp(t, "NULL", 4)) {
                        out[n++] = 0;
                        end = (char *)t + 4;
                } else {
                        out[n++] = strtoll(t, &end, 10);
                        if (end == t)
                                return -1;
                }
                t = end;
                if (*t == ',')
                        t++;
        }
        return *t == '}' ? (long)n : -1;
}

/* Whether the answer came with its row. */
bool answered(const struct store_reply *r, const PGresult *res)
{
        return r->answered && r->http == 200 && res;
}

static int same_of(const struct store_reply *r, const PGresult *res)
{
        return answered(r, res) ? col_bool(res, "same") : -1;
}

/* A number's mark as read (old_mark/mark, old_rev/mark_rev columns). */
static void mark_of(const PGresult *res, const char *mark, const char *rev, struct store_number *n)
{
        if (col_null(res, mark))
                return;
        n->marked = true;
        n->mark_valid = true;
        n->mark = (uint64_t)col_i64(res, mark, 0);
        n->mark_rev = col_i64(res, rev, 0);
}

/* ---- sending ---- */

static void on_row(void *userdata, const struct store_reply *r, const PGresult *res);

int send_verb(struct verb *v, const char *stmt, const struct args *a, bool kv, uint64_t tag)
{
        if (!v)
                return -ENOMEM;
        struct pg *p = store_backend(v->store);
        int r = pg_query(p, stmt, a->n, a->v, kv, on_row, v, tag, v->wait_ms);
        if (r < 0)
                verb_free(v);
        return r;
}

struct verb *new_verb(struct store *s, enum verb_kind kind, void (*cb)(void), void *userdata,
                      const struct cluster_ident *cl)
{
        struct verb *v = verb_new(s, kind, cb, userdata);
        if (v)
                v->cl = cl;
        return v;
}

/* ---- leases ---- */

static int pg_grant(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata, uint64_t tag)
{
        struct args a = {0};
        arg_u64(&a, ttl_s);
        return send_verb(new_verb(s, V_GRANT, (void (*)(void))cb, userdata, NULL),
                         "snowid_lease_grant", &a, false, tag);
}

static int pg_keepalive(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata,
                        uint64_t tag)
{
        struct args a = {0};
        struct verb *v = new_verb(s, V_KEEPALIVE, (void (*)(void))cb, userdata, NULL);
        if (v)
                v->lease = lease;
        arg_i64(&a, lease);
        return send_verb(v, "snowid_lease_keepalive", &a, false, tag);
}

static int pg_revoke(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata)
{
        struct args a = {0};
        arg_i64(&a, lease);
        return send_verb(new_verb(s, V_REVOKE, (void (*)(void))cb, userdata, NULL),
                         "snowid_lease_revoke", &a, false, 0);
}

/* ---- numbers ---- */

static int pg_scan(struct store *s, const struct cluster_ident *cl, uint64_t workers,
                   const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
                   void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96], fence[FENCE_MAX + 1], list[STORE_SAMPLE_MAX * 12 + 3];
        struct verb *v = new_verb(s, V_SCAN, (void (*)(void))cb, userdata, cl);
        if (sampled > STORE_SAMPLE_MAX)
                sampled = STORE_SAMPLE_MAX;
        if (v) {
                v->workers = workers;
                v->time_bits = time_bits;
                v->sampled = sample ? sampled : 0;
                for (unsigned i = 0; i < v->sampled; i++)
                        v->sample[i] = sample[i];
        }
        arg_cluster(&a, s, cl, name, sizeof(name), fence);
        arg_u64(&a, workers);
        if (sample && sampled) {
                size_t n = 0;
                list[n++] = '{';
                for (unsigned i = 0; i < sampled; i++)
                        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%" PRIu32,
                                              i ? "," : "", sample[i]);
                snprintf(list + n, sizeof(list) - n, "}");
                arg_str(&a, list);
        } else
                arg_str(&a, NULL);
        return send_verb(v, "snowid_scan", &a, true, tag);
}

static void scan_read(const struct store_reply *r, const PGresult *res, const struct verb *v,
                      struct store_scan *sc)
{
        sc->ok = answered(r, res);
        sc->succeeded = sc->ok;
        sc->same = same_of(r, res);
        sc->workers = v->workers;
        sc->floor_read = !sc->ok ? -1 : col_null(res, "floor") ? 0 : 1;
        if (sc->floor_read == 1) {
                sc->floor = (uint64_t)col_i64(res, "floor", 0);
                if (sc->floor >> v->time_bits)
                        sc->floor_read = 0; /* as if lost */
        }
        if (!sc->ok || sc->same != 1 || sc->floor_read != 1)
                return;
        size_t max = v->workers;
        int64_t *ns = calloc(max + 1, sizeof(int64_t)), *marks = calloc(max + 1, sizeof(int64_t)),
                *revs = calloc(max + 1, sizeof(int64_t)), *held = calloc(max + 1, sizeof(int64_t));
        sc->numbers = calloc(max ? max : 1, sizeof(*sc->numbers));
        long k = -1;
        if (ns && marks && revs && held && sc->numbers) {
                /* booleans as PostgreSQL writes them: "{t,f}" */
                const char *h = col_text(res, "held");
                char *hb = h ? strdup(h) : NULL;
                for (char *c = hb; c && *c; c++)
                        *c = *c == 't' ? '1' : *c == 'f' ? '0' : *c;
                k = int_array(col_text(res, "ns"), ns, max);
                if (k < 0 || int_array(col_text(res, "marks"), marks, max) != k ||
                    int_array(col_text(res, "revs"), revs, max) != k ||
                    (h && int_array(hb, held, max) != k))
                        k = -1;
                free(hb);
        }
        if (k < 0) {
                /* an answer that cannot be read says nothing */
                free(sc->numbers);
                sc->numbers = NULL;
                sc->ok = sc->succeeded = false;
        } else {
                /* not in the sample: as if held */
                for (uint64_t n = 0; n < v->workers; n++)
                        sc->numbers[n].held = v->sampled > 0;
                for (unsigned i = 0; i < v->sampled; i++)
                        if (v->sample[i] < v->workers)
                                sc->numbers[v->sample[i]].held = false;
                for (long i = 0; i < k; i++) {
                        if (ns[i] < 0 || (uint64_t)ns[i] >= v->workers)
                                continue;
                        struct store_number *x = &sc->numbers[ns[i]];
                        x->held = held[i] != 0;
                        x->marked = true;
                        x->mark = (uint64_t)marks[i];
                        x->mark_valid = !(x->mark >> v->time_bits);
                        x->mark_rev = revs[i];
                }
        }
        free(ns);
        free(marks);
        free(revs);
        free(held);
}

static int pg_claim(struct store *s, const struct store_claim_req *c, verb_claim_cb cb,
                    void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96], fence[FENCE_MAX + 1];
        struct verb *v = new_verb(s, V_CLAIM, (void (*)(void))cb, userdata, c->cl);
        if (v)
                v->own = c->own_rev > 0;
        arg_cluster(&a, s, c->cl, name, sizeof(name), fence);
        arg_u64(&a, c->worker);
        arg_i64(&a, c->lease);
        arg_str(&a, c->value);
        arg_u64(&a, c->start);
        arg_u64(&a, c->mark);
        arg_i64(&a, c->modrev);
        arg_i64(&a, c->own_worker);
        arg_i64(&a, c->own_rev);
        return send_verb(v, "snowid_claim", &a, true, tag);
}

static int pg_read_number(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                          const char *value, verb_read_cb cb, void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96], fence[FENCE_MAX + 1];
        struct verb *v = new_verb(s, V_READ, (void (*)(void))cb, userdata, cl);
        if (v)
                snprintf(v->value, sizeof(v->value), "%s", value);
        arg_cluster(&a, s, cl, name, sizeof(name), fence);
        arg_u64(&a, worker);
        arg_str(&a, value);
        return send_verb(v, "snowid_read_number", &a, true, tag);
}

static int pg_extend(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                     int64_t lease, const char *value, uint64_t mark, int64_t own_rev,
                     verb_extend_cb cb, void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96], fence[FENCE_MAX + 1];
        struct verb *v = new_verb(s, V_EXTEND, (void (*)(void))cb, userdata, cl);
        if (v)
                snprintf(v->value, sizeof(v->value), "%s", value);
        arg_cluster(&a, s, cl, name, sizeof(name), fence);
        arg_u64(&a, worker);
        arg_i64(&a, lease);
        arg_str(&a, value);
        arg_u64(&a, mark);
        arg_i64(&a, own_rev);
        return send_verb(v, "snowid_extend", &a, true, tag);
}

static int pg_raise(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
                    uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag)
{
        struct args a = {0};
        char name[96], fence[FENCE_MAX + 1];
        arg_cluster(&a, s, cl, name, sizeof(name), fence);
        arg_u64(&a, worker);
        arg_bool(&a, put);
        arg_u64(&a, mark);
        arg_i64(&a, modrev);
        return send_verb(new_verb(s, V_RAISE, (void (*)(void))cb, userdata, cl), "snowid_raise", &a,
                         true, tag);
}

/* ---- answers ---- */

static void on_row(void *userdata, const struct store_reply *r, const PGresult *res)
{
        struct verb *v = userdata;
        const struct store_answer a = store_answer_of(r);
        bool ok = answered(r, res);
        verb_answered(v, &a);
        switch (v->kind) {
        case V_GRANT:
                ((verb_lease_cb)v->cb)(v->userdata, &a, ok ? col_i64(res, "id", 0) : 0,
                                       ok ? col_i64(res, "ttl", -1) : -1);
                break;
        case V_KEEPALIVE:
                ((verb_lease_cb)v->cb)(v->userdata, &a, v->lease,
                                       ok ? col_i64(res, "ttl", -1) : -1);
                break;
        case V_REVOKE:
                ((verb_revoke_cb)v->cb)(v->userdata, &a, ok && col_bool(res, "gone"));
                break;
        case V_SCAN: {
                struct store_scan sc = {0};
                scan_read(r, res, v, &sc);
                ((verb_scan_cb)v->cb)(v->userdata, &a, &sc);
                free(sc.numbers);
                break;
        }
        case V_CLAIM: {
                /* every compare held but the lease is gone: as etcd's
                 * error for a put under a lease it does not know */
                struct store_claimed c = {
                        .no_answer = !r->answered || r->http >= 500,
                        .ok = ok && !col_bool(res, "lease_gone"),
                        .succeeded = ok && col_bool(res, "ok"),
                        .revision = r->revision,
                        .same = ok && col_bool(res, "ok") ? 1 : same_of(r, res),
                };
                if (c.ok && !c.succeeded && v->own) {
                        int64_t own = col_i64(res, "own_rev", -1);
                        c.own_read = true;
                        c.own.marked = own > 0;
                        c.own.mark_valid = own > 0;
                        c.own.mark_rev = own > 0 ? own : 0;
                        c.own.mark = (uint64_t)col_i64(res, "own_mark", 0);
                }
                ((verb_claim_cb)v->cb)(v->userdata, &a, &c);
                break;
        }
        case V_READ: {
                struct store_read rd = {.ok = ok, .succeeded = ok, .same = same_of(r, res)};
                rd.n.malformed = !ok;
                if (ok) {
                        rd.n.held = col_bool(res, "held");
                        rd.n.lease = col_i64(res, "lease", 0);
                        rd.n.value_is = col_bool(res, "value_is");
                        mark_of(res, "mark", "mark_rev", &rd.n);
                }
                ((verb_read_cb)v->cb)(v->userdata, &a, &rd);
                break;
        }
        case V_EXTEND: {
                struct store_extended e = {
                        .ok = ok, .succeeded = ok && col_bool(res, "ok"), .revision = r->revision};
                e.same = e.succeeded ? 1 : same_of(r, res);
                e.n.malformed = !ok;
                if (ok && !e.succeeded) {
                        e.n.held = col_bool(res, "held");
                        e.n.lease = col_i64(res, "holder_lease", 0);
                        e.n.value_is = col_bool(res, "value_is");
                        mark_of(res, "old_mark", "old_rev", &e.n);
                }
                ((verb_extend_cb)v->cb)(v->userdata, &a, &e);
                break;
        }
        case V_RAISE: {
                bool put = ok && col_bool(res, "ok") && r->revision > 0;
                struct store_raised rs = {
                        .ok = ok, .succeeded = ok && col_bool(res, "ok"), .put = put};
                rs.same = put ? 1 : same_of(r, res);
                rs.n.malformed = !ok;
                if (ok && !put)
                        mark_of(res, "old_mark", "old_rev", &rs.n);
                ((verb_raise_cb)v->cb)(v->userdata, &a, &rs);
                break;
        }
        default:
                pg_cluster_row(v, r, res);
                break;
        }
        verb_free(v);
}

const struct store_verb_ops store_pg_verbs = {
        .grant = pg_grant,
        .keepalive = pg_keepalive,
        .revoke = pg_revoke,
        .scan = pg_scan,
        .claim = pg_claim,
        .read_number = pg_read_number,
        .extend = pg_extend,
        .raise = pg_raise,
        .read_cluster = pg_read_cluster,
        .creating = pg_creating,
        .init_marks = pg_init_marks,
        .make_cluster = pg_make_cluster,
        .witness_put = pg_witness_put,
        .witness_delete = pg_witness_delete,
        .record_range = pg_record_range,
        .alarms = pg_alarms,
        .fence_read = pg_fence_read,
        .fence_write = pg_fence_write,
};
