/* SPDX-License-Identifier: MIT */
/*
 * The writer's side of the segment: snowidd and the tests publish through
 * this and nothing else.  One publisher per instance (an exclusive lock).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment.h"
#include "tsc.h"
#include "snowid.h"

struct shm_pub {
        int lock_fd;
        int ctl_fd;    /* read-write; kept by the daemon (and systemd's fd store) */
        int ctl_ro_fd; /* read-only: what clients get */
        int ctr_fd;
        struct shm_ctl *ctl;
        struct shm_ctr *ctr;
        int reused;             /* a valid segment was handed back (a restart) */
        unsigned replaced;      /* how many times a fresh segment replaced a damaged one */
        uint64_t memo_epoch_ms; /* what the lock file remembers (0: nothing) */
        int64_t memo_offset_ns;
        int32_t memo_worker; /* the worker number last published (-1: none) */
};

/* What a switch publishes. */
struct shm_publication {
        snowid_layout layout;
        uint32_t worker;
        uint64_t start_ms; /* the live counter starts at max(its value, start_ms << seq_bits) */
        uint64_t deadline; /* ID time ms: a mark that etcd has acknowledged */
        int64_t offset_ns;
        uint8_t lead_ms;
        /* Keep IDs increasing across the switch: start past the ms that the
         * old live counter reached.  Off for a switch whose point is to bring
         * ID time back to the wall clock (a large step back, the backstop). */
        int follow;
};

/* Takes the instance's lock, <dir>/<instance>.lock (no lock when dir is
 * NULL), then adopts the segment of ctl_fd and ctr_fd (a restart: both
 * checked, and refused when damaged or far ahead of ID time) or makes a new
 * one.  Takes the two descriptors (-1: none) whatever it returns.  -EBUSY if
 * another publisher holds the lock, -EINVAL for a bad instance name. */
int shm_pub_open(const char *dir, const char *instance, int ctl_fd, int ctr_fd,
                 struct shm_pub **ret);
/* 1 and the offset (ID time ns = CLOCK_MONOTONIC ns + offset) of the last
 * publisher of this instance in this boot, when it published for this
 * epoch; kept in the lock file at each switch and each change of offset. */
int shm_pub_remembered(const struct shm_pub *p, uint64_t epoch_ms, int64_t *ret_offset_ns);
/* The worker number the last publisher of this instance in this boot
 * published for this epoch (kept in the lock file at each switch), or -1. */
int32_t shm_pub_remembered_worker(const struct shm_pub *p, uint64_t epoch_ms);
/* Unmaps and drops the lock; clients keep the segment, valid until its deadline. */
struct shm_pub *shm_pub_close(struct shm_pub *p);
/* Tells clients that the daemon is alive (every clock tick). */
void shm_pub_heartbeat(struct shm_pub *p);

/* Moves the segment to a new worker/layout/counter/deadline (generation +2).
 * When every counter line is far ahead of where it should start (damaged), it
 * publishes into a fresh segment instead and retires the old one
 * (p->replaced counts these; the daemon then stores the new descriptors). */
int shm_pub_switch(struct shm_pub *p, const struct shm_publication *pub);
/* Raises the deadline of the current generation; never lowers it. */
int shm_pub_extend(struct shm_pub *p, uint64_t deadline);
void shm_pub_set_offset(struct shm_pub *p, int64_t offset_ns);
void shm_pub_set_state(struct shm_pub *p, enum shm_state state);
/* A segment's state (SNOWID_STATE_*) by the name `snowid status`, /healthz
 * and /metrics give it; old_names: as the deprecated JSON fields ("state")
 * say it until the next release, with the names from when etcd was the
 * only store ("etcd-restored", "etcd-full"). */
const char *shm_state_name(int state, bool old_names);
/* The worker numbers the daemon claims in, from..to, for snowid status. */
void shm_pub_set_range(struct shm_pub *p, uint32_t from, uint32_t to);
/* Publishes the TSC clock's line (tsc.h); NULL turns it off. */
void shm_pub_set_tsc(struct shm_pub *p, const struct tsc_line *l);
/* ms of the live counter, for the daemon's backstop. */
uint64_t shm_pub_counter_ms(const struct shm_pub *p);
/* What the segment holds now, as its clients read it: the deadline (ID time
 * ms), the epoch (unix ms of ID time 0), the offset (ID time ns =
 * CLOCK_MONOTONIC ns + offset) and the nonce that binds its two objects. */
uint64_t shm_pub_deadline(const struct shm_pub *p);
uint64_t shm_pub_epoch_ms(const struct shm_pub *p);
int64_t shm_pub_offset_ns(const struct shm_pub *p);
uint64_t shm_pub_nonce(const struct shm_pub *p);

/* CLOCK_MONOTONIC now, in ns, as the clients read it (ID time is this plus
 * the offset): the one reading of it in snowidd (daemon/monotonic.h). */
int64_t shm_monotonic_ns(void);
int64_t shm_realtime_ns(void);
/* The offset that makes ID time equal the wall clock now. */
int64_t shm_offset_for_wall(uint64_t epoch_ms);
