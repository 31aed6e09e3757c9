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

/* A held number runs two lines of requests side by side (the model's
 * KAFLIGHT=1): its mark, extended or raised back, one request at a time so
 * that the mark asked for is the one known; and its lease, kept alive or
 * its loss told.  Each value names the model's step. */
enum hold_mark {
        MARK_STILL,     /* nothing in flight: extended when due (renew) */
        MARK_EXTENDING, /* store_extend() to `pending` in flight (renew's R_EXTEND) */
        MARK_RAISING,   /* read back low: raised by the raise core before anything
                         * else (renew's R_RAISE) */
};
enum hold_lease {
        LEASE_QUIET,    /* nothing in flight: kept alive when due */
        LEASE_ASKED,    /* store_keepalive() in flight (keepalive) */
        LEASE_CHECKING, /* unknown before its TTL could run out: its mark read to
                         * tell a restore from a revocation (R-D) */
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
        /* held: what is in flight for its mark, and for its lease */
        enum hold_mark marking;
        enum hold_lease leasing;
        /* an extension found workers/<n> another's while the lease has time
         * (the model's kalost): the lease is asked for at once, and its
         * answer tells a number written over by hand (the lease lives:
         * lost) from a restore (the lease unknown: lease_check) */
        bool taken_seen;
        bool fresh;                 /* a clock reset: ID time back to the wall clock */
        uint64_t keepalive_next_ms; /* CLOCK_MONOTONIC ms of the next keepalive */
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
