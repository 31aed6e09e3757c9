/* SPDX-License-Identifier: MIT */
/* Shared by the fuzzers: a runtime directory of the process's own
 * (tests/rundir.h). */
#pragma once

#include "rundir.h"

static inline const char *fuzz_dir(void)
{
        return rundir("/tmp/snowid-fuzz-XXXXXX");
}
