/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "pg.h"
#include "store.h"

/* One of the two, as the settings say. */
struct store {
        struct etcd *etcd;
        struct pg *pg;
};

int store_new(sd_event *event, const struct settings *cfg, struct store **ret)
{
        struct store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int r = cfg->store == STORE_POSTGRES ? pg_new(event, cfg, &s->pg)
                                             : etcd_new(event, cfg, &s->etcd);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

struct store *store_free(struct store *s)
{
        if (s) {
                etcd_free(s->etcd);
                pg_free(s->pg);
                free(s);
        }
        return NULL;
}

int store_call(struct store *s, const char *path, json_t *body, etcd_cb cb, void *userdata,
               uint64_t tag)
{
        if (s->pg)
                return pg_call(s->pg, path, body, cb, userdata, tag);
        return etcd_call(s->etcd, path, body, cb, userdata, tag);
}

unsigned store_in_flight(const struct store *s)
{
        return s->pg ? pg_in_flight(s->pg) : etcd_in_flight(s->etcd);
}

void store_history_reset(struct store *s)
{
        if (s->pg)
                pg_history_reset(s->pg);
        else
                etcd_history_reset(s->etcd);
}

void store_expect_cluster(struct store *s, uint64_t cluster_id)
{
        if (s->pg)
                pg_expect_cluster(s->pg, cluster_id);
        else
                etcd_expect_cluster(s->etcd, cluster_id);
}

const char *store_endpoint(const struct store *s)
{
        return s->pg ? pg_endpoint(s->pg) : etcd_endpoint(s->etcd);
}

const struct etcd_stats *store_stats(const struct store *s)
{
        return s->pg ? pg_stats(s->pg) : etcd_stats(s->etcd);
}

void store_on_problem(struct store *s, void (*cb)(void *userdata, const struct etcd_problem *p),
                      void *userdata)
{
        if (s->pg)
                pg_on_problem(s->pg, cb, userdata);
        else
                etcd_on_problem(s->etcd, cb, userdata);
}

const char *store_name(const struct store *s)
{
        return s->pg ? "postgres" : "etcd";
}
