/* SPDX-License-Identifier: MIT */
/*
 * CLOCK_MONOTONIC in the units the daemon's parts count in.  It is read in
 * one place, shm_monotonic_ns() (shm/publish.c), the clock that ID time is
 * an offset from and that the segment's clients read too; these only change
 * its unit.  usec is sd-event's unit (timers, request latencies), ms the
 * unit of uptimes and throttles.
 */
#pragma once

#include <stdint.h>

#include "publish.h"

static inline uint64_t now_usec(void)
{
        return (uint64_t)shm_monotonic_ns() / 1000;
}

static inline uint64_t now_msec(void)
{
        return (uint64_t)shm_monotonic_ns() / 1000000;
}
