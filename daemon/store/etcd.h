/* SPDX-License-Identifier: MIT */
/*
 * The store on etcd (private to the backend: the daemon sees store.h):
 * etcd's v3 HTTP/JSON gateway, driven by libcurl's multi interface inside
 * the daemon's sd-event loop: nothing here blocks.  Every request has a
 * timeout; a transport failure or a 5xx moves on to the next endpoint.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "store.h"

struct etcd;

int etcd_new(sd_event *event, const struct settings *cfg, struct etcd **ret);
struct etcd *etcd_free(struct etcd *e);
/* As store_call(). */
int etcd_call(struct etcd *e, const char *path, json_t *body, store_cb cb, void *userdata,
              uint64_t tag);
unsigned etcd_in_flight(const struct etcd *e);
void etcd_history_reset(struct etcd *e);
/* The cluster every answer must come from (a fence names it); 0: the first
 * answer's. */
void etcd_expect_cluster(struct etcd *e, uint64_t cluster_id);
const char *etcd_endpoint(const struct etcd *e);
const struct store_stats *etcd_stats(const struct etcd *e);
void etcd_on_problem(struct etcd *e, store_problem_cb cb, void *userdata);

/* ---- etcd-json.c, pure ---- */

/* The class of a transfer that got no answer: libcurl's code and the text
 * of its CURLOPT_ERRORBUFFER. */
enum store_err etcd_curl_err(int curl_code, const char *errbuf);
/* "etcd-auth", "etcd-permission", "etcd-tls", "etcd-cert"; NULL for none. */
const char *etcd_err_name(enum store_err err);
/* What to set in snowidd's etcd-* settings, or run in etcdctl, to mend err. */
void etcd_refusal_hint(const struct settings *cfg, enum store_err err, const char *prefix,
                       char *buf, size_t size);
void etcd_full_text(const char *member, const char *endpoint, int64_t left_ms, char *buf,
                    size_t size);
