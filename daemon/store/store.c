/* SPDX-License-Identifier: MIT */
/*
 * The store: one backend, as the settings say, behind the table of its
 * operations (store.h), and what every backend shares: the verbs in
 * flight, and how long a call waits (patience.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "patience.h"
#include "store.h"
#include "verbs-int.h"

struct store {
        const struct store_ops *ops;
        void *b;
        const struct settings *cfg;
        struct patience patience;
        char prefix[96]; /* the verbs' keys: "/snowid/<cluster>/" */
        struct verb *verbs;
};

int store_new_with(const struct store_ops *ops, sd_event *event, const struct settings *cfg,
                   struct store **ret)
{
        struct store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->ops = ops;
        s->cfg = cfg;
        int r = ops->new (event, cfg, &s->b);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int store_new(sd_event *event, const struct settings *cfg, struct store **ret)
{
        return store_new_with(cfg->store == STORE_POSTGRES ? &store_pg_ops : &store_etcd_ops, event,
                              cfg, ret);
}

struct store *store_free(struct store *s)
{
        if (s) {
                s->ops->free(s->b);
                store_verbs_drop(s);
                free(s);
        }
        return NULL;
}

int store_call(struct store *s, const char *path, json_t *body, store_cb cb, void *userdata,
               uint64_t tag, unsigned timeout_ms)
{
        if (!s->ops->call) {
                json_decref(body);
                return -EOPNOTSUPP;
        }
        return s->ops->call(s->b, path, body, cb, userdata, tag, timeout_ms);
}

bool store_connecting(const struct store *s)
{
        return s->ops->connecting && s->ops->connecting(s->b);
}

unsigned store_wait_ms(const struct store *s, bool patient, bool connecting)
{
        if (!patient)
                return s->cfg->store_timeout_ms;
        return patience_ms(&s->patience, s->cfg->store_timeout_ms, connecting);
}

void store_waited(struct store *s, bool patient, unsigned waited_ms, uint64_t usec, bool answered)
{
        if (answered)
                patience_answered(&s->patience, usec);
        else if (patient && usec >= (uint64_t)waited_ms * 900) /* not a refused connection */
                patience_lost(&s->patience);
}

void store_set_prefix(struct store *s, const char *prefix)
{
        snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
}

void *store_backend(struct store *s)
{
        return s->b;
}

struct verb **store_verbs(struct store *s)
{
        return &s->verbs;
}

const char *store_prefix(const struct store *s)
{
        return s->prefix;
}

unsigned store_in_flight(const struct store *s)
{
        return s->ops->in_flight(s->b);
}

void store_history_reset(struct store *s)
{
        s->ops->history_reset(s->b);
}

void store_expect_cluster(struct store *s, uint64_t cluster_id)
{
        s->ops->expect_cluster(s->b, cluster_id);
}

const char *store_endpoint(const struct store *s)
{
        return s->ops->endpoint(s->b);
}

const struct store_stats *store_stats(const struct store *s)
{
        return s->ops->stats(s->b);
}

void store_on_problem(struct store *s, store_problem_cb cb, void *userdata)
{
        s->ops->on_problem(s->b, cb, userdata);
}

const char *store_name(const struct store *s)
{
        return s->ops->name;
}

const char *store_title(const struct store *s)
{
        return s->ops->title;
}

const char *store_err_name(const struct store *s, enum store_err err)
{
        return s->ops->err_name(err);
}

void store_refusal_hint(const struct store *s, const struct settings *cfg, enum store_err err,
                        const char *prefix, char *buf, size_t size)
{
        s->ops->refusal_hint(cfg, err, prefix, buf, size);
}

void store_full_text(const struct store *s, const char *member, int64_t left_ms, char *buf,
                     size_t size)
{
        s->ops->full_text(member, s->ops->endpoint(s->b), left_ms, buf, size);
}

unsigned store_members(const struct store *s, const struct settings *cfg)
{
        return s->ops->members(cfg);
}

/* ---- the verbs: the backend's ---- */

int store_grant(struct store *s, unsigned ttl_s, verb_lease_cb cb, void *userdata, uint64_t tag)
{
        return s->ops->verbs->grant(s, ttl_s, cb, userdata, tag);
}

int store_keepalive(struct store *s, int64_t lease, verb_lease_cb cb, void *userdata, uint64_t tag)
{
        return s->ops->verbs->keepalive(s, lease, cb, userdata, tag);
}

int store_revoke(struct store *s, int64_t lease, verb_revoke_cb cb, void *userdata)
{
        return s->ops->verbs->revoke(s, lease, cb, userdata);
}

int store_scan(struct store *s, const struct cluster_ident *cl, uint64_t workers,
               const uint32_t *sample, unsigned sampled, unsigned time_bits, verb_scan_cb cb,
               void *userdata, uint64_t tag)
{
        return s->ops->verbs->scan(s, cl, workers, sample, sampled, time_bits, cb, userdata, tag);
}

int store_claim(struct store *s, const struct store_claim_req *c, verb_claim_cb cb, void *userdata,
                uint64_t tag)
{
        return s->ops->verbs->claim(s, c, cb, userdata, tag);
}

int store_read_number(struct store *s, const struct cluster_ident *cl, uint32_t worker,
                      const char *value, verb_read_cb cb, void *userdata, uint64_t tag)
{
        return s->ops->verbs->read_number(s, cl, worker, value, cb, userdata, tag);
}

int store_extend(struct store *s, const struct cluster_ident *cl, uint32_t worker, int64_t lease,
                 const char *value, uint64_t mark, int64_t own_rev, verb_extend_cb cb,
                 void *userdata, uint64_t tag)
{
        return s->ops->verbs->extend(s, cl, worker, lease, value, mark, own_rev, cb, userdata, tag);
}

int store_raise(struct store *s, const struct cluster_ident *cl, uint32_t worker, bool put,
                uint64_t mark, int64_t modrev, verb_raise_cb cb, void *userdata, uint64_t tag)
{
        return s->ops->verbs->raise(s, cl, worker, put, mark, modrev, cb, userdata, tag);
}

int store_read_cluster(struct store *s, bool marks, int32_t own_worker, verb_cluster_cb cb,
                       void *userdata, uint64_t tag)
{
        return s->ops->verbs->read_cluster(s, marks, own_worker, cb, userdata, tag);
}

int store_creating(struct store *s, const char *value, int64_t stale_rev, verb_creating_cb cb,
                   void *userdata, uint64_t tag)
{
        return s->ops->verbs->creating(s, value, stale_rev, cb, userdata, tag);
}

int store_init_marks(struct store *s, uint64_t from, uint64_t to, verb_done_cb cb, void *userdata)
{
        return s->ops->verbs->init_marks(s, from, to, cb, userdata);
}

int store_make_cluster(struct store *s, const snowid_layout *l, const char *fence, uint64_t floor,
                       bool marked, verb_done_cb cb, void *userdata)
{
        return s->ops->verbs->make_cluster(s, l, fence, floor, marked, cb, userdata);
}

int store_witness_put(struct store *s, const char *token, const struct store_witness *w,
                      verb_done_cb cb, void *userdata, uint64_t tag)
{
        return s->ops->verbs->witness_put(s, token, w, cb, userdata, tag);
}

int store_witness_delete(struct store *s, const char *token, verb_done_cb cb, void *userdata)
{
        return s->ops->verbs->witness_delete(s, token, cb, userdata);
}

int store_record_range(struct store *s, const char *region, const char *value, int64_t rev,
                       int64_t layout_rev, verb_done_cb cb, void *userdata)
{
        return s->ops->verbs->record_range(s, region, value, rev, layout_rev, cb, userdata);
}

int store_alarms(struct store *s, verb_alarms_cb cb, void *userdata)
{
        return s->ops->verbs->alarms(s, cb, userdata);
}

int store_fence_read(struct store *s, unsigned time_bits, verb_fence_read_cb cb, void *userdata)
{
        return s->ops->verbs->fence_read(s, time_bits, cb, userdata);
}

int store_fence_write(struct store *s, const struct store_fence_write *w, verb_done_cb cb,
                      void *userdata)
{
        return s->ops->verbs->fence_write(s, w, cb, userdata);
}
