/* SPDX-License-Identifier: MIT */
/*
 * The cluster a daemon believes it talks to, as its fence says (docs/fences.md
 * rule 6): plain data, shared by the store's transactions (txn.h), the
 * rules (rules/rules.h) and `snowid fence`.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FENCE_MAX 256

/* The cluster a daemon believes it talks to: the fence's exact bytes and
 * the layout's create revision, as read. */
struct cluster_ident {
        char fence[FENCE_MAX];
        size_t fence_len;
        char token[33];
        uint64_t era; /* unix ms when the fence was made; only grows */
        uint64_t claims_above;
        /* etcd's cluster ID (header.cluster_id) where the fence was written;
         * 0: the fence names none (made by an earlier snowid) */
        uint64_t cluster_id;
        /* made with the cluster by the daemon that created it, not by
         * `snowid fence`: to a daemon that knew the cluster before, a
         * cluster made anew (a wiped prefix, a snapshot without it) */
        bool made;
        int64_t layout_rev;
};

/* The fence read is the one known, byte for byte. */
static inline bool fence_same(const struct cluster_ident *known, const struct cluster_ident *read)
{
        return read->fence_len == known->fence_len &&
               !memcmp(read->fence, known->fence, read->fence_len);
}

/* A cluster's first fence: made with the cluster (or, claims_above 0, by an
 * earlier snowid), not by `snowid fence`. */
static inline bool fence_first(const struct cluster_ident *c)
{
        return c->made || !c->claims_above;
}

/* How far ahead of the clock of the host that makes a fence (or creates a
 * cluster) any host's ID time may run, by default: `snowid fence --ahead` */
#ifndef FENCE_AHEAD_MS
#define FENCE_AHEAD_MS 60000
#endif
