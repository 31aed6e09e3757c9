/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory segment: an ABI between snowidd and every client on the
 * host.  Two memfds per segment, made by snowidd and handed to each client
 * over its socket (handshake.h); nothing lives under a name in /dev/shm:
 *
 *   control  struct shm_ctl   written by snowidd only; clients get a
 *                             read-only descriptor (and the memfd is 0600)
 *   counter  struct shm_ctr   clients read-modify-write the counter lines
 *
 * Both are sealed against shrinking and growing (no client can make another
 * take SIGBUS) and against further seals.
 *
 * Synchronization table (who writes, who reads, how):
 *
 * field          | writer                    | readers                  | access
 * ---------------+---------------------------+--------------------------+----------------------
 * magic, version,| publisher, at create      | clients at open          | plain, before any
 * size, nonce    |                           |                          | client can see it
 * pid, state     | publisher, any time       | status; clients' slow    | WRITE_ONCE / READ_ONCE
 *                |                           | path (RETIRED: follow)   |
 * heartbeat_ms   | publisher, every 100 ms   | clients' slow path       | WRITE_ONCE / READ_ONCE
 * gen            | publisher: odd, then even | every client call        | seqlock: store_release
 *                | around a switch           |                          | / load_acquire
 * worker, layout | publisher, inside a switch| every client call        | READ_ONCE between two
 * (time/worker/  | (gen odd)                 |                          | reads of gen
 * seq bits,epoch)|                           |                          |
 * deadline       | publisher: in a switch,   | every client call        | WRITE_ONCE (in a switch
 *                | and raised by extend      |                          | under gen's release) /
 *                |                           |                          | READ_ONCE (see next.c)
 * offset_ns      | publisher: in a switch,   | every client call        | WRITE_ONCE / READ_ONCE
 *                | and by clock slewing      |                          | (any value is safe)
 * lead_ms        | publisher, in a switch    | client slow path         | READ_ONCE
 * range_from,    | publisher, once the       | snowid status (through   | WRITE_ONCE / READ_ONCE
 * range_end      | layout is known           | a private call)          | (a display: no pairing)
 * tsc.seq        | publisher: odd, then even | every client call while  | seqlock: store_release
 *                | around each recalibration | the TSC clock is allowed | / load_acquire
 * tsc.base, span,| publisher, inside the     | every client call        | READ_ONCE between two
 * mult, shift, ns| tsc seqlock (tsc.h)       | (tsc.h)                  | reads of tsc.seq
 * line[i].state  | publisher raises it at a  | clients: CAS forward or  | atomic RMW only; it
 *                | switch (CAS forward);     | fetch_add; publisher     | only ever grows
 *                | clients CAS / fetch_add   | reads it for its backstop|
 * stats          | clients, slow paths only  | snowidd /metrics         | fetch_add relaxed
 *                | (issued: once per ms, as  |                          |
 *                | a counter leaves that ms) |                          |
 *
 * The live counter line is line[(gen / 2) % SHM_LINES]: every switch moves to
 * a fresh line, so a client that slept through a switch can only touch a
 * retired line.  A counter value is (ms << seq_bits) | seq, ms being ID time
 * (milliseconds since the layout's epoch).
 *
 * A segment that snowidd replaces (its counters damaged, far ahead of ID
 * time) is retired: gen left odd and state SHM_STATE_RETIRED, so its clients
 * stop taking from it and fetch the new one.  The nonce binds a control
 * object to its counter object.
 */
#pragma once

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_MAGIC_CTL UINT64_C(0x314c54434449574e) /* "NWIDCTL1" little-endian */
#define SHM_MAGIC_CTR UINT64_C(0x3152544344495753) /* "SWIDCTR1" little-endian */
#define SHM_VERSION 2u
#define SHM_LINES 64u
#define SHM_LINE_SIZE 64u

enum shm_state {
        SHM_STATE_STARTING = 0,    /* no worker published yet */
        SHM_STATE_LEASED = 1,      /* holding a lease, deadline being extended */
        SHM_STATE_NO_LEASE = 2,    /* lease lost or etcd unreachable: runs out at deadline */
        SHM_STATE_RESTORED = 3,    /* etcd restored: nothing extended until it is fenced */
        SHM_STATE_LAYOUT_LOST = 4, /* the cluster's layout or fence key is gone */
        SHM_STATE_RETIRED = 5,     /* replaced by a new segment: clients fetch it */
        SHM_STATE_STORE_FULL = 6,  /* the store refuses writes (full): runs out at deadline */
};

/* A heartbeat older than this: the daemon that made the segment is gone, and
 * a client that waits asks the socket for a newer segment. */
#define SHM_HEARTBEAT_STALE_MS 1000
/* A counter line this far ahead of where a switch wants it, or of ID time
 * when a restarted daemon finds the segment: damaged, never reused. */
#define SHM_AHEAD_REPLACE_MS 1000
#define SHM_AHEAD_REUSE_MS 60000

struct shm_ctl {
        /* line 0: identity, written once at create */
        uint64_t magic;
        uint32_t version;
        uint32_t size;
        _Atomic int32_t pid;
        _Atomic uint32_t state;
        uint64_t nonce; /* random, equal in both objects of one segment */
        uint8_t reserved0[32];

        /* line 1: everything the fast path reads */
        alignas(64) _Atomic uint64_t gen;
        _Atomic uint64_t deadline; /* last ID time (ms) a client may use */
        _Atomic int64_t offset_ns; /* ID time ns = CLOCK_MONOTONIC ns + offset_ns */
        _Atomic uint64_t epoch_ms; /* unix ms of ID time 0 */
        _Atomic uint32_t worker;
        _Atomic uint8_t time_bits;
        _Atomic uint8_t worker_bits;
        _Atomic uint8_t seq_bits;
        _Atomic uint8_t lead_ms; /* how far the counter may run ahead of ID time */
        uint8_t reserved1[24];

        /* line 2: liveness */
        alignas(64) _Atomic uint64_t
                heartbeat_ms; /* CLOCK_MONOTONIC ms of the daemon's last tick */
        /* the numbers the daemon claims in: [range_from, range_end); end 0:
         * not said (a daemon before worker ranges; the bytes were reserved) */
        _Atomic uint32_t range_from;
        _Atomic uint32_t range_end;
        /* the TSC clock (tsc.h): CLOCK_MONOTONIC as a line over the TSC,
         * calibrated by snowidd; all zero (span 0) is "off", and a client
         * that predates it never looks here (the bytes were reserved) */
        struct shm_tsc {
                _Atomic uint32_t seq;   /* odd while snowidd rewrites the line */
                _Atomic uint32_t shift; /* ns = ns0 + (tsc - base) * mult >> shift */
                _Atomic uint64_t base;  /* TSC at the line's start */
                _Atomic uint64_t span;  /* cycles past base the line is good for; 0: off */
                _Atomic uint64_t mult;
                _Atomic int64_t ns; /* CLOCK_MONOTONIC ns at base */
        } tsc;
        uint8_t reserved2[8];
};

struct shm_line {
        alignas(64) _Atomic uint64_t state;
        uint8_t pad[SHM_LINE_SIZE - sizeof(uint64_t)];
};

struct shm_stats {
        alignas(64) _Atomic uint64_t waits_ceiling; /* calls that waited for the clock */
        _Atomic uint64_t waits_deadline;            /* calls that waited for the deadline */
        _Atomic uint64_t waits_switch;              /* calls that waited on an odd generation */
        _Atomic uint64_t eagain;                    /* calls that gave up with -EAGAIN */
        _Atomic uint64_t dropped;                   /* values dropped on a generation change */
        _Atomic uint64_t issued; /* values taken, added as each ms of a counter closes */
        uint8_t pad[16];
};

struct shm_ctr {
        struct shm_line line[SHM_LINES];
        struct shm_stats stats;
        /* line 65: identity, checked by clients at open */
        alignas(64) uint64_t magic;
        uint32_t version;
        uint32_t size;
        uint64_t nonce;
        uint8_t reserved[40];
};

_Static_assert(sizeof(struct shm_ctl) == 192, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, pid) == 16, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, nonce) == 24, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, gen) == 64, "gen starts the hot line");
_Static_assert(offsetof(struct shm_ctl, deadline) == 72, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, offset_ns) == 80, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, epoch_ms) == 88, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, worker) == 96, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, lead_ms) == 103, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, heartbeat_ms) == 128, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, range_from) == 136, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, range_end) == 140, "shm_ctl is an ABI");
_Static_assert(offsetof(struct shm_ctl, tsc) == 144 && sizeof(struct shm_tsc) == 40,
               "shm_ctl is an ABI");
_Static_assert(sizeof(struct shm_line) == SHM_LINE_SIZE, "one counter per cache line");
_Static_assert(sizeof(struct shm_stats) == 64, "stats fill one line");
_Static_assert(offsetof(struct shm_ctr, stats) == SHM_LINES * SHM_LINE_SIZE, "stats after lines");
_Static_assert(offsetof(struct shm_ctr, magic) == (SHM_LINES + 1) * SHM_LINE_SIZE, "ABI");
_Static_assert(sizeof(struct shm_ctr) == (SHM_LINES + 2) * SHM_LINE_SIZE, "shm_ctr is an ABI");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && alignof(_Atomic uint64_t) == 8, "lock-free u64");

static inline unsigned shm_line_index(uint64_t gen)
{
        return (unsigned)((gen / 2) % SHM_LINES);
}

/* An instance names one daemon's socket: <runtime-dir>/<instance>.sock. */
#define SHM_INSTANCE_MAX 64
#define SHM_DEFAULT_INSTANCE "default"

int shm_instance_valid(const char *instance);
/* instance, or $SNOWID_INSTANCE, or "default"; NULL if what was chosen is not valid */
const char *shm_instance_pick(const char *instance);

/* Checks a mapped control object; 0 or -EPROTO.  Used by clients at open and
 * by the publisher when it adopts a segment kept across a restart. */
int shm_ctl_check(const struct shm_ctl *ctl, size_t mapped_size);
int shm_ctr_check(const struct shm_ctr *ctr, size_t mapped_size);
