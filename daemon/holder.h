/* SPDX-License-Identifier: MIT */
/*
 * The worker-number holder: DESIGN.md's "Why two hosts never make the same
 * ID" and "Clocks", as one state machine in the daemon's loop.
 *
 * A holding is one lease with at most one claim attempt.  `cur` is the
 * holding published in the segment; `next` is an acquisition under way
 * (at start, after a lost lease, or for a fresh number after a clock step
 * back).  Every etcd request carries its holding's id, and an answer whose
 * id is neither cur's nor next's is ignored.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "etcd.h"
#include "publish.h"

enum hstate {
        H_NONE,   /* no holding */
        H_GRANT,  /* waiting for a lease */
        H_SCAN,   /* reading workers/ and hwm/ to choose a number */
        H_CLAIM,  /* the claim transaction is in flight */
        H_SETTLE, /* the claim's answer never came: reading back */
        H_HELD,   /* claimed; renewing */
        H_LOST,   /* the lease or the number is gone */
};

struct holding {
        uint64_t id;
        enum hstate state;
        int64_t lease;
        int32_t worker;
        char value[320];     /* workers/<n>: host, instance, pid, token */
        uint64_t start_ms;   /* the claim's first ID time */
        uint64_t mark;       /* the claim's mark, then the highest acknowledged */
        uint64_t pending;    /* the mark of the extension in flight */
        int64_t hwm_modrev;  /* hwm/<n>'s mod revision when scanned; 0 if absent */
        bool fresh;          /* a clock reset: ID time back to the wall clock */
        bool keepalive_busy, extend_busy;
};

struct holder_stats {
        uint64_t renewals, renewal_failures, switches, leases_lost;
        uint64_t steps_forward, steps_back, backstops;
};

struct holder {
        const struct settings *cfg;
        sd_event *event;
        struct etcd *etcd;
        struct shm_pub *pub;
        snowid_layout layout;
        bool layout_ready;
        char prefix[96]; /* "/snowid/<cluster>/" */
        char host[128];
        char token[17];
        uint64_t ids;
        struct holding cur, next;
        int64_t offset_ns;    /* ID time minus CLOCK_MONOTONIC, as published */
        unsigned backoff_ms;
        uint64_t fresh_not_before_ms; /* monotonic ms: throttles fresh-number attempts */
        sd_event_source *renew_timer, *clock_timer, *retry_timer, *setclock_io, *stop_timer;
        bool ready_sent, stopping, etcd_reachable;
        int exit_code;
        struct holder_stats stats;
        /* called on every state change and renewal tick (the HTTP snapshot) */
        void (*on_change)(struct holder *h, void *userdata);
        void *on_change_userdata;
};

int holder_start(struct holder *h, sd_event *event, const struct settings *cfg,
                 struct shm_pub *pub);
/* Revokes the leases and leaves the segment valid until its deadline; the
 * loop exits when etcd has answered or after a second. */
void holder_stop(struct holder *h);
void holder_free(struct holder *h);
