/* SPDX-License-Identifier: MIT */
/*
 * When a held number is renewed, and to what (daemon/holder/renew.c acts on
 * it): a pure decision over the holding's state and the clocks read.  The
 * mark is written only once the headroom falls below the window, and then
 * mark-step further: at rest one write per mark-step, while an outage that
 * starts at any moment still finds at least the window (less one renewal)
 * of headroom.  The lease is kept alive a third of its TTL apart.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct renew_in {
        uint64_t now;  /* ID time, ms */
        uint64_t mark; /* the deadline published (the mark acknowledged) */
        uint64_t window_ms, step_ms;
        unsigned time_bits; /* a mark past them cannot be written */
        bool extend_busy;   /* an extension in flight: its value is the one known */
        bool raising;       /* the mark read back low: raised before anything else */
        bool halted;        /* nothing is extended on a cluster not trusted */
        uint64_t mono;      /* CLOCK_MONOTONIC ms */
        uint64_t keepalive_next;
        bool keepalive_busy, lease_checking;
        bool keepalive_now; /* asked at once (the lease must tell something) */
        unsigned ttl_ms;
};

struct renew_plan {
        bool keepalive;
        uint64_t keepalive_next; /* when the one after it is due */
        bool extend;
        uint64_t extend_to;
};

struct renew_plan renew_decide(const struct renew_in *in);
