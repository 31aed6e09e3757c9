/* SPDX-License-Identifier: MIT */
/*
 * How long a call waits for its answer before it is given up (docs/design.md,
 * "Retries"), as pure functions of what the store's last answers took.
 *
 * A held number's keepalive, extension and raise, and the writes of a
 * cluster, a witness or a range, wait store-timeout: rule 6's settle pause
 * counts on the extension and the raise.  The acquisition's calls (a grant,
 * a scan, a claim, its read-back) and the cluster's reads wait as long as
 * the store's answers take now: the smoothed latency of this daemon's answered calls plus four
 * times its mean deviation (RFC 6298's estimator), doubled after each call
 * of its kind in a row that got no answer, never below store-timeout and
 * never above PATIENCE_X times it.  A store slowed by load is then waited
 * for, not asked again: a call given up on is still the store's work, and
 * its retry only adds to the queue that made it slow.
 *
 * A patient call made while the daemon's first connection to the store is
 * still being made waits the longest: the connection's own making (a fleet
 * started at once connects at once) is no sign of an answer lost, and a
 * call given up on before it was sent is only made again behind it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define PATIENCE_X 4

struct patience {
        uint64_t srtt_us, rttvar_us; /* no answer yet: both 0 */
        unsigned lost;               /* patient calls in a row with no answer */
};

/* An answer came after usec. */
void patience_answered(struct patience *p, uint64_t usec);
/* A patient call got no answer within its wait. */
void patience_lost(struct patience *p);
/* How long the next patient call waits, in ms, for a store-timeout of
 * timeout_ms; connecting: the first connection is being made. */
unsigned patience_ms(const struct patience *p, unsigned timeout_ms, bool connecting);
