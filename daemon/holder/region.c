/* SPDX-License-Identifier: MIT */
/*
 * A daemon's worker range and its region's record (docs/regions.md): before
 * the first claim, the range must fit the cluster's layout and must not
 * overlap what another region recorded under /snowid/<cluster>/ranges/; then
 * this region's record is made to cover it.  Checked once, at start: a
 * running daemon is never stopped by a record written later (whoever wrote
 * it was checked against ours).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "log.h"
#include "range.h"
#include "region.h"

/* The i-th kv of the ranges/ read: the region it names (NULL: not a
 * record's key) and its range (0, or -EBADMSG when damaged). */
static const char *record_at(const struct holder *h, const json_t *kvs, size_t i, struct kv *kv,
                             uint32_t *from, uint32_t *to, int *parsed)
{
        size_t pl = strlen(h->prefix);
        if (kv_parse(json_array_get(kvs, i), kv) < 0)
                return NULL;
        if (strncmp(kv->key, h->prefix, pl) || strncmp(kv->key + pl, "ranges/", 7))
                return NULL;
        *parsed = range_record_parse(kv->value, kv->value_len, from, to);
        return kv->key + pl + 7;
}

static void on_record(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        if (!store_ok(r)) {
                log_warning("Cannot record this region's worker range: %s", r->error);
                cluster_read_in(h, 1000);
                return;
        }
        if (json_is_true(json_object_get(r->json, "succeeded")))
                log_notice("Recorded the worker range of region '%s' at %sranges/%s",
                           h->cfg->region, h->prefix, h->cfg->region);
        /* read again either way: a record written meanwhile is checked too */
        cluster_read_in(h, 0);
}

/* Puts this region's record, only if no record changed since the read at
 * revision `rev` and the layout is the one read. */
static void record_put(struct holder *h, uint32_t from, uint32_t to, int64_t rev,
                       int64_t layout_rev)
{
        const char *p = h->prefix;
        char value[64];
        range_record_format(value, sizeof(value), from, to);
        json_t *any = txn_cmp(txn_key(p, "ranges/", -1), "MOD", "LESS", NULL, rev + 1);
        json_object_set_new(any, "range_end", txn_key(p, "ranges0", -1));
        json_t *body = json_pack(
                "{s:[o, o], s:[o]}", "compare", any,
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, layout_rev), "success",
                txn_put(store_b64("%sranges/%s", p, h->cfg->region), store_b64("%s", value), 0));
        if (store_call(h->store, "/v3/kv/txn", body, on_record, h, 0) < 0)
                cluster_read_in(h, 1000);
}

bool region_range_fits(struct holder *h, unsigned worker_bits)
{
        uint32_t from, to;
        settings_worker_range(h->cfg, worker_bits, &from, &to);
        if (worker_range_fits(from, to, worker_bits))
                return true;
        log_error("worker-range %" PRIu32 "-%" PRIu32 " does not fit the cluster's layout of %u "
                  "worker bits (numbers 0 to %" PRIu64 ")",
                  from, to, worker_bits, (UINT64_C(1) << worker_bits) - 1);
        holder_fatal(h, EX_CONFIG_);
        return false;
}

int region_check(struct holder *h, const struct store_reply *r, size_t op, unsigned worker_bits,
                 int64_t layout_rev)
{
        const char *region = h->cfg->region;
        json_t *kvs = txn_kvs(r->json, op);
        uint32_t from, to, lo, hi, of, ot;
        bool covered = false;
        struct kv kv;
        int parsed;
        if (!region_range_fits(h, worker_bits))
                return -1;
        settings_worker_range(h->cfg, worker_bits, &from, &to);
        lo = from, hi = to;
        /* this region's record: one interval, widened to every range its
         * daemons claim in (daemons of one region may differ; each claims
         * in its own) */
        for (size_t i = 0; i < json_array_size(kvs); i++) {
                const char *name = record_at(h, kvs, i, &kv, &of, &ot, &parsed);
                if (name && !strcmp(name, region) && parsed == 0) {
                        covered = of <= from && to <= ot;
                        lo = of < lo ? of : lo;
                        hi = ot > hi ? ot : hi;
                }
                kv_clear(&kv);
        }
        for (size_t i = 0; i < json_array_size(kvs); i++) {
                const char *name = record_at(h, kvs, i, &kv, &of, &ot, &parsed);
                bool clash = name && strcmp(name, region) && parsed == 0 &&
                             worker_range_overlaps(lo, hi, of, ot);
                if (name && strcmp(name, region) && parsed < 0)
                        log_warning("The record %s is not {\"from\": F, \"to\": T}: '%.100s'; "
                                    "not checked against it",
                                    kv.key, kv.value);
                if (clash)
                        log_error("Worker range %" PRIu32 "-%" PRIu32 " of region '%s' (this "
                                  "daemon's: %" PRIu32 "-%" PRIu32 ") overlaps %" PRIu32 "-%" PRIu32
                                  " recorded by region '%s' at %s: the two would "
                                  "issue the same IDs. Give each region its own numbers "
                                  "(docs/regions.md)",
                                  lo, hi, region, from, to, of, ot, name, kv.key);
                kv_clear(&kv);
                if (clash) {
                        holder_fatal(h, EX_CONFIG_);
                        return -1;
                }
        }
        if (!covered) {
                record_put(h, lo, hi, r->revision, layout_rev);
                return 0;
        }
        h->range_from = from;
        h->range_to = to;
        shm_pub_set_range(h->pub, from, to);
        log_info("Claiming worker numbers %" PRIu32 " to %" PRIu32 " (region '%s', which "
                 "recorded %" PRIu32 "-%" PRIu32 ")",
                 from, to, region, lo, hi);
        return 1;
}
