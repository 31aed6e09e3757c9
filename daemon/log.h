/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <syslog.h>

extern int log_max_level;

void log_setup(void);
int log_internal(int level, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Each returns -|error| (or 0 when error is 0), so that a failure can be
 * logged and returned in one statement. */
#define log_error_errno(e, ...) log_internal(LOG_ERR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_WARNING, (e), __VA_ARGS__)
#define log_error(...) log_internal(LOG_ERR, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, __VA_ARGS__)
#define log_notice(...) log_internal(LOG_NOTICE, 0, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_DEBUG, 0, __VA_ARGS__)
