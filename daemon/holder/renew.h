/* SPDX-License-Identifier: MIT */
/* renew.c: keepalive and mark extension of the held number; its loss. */
#pragma once

#include "holder-int.h"

/* A keepalive and an extension now (each if none is in flight). */
void renew_send(struct holder *h);
/* The renew-ms timer. */
int renew_on_timer(sd_event_source *s, uint64_t usec, void *userdata);
/* The held number is lost (why: for the log): IDs go on to its deadline,
 * its mark is confirmed, and another acquisition starts. */
void holder_lost(struct holder *h, const char *why);
