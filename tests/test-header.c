/* The public header alone, in C: nothing else included before it. */
#include "snowid.h"

int main(void)
{
        snowid_layout l;
        snowid_parts p;
        snowid_status st = SNOWID_STATUS_INIT;
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        if (snowid_layout_default(&l) != 0 || snowid_decode(&l, (UINT64_C(1) << 22) | 5, &p) != 0)
                return 1;
        /* a UUIDv7 at the epoch's ms + 1: sequence 5, worker 3 */
        uint8_t u[16] = {0x01, 0x94, 0x1f, 0x29, 0x7c, 0x01, 0x70, 0x05, 0x80, 0x30};
        uint8_t(*batch)[16] = &u;
        if (snowid_decode_uuid7(&l, batch[0], &p) != 0 || p.time_ms != 1 || p.worker != 3)
                return 1;
        /* a full store's state, by its name and by its earlier one: one value, 6 */
        if (SNOWID_STATE_STORE_FULL != 6 || SNOWID_STATE_ETCD_FULL != SNOWID_STATE_STORE_FULL)
                return 1;
        return p.time_ms == 1 && p.sequence == 5 && sizeof(snowid_status) > 0 &&
                               SNOWID_HAS_FIELD(&st, tsc_clock) && hs.size == sizeof(hs) &&
                               snowid_get_status(0, &st) < 0
                       ? 0
                       : 1;
}
