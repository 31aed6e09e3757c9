/* SPDX-License-Identifier: MIT */
/*
 * A holding, as the holder and its pure core (acquire.h) both see it: one
 * claim attempt under a lease (which may carry several holdings' attempts,
 * each after the last was refused outright: rule 9), and the numbers this
 * daemon published.  Plain data: no event loop, no store, no clock.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A holding's state once claimed; while it is acquired, the acquisition's
 * state says where it is (enum acq_state). */
enum hstate {
        H_NONE, /* no holding */
        H_HELD, /* claimed; renewing */
        H_LOST, /* the lease or the number is gone */
};

#define SCAN_SAMPLE 8

struct holding {
        uint64_t id;
        enum hstate state;
        int64_t lease;
        int32_t worker;
        char value[320];    /* workers/<n>: host, instance, pid, token */
        uint64_t start_ms;  /* the claim's first ID time */
        uint64_t mark;      /* the claim's mark, then the highest acknowledged */
        uint64_t pending;   /* the mark of the extension in flight */
        int64_t hwm_modrev; /* hwm/<n>'s mod revision when scanned; 0 if absent */
        /* the revision at which the store acknowledged this holding's last write
         * of hwm/<n> (0: none known); a restore that forgot the write shows
         * hwm/<n> at a lower mod revision, whatever the revisions since */
        int64_t mark_rev;
        /* CLOCK_BOOTTIME ms before which the lease cannot have expired
         * (the last TTL the store gave, counted from when it was asked, less
         * a margin): the store not knowing it before then is a restore */
        uint64_t lease_until_ms;
        uint64_t lease_asked_ms; /* CLOCK_BOOTTIME ms the grant or keepalive in flight was sent */
        /* what the claim in flight compared: the holding's own last write of
         * its mark (worker, revision), or -1 */
        int32_t own_worker;
        int64_t own_rev;
        bool lease_checking; /* its lease unknown early: reading its mark to tell why */
        /* an extension found workers/<n> another's while the lease has time:
         * the lease is asked for at once, and its answer tells a number
         * written over by hand (the lease lives: lost) from a restore (the
         * lease unknown: lease_check) */
        bool taken_seen;
        bool fresh; /* a clock reset: ID time back to the wall clock */
        bool keepalive_busy, extend_busy;
        uint64_t keepalive_next_ms; /* CLOCK_MONOTONIC ms of the next keepalive */
        bool raising;               /* its mark read back low: raised before anything else */
        /* the scan: a sample of SCAN_SAMPLE numbers (sampled > 0), else every
         * number of the range */
        unsigned sampled;
        uint32_t sample[SCAN_SAMPLE];
};

/* A number this daemon published, with the last deadline it published. */
struct published {
        int32_t worker;
        uint64_t mark;
        uint64_t mono_ms; /* when it was retired */
};

#define PUBLISHED_MAX 32
