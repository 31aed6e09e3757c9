/* SPDX-License-Identifier: MIT */
/*
 * The values snowid stores, the same in every store: a mark (hwm/<n>, the
 * floor), a fence and a witness.  How a store keeps and sends them is its backend's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster-ident.h"

/* A stored mark: exactly 20 decimal digits. */
int parse_mark(const char *v, size_t len, uint64_t *ret);
/* A fence value: {"token": 32 hex digits, "era": unix ms, "claims_above": ms,
 * "made": true (optional), "cluster_id": decimal digits in a string
 * (optional)}. */
int fence_parse(const char *v, size_t len, struct cluster_ident *c);
/* A new fence value with a random token, after the era `after` (0: none),
 * naming cluster_id (0: none); made: by the cluster's creation. */
int fence_make(uint64_t claims_above, uint64_t after, uint64_t cluster_id, bool made,
               struct cluster_ident *c);

struct store_witness;
/* A witness's value (docs/fences.md rule 7): {"host", "instance", "era",
 * "claims_above", "deadline", "wall_ms"}; NULL if out of memory.  Freed by
 * the caller. */
char *witness_text(const struct store_witness *w);
