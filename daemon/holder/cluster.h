/* SPDX-License-Identifier: MIT */
/* cluster.c: the layout, the fence, halts, as the driver of the pure cores
 * daemon/core/known.c and daemon/core/create.c. */
#pragma once

#include "holder-int.h"

/* The creation's core made, once the holder's token is known. */
void cluster_init(struct holder *h);
void cluster_read(struct holder *h);
void cluster_read_in(struct holder *h, unsigned ms);
/* Rule 1: whether to act on an answer (see cluster.c). */
bool cluster_ok(struct holder *h, const struct store_answer *r, bool ok, int same);
/* An answer named another fence, layout or floor: halted while they are read. */
void cluster_check(struct holder *h);
/* A write this daemon made that the store forgot (rule 5): said, and
 * halted as restored (enum forgot says what a and b are). */
void cluster_forgotten(struct holder *h, enum forgot why, int32_t worker, int64_t a, int64_t b,
                       const char *where);
