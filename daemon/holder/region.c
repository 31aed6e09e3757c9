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

static void on_record(void *userdata, const struct store_answer *r, bool ok, bool succeeded)
{
        struct holder *h = userdata;
        if (!ok) {
                log_warning("Cannot record this region's worker range: %s", r->error);
                cluster_read_in(h, 1000);
                return;
        }
        if (succeeded)
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
        char value[64];
        range_record_format(value, sizeof(value), from, to);
        if (store_record_range(h->store, h->cfg->region, value, rev, layout_rev, on_record, h) < 0)
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

int region_check(struct holder *h, int64_t rev, const struct store_record *records, size_t n,
                 unsigned worker_bits, int64_t layout_rev)
{
        const char *region = h->cfg->region;
        uint32_t from, to, lo, hi, of, ot;
        bool covered = false;
        if (!region_range_fits(h, worker_bits))
                return -1;
        settings_worker_range(h->cfg, worker_bits, &from, &to);
        lo = from, hi = to;
        /* this region's record: one interval, widened to every range its
         * daemons claim in (daemons of one region may differ; each claims
         * in its own) */
        for (size_t i = 0; i < n; i++) {
                const char *name = records[i].region;
                int parsed =
                        name ? range_record_parse(records[i].value, records[i].value_len, &of, &ot)
                             : -1;
                if (name && !strcmp(name, region) && parsed == 0) {
                        covered = of <= from && to <= ot;
                        lo = of < lo ? of : lo;
                        hi = ot > hi ? ot : hi;
                }
        }
        for (size_t i = 0; i < n; i++) {
                const char *name = records[i].region;
                int parsed =
                        name ? range_record_parse(records[i].value, records[i].value_len, &of, &ot)
                             : -1;
                bool clash = name && strcmp(name, region) && parsed == 0 &&
                             worker_range_overlaps(lo, hi, of, ot);
                if (name && strcmp(name, region) && parsed < 0)
                        log_warning("The record %s is not {\"from\": F, \"to\": T}: '%.100s'; "
                                    "not checked against it",
                                    records[i].key, records[i].value);
                if (clash)
                        log_error("Worker range %" PRIu32 "-%" PRIu32 " of region '%s' (this "
                                  "daemon's: %" PRIu32 "-%" PRIu32 ") overlaps %" PRIu32 "-%" PRIu32
                                  " recorded by region '%s' at %s: the two would "
                                  "issue the same IDs. Give each region its own numbers "
                                  "(docs/regions.md)",
                                  lo, hi, region, from, to, of, ot, name, records[i].key);
                if (clash) {
                        holder_fatal(h, EX_CONFIG_);
                        return -1;
                }
        }
        if (!covered) {
                record_put(h, lo, hi, rev, layout_rev);
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
