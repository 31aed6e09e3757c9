/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "store.h"

struct store {
        struct etcd *etcd;
};

int store_new(sd_event *event, const struct settings *cfg, struct store **ret)
{
        struct store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int r = etcd_new(event, cfg, &s->etcd);
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
                free(s);
        }
        return NULL;
}

int store_call(struct store *s, const char *path, json_t *body, etcd_cb cb, void *userdata,
               uint64_t tag)
{
        return etcd_call(s->etcd, path, body, cb, userdata, tag);
}

unsigned store_in_flight(const struct store *s)
{
        return etcd_in_flight(s->etcd);
}

void store_history_reset(struct store *s)
{
        etcd_history_reset(s->etcd);
}

const char *store_endpoint(const struct store *s)
{
        return etcd_endpoint(s->etcd);
}

const struct etcd_stats *store_stats(const struct store *s)
{
        return etcd_stats(s->etcd);
}

void store_on_problem(struct store *s, void (*cb)(void *userdata, const struct etcd_problem *p),
                      void *userdata)
{
        etcd_on_problem(s->etcd, cb, userdata);
}

const char *store_name(const struct store *s)
{
        (void)s;
        return "etcd";
}
