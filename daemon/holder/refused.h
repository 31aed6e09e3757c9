/* SPDX-License-Identifier: MIT */
/* refused.c: the store refuses snowidd (auth, roles, TLS): said once, fatal
 * before READY, else reported until it clears. */
#pragma once

#include "holder-int.h"

void refused_problem(void *userdata, const struct store_problem *p);
/* <runtime-dir>/<instance>.store-error, written or removed as it stands */
void refused_file(const struct holder *h);
