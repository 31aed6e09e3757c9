// The public header alone, in C++.
#include "snowid.h"

int main()
{
        snowid_layout l;
        snowid_parts p;
        snowid *s = nullptr;
        if (snowid_layout_default(&l) != 0 || snowid_decode(&l, (UINT64_C(1) << 22) | 5, &p) != 0)
                return 1;
        return p.time_ms == 1 && p.sequence == 5 && snowid_close(s) == nullptr ? 0 : 1;
}
