/* SPDX-License-Identifier: MIT */
/*
 * The coordination store: a transactional key-value store with leases and
 * revisions, spoken to in etcd's v3 vocabulary (a path such as
 * "/v3/kv/txn" and a body shaped as etcd's JSON gateway wants it, answered
 * as etcd answers).  etcd itself (etcd.c) or PostgreSQL (pg.c, which runs
 * the same transactions with the same meaning: docs/postgres.md) stands
 * behind it; the holder's state machine does not know which.
 */
#pragma once

#include "etcd.h"

struct store;

int store_new(sd_event *event, const struct settings *cfg, struct store **ret);
struct store *store_free(struct store *s);
/* As etcd_call(): body taken over; cb runs exactly once, from the loop,
 * unless the store is freed first. */
int store_call(struct store *s, const char *path, json_t *body, etcd_cb cb, void *userdata,
               uint64_t tag);
unsigned store_in_flight(const struct store *s);
/* Forgets the revisions and cluster identity seen (a new fence adopted). */
void store_history_reset(struct store *s);
/* Every answer must come from this cluster ID (the one the fence names):
 * one from another sets went_back. */
void store_expect_cluster(struct store *s, uint64_t cluster_id);
/* Where requests go now, for logs: an etcd endpoint, or PostgreSQL's host and port. */
const char *store_endpoint(const struct store *s);
const struct etcd_stats *store_stats(const struct store *s);
void store_on_problem(struct store *s, void (*cb)(void *userdata, const struct etcd_problem *p),
                      void *userdata);
/* "etcd" or "postgres" */
const char *store_name(const struct store *s);
