/* The public header alone, in C: nothing else included before it. */
#include "snowid.h"

int main(void)
{
        snowid_layout l;
        snowid_parts p;
        if (snowid_layout_default(&l) != 0 || snowid_decode(&l, (UINT64_C(1) << 22) | 5, &p) != 0)
                return 1;
        return p.time_ms == 1 && p.sequence == 5 && sizeof(snowid_status) > 0 ? 0 : 1;
}
