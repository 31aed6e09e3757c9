/* SPDX-License-Identifier: MIT */
/*
 * The store: one backend, as the settings say, behind the table of its
 * operations (store.h).  Nothing is added to a call but the dispatch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "store.h"
#include "verbs-int.h"

struct store {
        const struct store_ops *ops;
        void *b;
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
               uint64_t tag)
{
        return s->ops->call(s->b, path, body, cb, userdata, tag);
}

void store_set_prefix(struct store *s, const char *prefix)
{
        snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
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
