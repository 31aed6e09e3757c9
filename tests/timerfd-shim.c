/* SPDX-License-Identifier: MIT */
/*
 * Preloaded before libfaketime in the clock tests.  libfaketime 0.9.10
 * shifts every absolute timerfd_settime() by its fake offset, the
 * CLOCK_MONOTONIC timers of sd-event included, even with
 * FAKETIME_DONT_FAKE_MONOTONIC=1: after a fake step of an hour forward the
 * kernel refuses the negative time and the event loop fails.  This passes
 * timerfd_settime() straight to the kernel, so that only the wall clock is
 * faked, as on a real host whose clock is stepped.
 */
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

int timerfd_settime(int fd, int flags, const struct itimerspec *new_value,
                    struct itimerspec *old_value)
{
        return (int)syscall(SYS_timerfd_settime, fd, flags, new_value, old_value);
}
