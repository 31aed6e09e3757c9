/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: Prometheus text.  Every family is declared here with its
 * HELP and TYPE lines, which tests/integration/monitoring.py reads to check
 * the names contrib/ uses; promtool lints a live daemon's output
 * (tests/integration/test_http.py).  Metric names are an API: dashboards
 * and alerting rules use them.  The store's are snowid_store_*, whichever
 * store answers; each was snowid_etcd_* when etcd was the only store, and is
 * served under that name too, its HELP saying so, until the next release
 * (docs/operators.md, "Renamed: the store's metrics and states").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-internal.h"

/* The store's families, each followed by its name from when etcd was the
 * only store (the same samples; a HELP that says it is deprecated). */
static void store_families(FILE *f, const struct http_snapshot *s)
{
        fprintf(f,
                "# HELP snowid_store_reachable Whether the last store request got an answer.\n"
                "# TYPE snowid_store_reachable gauge\nsnowid_store_reachable %d\n"
                "# HELP snowid_etcd_reachable Deprecated: the same as snowid_store_reachable, "
                "served until the next release.\n"
                "# TYPE snowid_etcd_reachable gauge\nsnowid_etcd_reachable %d\n",
                s->store_reachable, s->store_reachable);
        fprintf(f,
                "# HELP snowid_store_restores_seen_total Times the store was found restored (its "
                "history went back).\n"
                "# TYPE snowid_store_restores_seen_total counter\n"
                "snowid_store_restores_seen_total %" PRIu64 "\n"
                "# HELP snowid_etcd_restores_seen_total Deprecated: the same as "
                "snowid_store_restores_seen_total, served until the next release.\n"
                "# TYPE snowid_etcd_restores_seen_total counter\n"
                "snowid_etcd_restores_seen_total %" PRIu64 "\n",
                s->holder.restores_seen, s->holder.restores_seen);
        fprintf(f,
                "# HELP snowid_store_full Whether the store refuses writes because it is full.\n"
                "# TYPE snowid_store_full gauge\nsnowid_store_full %d\n"
                "# HELP snowid_etcd_full Deprecated: the same as snowid_store_full, served until "
                "the next release.\n"
                "# TYPE snowid_etcd_full gauge\nsnowid_etcd_full %d\n",
                s->store_full, s->store_full);
        fprintf(f,
                "# HELP snowid_store_full_total Times the store was found full.\n"
                "# TYPE snowid_store_full_total counter\nsnowid_store_full_total %" PRIu64 "\n"
                "# HELP snowid_etcd_full_total Deprecated: the same as snowid_store_full_total, "
                "served until the next release.\n"
                "# TYPE snowid_etcd_full_total counter\nsnowid_etcd_full_total %" PRIu64 "\n",
                s->holder.store_full_seen, s->holder.store_full_seen);
        static const char *const le[] = {"0.001", "0.002", "0.005", "0.01",
                                         "0.05",  "0.1",   "1",     "+Inf"};
        fprintf(f, "# HELP snowid_store_request_duration_seconds Store request latency.\n"
                   "# TYPE snowid_store_request_duration_seconds histogram\n");
        for (size_t i = 0; i < 8; i++)
                fprintf(f, "snowid_store_request_duration_seconds_bucket{le=\"%s\"} %" PRIu64 "\n",
                        le[i], s->store.latency_le[i]);
        fprintf(f,
                "snowid_store_request_duration_seconds_sum %.6f\n"
                "snowid_store_request_duration_seconds_count %" PRIu64 "\n",
                s->store.latency_sum_s, s->store.latency_le[7]);
        fprintf(f, "# HELP snowid_etcd_request_duration_seconds Deprecated: the same as "
                   "snowid_store_request_duration_seconds, served until the next release.\n"
                   "# TYPE snowid_etcd_request_duration_seconds histogram\n");
        for (size_t i = 0; i < 8; i++)
                fprintf(f, "snowid_etcd_request_duration_seconds_bucket{le=\"%s\"} %" PRIu64 "\n",
                        le[i], s->store.latency_le[i]);
        fprintf(f,
                "snowid_etcd_request_duration_seconds_sum %.6f\n"
                "snowid_etcd_request_duration_seconds_count %" PRIu64 "\n",
                s->store.latency_sum_s, s->store.latency_le[7]);
}

enum MHD_Result http_metrics(struct http_server *srv, struct MHD_Connection *c)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        snowid_status st = SNOWID_STATUS_INIT;
        if (!f)
                return http_fail(srv, c, 500, "out of memory");
        snowid_get_status(srv->ids, &st);
        fprintf(f,
                "# HELP snowid_http_ids_total IDs served over HTTP.\n"
                "# TYPE snowid_http_ids_total counter\nsnowid_http_ids_total %" PRIu64 "\n",
                READ_ONCE(srv->ids_served));
        fprintf(f, "# HELP snowid_http_token_requests_total Requests by bearer token (its name; "
                   "none: no token).\n# TYPE snowid_http_token_requests_total counter\n");
        for (unsigned i = 0; i <= srv->cfg->n_http_tokens; i++) {
                const struct token *t =
                        i < srv->cfg->n_http_tokens ? &srv->cfg->http_tokens[i] : &srv->anonymous;
                fprintf(f, "snowid_http_token_requests_total{token=\"%s\"} %" PRIu64 "\n", t->name,
                        READ_ONCE(t->n_requests));
        }
        fprintf(f, "# HELP snowid_http_token_ids_total IDs served, by bearer token.\n"
                   "# TYPE snowid_http_token_ids_total counter\n");
        for (unsigned i = 0; i <= srv->cfg->n_http_tokens; i++) {
                const struct token *t =
                        i < srv->cfg->n_http_tokens ? &srv->cfg->http_tokens[i] : &srv->anonymous;
                fprintf(f, "snowid_http_token_ids_total{token=\"%s\"} %" PRIu64 "\n", t->name,
                        READ_ONCE(t->n_ids));
        }
        fprintf(f, "# HELP snowid_http_limited_total Requests refused (429) by a rate limit: "
                   "a token's or an address's, of IDs or of requests.\n"
                   "# TYPE snowid_http_limited_total counter\n");
        for (unsigned i = 0; i < srv->cfg->n_http_tokens; i++) {
                const struct token *t = &srv->cfg->http_tokens[i];
                fprintf(f,
                        "snowid_http_limited_total{by=\"token\",token=\"%s\",limit=\"ids\"} "
                        "%" PRIu64
                        "\nsnowid_http_limited_total{by=\"token\",token=\"%s\",limit=\"requests\"} "
                        "%" PRIu64 "\n",
                        t->name, READ_ONCE(t->limited_ids), t->name,
                        READ_ONCE(t->limited_requests));
        }
        fprintf(f,
                "snowid_http_limited_total{by=\"address\",limit=\"ids\"} %" PRIu64 "\n"
                "snowid_http_limited_total{by=\"address\",limit=\"requests\"} %" PRIu64 "\n"
                "# HELP snowid_http_connections Open HTTP connections.\n"
                "# TYPE snowid_http_connections gauge\nsnowid_http_connections %" PRIu64 "\n"
                "# HELP snowid_http_read_deadline_cuts_total Connections shut because a request "
                "was not read whole within http-read-timeout.\n"
                "# TYPE snowid_http_read_deadline_cuts_total counter\n"
                "snowid_http_read_deadline_cuts_total %" PRIu64 "\n",
                READ_ONCE(srv->limited_addr_ids), READ_ONCE(srv->limited_addr_requests),
                READ_ONCE(srv->conns_open), READ_ONCE(srv->deadline_cuts));
        fprintf(f,
                "# HELP snowid_http_evictions_total Connections waiting for a request closed to "
                "make way for a new one while http-connections were held.\n"
                "# TYPE snowid_http_evictions_total counter\nsnowid_http_evictions_total %" PRIu64
                "\n",
                READ_ONCE(srv->evictions));
        fprintf(f, "# HELP snowid_http_requests_total HTTP requests answered, by status code.\n"
                   "# TYPE snowid_http_requests_total counter\n");
        for (unsigned code = 100; code < CODES; code++) {
                uint64_t n = READ_ONCE(srv->by_code[code]);
                if (n)
                        fprintf(f, "snowid_http_requests_total{code=\"%u\"} %" PRIu64 "\n", code,
                                n);
        }
        rcu_read_lock();
        const struct http_snapshot *s = rcu_dereference(srv->snap);
        fprintf(f,
                "# HELP snowid_lease_renewals_total Mark extensions acknowledged by the store.\n"
                "# TYPE snowid_lease_renewals_total counter\nsnowid_lease_renewals_total %" PRIu64
                "\n# HELP snowid_lease_renewal_failures_total Keepalives or extensions that "
                "failed.\n"
                "# TYPE snowid_lease_renewal_failures_total counter\n"
                "snowid_lease_renewal_failures_total %" PRIu64 "\n"
                "# HELP snowid_leases_lost_total Worker numbers lost.\n"
                "# TYPE snowid_leases_lost_total counter\nsnowid_leases_lost_total %" PRIu64 "\n"
                "# HELP snowid_worker_switches_total Segment switches to a new worker number.\n"
                "# TYPE snowid_worker_switches_total counter\nsnowid_worker_switches_total %" PRIu64
                "\n# HELP snowid_clock_steps_total Wall clock steps seen, by direction.\n"
                "# TYPE snowid_clock_steps_total counter\n"
                "snowid_clock_steps_total{direction=\"forward\"} %" PRIu64 "\n"
                "snowid_clock_steps_total{direction=\"back\"} %" PRIu64 "\n"
                /* not snowid_counter_...: a name that holds a metric type fails
                 * promtool check metrics (tests/integration/test_http.py) */
                "# HELP snowid_backstop_switches_total Switches to a fresh worker number because "
                "the live counter ran ahead of ID time.\n"
                "# TYPE snowid_backstop_switches_total counter\n"
                "snowid_backstop_switches_total %" PRIu64 "\n"
                "# HELP snowid_clock_offset_seconds ID time minus CLOCK_MONOTONIC, less the "
                "epoch.\n"
                "# TYPE snowid_clock_offset_seconds gauge\nsnowid_clock_offset_seconds %.6f\n"
                "# HELP snowid_worker The worker number held, -1 if none.\n"
                "# TYPE snowid_worker gauge\nsnowid_worker %" PRId32 "\n",
                s->holder.renewals, s->holder.renewal_failures, s->holder.leases_lost,
                s->holder.switches, s->holder.steps_forward, s->holder.steps_back,
                s->holder.backstops, (double)s->offset_ns / 1e9, s->worker);
        fprintf(f,
                "# HELP snowid_tsc_clock_on Whether clients read time from the TSC clock that "
                "snowidd calibrates (else the vDSO).\n# TYPE snowid_tsc_clock_on gauge\n"
                "snowid_tsc_clock_on %d\n"
                "# HELP snowid_tsc_clock_error_seconds The TSC clock minus CLOCK_MONOTONIC at its "
                "last check while on.\n# TYPE snowid_tsc_clock_error_seconds gauge\n"
                "snowid_tsc_clock_error_seconds %.9f\n"
                "# HELP snowid_tsc_clock_trips_total Times the TSC clock went off because its "
                "error passed tsc-max-error.\n# TYPE snowid_tsc_clock_trips_total counter\n"
                "snowid_tsc_clock_trips_total %" PRIu64 "\n",
                s->tsc.on, (double)s->tsc.last_error_ns / 1e9, s->tsc.trips);
        fprintf(f,
                "# HELP snowid_cluster_halted Whether the daemon extends nothing on the cluster, "
                "and why (run `snowid fence`); reason=\"etcd-restored\" is the deprecated "
                "name of reason=\"store-restored\", served beside it until the next release.\n"
                "# TYPE snowid_cluster_halted gauge\n");
        static const char *const reasons[] = {"store-restored", "layout-lost", "fence-lost"};
        for (size_t i = 0; i < 3; i++)
                fprintf(f, "snowid_cluster_halted{reason=\"%s\"} %d\n", reasons[i],
                        s->halted && !strcmp(s->halted, reasons[i]));
        fprintf(f, "snowid_cluster_halted{reason=\"etcd-restored\"} %d\n",
                s->halted && !strcmp(s->halted, reasons[0]));
        fprintf(f,
                "# HELP snowid_marks_raised_total Marks found absent or low and written back.\n"
                "# TYPE snowid_marks_raised_total counter\nsnowid_marks_raised_total %" PRIu64 "\n"
                "# HELP snowid_fences_adopted_total New fences (snowid fence) adopted.\n"
                "# TYPE snowid_fences_adopted_total counter\nsnowid_fences_adopted_total %" PRIu64
                "\n",
                s->holder.marks_raised, s->holder.fences_adopted);
        fprintf(f,
                "# HELP snowid_segments_replaced_total Segments replaced because their counters "
                "were far ahead (written by a client).\n"
                "# TYPE snowid_segments_replaced_total counter\n"
                "snowid_segments_replaced_total %" PRIu64 "\n"
                "# HELP snowid_handshakes_total Handshakes on the socket, by result.\n"
                "# TYPE snowid_handshakes_total counter\n"
                "snowid_handshakes_total{result=\"given\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"refused\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"malformed\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"timeout\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"evicted\"} %" PRIu64 "\n"
                "snowid_handshakes_total{result=\"busy\"} %" PRIu64 "\n",
                s->holder.segments_replaced, s->handshakes.given, s->handshakes.refused,
                s->handshakes.bad, s->handshakes.timeouts, s->handshakes.evicted,
                s->handshakes.busy);
        store_families(f, s);
        rcu_read_unlock();
        fprintf(f,
                "# HELP snowid_headroom_seconds Time left before the published deadline.\n"
                "# TYPE snowid_headroom_seconds gauge\nsnowid_headroom_seconds %.3f\n",
                (double)st.headroom_ms / 1000);
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        if (snowid_get_host_stats(srv->ids, &hs) == 0)
                fprintf(f,
                        "# HELP snowid_host_ids_issued_total Counter values taken on this host "
                        "(all processes).\n# TYPE snowid_host_ids_issued_total counter\n"
                        "snowid_host_ids_issued_total %" PRIu64 "\n"
                        "# HELP snowid_host_waits_total Calls that waited, by reason.\n"
                        "# TYPE snowid_host_waits_total counter\n"
                        "snowid_host_waits_total{reason=\"ceiling\"} %" PRIu64 "\n"
                        "snowid_host_waits_total{reason=\"deadline\"} %" PRIu64 "\n"
                        "snowid_host_waits_total{reason=\"switch\"} %" PRIu64 "\n"
                        "# HELP snowid_host_eagain_total Calls that gave up with EAGAIN.\n"
                        "# TYPE snowid_host_eagain_total counter\nsnowid_host_eagain_total %" PRIu64
                        "\n",
                        hs.issued, hs.waits_ceiling, hs.waits_deadline, hs.waits_switch, hs.eagain);
        fclose(f);
        return http_reply(srv, c, 200, "text/plain; version=0.0.4", buf, len, NULL, NULL);
}
