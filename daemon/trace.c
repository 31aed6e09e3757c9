/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "rules.h"
#include "trace.h"

static int trace_fd = -1;

/* 0, or -1 with errno: the whole of buf, short writes and signals retried */
static int write_all(const char *buf, size_t len)
{
        while (len) {
                ssize_t n = write(trace_fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n == 0)
                                errno = EIO;
                        return -1;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* One line ("<kind><name> values[ = result]"), in one write (unless the
 * file takes it in parts): lines of several processes appended to one file
 * do not interleave. */
static void line_out(char kind, const char *name, unsigned n, const int64_t *v,
                     const int64_t *result)
{
        char line[512];
        int len = snprintf(line, sizeof(line), "%c%s", kind, name);
        for (unsigned i = 0; i < n && len > 0 && (size_t)len < sizeof(line); i++)
                len += snprintf(line + len, sizeof(line) - (size_t)len, " %" PRId64, v[i]);
        if (result && len > 0 && (size_t)len < sizeof(line))
                len += snprintf(line + len, sizeof(line) - (size_t)len, " = %" PRId64, *result);
        if (len > 0 && (size_t)len < sizeof(line) - 1) {
                line[len++] = '\n';
                if (write_all(line, (size_t)len) == 0)
                        return;
        }
        /* a trace with a line missing could pass where it should not: the
         * tests that read traces look for this line in the daemon's log */
        log_error("Cannot write the trace SNOWID_TRACE names: no more of it is written");
        rules_note = NULL;
        close(trace_fd);
        trace_fd = -1;
}

static void note(const char *name, unsigned n, const int64_t *in, int64_t result)
{
        line_out('@', name, n, in, &result);
}

void trace_step(const char *what, unsigned n, const int64_t *values)
{
        if (trace_fd >= 0)
                line_out('!', what, n, values, NULL);
}

int trace_start(const char *program)
{
        const char *path = getenv("SNOWID_TRACE");
        if (!path || !*path)
                return 0;
        trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (trace_fd < 0)
                return log_error_errno(errno, "Cannot open the trace SNOWID_TRACE names, %s: %m",
                                       path);
        char head[128];
        int len = snprintf(head, sizeof(head),
                           "# %s %d: the rules' decisions and the holder's "
                           "steps\n",
                           program, (int)getpid());
        if (write_all(head, (size_t)len) < 0) {
                int e = errno;
                close(trace_fd);
                trace_fd = -1;
                return log_error_errno(e, "Cannot write the trace SNOWID_TRACE names, %s: %m",
                                       path);
        }
        rules_note = note;
        return 0;
}
