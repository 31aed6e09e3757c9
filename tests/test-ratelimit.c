/* SPDX-License-Identifier: MIT */
/* The HTTP API's rate limits (daemon/ratelimit.c): buckets on a fake clock,
 * many threads on one bucket without a lock, the address table, the token
 * file. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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

static void test_addr_table(void **state)
{
        (void)state;
        struct addr_table *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        int64_t now = 10 * S, wait;
        struct rate r = {1};
        struct addr_slot *a = addr_slot_get(t, 1000, now);
        assert_ptr_equal(addr_slot_get(t, 1000, now), a);
        assert_int_equal(bucket_take(&a->requests, r, 1, now, &wait), 0);
        assert_int_equal(bucket_take(&addr_slot_get(t, 1000, now)->requests, r, 1, now, &wait), -1);
        /* every address owing: the probes fill, then the overflow slot is shared */
        struct addr_slot *overflow = &t->slot[LIMIT_ADDR_SLOTS];
        unsigned shared = 0;
        for (uint64_t k = 2000; k < 2000 + 2 * LIMIT_ADDR_SLOTS; k++) {
                struct addr_slot *s = addr_slot_get(t, k, now);
                if (s == overflow)
                        shared++;
                else
                        assert_int_equal(bucket_take(&s->requests, r, 1, now, &wait), 0);
        }
        assert_true(shared >= LIMIT_ADDR_SLOTS);
        /* once nothing is owed, a slot is as good as free: taken over */
        now += 5 * S;
        struct addr_slot *n = addr_slot_get(t, 99999999, now);
        assert_ptr_not_equal(n, overflow);
        assert_int_equal(bucket_take(&n->requests, r, 1, now, &wait), 0);
        free(t);
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
                cmocka_unit_test(test_bucket),         cmocka_unit_test(test_bucket_large_charge),
                cmocka_unit_test(test_bucket_threads), cmocka_unit_test(test_addr_key),
                cmocka_unit_test(test_addr_table),     cmocka_unit_test(test_tokens),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
