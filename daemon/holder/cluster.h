/* SPDX-License-Identifier: MIT */
/* cluster.c: the layout, the fence, halts. */
#pragma once

#include "holder-int.h"

/* The creation's core made, once the holder's token is known. */
void cluster_init(struct holder *h);
void cluster_read(struct holder *h);
void cluster_read_in(struct holder *h, unsigned ms);
bool cluster_ok(struct holder *h, const struct store_answer *r, bool ok, int same);
void cluster_halt(struct holder *h, enum halt why);
