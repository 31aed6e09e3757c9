/* SPDX-License-Identifier: MIT */
/*
 * Rate limits of the HTTP API: token buckets kept as GCRA (one "theoretical
 * arrival time" per bucket), each taken with a compare-and-swap on its own
 * word.  Requests of one token or one address contend on that token's or
 * address's word only; no lock is shared by the HTTP threads.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define LIMIT_RATE_MAX 1000000000u /* per second: one per ns */
#define LIMIT_NAME_MAX 64
#define LIMIT_TOKENS_MAX 256
#define LIMIT_ADDR_SLOTS 4096 /* a power of two */
#define LIMIT_ADDR_PROBES 8

/* A rate: so many per second, a second's worth in a burst.  0: no limit. */
struct rate {
        uint32_t per_s;
};

struct bucket {
        /* CLOCK_MONOTONIC ns at which the bucket is full again; at or
         * before now: full */
        _Atomic int64_t tat;
};

/* 0 and the bucket charged n, or -1 and how long until a retry can pass.
 * A charge larger than a burst passes when the bucket is full (then the
 * bucket stays empty for as long as it costs). */
int bucket_take(struct bucket *b, struct rate r, uint64_t n, int64_t now_ns, int64_t *ret_wait_ns);
/* Gives back a charge (a request refused by a later limit). */
void bucket_refund(struct bucket *b, struct rate r, uint64_t n);

struct token {
        char name[LIMIT_NAME_MAX + 1];
        char *secret;
        struct rate ids, requests;
        struct bucket ids_bucket, requests_bucket;
        _Atomic uint64_t n_requests, n_ids, limited_ids, limited_requests;
};

/* Reads a token file: one token a line, "NAME SECRET [ids=N] [requests=N]"
 * (N per second, 0 no limit; unset: the defaults), '#' comments and blank
 * lines skipped; a line with the secret alone names it "default".  Names
 * and secrets unique.  0, or -EINVAL with a one-line reason in err. */
int tokens_load(const char *path, struct rate def_ids, struct rate def_requests, struct token **ret,
                unsigned *ret_n, char *err, size_t errlen);
void tokens_free(struct token *t, unsigned n);
/* The token whose secret is given (constant time in each secret's length),
 * or NULL. */
struct token *tokens_find(struct token *t, unsigned n, const char *given);

/* An address's key: IPv4 (also mapped into IPv6) by its 32 bits, IPv6 by
 * its /64, the unit one host or one customer usually holds. */
uint64_t addr_key(const struct sockaddr *sa);

struct addr_slot {
        _Atomic uint64_t key; /* 0: free */
        struct bucket ids, requests;
};

/* A fixed table of per-address buckets, open addressing.  A slot whose
 * buckets are full (nothing owed) is as good as free and is taken over by
 * another address; when every slot probed is owed by others, the address
 * shares the last slot, overflow, with the rest of them. */
struct addr_table {
        struct addr_slot slot[LIMIT_ADDR_SLOTS + 1];
};

struct addr_slot *addr_slot_get(struct addr_table *t, uint64_t key, int64_t now_ns);
