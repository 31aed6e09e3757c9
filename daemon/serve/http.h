/* SPDX-License-Identifier: MIT */
/*
 * The daemon's HTTP API (libmicrohttpd, its own thread pool).  Handlers take
 * IDs through libsnowid like any other client; what they know of the lease
 * comes from a snapshot that the event loop publishes with liburcu
 * (rcu_assign_pointer there, rcu_dereference here, call_rcu to free).
 * The server's own files are listed in http-internal.h.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "holder.h"
#include "publish.h"
#include "serve.h"
#include "store.h"
#include "tsc-clock.h"

/* What the loop knows, as one immutable object. */
struct http_snapshot {
        snowid_layout layout;
        bool layout_ready;
        int32_t worker;          /* -1: none */
        const char *lease;       /* "held", "lost", "claiming" */
        const char *store_name;  /* "etcd", "postgres" (static strings) */
        const char *store_title; /* "etcd", "PostgreSQL" */
        bool store_reachable;    /* the last store request got an answer */
        const char *halted;      /* NULL, or why nothing is extended (holder_halt_name) */
        bool store_full;         /* the store refuses writes: it is full (NOSPACE, a full disk) */
        /* NULL, or how the store refuses us: "etcd-auth", "postgres-auth"... */
        const char *store_error;
        char store_error_message[256]; /* in the store's or TLS's words */
        int64_t offset_ns;
        uint64_t mono_started_ms;
        struct holder_stats holder;
        struct store_stats store; /* request latencies */
        struct serve_stats handshakes;
        struct tsc_stats tsc;
};

struct http_server;

/* libmicrohttpd's connection limit for http-connections n: the n that
 * snowidd keeps open (its own count, http-limits.c), and room for the
 * connections closed to make way for others in the moments they take to go.
 * Each costs two descriptors. */
static inline uint64_t http_connections_max(uint64_t n)
{
        return n + n / 16 + 16;
}

struct http_snapshot *http_snapshot_new(void);
/* Listens on cfg->http (addr.h).  Takes IDs from pub's segment, following
 * it through the socket. */
int http_start(const struct settings *cfg, const struct shm_pub *pub, struct http_server **ret);
void http_stop(struct http_server *srv);
/* The port the server listens on (the one the kernel chose for port 0). */
unsigned http_port(const struct http_server *srv);
/* From the loop: replaces the snapshot (taken over; the old one is freed
 * after a grace period). */
void http_publish(struct http_server *srv, struct http_snapshot *snap);
