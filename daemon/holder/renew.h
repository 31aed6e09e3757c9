/* SPDX-License-Identifier: MIT */
/* renew.c: keepalive and mark extension of the held number, and its loss, as
 * the driver of the pure core daemon/core/hold.c. */
#pragma once

#include "holder-int.h"

void renew_init(struct holder *h);
/* A keepalive and an extension now (each if due and none is in flight). */
void renew_send(struct holder *h);
/* The renew-ms timer. */
int renew_on_timer(sd_event_source *s, uint64_t usec, void *userdata);
/* g is published: the holding renewed from now on. */
void renew_published(struct holder *h, const struct holding *g);
/* The raise the holding `holding` waited for is confirmed. */
void renew_raised(struct holder *h, uint64_t holding);
/* A new fence adopted: the held number given up to its mark. */
void renew_fenced(struct holder *h);
/* Stopping: nothing held is renewed. */
void renew_stop(struct holder *h);
