/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "snowid.h"

/* The largest epoch that still leaves unix ms representable for every time. */
/* 2109-05-15: an epoch in ns (the clock offsets) fits an int64 with room */
#define EPOCH_MAX_MS (UINT64_C(1) << 42)

SNOWID_EXPORT int snowid_layout_default(snowid_layout *ret)
{
        if (!ret)
                return -EINVAL;
        *ret = (snowid_layout){
                .epoch_ms = SNOWID_EPOCH_DEFAULT_MS,
                .time_bits = 41,
                .worker_bits = 10,
                .seq_bits = 12,
        };
        return 0;
}

SNOWID_EXPORT int snowid_layout_check(const snowid_layout *l)
{
        if (!l)
                return -EINVAL;
        if (l->time_bits < 32 || l->time_bits > 63 || l->worker_bits > 31 || l->seq_bits > 31)
                return -EINVAL;
        if (l->time_bits + l->worker_bits + l->seq_bits != 63)
                return -EINVAL;
        if (l->epoch_ms >= EPOCH_MAX_MS)
                return -EINVAL;
        return 0;
}

SNOWID_EXPORT int snowid_decode(const snowid_layout *l, uint64_t id, snowid_parts *ret)
{
        int r = snowid_layout_check(l);
        if (r < 0)
                return r;
        if (!ret)
                return -EINVAL;
        if (id >> 63)
                return -ERANGE; /* the sign bit is never set */

        /* epoch_ms < 2^42 and time_ms < 2^63: unix_ms cannot wrap */
        uint64_t time_ms = id >> (l->worker_bits + l->seq_bits);
        *ret = (snowid_parts){
                .time_ms = time_ms,
                .unix_ms = l->epoch_ms + time_ms,
                .worker = (uint32_t)((id >> l->seq_bits) & ((UINT64_C(1) << l->worker_bits) - 1)),
                .sequence = (uint32_t)(id & ((UINT64_C(1) << l->seq_bits) - 1)),
        };
        return 0;
}

SNOWID_EXPORT int snowid_encode(const snowid_layout *l, const snowid_parts *p, uint64_t *ret_id)
{
        int r = snowid_layout_check(l);
        if (r < 0)
                return r;
        if (!p || !ret_id)
                return -EINVAL;
        if (p->time_ms >> l->time_bits || (uint64_t)p->worker >> l->worker_bits ||
            (uint64_t)p->sequence >> l->seq_bits)
                return -ERANGE;
        *ret_id = (p->time_ms << (l->worker_bits + l->seq_bits)) |
                  ((uint64_t)p->worker << l->seq_bits) | p->sequence;
        return 0;
}
