/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>

#include "range.h"

/* Digits only, no leading zero but "0": a range is written by hand, and
 * "010-20" or "+1-5" is more likely a typo than a meaning.  Moves *p past
 * the number. */
static int parse_number(const char **p, uint32_t *ret)
{
        const char *d = *p;
        uint64_t n = 0;
        if (*d < '0' || *d > '9' || (*d == '0' && d[1] >= '0' && d[1] <= '9'))
                return -EINVAL;
        for (; *d >= '0' && *d <= '9'; d++) {
                n = n * 10 + (uint64_t)(*d - '0');
                if (n > WORKER_RANGE_MAX)
                        return -ERANGE;
        }
        *ret = (uint32_t)n;
        *p = d;
        return 0;
}

int worker_range_parse(const char *v, uint32_t *ret_from, uint32_t *ret_to)
{
        uint32_t from, to;
        const char *p = v;
        int r = parse_number(&p, &from);
        if (r < 0)
                return r;
        if (*p++ != '-')
                return -EINVAL;
        r = parse_number(&p, &to);
        if (r < 0)
                return r;
        if (*p)
                return -EINVAL;
        if (from > to)
                return -ERANGE;
        *ret_from = from;
        *ret_to = to;
        return 0;
}

bool worker_range_fits(uint32_t from, uint32_t to, unsigned worker_bits)
{
        return worker_bits < 32 && from <= to && (uint64_t)to < (UINT64_C(1) << worker_bits);
}

bool worker_range_overlaps(uint32_t from, uint32_t to, uint32_t of, uint32_t ot)
{
        return from <= ot && of <= to;
}

void range_record_format(char *buf, size_t size, uint32_t from, uint32_t to)
{
        snprintf(buf, size, "{\"from\":%" PRIu32 ",\"to\":%" PRIu32 "}", from, to);
}

int range_record_parse(const char *v, size_t len, uint32_t *ret_from, uint32_t *ret_to)
{
        json_int_t from = -1, to = -1;
        json_t *j = json_loadb(v, len, 0, NULL);
        int bad = !j || json_unpack(j, "{s:I, s:I}", "from", &from, "to", &to) < 0;
        json_decref(j);
        if (bad || from < 0 || to < from || to > (json_int_t)WORKER_RANGE_MAX)
                return -EBADMSG;
        *ret_from = (uint32_t)from;
        *ret_to = (uint32_t)to;
        return 0;
}
