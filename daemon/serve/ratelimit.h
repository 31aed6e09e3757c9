/* SPDX-License-Identifier: MIT */
/*
 * Rate limits of the HTTP API: token buckets kept as GCRA (one "theoretical
 * arrival time" per bucket), each taken with a compare-and-swap on its own
 * word.  Requests of one token or one address contend on that token's or
 * address's word only; no lock is shared by the HTTP threads.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "barrier.h"

#define LIMIT_RATE_MAX 1000000000u /* per second: one per ns */
#define LIMIT_NAME_MAX 64
#define LIMIT_TOKENS_MAX 256
#define LIMIT_ADDR_SETS 512 /* a power of two */
#define LIMIT_ADDR_WAYS 8
#define LIMIT_ADDR_SLOTS (LIMIT_ADDR_SETS * LIMIT_ADDR_WAYS)
#define LIMIT_ADDR_SHARED 1024 /* a power of two */
/* An address keeps its slot until this long after its buckets are full
 * again (after its last charge, give or take a charge's worth) */
#define LIMIT_ADDR_HOLD_NS INT64_C(2000000000)
/* An address refused this recently floods: its slot is the first given up */
#define LIMIT_ADDR_FLOOD_NS INT64_C(1000000000)

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
 * its /64, the unit one host or one customer usually holds.  Never 0. */
uint64_t addr_key(const struct sockaddr *sa);

/* A 128-bit key for addr_hash(), drawn at start (getrandom()): where a key
 * lands in a table is known to this process alone, so no one can choose
 * addresses that share another's place. */
struct addr_hash {
        uint64_t k0, k1;
};

/* 0, or -errno from getrandom(). */
int addr_hash_init(struct addr_hash *h);
/* SipHash-2-4 of the 8 bytes of x (little-endian) under h. */
uint64_t addr_hash(const struct addr_hash *h, uint64_t x);

struct addr_slot {
        _Atomic uint64_t key; /* 0: free */
        struct bucket ids, requests;
        _Atomic int64_t refused; /* CLOCK_MONOTONIC ns of the last refusal; 0: none */
};

/* A fixed table of per-address buckets.  Each address has two candidate sets
 * of LIMIT_ADDR_WAYS slots, chosen by the keyed hash, and one of
 * LIMIT_ADDR_SHARED shared slots.  An address holds a slot in one of its sets
 * for as long as it keeps being charged (LIMIT_ADDR_HOLD_NS); a newcomer
 * takes a free slot, else one whose address went quiet, else one whose
 * address was refused within LIMIT_ADDR_FLOOD_NS (the most owing), and only
 * when every candidate is held by an address that pays its way does it use
 * its shared slot.  A slot given up hands what it owes to its address's
 * shared slot, and a slot taken starts owing what the newcomer's shared slot
 * owes: an address that loses its slot takes its debt with it. */
struct addr_table {
        struct addr_hash hash;
        struct addr_slot slot[LIMIT_ADDR_SLOTS];
        struct addr_slot shared[LIMIT_ADDR_SHARED];
};

/* t zeroed: draws its hash key; 0 or -errno. */
int addr_table_init(struct addr_table *t);
/* The two sets (indexes of LIMIT_ADDR_SETS) where key may hold a slot. */
void addr_sets(const struct addr_table *t, uint64_t key, size_t ret_set[2]);
/* The slot of key: its own, or its shared one. */
struct addr_slot *addr_slot_get(struct addr_table *t, uint64_t key, int64_t now_ns);
/* bucket_take() on b, one of s's buckets; a refusal is noted in s. */
int addr_take(struct addr_slot *s, struct bucket *b, struct rate r, uint64_t n, int64_t now_ns,
              int64_t *ret_wait_ns);

/* Open connections per address key, counted exactly: open addressing on the
 * keyed hash, room for twice the most keys.  No lock of its own: the
 * caller's. */
struct conn_count {
        uint64_t key; /* 0: empty */
        unsigned n;
};

struct conn_counts {
        struct addr_hash hash;
        size_t mask, used; /* used: keys counted, each holding one or more */
        size_t total;      /* connections counted, of every key */
        struct conn_count *e;
};

/* 0, -ENOMEM, or -errno from getrandom(). */
int conn_counts_init(struct conn_counts *c, unsigned max_keys);
void conn_counts_free(struct conn_counts *c);
unsigned conn_counts_get(const struct conn_counts *c, uint64_t key);
/* One more for key: 0, or -EBUSY with nothing counted when key has cap
 * already (or the table is full). */
int conn_counts_add(struct conn_counts *c, uint64_t key, unsigned cap);
/* One fewer for key (counted by conn_counts_add()). */
void conn_counts_del(struct conn_counts *c, uint64_t key);

/* The most connections one address may hold while the pool is full: pool
 * divided among addresses (those holding any, and the newcomer's), at least
 * 1 and at most cap.  It shrinks as more addresses compete. */
unsigned conn_share(unsigned pool, size_t addresses, unsigned cap);

enum conn_admit {
        CONN_REFUSE = -1, /* closed at once */
        CONN_KEEP = 0,    /* the pool has room */
        CONN_MAKE_WAY = 1 /* kept if another connection is closed for it (conn_victim()) */
};

/* What becomes of a new connection from key: refused at its address's cap,
 * or when the pool is full and key holds its share already; else kept,
 * another making way if the pool is full. */
enum conn_admit conn_admit(const struct conn_counts *c, uint64_t key, unsigned pool, unsigned cap);

/* An open connection, as conn_victim() weighs it. */
struct conn_view {
        unsigned held;      /* connections its address holds */
        int64_t idle_since; /* since when it has waited for a request; 0: not waiting */
};

/* The connection to close so that a new one from an address holding mine
 * may stay: one waiting for a request, of an address holding more than
 * mine (so none is left with fewer than the newcomer had), of the address
 * holding the most, the one waiting longest.  Its index in v, or -1 if none
 * may go. */
long conn_victim(const struct conn_view *v, size_t n, unsigned mine);
