/* SPDX-License-Identifier: MIT */
/*
 * The worker-number holder: docs/design.md's "Why two hosts never make the
 * same ID" (rules 1-14) and "Clocks", as one state machine on an sd-event
 * loop.  It leases a worker number from the store, writes the marks, and
 * publishes worker, epoch and deadline into a segment.
 *
 * A holder is an object: several may run in one process on one loop, each
 * with its own settings, store client and segment (bench/ does, to be many
 * hosts at once).  Its inside is holder-int.h's, private to holder/.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "publish.h"
#include "snowid.h"
#include "store-api.h"

struct holder;

/* Counters for STATUS= and /metrics. */
struct holder_stats {
        uint64_t renewals, renewal_failures, switches, leases_lost;
        uint64_t steps_forward, steps_back, backstops;
        uint64_t marks_raised, fences_adopted, restores_seen;
        uint64_t segments_replaced;
        uint64_t store_full_seen;
        uint64_t store_refusals; /* times the store began refusing (auth, roles, TLS) */
};

/* What the holder knows now, as a copy (main.c hands it to the HTTP threads). */
struct holder_status {
        snowid_layout layout;
        bool layout_ready;
        int32_t worker;    /* -1: none held */
        const char *lease; /* "held", "lost", "claiming" */
        /* the acquisition's step, else the holding's: "layout" (reading the
         * cluster), "grant", "scan", "claim", "settle", "held", "lost" */
        const char *step;
        bool store_reachable;
        const char *halted;            /* NULL, or why nothing is extended (holder_halt_name) */
        bool store_full;               /* the store refuses writes: it is full */
        const char *store_name;        /* the backend's: "etcd", "postgres" */
        const char *store_title;       /* for sentences: "etcd", "PostgreSQL" */
        const char *store_error;       /* NULL, or how the store refuses us: "etcd-auth"... */
        char store_error_message[256]; /* in the store's or TLS's words */
        int64_t offset_ns;             /* ID time minus CLOCK_MONOTONIC, as published */
        struct holder_stats stats;
        struct store_stats store;
};

struct holder_callbacks {
        /* on every state change and renewal tick */
        void (*change)(struct holder *h, void *userdata);
        /* the holder is done: stopped, or a setting makes going on useless
         * (code: the exit code, EX_CONFIG_ for a setting).  NULL: the loop
         * exits with code. */
        void (*done)(struct holder *h, int code, void *userdata);
        /* the segment was replaced by a fresh one (a client wrote far ahead):
         * its descriptors are new */
        void (*segment_replaced)(struct holder *h, void *userdata);
        void *userdata;
};

/* Starts a holder on event with the store the settings name (store_ops:
 * NULL), or with a backend given.  cfg and pub must outlive it. */
int holder_new(sd_event *event, const struct settings *cfg, struct shm_pub *pub,
               const struct store_ops *store_ops, const struct holder_callbacks *cb,
               struct holder **ret);
/* Confirms the held number's mark at or above its deadline, then revokes
 * its lease, and leaves the segment valid until its deadline; done when the
 * store has answered, or after store-timeout and a second. */
void holder_stop(struct holder *h);
struct holder *holder_free(struct holder *h);
void holder_status(const struct holder *h, struct holder_status *ret);
/* The exit code it ended with: 0, or what made it done. */
int holder_exit_code(const struct holder *h);
