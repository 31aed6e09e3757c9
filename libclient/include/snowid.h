/* SPDX-License-Identifier: MIT */
/*
 * libsnowid: unique, roughly time-ordered 64-bit IDs (or UUIDv7s) from the
 * host's snowidd.
 *
 * snowid_next() takes one value from the segment's shared counter with one
 * atomic operation and no system call.  Only when it must wait (and has a
 * budget to wait) and its segment is retired or its daemon gone, it asks
 * snowidd's socket for a newer segment, within that budget.  Every function
 * returns 0 or a negative errno value and leaves its out-parameters untouched
 * on failure.  A handle may be shared between threads and survives fork().
 * The library never prints.
 */
#ifndef SNOWID_H
#define SNOWID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(SNOWID_BUILDING)
#define SNOWID_EXPORT __attribute__((visibility("default")))
#else
#define SNOWID_EXPORT
#endif

typedef struct snowid snowid;

/* How an ID is cut: time_bits + worker_bits + seq_bits == 63, time_bits >= 32. */
typedef struct snowid_layout {
        uint64_t epoch_ms;    /* unix ms of ID time 0; default 1735689600000 (2025-01-01Z) */
        unsigned time_bits;   /* default 41 */
        unsigned worker_bits; /* default 10 */
        unsigned seq_bits;    /* default 12 */
} snowid_layout;

typedef struct snowid_parts {
        uint64_t time_ms; /* ms since the layout's epoch */
        uint64_t unix_ms; /* epoch_ms + time_ms */
        uint32_t worker;
        uint32_t sequence;
} snowid_parts;

enum snowid_state {
        SNOWID_STATE_STARTING = 0,
        SNOWID_STATE_LEASED = 1,
        SNOWID_STATE_NO_LEASE = 2,
        SNOWID_STATE_RESTORED = 3,    /* the store was restored: nothing extended until fenced */
        SNOWID_STATE_LAYOUT_LOST = 4, /* the cluster's layout or fence is gone */
        SNOWID_STATE_RETIRED = 5,     /* replaced by a newer segment (clients follow) */
        SNOWID_STATE_STORE_FULL = 6,  /* the store is full: nothing extended */
        /* the same state by its name from when etcd was the only store */
        SNOWID_STATE_ETCD_FULL = SNOWID_STATE_STORE_FULL,
};

/*
 * The two structs below grow at their end as libsnowid learns more to say.
 * Before the call, set size to sizeof the struct (the _INIT macros do); the
 * library fills the fields that fit in both its struct and the caller's, and
 * sets size to the bytes it filled.  So a program built against an older
 * header gets what it knows of, and one built against a newer header than the
 * library it runs with can tell, with SNOWID_HAS_FIELD(), which fields came
 * back.  (The versions of SNOWID_1.0, without size, stay for programs built
 * against them.)
 */
#define SNOWID_HAS_FIELD(ptr, field)                                                               \
        (offsetof(__typeof__(*(ptr)), field) + sizeof((ptr)->field) <= (ptr)->size)

/* Host-wide counts, kept by libsnowid on its slow paths (all processes). */
typedef struct snowid_host_stats {
        size_t size;             /* in: sizeof(snowid_host_stats); out: bytes filled */
        uint64_t issued;         /* counter values taken (IDs, and the few dropped at a switch) */
        uint64_t waits_ceiling;  /* calls that waited for the clock */
        uint64_t waits_deadline; /* calls that waited for the deadline */
        uint64_t waits_switch;   /* calls that waited for a switch to finish */
        uint64_t eagain;         /* calls that gave up */
        uint64_t dropped;        /* values dropped because the generation changed */
} snowid_host_stats;

typedef struct snowid_status {
        size_t size; /* in: sizeof(snowid_status); out: bytes filled */
        uint32_t worker;
        int state;            /* enum snowid_state */
        uint64_t generation;  /* odd while snowidd is switching */
        uint64_t deadline_ms; /* last ID time (ms since epoch) that may be used */
        uint64_t deadline_unix_ms;
        int64_t headroom_ms; /* deadline minus ID time now; negative once passed */
        int64_t offset_ns;   /* ID time minus CLOCK_MONOTONIC */
        int32_t daemon_pid;
        int32_t tsc_clock; /* 1: snowidd publishes the TSC clock (clients may read it) */
} snowid_status;

/* initialisers with size set (every field named, for -Wextra in C++) */
/* clang-format off */
#ifdef __cplusplus
#define SNOWID_HOST_STATS_INIT {sizeof(snowid_host_stats), 0, 0, 0, 0, 0, 0}
#define SNOWID_STATUS_INIT {sizeof(snowid_status), 0, 0, 0, 0, 0, 0, 0, 0, 0}
#else
#define SNOWID_HOST_STATS_INIT {.size = sizeof(snowid_host_stats)}
#define SNOWID_STATUS_INIT {.size = sizeof(snowid_status)}
#endif
/* clang-format on */

#define SNOWID_EPOCH_DEFAULT_MS UINT64_C(1735689600000)
#define SNOWID_MAX_WAIT_DEFAULT_USEC UINT64_C(100000)

/* Gets the segment of instance (NULL: $SNOWID_INSTANCE or "default") from
 * snowidd over <dir>/<instance>.sock, dir being $SNOWID_RUNTIME_DIR or
 * /run/snowid.  The handle follows a newer segment by itself.
 * -ENOENT or -ECONNREFUSED: no snowidd listening;
 * -EACCES: snowidd does not let this process take IDs;
 * -EPERM: the socket is not safe (its directory writable by others, or it
 *         or its directory owned by a user other than the daemon's or root);
 * -EXDEV: this process does not share snowidd's CLOCK_MONOTONIC (another
 *         time namespace);
 * -EPROTO: not a snowidd of this version, or a damaged answer;
 * -ECONNRESET: snowidd closed the connection without an answer, four times
 *         running (each time asked again after 10 ms: a restart's backlog
 *         is served by the next snowidd);
 * -ETIMEDOUT: snowidd did not answer within a second;
 * -EAGAIN: this user held too many answers unread for a second;
 * -EINVAL: a bad instance name, or $SNOWID_RUNTIME_DIR not an absolute path;
 * -ENAMETOOLONG: the socket path is too long; -ENOMEM.
 * Other errors of connect() pass through (-EACCES too: a directory this
 * process may not search). */
SNOWID_EXPORT int snowid_open(const char *instance, snowid **ret);
/* Accepts NULL; always returns NULL. */
SNOWID_EXPORT snowid *snowid_close(snowid *s);

/* One ID.  -EAGAIN if none could be issued within the wait budget (no lease,
 * deadline reached, clock behind the counter). */
SNOWID_EXPORT int snowid_next(snowid *s, uint64_t *ret_id);
/* n IDs from one atomic operation, increasing.  1 <= n <= 2^seq_bits. */
SNOWID_EXPORT int snowid_next_batch(snowid *s, uint64_t *ret_ids, size_t n);
/* How long a call may wait (clock, deadline, a switch); 0 never waits.  A
 * budget too long to count in ns (about 292 years and up, e.g. UINT64_MAX)
 * waits as long as it takes. */
SNOWID_EXPORT int snowid_set_max_wait(snowid *s, uint64_t usec);

SNOWID_EXPORT int snowid_get_layout(snowid *s, snowid_layout *ret);
SNOWID_EXPORT int snowid_get_status(snowid *s, snowid_status *ret);
SNOWID_EXPORT int snowid_get_host_stats(snowid *s, snowid_host_stats *ret);

/* Layouts need no segment. */
SNOWID_EXPORT int snowid_layout_default(snowid_layout *ret);
SNOWID_EXPORT int snowid_layout_check(const snowid_layout *l);
SNOWID_EXPORT int snowid_decode(const snowid_layout *l, uint64_t id, snowid_parts *ret);
/* Uses p->time_ms, p->worker and p->sequence; -ERANGE if one does not fit. */
SNOWID_EXPORT int snowid_encode(const snowid_layout *l, const snowid_parts *p, uint64_t *ret_id);

/*
 * UUIDv7 (RFC 9562), since SNOWID_1.1: made from one counter value taken
 * exactly as snowid_next() takes one (same checks, same errors), so a UUID
 * and a 64-bit ID never share a value, and two UUIDs are never equal.
 * 16 bytes, big-endian: unix ms (48 bits), version 7, the sequence (12 bits;
 * its high 12 when the layout has more), variant 10, then the sequence's
 * remaining low bits, the worker number and random bits.  They sort by
 * time as the IDs do.  The random bits come from a generator seeded per
 * handle with getrandom(); they are not secret (docs/uuid7.md).
 * -ERANGE: the time does not fit 48 bits (after the year 10889).
 */
SNOWID_EXPORT int snowid_next_uuid7(snowid *s, uint8_t ret_uuid[16]);
/* n UUIDs from one atomic operation, increasing.  1 <= n <= 2^seq_bits. */
SNOWID_EXPORT int snowid_next_uuid7_batch(snowid *s, uint8_t (*ret_uuids)[16], size_t n);
/* The time, worker and sequence of a UUID made by snowid_next_uuid7() under
 * layout l.  -EINVAL: not a UUIDv7; -ERANGE: its time or sequence does not
 * fit l.  A UUIDv7 made elsewhere decodes to meaningless worker numbers. */
SNOWID_EXPORT int snowid_decode_uuid7(const snowid_layout *l, const uint8_t uuid[16],
                                      snowid_parts *ret);

#ifdef __cplusplus
}
#endif

#endif
