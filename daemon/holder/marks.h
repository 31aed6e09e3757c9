/* SPDX-License-Identifier: MIT */
/* marks.c: the marks this daemon published, and raising them (rule 4), as
 * the driver of the pure core daemon/core/raise.c. */
#pragma once

#include "holder-int.h"

void marks_init(struct holder *h);
/* A new fence adopted: every mark published past it raised to its deadline. */
void marks_fence_adopted(struct holder *h);
void marks_raise(struct holder *h, int32_t worker, uint64_t mark, int64_t lease,
                 uint64_t for_holding, int64_t acked_rev);
void marks_retired(struct holder *h, int32_t worker, uint64_t mark);
/* whether a raise of the number's mark will give up a lease once confirmed */
bool marks_handing_over(const struct holder *h, int32_t worker);
/* A restore seen: every mark this daemon published (the held number's, and
 * those of the last hour) raised again on the store as it is now; a higher
 * mark only fences more. */
void marks_protect(struct holder *h);
