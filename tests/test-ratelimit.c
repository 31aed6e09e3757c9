/* SPDX-License-Identifier: MIT */
/* The HTTP API's rate limits (daemon/serve/ratelimit.c): buckets on a fake clock,
 * many threads on one bucket without a lock, the address table, connection
 * counts and the pool's shares, the token file. */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ratelimit.h"

#define S INT64_C(1000000000)

static void test_bucket(void **state)
{
        (void)state;
        struct bucket b = {0};
        struct rate r = {10};
        int64_t now = 100 * S, wait = 0;
        /* a burst of one second's worth, then one per interval */
        for (int i = 0; i < 10; i++)
                assert_int_equal(bucket_take(&b, r, 1, now, &wait), 0);
        assert_int_equal(bucket_take(&b, r, 1, now, &wait), -1);
        assert_int_equal(wait, S / 10);
        now += S / 10;
        assert_int_equal(bucket_take(&b, r, 1, now, &wait), 0);
        assert_int_equal(bucket_take(&b, r, 1, now, &wait), -1);
        /* idle long enough: full again, not fuller */
        now += 60 * S;
        for (int i = 0; i < 10; i++)
                assert_int_equal(bucket_take(&b, r, 1, now, &wait), 0);
        assert_int_equal(bucket_take(&b, r, 1, now, &wait), -1);
        /* a refund gives one back */
        bucket_refund(&b, r, 1);
        assert_int_equal(bucket_take(&b, r, 1, now, &wait), 0);
        /* 0: no limit */
        struct bucket u = {0};
        for (int i = 0; i < 1000; i++)
                assert_int_equal(bucket_take(&u, (struct rate){0}, 1000000, now, &wait), 0);
}

static void test_bucket_large_charge(void **state)
{
        (void)state;
        struct bucket b = {0};
        struct rate r = {1000};
        int64_t now = 5 * S, wait = 0;
        /* larger than a burst: passes on a full bucket, then owes it */
        assert_int_equal(bucket_take(&b, r, 3000, now, &wait), 0);
        assert_int_equal(bucket_take(&b, r, 1, now + S, &wait), -1);
        assert_int_equal(bucket_take(&b, r, 3000, now + S, &wait), -1);
        assert_int_equal(wait, 2 * S); /* until the bucket is full */
        assert_int_equal(bucket_take(&b, r, 3000, now + 3 * S, &wait), 0);
        /* a charge that would overflow saturates rather than wrapping */
        struct bucket c = {0};
        assert_int_equal(bucket_take(&c, (struct rate){1}, UINT64_MAX, now, &wait), 0);
        assert_int_equal(bucket_take(&c, (struct rate){1}, 1, now + 1000 * S, &wait), -1);
}

struct hammer {
        struct bucket *b;
        int64_t until;
        long granted;
};

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

static void *hammer(void *arg)
{
        struct hammer *h = arg;
        int64_t wait, now;
        while ((now = now_ns()) < h->until)
                if (bucket_take(h->b, (struct rate){100000}, 1, now, &wait) == 0)
                        h->granted++;
        return NULL;
}

/* Four threads on one bucket, no lock: what they are granted together never
 * exceeds a burst plus the rate over the time. */
static void test_bucket_threads(void **state)
{
        (void)state;
        struct bucket b = {0};
        struct hammer h[4];
        pthread_t t[4];
        int64_t start = now_ns();
        atomic_store(&b.tat, start);
        for (int i = 0; i < 4; i++) {
                h[i] = (struct hammer){.b = &b, .until = start + S / 2};
                assert_int_equal(pthread_create(&t[i], NULL, hammer, &h[i]), 0);
        }
        long total = 0;
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                total += h[i].granted;
        }
        double secs = (double)(now_ns() - start) / S;
        print_message("granted %ld in %.3f s at 100000/s\n", total, secs);
        assert_true(total <= 100000 * (secs + 1) + 1);
        assert_true(total >= 100000 * 0.5 * 0.9); /* the rate, at least, was given */
}

static void test_addr_key(void **state)
{
        (void)state;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
        struct sockaddr_in b = a;
        b.sin_addr.s_addr = htonl(0x7f000003);
        assert_int_not_equal(addr_key((void *)&a), addr_key((void *)&b));
        b.sin_addr = a.sin_addr;
        b.sin_port = htons(9);
        assert_int_equal(addr_key((void *)&a), addr_key((void *)&b)); /* the port is not the key */
        /* IPv4 mapped into IPv6: the same key as IPv4 */
        struct sockaddr_in6 m = {.sin6_family = AF_INET6};
        m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
        memcpy(m.sin6_addr.s6_addr + 12, &a.sin_addr, 4);
        assert_int_equal(addr_key((void *)&a), addr_key((void *)&m));
        /* IPv6: one key per /64 */
        struct sockaddr_in6 x = {.sin6_family = AF_INET6}, y;
        x.sin6_addr.s6_addr[0] = 0x20;
        x.sin6_addr.s6_addr[1] = 0x01;
        x.sin6_addr.s6_addr[15] = 1;
        y = x;
        y.sin6_addr.s6_addr[15] = 2;
        assert_int_equal(addr_key((void *)&x), addr_key((void *)&y));
        y.sin6_addr.s6_addr[7] = 1;
        assert_int_not_equal(addr_key((void *)&x), addr_key((void *)&y));
        assert_int_not_equal(addr_key((void *)&x), 0);
        /* a /64 whose bytes spell an IPv4 key (2001:db8:0:4::/64 and
         * 32.1.13.184 once did) never shares its buckets */
        struct sockaddr_in6 z = {.sin6_family = AF_INET6};
        static const uint8_t p64[8] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 4};
        memcpy(z.sin6_addr.s6_addr, p64, 8);
        struct sockaddr_in v4 = {.sin_family = AF_INET};
        memcpy(&v4.sin_addr, p64, 4);
        assert_int_not_equal(addr_key((void *)&z), addr_key((void *)&v4));
}

static void test_addr_hash(void **state)
{
        (void)state;
        /* SipHash-2-4's own vector: key 00..0f, message 00..07 */
        struct addr_hash k = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
        assert_true(addr_hash(&k, UINT64_C(0x0706050403020100)) == UINT64_C(0x93f5f5799a932462));
        /* drawn at start: two tables place one key apart */
        struct addr_hash a, b;
        assert_int_equal(addr_hash_init(&a), 0);
        assert_int_equal(addr_hash_init(&b), 0);
        assert_true(a.k0 != b.k0 || a.k1 != b.k1);
        unsigned same = 0;
        for (uint64_t x = 1; x <= 64; x++)
                same += (addr_hash(&a, x) & 511) == (addr_hash(&b, x) & 511);
        assert_true(same < 8);
}

static struct addr_table *table(void)
{
        struct addr_table *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        /* a key the test knows, as an attacker who learnt it would */
        t->hash = (struct addr_hash){42, 43};
        return t;
}

static bool is_shared(struct addr_table *t, struct addr_slot *s)
{
        return s >= t->shared && s < t->shared + LIMIT_ADDR_SHARED;
}

static void test_addr_table(void **state)
{
        (void)state;
        struct addr_table *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        assert_int_equal(addr_table_init(t), 0);
        int64_t now = 10 * S, wait;
        struct rate r = {1};
        struct addr_slot *a = addr_slot_get(t, 1000, now);
        assert_false(is_shared(t, a));
        assert_ptr_equal(addr_slot_get(t, 1000, now), a);
        assert_int_equal(addr_take(a, &a->requests, r, 1, now, &wait), 0);
        /* every address charged (paying its way): the table fills, then the
         * rest use their shared slots */
        unsigned shared = 0;
        for (uint64_t k = 2000; k < 2000 + 2 * LIMIT_ADDR_SLOTS; k++) {
                struct addr_slot *s = addr_slot_get(t, k, now);
                if (is_shared(t, s))
                        shared++;
                else
                        assert_int_equal(addr_take(s, &s->requests, r, 1, now, &wait), 0);
        }
        assert_true(shared >= LIMIT_ADDR_SLOTS);
        assert_ptr_equal(addr_slot_get(t, 1000, now), a); /* kept its own */
        /* quiet for the hold time: given up to a newcomer */
        now += 1 * S + LIMIT_ADDR_HOLD_NS;
        struct addr_slot *n = addr_slot_get(t, 99999999, now);
        assert_false(is_shared(t, n));
        assert_int_equal(addr_take(n, &n->requests, r, 1, now, &wait), 0);
        free(t);
}

/* count keys whose two sets are those of key */
static void colliding(struct addr_table *t, uint64_t key, uint64_t *ret, unsigned count)
{
        size_t want[2], got[2];
        addr_sets(t, key, want);
        for (uint64_t k = key + 1; count; k++) {
                addr_sets(t, k, got);
                if ((got[0] == want[0] && got[1] == want[1]) ||
                    (got[0] == want[1] && got[1] == want[0]))
                        ret[--count] = k;
        }
}

/* An address refused gives its slot up first, and takes what it owes along
 * to its shared slot and to the next slot it takes. */
static void test_addr_table_debt(void **state)
{
        (void)state;
        struct addr_table *t = table();
        struct rate r = {10};
        int64_t now = 10 * S, wait;
        uint64_t keys[2 * LIMIT_ADDR_WAYS + 1];
        colliding(t, 5, keys, 2 * LIMIT_ADDR_WAYS + 1);
        /* 16 addresses fill the two sets; the first floods (refused) */
        struct addr_slot *s[2 * LIMIT_ADDR_WAYS];
        for (int i = 0; i < 2 * LIMIT_ADDR_WAYS; i++) {
                s[i] = addr_slot_get(t, keys[i], now);
                assert_false(is_shared(t, s[i]));
                assert_int_equal(addr_take(s[i], &s[i]->requests, r, 1, now, &wait), 0);
        }
        for (int i = 0; i < 9; i++)
                assert_int_equal(addr_take(s[0], &s[0]->requests, r, 1, now, &wait), 0);
        assert_int_equal(addr_take(s[0], &s[0]->requests, r, 1, now, &wait), -1);
        /* a newcomer to the full sets takes the flooder's slot, full */
        uint64_t newcomer = keys[2 * LIMIT_ADDR_WAYS];
        struct addr_slot *n = addr_slot_get(t, newcomer, now);
        assert_ptr_equal(n, s[0]);
        for (int i = 0; i < 10; i++)
                assert_int_equal(addr_take(n, &n->requests, r, 1, now, &wait), 0);
        /* the flooder, in its shared slot (the rest pay their way), still owes */
        struct addr_slot *f = addr_slot_get(t, keys[0], now);
        assert_true(is_shared(t, f));
        assert_int_equal(addr_take(f, &f->requests, r, 1, now, &wait), -1);
        /* and in a slot of its own again, once one went quiet, still owes:
         * 50 more at once (5 s' worth) */
        for (int step = 0; step < 7; step++) {
                now += S / 2;
                for (int i = 2; i < 2 * LIMIT_ADDR_WAYS; i++)
                        assert_int_equal(addr_take(s[i], &s[i]->requests, r, 1, now, &wait), 0);
                assert_int_equal(addr_take(n, &n->requests, r, 1, now, &wait), 0);
        }
        assert_int_equal(addr_take(f, &f->requests, r, 50, now, &wait), 0);
        f = addr_slot_get(t, keys[0], now);
        assert_ptr_equal(f, s[1]);
        assert_int_equal(addr_take(f, &f->requests, r, 1, now + S, &wait), -1);
        assert_true(wait > 3 * S);
        free(t);
}

#define FLOOD 24

/* A polite address (a fifth of its rate) holds a slot; FLOOD addresses that
 * share both its sets (chosen knowing the table's key) flood at four times
 * their rate for 20 s: the polite one is served every request from its own
 * slot, a polite newcomer to the same sets is served from its first request,
 * and each flooder, for all the slots changing hands, is granted no more
 * than its burst and its rate. */
static void test_addr_table_flood(void **state)
{
        (void)state;
        struct addr_table *t = table();
        struct rate r = {10};
        uint64_t polite = 7, flood[FLOOD + 1];
        colliding(t, polite, flood, FLOOD + 1);
        uint64_t newcomer = flood[FLOOD];
        int64_t start = 100 * S, wait;
        struct addr_slot *own = addr_slot_get(t, polite, start);
        assert_false(is_shared(t, own));
        long granted[FLOOD] = {0}, refused = 0, moves = 0, newcomer_served = 0;
        struct addr_slot *last[FLOOD] = {0}, *newcomer_slot = NULL;
        for (int64_t ms = 0; ms < 20000; ms += 25) {
                int64_t now = start + ms * (S / 1000);
                for (int i = 0; i < FLOOD; i++) {
                        struct addr_slot *s = addr_slot_get(t, flood[i], now);
                        moves += s != last[i];
                        last[i] = s;
                        if (addr_take(s, &s->requests, r, 1, now, &wait) == 0)
                                granted[i]++;
                        else
                                refused++;
                }
                if (ms % 500 == 0) {
                        struct addr_slot *s = addr_slot_get(t, polite, now);
                        assert_ptr_equal(s, own);
                        assert_int_equal(addr_take(s, &s->requests, r, 1, now, &wait), 0);
                }
                if (ms >= 10000 && ms % 500 == 250) {
                        struct addr_slot *s = addr_slot_get(t, newcomer, now);
                        assert_false(is_shared(t, s));
                        if (newcomer_slot)
                                assert_ptr_equal(s, newcomer_slot);
                        newcomer_slot = s;
                        assert_int_equal(addr_take(s, &s->requests, r, 1, now, &wait), 0);
                        newcomer_served++;
                }
        }
        long total = 0;
        for (int i = 0; i < FLOOD; i++) {
                assert_true(granted[i] <= 10 * 20 + 10);
                total += granted[i];
        }
        print_message("polite: 40 of 40 from its own slot; newcomer: %ld of 20; %d flooders "
                      "at 40/s for 20 s: %ld granted (at most %d), %ld refused, %ld moves\n",
                      newcomer_served, FLOOD, total, FLOOD * 210, refused, moves);
        assert_int_equal(newcomer_served, 20);
        assert_true(refused > 0);
        free(t);
}

static void test_conn_counts(void **state)
{
        (void)state;
        struct conn_counts c;
        assert_int_equal(conn_counts_init(&c, 128), 0);
        /* 8 addresses of one /64, 16 connections each, a cap of 16: the /64
         * is held to 16 */
        struct sockaddr_in6 a = {.sin6_family = AF_INET6};
        static const uint8_t net[8] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0};
        memcpy(a.sin6_addr.s6_addr, net, 8);
        unsigned ok = 0;
        for (int host = 1; host <= 8; host++) {
                a.sin6_addr.s6_addr[15] = (uint8_t)host;
                for (int i = 0; i < 16; i++)
                        ok += conn_counts_add(&c, addr_key((void *)&a), 16) == 0;
        }
        assert_int_equal(ok, 16);
        assert_int_equal(conn_counts_get(&c, addr_key((void *)&a)), 16);
        /* another /64 is not held back by it */
        struct sockaddr_in6 b = a;
        b.sin6_addr.s6_addr[7] = 2;
        assert_int_equal(conn_counts_add(&c, addr_key((void *)&b), 16), 0);
        /* IPv4: each address its own */
        struct sockaddr_in v = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
        for (int i = 0; i < 16; i++)
                assert_int_equal(conn_counts_add(&c, addr_key((void *)&v), 16), 0);
        assert_int_equal(conn_counts_add(&c, addr_key((void *)&v), 16), -EBUSY);
        v.sin_addr.s_addr = htonl(0x7f000003);
        assert_int_equal(conn_counts_add(&c, addr_key((void *)&v), 16), 0);
        /* one closed: one more may open */
        conn_counts_del(&c, addr_key((void *)&a));
        assert_int_equal(conn_counts_add(&c, addr_key((void *)&a), 16), 0);
        assert_int_equal(conn_counts_add(&c, addr_key((void *)&a), 16), -EBUSY);
        conn_counts_free(&c);

        /* many keys coming and going in a small table: the counts stay exact */
        assert_int_equal(conn_counts_init(&c, 64), 0);
        unsigned want[200] = {0};
        srandom(1);
        for (int step = 0; step < 200000; step++) {
                unsigned k = (unsigned)random() % 200;
                if (random() % 2 && want[k]) {
                        conn_counts_del(&c, k + 1);
                        want[k]--;
                } else if (conn_counts_add(&c, k + 1, 3) == 0)
                        want[k]++;
                else
                        assert_true(want[k] == 3 || c.used == c.mask);
        }
        unsigned keys = 0, total = 0;
        for (unsigned k = 0; k < 200; k++) {
                assert_int_equal(conn_counts_get(&c, k + 1), want[k]);
                keys += want[k] > 0;
                total += want[k];
        }
        assert_int_equal(keys, c.used);
        assert_int_equal(total, c.total);
        conn_counts_free(&c);
}

static void test_conn_share(void **state)
{
        (void)state;
        assert_int_equal(conn_share(1024, 16, 64), 64);
        assert_int_equal(conn_share(1024, 17, 64), 60);
        assert_int_equal(conn_share(1024, 100, 64), 10);
        assert_int_equal(conn_share(1024, 5000, 64), 1); /* never none */
        assert_int_equal(conn_share(1024, 1, 64), 64);   /* never over the cap */
        assert_int_equal(conn_share(8, 0, 64), 8);

        /* a pool of 8, 4 an address */
        struct conn_counts c;
        assert_int_equal(conn_counts_init(&c, 8), 0);
        for (int i = 0; i < 4; i++) {
                assert_int_equal(conn_admit(&c, 1, 8, 4), CONN_KEEP);
                assert_int_equal(conn_counts_add(&c, 1, 4), 0);
        }
        assert_int_equal(conn_admit(&c, 1, 8, 4), CONN_REFUSE); /* its cap */
        for (int i = 0; i < 4; i++) {
                assert_int_equal(conn_admit(&c, 2, 8, 4), CONN_KEEP);
                assert_int_equal(conn_counts_add(&c, 2, 4), 0);
        }
        assert_int_equal(c.total, 8);
        /* full: a third address's share is 8 / 3 = 2, made way for */
        assert_int_equal(conn_admit(&c, 3, 8, 4), CONN_MAKE_WAY);
        conn_counts_del(&c, 1);
        assert_int_equal(conn_counts_add(&c, 3, 4), 0);
        assert_int_equal(conn_admit(&c, 3, 8, 4), CONN_MAKE_WAY);
        conn_counts_del(&c, 2);
        assert_int_equal(conn_counts_add(&c, 3, 4), 0);
        assert_int_equal(conn_admit(&c, 3, 8, 4), CONN_REFUSE);
        /* one closes: room again, up to the cap */
        conn_counts_del(&c, 1);
        assert_int_equal(conn_admit(&c, 3, 8, 4), CONN_KEEP);
        conn_counts_free(&c);
}

static void test_conn_victim(void **state)
{
        (void)state;
        const struct conn_view v[] = {
                {5, 100}, /* 0 */
                {7, 300}, /* 1 */
                {7, 0},   /* 2: busy, though its address holds the most and it was idle first */
                {7, 200}, /* 3: the longest idle of the address holding the most */
                {3, 50},  /* 4 */
        };
        assert_int_equal(conn_victim(v, 5, 0), 3);
        assert_int_equal(conn_victim(v, 5, 6), 3);
        /* none of an address holding no more than the newcomer */
        assert_int_equal(conn_victim(v, 5, 7), -1);
        assert_int_equal(conn_victim(v, 2, 5), 1);
        assert_int_equal(conn_victim(v, 1, 5), -1);
        assert_int_equal(conn_victim(v + 2, 1, 0), -1);
        assert_int_equal(conn_victim(v, 0, 0), -1);
}

/* The pool as http-limits.c keeps it, on a fake clock: each connection
 * admitted by conn_admit(), the pool full making way by conn_victim(). */
#define POOL 1024
#define CAP 64
struct sim {
        struct conn_counts c;
        uint64_t addr[POOL];
        int64_t idle_since[POOL]; /* -1: closed */
        int64_t now;
        uint64_t made_way; /* the address of the last connection closed to make way */
};

static int sim_open(struct sim *s, uint64_t addr)
{
        enum conn_admit a = conn_admit(&s->c, addr, POOL, CAP);
        if (a == CONN_REFUSE)
                return -1;
        int slot = -1;
        if (a == CONN_MAKE_WAY) {
                struct conn_view v[POOL];
                for (size_t i = 0; i < POOL; i++)
                        v[i] = (struct conn_view){
                                s->idle_since[i] >= 0 ? conn_counts_get(&s->c, s->addr[i]) : 0,
                                s->idle_since[i] > 0 ? s->idle_since[i] : 0};
                long i = conn_victim(v, POOL, conn_counts_get(&s->c, addr));
                if (i < 0)
                        return -1;
                conn_counts_del(&s->c, s->addr[i]);
                s->made_way = s->addr[i];
                s->idle_since[i] = -1;
                slot = (int)i;
        } else
                for (int i = 0; i < POOL && slot < 0; i++)
                        if (s->idle_since[i] < 0)
                                slot = i;
        assert_true(slot >= 0);
        assert_int_equal(conn_counts_add(&s->c, addr, CAP), 0);
        s->addr[slot] = addr;
        s->idle_since[slot] = ++s->now;
        return slot;
}

static void sim_holdings(struct sim *s, uint64_t from, uint64_t to, unsigned *min, unsigned *max)
{
        *min = UINT32_MAX, *max = 0;
        for (uint64_t a = from; a <= to; a++) {
                unsigned n = conn_counts_get(&s->c, a);
                *min = n < *min ? n : *min;
                *max = n > *max ? n : *max;
        }
}

static void test_conn_pool(void **state)
{
        (void)state;
        struct sim *s = calloc(1, sizeof(*s));
        assert_non_null(s);
        assert_int_equal(conn_counts_init(&s->c, POOL), 0);
        for (int i = 0; i < POOL; i++)
                s->idle_since[i] = -1;
        /* 16 addresses hold the pool, 64 each; their 65th is refused */
        for (uint64_t a = 1; a <= 16; a++)
                for (int i = 0; i < CAP; i++)
                        assert_true(sim_open(s, a) >= 0);
        assert_int_equal(s->c.total, POOL);
        assert_int_equal(sim_open(s, 1), -1);
        /* a newcomer, a connection at a time, each closed after its answer:
         * always kept, an idle one of the sixteen making way */
        for (int i = 0; i < 25; i++) {
                int k = sim_open(s, 100);
                assert_true(k >= 0);
                conn_counts_del(&s->c, 100);
                s->idle_since[k] = -1;
                /* the one that made way opens again: the pool has room */
                assert_true(s->made_way >= 1 && s->made_way <= 16);
                assert_true(sim_open(s, s->made_way) >= 0);
        }
        /* a seventeenth holding all it can: its share, 1024 / 17 */
        unsigned held = 0, min, max;
        while (sim_open(s, 17) >= 0)
                held++;
        assert_int_equal(held, POOL / 17);
        sim_holdings(s, 1, 16, &min, &max);
        print_message("17 addresses: the newcomer holds %u, the sixteen %u-%u\n", held, min, max);
        assert_true(min >= POOL / 17 && max <= POOL / 17 + 1);
        /* the sixteen cannot take theirs back while the pool is full */
        for (uint64_t a = 1; a <= 16; a++)
                assert_int_equal(sim_open(s, a), -1);
        /* 64 more addresses, each holding all it can: every share shrinks to
         * 1024 / 81 = 12 */
        for (uint64_t a = 18; a < 18 + 64; a++)
                while (sim_open(s, a) >= 0)
                        ;
        sim_holdings(s, 1, 81, &min, &max);
        print_message("81 addresses: each holds %u-%u\n", min, max);
        assert_true(min >= POOL / 81 && max <= POOL / 81 + 1);
        /* more addresses than connections: one each, a newcomer served by
         * the one idle longest making way */
        for (uint64_t a = 100; a < 100 + 2 * POOL; a++)
                assert_true(sim_open(s, a) >= 0);
        sim_holdings(s, 100 + POOL, 100 + 2 * POOL - 1, &min, &max);
        assert_true(min == 1 && max == 1);
        assert_int_equal(s->c.total, POOL);
        conn_counts_free(&s->c);
        free(s);
}

static const char *write_file(const char *text)
{
        static char path[64];
        snprintf(path, sizeof(path), "/tmp/snowid-tokens-%d", (int)getpid());
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        return path;
}

static void test_tokens(void **state)
{
        (void)state;
        struct token *t;
        unsigned n;
        char err[256];
        const char *p = write_file("# a comment\n\n  ci   s3cret-ci ids=500 requests=20\n"
                                   "batch s3cret-batch\n");
        assert_int_equal(
                tokens_load(p, (struct rate){7}, (struct rate){8}, &t, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        assert_string_equal(t[0].name, "ci");
        assert_int_equal(t[0].ids.per_s, 500);
        assert_int_equal(t[0].requests.per_s, 20);
        assert_string_equal(t[1].name, "batch");
        assert_int_equal(t[1].ids.per_s, 7); /* the defaults */
        assert_int_equal(t[1].requests.per_s, 8);
        assert_ptr_equal(tokens_find(t, n, "s3cret-batch"), &t[1]);
        assert_ptr_equal(tokens_find(t, n, "s3cret-ci"), &t[0]);
        assert_null(tokens_find(t, n, "s3cret-c"));
        assert_null(tokens_find(t, n, "s3cret-cii"));
        assert_null(tokens_find(t, n, ""));
        tokens_free(t, n);

        /* the older form: the secret alone */
        p = write_file("just-a-secret\n");
        assert_int_equal(
                tokens_load(p, (struct rate){0}, (struct rate){0}, &t, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 1);
        assert_string_equal(t[0].name, "default");
        assert_string_equal(t[0].secret, "just-a-secret");
        tokens_free(t, n);

        static const struct {
                const char *text, *want;
        } bad[] = {
                {"", "has no token"},
                {"a b ids=1 requests=2 x y\n", "more than"},
                {"a/b secret\n", "a name is"},
                {"a secret ids=-1\n", "ids=N or requests=N"},
                {"a secret ids=1000000001\n", "ids=N or requests=N"},
                {"a secret bursts=5\n", "ids=N or requests=N"},
                {"a s1\nb s1\n", "given twice"},
                {"a s1\na s2\n", "given twice"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                p = write_file(bad[i].text);
                err[0] = 0;
                assert_int_equal(tokens_load(p, (struct rate){0}, (struct rate){0}, &t, &n, err,
                                             sizeof(err)),
                                 -EINVAL);
                if (!strstr(err, bad[i].want))
                        fail_msg("'%s': %s", bad[i].text, err);
        }
        unlink(p);
        assert_int_equal(tokens_load("/nonexistent/tokens", (struct rate){0}, (struct rate){0}, &t,
                                     &n, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "cannot read"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bucket),          cmocka_unit_test(test_bucket_large_charge),
                cmocka_unit_test(test_bucket_threads),  cmocka_unit_test(test_addr_key),
                cmocka_unit_test(test_addr_hash),       cmocka_unit_test(test_addr_table),
                cmocka_unit_test(test_addr_table_debt), cmocka_unit_test(test_addr_table_flood),
                cmocka_unit_test(test_conn_counts),     cmocka_unit_test(test_conn_share),
                cmocka_unit_test(test_conn_victim),     cmocka_unit_test(test_conn_pool),
                cmocka_unit_test(test_tokens),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
