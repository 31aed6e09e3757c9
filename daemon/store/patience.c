/* SPDX-License-Identifier: MIT */
/*
 * How long a call waits for its answer (patience.h).
 */
#include "patience.h"

void patience_answered(struct patience *p, uint64_t usec)
{
        if (!p->srtt_us) {
                p->srtt_us = usec ? usec : 1;
                p->rttvar_us = usec / 2;
        } else {
                uint64_t d = usec > p->srtt_us ? usec - p->srtt_us : p->srtt_us - usec;
                p->rttvar_us = (3 * p->rttvar_us + d) / 4;
                p->srtt_us = (7 * p->srtt_us + usec) / 8;
                if (!p->srtt_us)
                        p->srtt_us = 1;
        }
        p->lost = 0;
}

void patience_lost(struct patience *p)
{
        if (p->lost < 8)
                p->lost++;
}

unsigned patience_ms(const struct patience *p, unsigned timeout_ms, bool connecting)
{
        uint64_t most = (uint64_t)timeout_ms * PATIENCE_X;
        if (connecting)
                return (unsigned)most;
        uint64_t ms = (p->srtt_us + 4 * p->rttvar_us + 999) / 1000;
        /* each call in a row given up on doubles the wait, from the
         * estimate or from store-timeout, whichever is longer */
        ms = ms > timeout_ms ? ms : timeout_ms;
        for (unsigned i = 0; i < p->lost && ms < most; i++)
                ms *= 2;
        return (unsigned)(ms < most ? ms : most);
}
