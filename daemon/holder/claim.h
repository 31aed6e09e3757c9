/* SPDX-License-Identifier: MIT */
/* claim.c: acquiring a number (lease, scan, claim, settle), and backoffs. */
#pragma once

#include "holder-int.h"

/* A new acquisition into h->next (fresh: for a fresh number after a clock
 * step back). */
void claim_start(struct holder *h, bool fresh);
/* The acquisition under way given up; another in delay_ms. */
void claim_restart(struct holder *h, unsigned delay_ms);
/* claim_next_backoff(), up to half a lease TTL when the store did not
 * answer or answered 5xx, else up to a second */
unsigned claim_failure_backoff(struct holder *h, const struct store_answer *r);
unsigned claim_next_backoff(struct holder *h, unsigned max);
