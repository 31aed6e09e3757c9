/* SPDX-License-Identifier: MIT */
/* claim.c: acquiring a number (lease, scan, claim, settle), as the driver of
 * the pure core daemon/core/acquire.c. */
#pragma once

#include "holder-int.h"

/* The core made, once the holder's host and token are known. */
void claim_init(struct holder *h);
/* A new acquisition, unless one is under way (fresh: for a fresh number
 * after a clock step back). */
void claim_start(struct holder *h, bool fresh);
/* The next scan looks at worker first (the number held when a fence came). */
void claim_prefer(struct holder *h, int32_t worker);
/* The acquisition under way given up (halted, stopping): its lease revoked. */
void claim_drop(struct holder *h);
/* holder_publish()'s outcome for the number acquired. */
void claim_published(struct holder *h, bool published);
