/* SPDX-License-Identifier: MIT */
/*
 * Which number to claim, from a scan (daemon/holder/claim.c asks): a pure
 * decision over what the scan read, like the rules beside it.  Which number
 * is chosen changes nothing of a claim's safety (its transaction compares
 * what the scan read of it, rule 3); it decides how far ahead of the clock
 * the host starts, and how a fleet starting at once spreads.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reads.h"

/* Free numbers whose mark is behind the clock are spread over at random;
 * failing those, the free numbers within this of the lowest mark. */
#define CHOOSE_SPREAD_MS 1000

enum choice_kind {
        CHOOSE_CLAIM,      /* claim `worker`, whose mark (or the floor's stand-in) is `mark` */
        CHOOSE_WAIT,       /* the preferred number is still this host's, handing over */
        CHOOSE_SCAN_ALL,   /* a sample found nothing free near the clock: read every number */
        CHOOSE_NONE_FRESH, /* a fresh number wanted, none behind the clock: keep this one */
        CHOOSE_ALL_TAKEN,  /* every number of the range is held */
};

struct choice {
        enum choice_kind kind;
        uint32_t worker;
        uint64_t mark;
        bool ahead; /* every free number's mark is ahead of the clock */
};

struct choose_in {
        const struct store_number *numbers; /* as the scan read them; index: the number */
        uint64_t first, last;               /* the range claimed in */
        uint64_t floor, now, claims_above;
        /* the number held when a fence came, or published last before a
         * restart (the lock file's), or -1 */
        int32_t prefer;
        bool prefer_handing_over; /* it is still held by this host's old lease */
        bool fresh;               /* a fresh number: only one behind the clock will do */
        bool sampled;             /* the scan read a sample, not every number */
        /* how far a live holder's mark leads the clock (window + mark-step):
         * a sample whose lowest free number has a mark ahead by no more
         * than this is claimed from without reading every number */
        uint64_t lead_ms;
        /* how far apart live holders' marks lie (mark-step): the preferred
         * number is taken if its claim starts within this of the lowest
         * free mark, or within lead_ms of the lowest start a claim could
         * have (now or claims_above + 1) */
        uint64_t step_ms;
        /* a uniform draw in [0, n), n > 0 */
        uint64_t (*draw)(void *state, uint64_t n);
        void *draw_state;
};

/* Whether the scan's number n can be claimed: not held, its mark readable. */
bool choose_free(const struct store_number *x);

struct choice claim_choose(const struct choose_in *in);
