/* SPDX-License-Identifier: MIT */
/*
 * The writer's side of the segment: snowidd and the tests publish through
 * this and nothing else.  One publisher per instance (an exclusive lock).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "segment.h"
#include "snowid.h"

#define SHM_DIR "/dev/shm"

struct shm_pub {
        char instance[SHM_INSTANCE_MAX + 1];
        int lock_fd;
        int ctl_fd;
        int ctr_fd;
        struct shm_ctl *ctl;
        struct shm_ctr *ctr;
        int reused; /* a valid segment was already there (a restart) */
};

/* What a switch publishes. */
struct shm_publication {
        snowid_layout layout;
        uint32_t worker;
        uint64_t start_ms;  /* the live counter starts at max(its value, start_ms << seq_bits) */
        uint64_t deadline;  /* ID time ms: a mark that etcd has acknowledged */
        int64_t offset_ns;
        uint8_t lead_ms;
        /* Keep IDs increasing across the switch: start past the ms that the
         * old live counter reached.  Off for a switch whose point is to bring
         * ID time back to the wall clock (a large step back, the backstop). */
        int follow;
};

/* Creates or reuses the pair and takes the instance's lock.  group: owner
 * group of the counter object, or (gid_t)-1 to leave it.  -EBUSY if another
 * publisher holds the lock, -EINVAL for a bad instance name. */
int shm_pub_open(const char *instance, gid_t group, struct shm_pub **ret);
/* Unmaps and drops the lock; the objects stay, valid until their deadline. */
struct shm_pub *shm_pub_close(struct shm_pub *p);
/* Removes both objects (tests, and `snowidd --remove-segment`). */
int shm_pub_unlink(const char *instance);

/* Moves the segment to a new worker/layout/counter/deadline (generation +2). */
int shm_pub_switch(struct shm_pub *p, const struct shm_publication *pub);
/* Raises the deadline of the current generation; never lowers it. */
int shm_pub_extend(struct shm_pub *p, uint64_t deadline);
void shm_pub_set_offset(struct shm_pub *p, int64_t offset_ns);
void shm_pub_set_state(struct shm_pub *p, enum shm_state state);
/* ms of the live counter, for the daemon's backstop. */
uint64_t shm_pub_counter_ms(const struct shm_pub *p);

/* ID time of CLOCK_MONOTONIC now, as the clients compute it. */
int64_t shm_monotonic_ns(void);
int64_t shm_realtime_ns(void);
/* The offset that makes ID time equal the wall clock now. */
int64_t shm_offset_for_wall(uint64_t epoch_ms);
