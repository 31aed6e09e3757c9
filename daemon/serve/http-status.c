/* SPDX-License-Identifier: MIT */
/*
 * GET /v1/status (what the daemon knows, as JSON) and GET /healthz (200, or
 * 503 and why IDs may stop).  docs/http.md says which fields to use.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "http-internal.h"
#include "monotonic.h"

enum MHD_Result http_status(struct http_server *srv, struct MHD_Connection *c)
{
        snowid_status st = SNOWID_STATUS_INIT;
        char deadline[48];
        if (snowid_get_status(srv->ids, &st) < 0)
                return http_fail(srv, c, 500, "cannot read the segment");
        http_rfc3339(st.deadline_unix_ms, deadline, sizeof(deadline));
        rcu_read_lock();
        const struct http_snapshot *s = rcu_dereference(srv->snap);
        uint32_t from, to;
        settings_worker_range(srv->cfg, s->layout.worker_bits, &from, &to);
        /* the whole space is known only once the layout is */
        json_t *range =
                s->layout_ready || srv->cfg->range_given
                        ? json_pack("{s:I, s:I}", "from", (json_int_t)from, "to", (json_int_t)to)
                        : json_null();
        json_t *j = json_pack(
                "{s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:s, s:s, s:s, s:I, s:b, s:s, s:I, "
                "s:s, s:o}",
                "cluster", srv->cfg->cluster, "instance", srv->cfg->instance, "layout", "epoch_ms",
                (json_int_t)s->layout.epoch_ms, "time_bits", (json_int_t)s->layout.time_bits,
                "worker_bits", (json_int_t)s->layout.worker_bits, "seq_bits",
                (json_int_t)s->layout.seq_bits, "worker", (json_int_t)s->worker, "generation",
                (json_int_t)st.generation, "state", shm_state_name(st.state, true), "lease",
                s->lease, "deadline", deadline, "headroom_ms", (json_int_t)st.headroom_ms,
                "etcd_reachable", s->store_reachable, "halted",
                !s->halted                             ? "no"
                : !strcmp(s->halted, "store-restored") ? "etcd-restored"
                                                       : s->halted,
                "uptime_s", (json_int_t)((now_msec() - s->mono_started_ms) / 1000), "region",
                srv->cfg->region, "worker_range", range);
        /* the store behind the store_* and etcd_* fields (docs/postgres.md) */
        json_object_set_new(j, "store", json_string(s->store_name));
        /* state and halted under the store-neutral names; those two say
         * etcd-restored and etcd-full until the next release (docs/http.md) */
        json_object_set_new(j, "segment_state", json_string(shm_state_name(st.state, false)));
        json_object_set_new(j, "halt_reason", s->halted ? json_string(s->halted) : json_null());
        /* the clock clients read (docs/clocks.md, "The TSC clock") */
        json_object_set_new(
                j, "tsc_clock",
                json_pack("{s:s, s:b, s:o, s:f, s:f, s:I}", "mode", s->tsc.mode, "on", s->tsc.on,
                          "why_off", s->tsc.on ? json_null() : json_string(s->tsc.why_off),
                          "last_error_us", (double)s->tsc.last_error_ns / 1000, "max_error_us",
                          (double)s->tsc.max_error_ns / 1000, "trips", (json_int_t)s->tsc.trips));
        /* how the store refuses us, if it does: class and its own words */
        json_object_set_new(j, "etcd_error",
                            s->store_error ? json_string(s->store_error) : json_null());
        json_object_set_new(j, "etcd_error_message",
                            s->store_error ? json_string(s->store_error_message) : json_null());
        /* the same under the store's names, the ones to use (docs/http.md);
         * etcd_reachable and etcd_error* are kept for the clients that read them */
        json_object_set_new(j, "store_reachable", json_boolean(s->store_reachable));
        json_object_set_new(j, "store_full", json_boolean(s->store_full));
        json_object_set_new(j, "store_error",
                            s->store_error ? json_string(s->store_error) : json_null());
        json_object_set_new(j, "store_error_message",
                            s->store_error ? json_string(s->store_error_message) : json_null());
        rcu_read_unlock();
        return http_reply_json(srv, c, 200, j, NULL, NULL);
}

enum MHD_Result http_healthz(struct http_server *srv, struct MHD_Connection *c)
{
        snowid_status st = SNOWID_STATUS_INIT;
        char why[256];
        if (snowid_get_status(srv->ids, &st) < 0)
                return http_fail(srv, c, 503, "cannot read the segment");
        rcu_read_lock();
        const char *halted = rcu_dereference(srv->snap)->halted;
        bool full = rcu_dereference(srv->snap)->store_full;
        const char *refused = rcu_dereference(srv->snap)->store_error;
        const char *title = rcu_dereference(srv->snap)->store_title; /* static */
        if (refused) /* the message lives in the snapshot: copied inside the section */
                snprintf(why, sizeof(why),
                         "%s: %s refuses snowidd: %.160s (the log says "
                         "what to check)",
                         refused, title, rcu_dereference(srv->snap)->store_error_message);
        rcu_read_unlock();
        if (halted && strcmp(halted, "checking")) {
                /* static strings: safe past the read-side section */
                if (!strcmp(halted, "store-restored"))
                        snprintf(why, sizeof(why),
                                 "%s: %s was restored from a backup or replaced; run `snowid "
                                 "fence` against the cluster (IDs stop at the deadline)",
                                 halted, title);
                else
                        snprintf(why, sizeof(why),
                                 "%s: the cluster's layout or fence key is gone; run `snowid "
                                 "fence` against the cluster (IDs stop at the deadline)",
                                 halted);
                return http_fail(srv, c, 503, why);
        }
        if (full) {
                snprintf(why, sizeof(why),
                         "store-full: %s is full and refuses every write; the log says how to "
                         "mend it (IDs stop at the deadline, %" PRId64 " ms from now)",
                         title, st.headroom_ms);
                return http_fail(srv, c, 503, why);
        }
        if (refused)
                return http_fail(srv, c, 503, why);
        if (st.generation & 1)
                return http_fail(srv, c, 503,
                                 "no worker number published yet, or a switch is under way");
        if (st.headroom_ms < 1000) {
                snprintf(why, sizeof(why), "only %" PRId64 " ms of headroom before the deadline",
                         st.headroom_ms);
                return http_fail(srv, c, 503, why);
        }
        return http_reply_json(srv, c, 200,
                               json_pack("{s:s, s:I, s:I}", "status", "ok", "worker",
                                         (json_int_t)st.worker, "headroom_ms",
                                         (json_int_t)st.headroom_ms),
                               NULL, NULL);
}
