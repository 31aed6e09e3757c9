/* SPDX-License-Identifier: MIT */
/*
 * Worker ranges (docs/regions.md): the numbers a daemon may claim, and the
 * record each region keeps of its range at /snowid/<cluster>/ranges/<region>,
 * so that two regions that would issue the same IDs are caught where their
 * records meet.  Pure functions: snowidd, `snowid` and the unit tests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WORKER_RANGE_MAX ((UINT32_C(1) << 31) - 1) /* worker-bits is at most 31 */

/* "FROM-TO", two decimal numbers, FROM <= TO <= WORKER_RANGE_MAX, nothing
 * else (no sign, no space): 0, or -EINVAL for another form, -ERANGE for a
 * number too large or FROM > TO.  The out-parameters are left alone on
 * failure. */
int worker_range_parse(const char *v, uint32_t *ret_from, uint32_t *ret_to);
/* Whether [from, to] lies within a layout of worker_bits. */
bool worker_range_fits(uint32_t from, uint32_t to, unsigned worker_bits);
bool worker_range_overlaps(uint32_t from, uint32_t to, uint32_t of, uint32_t ot);

/* A region's record: {"from": F, "to": T}.  buf gets a NUL-terminated value. */
void range_record_format(char *buf, size_t size, uint32_t from, uint32_t to);
/* 0, or -EBADMSG for anything but such an object with from <= to. */
int range_record_parse(const char *v, size_t len, uint32_t *ret_from, uint32_t *ret_to);
