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

/* The backend's calls are its table's, store_etcd_ops (store.h). */

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
