/* SPDX-License-Identifier: MIT */
/* steps.c: the wall clock's steps, each tick and on a clock set. */
#pragma once

#include "holder-int.h"

#define CLOCK_TICK_MS 100

void steps_check(struct holder *h);
/* The CLOCK_TICK_MS timer: the segment's heartbeat, then steps_check(). */
int steps_on_tick(sd_event_source *s, uint64_t usec, void *userdata);
/* fd, a CLOCK_REALTIME timerfd, armed to fire whenever the clock is set. */
int steps_arm_setclock(int fd);
int steps_on_setclock(sd_event_source *s, int fd, uint32_t revents, void *userdata);
