/* SPDX-License-Identifier: MIT */
/* A store's refusal (a setting is wrong, so retrying soon cannot help: auth,
 * TLS, roles, space), kept until a call of its kind goes through, told to
 * the daemon, and holding back the calls it concerns for a wait that doubles
 * with each round of tries, 1 s to 30 s.  etcd.c and pg.c keep one each. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "etcd.h"

struct store_refusal {
        struct store_problem problem;
        uint64_t until;         /* CLOCK_MONOTONIC usec; 0: no wait */
        sd_event_source *timer; /* at until: the calls held back go */
        void (*cb)(void *userdata, const struct store_problem *p);
        void *cb_userdata;
};

/* Is a call held back now?  A refusal concerns every call, except for
 * permissions: only key-value calls (is_kv) are checked against roles. */
bool store_refusal_applies(const struct store_refusal *h, bool is_kv);
/* A refusal of kind err (from endpoint, one of members endpoints that
 * refused this way): recorded and told; in a new round of tries the wait
 * doubles, and over(userdata) runs on event when it ends. */
void store_refusal_seen(struct store_refusal *h, enum store_err err, const char *message,
                        const char *endpoint, unsigned members, sd_event *event,
                        const char *timer_name, sd_event_time_handler_t over, void *userdata);
/* A call (is_kv: a key-value one) went through: true if that ended the
 * refusal (told; the caller then lets the calls held back go). */
bool store_refusal_cleared(struct store_refusal *h, bool is_kv);
void store_refusal_free(struct store_refusal *h);
