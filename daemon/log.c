/* SPDX-License-Identifier: MIT */
/* Logs to stderr; under systemd (JOURNAL_STREAM set) with <N> level prefixes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

int log_max_level = LOG_INFO;
static int prefix_levels;

void log_setup(void)
{
        prefix_levels = getenv("JOURNAL_STREAM") != NULL;
}

int log_internal(int level, int error, const char *fmt, ...)
{
        int saved = errno;
        if (error < 0)
                error = -error;
        if (level <= log_max_level) {
                char buf[1024];
                va_list ap;
                errno = error; /* so that %m says the error passed in */
                va_start(ap, fmt);
                vsnprintf(buf, sizeof(buf), fmt, ap);
                va_end(ap);
                if (prefix_levels)
                        fprintf(stderr, "<%d>%s\n", level, buf);
                else {
                        struct timespec ts;
                        struct tm tm;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        localtime_r(&ts.tv_sec, &tm);
                        fprintf(stderr, "%02d:%02d:%02d.%03ld snowidd: %s\n", tm.tm_hour, tm.tm_min,
                                tm.tm_sec, ts.tv_nsec / 1000000, buf);
                }
        }
        errno = saved;
        return -error;
}
