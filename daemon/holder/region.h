/* SPDX-License-Identifier: MIT */
/* region.c: the worker range and its region's record (docs/regions.md). */
#pragma once

#include "holder-int.h"

/* Whether the range fits worker_bits (else logged, and the holder is done
 * with EX_CONFIG_). */
bool region_range_fits(struct holder *h, unsigned worker_bits);
/* With the n ranges/ records read at revision rev: 1 the range is checked
 * and recorded (h->range_*); 0 a record is being written, the cluster read
 * again after; -1 refused (done with EX_CONFIG_). */
int region_check(struct holder *h, int64_t rev, const struct store_record *records, size_t n,
                 unsigned worker_bits, int64_t layout_rev);
