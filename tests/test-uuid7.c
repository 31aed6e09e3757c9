/* SPDX-License-Identifier: MIT */
/*
 * UUIDv7 from the shared counter, against a fake clock (libsnowid built with
 * snowid_fake_monotonic_ns(), as in test-client.c) and real publishers: the
 * bits, the fields against the 64-bit ID's, order, uniqueness across two
 * workers, the two forms sharing one counter, decoding, and the text form.
 */
#include <errno.h>
#include <stdint.h>

#include "barrier.h"
#include "helpers.h"
#include "snowid.h"
#include "uuid-text.h"

#define MS INT64_C(1000000)
#define T UINT64_C(1000000) /* ID time (ms) at which each test starts */

static _Atomic int64_t fake_ns;
static int64_t fake_step;

int64_t snowid_fake_monotonic_ns(void);
int64_t snowid_fake_monotonic_ns(void)
{
        return atomic_fetch_add(&fake_ns, fake_step);
}

static struct shm_pub *pub, *pub2;
static snowid *cli, *cli2;
static snowid_layout layout;

static void publish(struct shm_pub *p, uint32_t worker, unsigned seq_bits, unsigned worker_bits)
{
        struct shm_publication pb = test_publication(worker, T, T + 100000, 0);
        pb.layout.seq_bits = seq_bits;
        pb.layout.worker_bits = worker_bits;
        pb.layout.time_bits = 63 - seq_bits - worker_bits;
        assert_int_equal(shm_pub_switch(p, &pb), 0);
}

static int setup(void **state)
{
        (void)state;
        atomic_store(&fake_ns, (int64_t)T * MS);
        fake_step = 0;
        assert_int_equal(test_pub_open(test_instance("uuid7"), &pub), 0);
        publish(pub, 5, 12, 10);
        assert_int_equal(snowid_open(test_instance("uuid7"), &cli), 0);
        assert_int_equal(snowid_get_layout(cli, &layout), 0);
        snowid_set_max_wait(cli, 0); /* a frozen clock never ends a wait */
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        cli = snowid_close(cli);
        cli2 = snowid_close(cli2);
        pub = test_pub_close(pub);
        pub2 = test_pub_close(pub2);
        return 0;
}

static uint64_t be(const uint8_t *p, int n)
{
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

static snowid_parts uparts(const uint8_t u[16])
{
        snowid_parts p;
        assert_int_equal(snowid_decode_uuid7(&layout, u, &p), 0);
        return p;
}

static snowid_parts iparts(uint64_t id)
{
        snowid_parts p;
        assert_int_equal(snowid_decode(&layout, id, &p), 0);
        return p;
}

/* The counter value a UUID or an ID was made from. */
static uint64_t value_of(snowid_parts p)
{
        return p.time_ms << layout.seq_bits | p.sequence;
}

static void test_bits(void **state)
{
        (void)state;
        uint8_t u[16], v[16];
        assert_int_equal(snowid_next_uuid7(cli, u), 0);
        assert_int_equal(snowid_next_uuid7(cli, v), 0);
        for (int i = 0; i < 2; i++) {
                const uint8_t *x = i ? v : u;
                assert_int_equal(x[6] >> 4, 7);                          /* version */
                assert_int_equal(x[8] >> 6, 2);                          /* variant 10 */
                assert_int_equal(be(x, 6), SNOWID_EPOCH_DEFAULT_MS + T); /* unix_ts_ms */
                assert_int_equal(be(x + 6, 2) & 0xfff, i);               /* rand_a: sequence */
                assert_int_equal(be(x + 8, 8) >> 52 & 0x3ff, 5);         /* worker, after var */
        }
        /* the random bits are not all the same */
        assert_true((be(u + 8, 8) & ((UINT64_C(1) << 52) - 1)) !=
                    (be(v + 8, 8) & ((UINT64_C(1) << 52) - 1)));
}

static void test_same_fields_as_ids(void **state)
{
        (void)state;
        uint64_t id;
        uint8_t u[16];
        fake_step = MS / 3; /* the clock moves under the calls */
        snowid_set_max_wait(cli, 100000);
        for (int i = 0; i < 1000; i++) {
                assert_int_equal(snowid_next(cli, &id), 0);
                assert_int_equal(snowid_next_uuid7(cli, u), 0);
                snowid_parts a = iparts(id), b = uparts(u);
                assert_true(b.unix_ms >= a.unix_ms);
                assert_true(b.unix_ms <= a.unix_ms + 1);
                assert_int_equal(b.time_ms, b.unix_ms - layout.epoch_ms);
                assert_int_equal(b.worker, a.worker);
                if (b.unix_ms == a.unix_ms)
                        assert_int_equal(b.sequence, a.sequence + 1);
                else
                        assert_int_equal(b.sequence, 0);
        }
}

/* Both forms drawn in turn, single and batched, through the ms boundary:
 * their counter values strictly increase, so none is shared. */
static void test_forms_share_no_value(void **state)
{
        (void)state;
        static uint8_t us[64][16];
        static uint64_t ids[64];
        uint64_t prev = 0, id;
        uint8_t u[16];
        int first = 1;
        fake_step = MS / 50;
        snowid_set_max_wait(cli, 100000);
        for (int i = 0; i < 2000; i++) {
                uint64_t vals[130];
                int nv = 0;
                assert_int_equal(snowid_next(cli, &id), 0);
                vals[nv++] = value_of(iparts(id));
                assert_int_equal(snowid_next_uuid7(cli, u), 0);
                vals[nv++] = value_of(uparts(u));
                if (i % 10 == 0) {
                        assert_int_equal(snowid_next_batch(cli, ids, 64), 0);
                        for (int k = 0; k < 64; k++)
                                vals[nv++] = value_of(iparts(ids[k]));
                        assert_int_equal(snowid_next_uuid7_batch(cli, us, 64), 0);
                        for (int k = 0; k < 64; k++)
                                vals[nv++] = value_of(uparts(us[k]));
                }
                for (int k = 0; k < nv; k++) {
                        assert_true(first || vals[k] > prev);
                        prev = vals[k];
                        first = 0;
                }
        }
}

/* Byte-wise order is the order of taking, within a ms, across ms, single
 * and batched (RFC 9562 section 6.2, method 1: a counter after the time). */
static void test_order(void **state)
{
        (void)state;
        static uint8_t batch[4096][16];
        uint8_t prev[16] = {0}, u[16];
        fake_step = MS / 700;
        snowid_set_max_wait(cli, 100000);
        for (int round = 0; round < 20; round++) {
                assert_int_equal(snowid_next_uuid7_batch(cli, batch, 4096), 0);
                for (int k = 0; k < 4096; k++) {
                        assert_true(memcmp(batch[k], prev, 16) > 0);
                        memcpy(prev, batch[k], 16);
                }
                for (int k = 0; k < 3000; k++) {
                        assert_int_equal(snowid_next_uuid7(cli, u), 0);
                        assert_true(memcmp(u, prev, 16) > 0);
                        memcpy(prev, u, 16);
                }
        }
        /* the batch crossed ms: its sequence carried into the next one */
        assert_true(uparts(prev).unix_ms > SNOWID_EPOCH_DEFAULT_MS + T + 20);
}

static int cmp16(const void *a, const void *b)
{
        return memcmp(a, b, 16);
}

/* Two hosts (two publishers, workers 5 and 6) at the same ID time: every
 * (time, sequence) is made twice, and the worker in rand_b keeps the UUIDs
 * apart.  The random bits are not needed for that, so they are cleared. */
static void test_two_workers(void **state)
{
        (void)state;
        static uint8_t all[2 * 8 * 4096][16];
        size_t n = 0;
        assert_int_equal(test_pub_open(test_instance("uuid7b"), &pub2), 0);
        publish(pub2, 6, 12, 10);
        assert_int_equal(snowid_open(test_instance("uuid7b"), &cli2), 0);
        snowid_set_max_wait(cli2, 0);
        for (int ms = 0; ms < 8; ms++) {
                for (int h = 0; h < 2; h++) {
                        assert_int_equal(snowid_next_uuid7_batch(h ? cli2 : cli, all + n, 4096), 0);
                        n += 4096;
                }
                atomic_fetch_add(&fake_ns, MS);
        }
        for (size_t i = 0; i < n; i++) {
                snowid_parts p = uparts(all[i]);
                assert_int_equal(p.worker, i / 4096 % 2 ? 6 : 5);
                /* byte 8 and the high half of byte 9: variant and worker */
                all[i][9] &= 0xf0;
                memset(all[i] + 10, 0, 6);
        }
        qsort(all, n, 16, cmp16);
        for (size_t i = 1; i < n; i++)
                assert_true(memcmp(all[i - 1], all[i], 16) != 0);
        /* and the same (time, sequence) was indeed made on both */
        snowid_parts a = uparts(all[0]), b = uparts(all[1]);
        assert_int_equal(a.unix_ms, b.unix_ms);
        assert_int_equal(a.sequence, b.sequence);
        assert_int_not_equal(a.worker, b.worker);
}

static void test_round_trip(void **state)
{
        (void)state;
        static uint8_t us[300][16];
        fake_step = MS / 100;
        snowid_set_max_wait(cli, 100000);
        for (int i = 0; i < 20; i++) {
                assert_int_equal(snowid_next_uuid7_batch(cli, us, 300), 0);
                for (int k = 0; k < 300; k++) {
                        snowid_parts p = uparts(us[k]);
                        uint64_t id;
                        /* the same parts make a 64-bit ID of this layout */
                        assert_int_equal(snowid_encode(&layout, &p, &id), 0);
                        snowid_parts q = iparts(id);
                        assert_int_equal(q.unix_ms, p.unix_ms);
                        assert_int_equal(q.worker, 5);
                        assert_int_equal(q.sequence, p.sequence);
                        assert_int_equal(p.unix_ms, be(us[k], 6));
                }
        }
}

static void test_decode_refuses(void **state)
{
        (void)state;
        uint8_t u[16], bad[16];
        snowid_parts p = {.worker = 77};
        assert_int_equal(snowid_next_uuid7(cli, u), 0);
        memcpy(bad, u, 16);
        bad[6] = (uint8_t)((bad[6] & 0x0f) | 0x40); /* version 4 */
        assert_int_equal(snowid_decode_uuid7(&layout, bad, &p), -EINVAL);
        memcpy(bad, u, 16);
        bad[8] = (uint8_t)((bad[8] & 0x3f) | 0xc0); /* variant 11 */
        assert_int_equal(snowid_decode_uuid7(&layout, bad, &p), -EINVAL);
        memcpy(bad, u, 16);
        memset(bad, 0, 6); /* 1970: before the epoch */
        assert_int_equal(snowid_decode_uuid7(&layout, bad, &p), -ERANGE);
        assert_int_equal(p.worker, 77);
        snowid_layout narrow = layout;
        narrow.seq_bits = 6, narrow.worker_bits = 16; /* 41/16/6 */
        u[7] = 0xff;                                  /* a sequence above 63 */
        assert_int_equal(snowid_decode_uuid7(&narrow, u, &p), -ERANGE);
        assert_int_equal(snowid_decode_uuid7(NULL, u, &p), -EINVAL);
        assert_int_equal(snowid_decode_uuid7(&layout, NULL, &p), -EINVAL);
        assert_int_equal(snowid_decode_uuid7(&layout, u, NULL), -EINVAL);
        assert_int_equal(p.worker, 77);
}

static void test_bounds_and_failures(void **state)
{
        (void)state;
        static uint8_t big[4097][16];
        uint8_t u[16];
        memset(u, 0xaa, 16);
        assert_int_equal(snowid_next_uuid7(NULL, u), -EINVAL);
        assert_int_equal(snowid_next_uuid7(cli, NULL), -EINVAL);
        assert_int_equal(snowid_next_uuid7_batch(cli, big, 0), -EINVAL);
        assert_int_equal(snowid_next_uuid7_batch(cli, big, 4097), -EINVAL);
        assert_int_equal(snowid_next_uuid7_batch(cli, NULL, 1), -EINVAL);
        /* two ms taken: past the lead bound, -EAGAIN, nothing written */
        assert_int_equal(snowid_next_uuid7_batch(cli, big, 4096), 0);
        assert_int_equal(snowid_next_uuid7_batch(cli, big, 4096), 0);
        assert_int_equal(snowid_next_uuid7(cli, u), -EAGAIN);
        for (int i = 0; i < 16; i++)
                assert_int_equal(u[i], 0xaa);
        /* past the deadline, likewise: the checks are snowid_next()'s */
        atomic_store(&fake_ns, (int64_t)(T + 200000) * MS);
        assert_int_equal(snowid_next_uuid7(cli, u), -EAGAIN);
        assert_int_equal(u[0], 0xaa);
}

/* More than 12 sequence bits: the high 12 in rand_a, the rest at the head
 * of rand_b, before the worker.  Fewer: the sequence alone in rand_a. */
static void test_other_layouts(void **state)
{
        (void)state;
        static uint8_t us[5000][16];
        publish(pub, 9, 20, 10); /* 33/10/20 */
        assert_int_equal(snowid_get_layout(cli, &layout), 0);
        assert_int_equal(layout.seq_bits, 20);
        assert_int_equal(snowid_next_uuid7_batch(cli, us, 5000), 0);
        for (int k = 0; k < 5000; k++) {
                snowid_parts p = uparts(us[k]);
                uint64_t b = be(us[k] + 8, 8);
                assert_int_equal(p.sequence, k);
                assert_int_equal(p.worker, 9);
                assert_int_equal(be(us[k] + 6, 2) & 0xfff, (unsigned)k >> 8);
                assert_int_equal(b >> 54 & 0xff, k & 0xff);
                assert_int_equal(b >> 44 & 0x3ff, 9);
                assert_int_equal(us[k][6] >> 4, 7);
                if (k)
                        assert_true(memcmp(us[k - 1], us[k], 16) < 0);
        }

        publish(pub, 40000, 6, 16); /* 41/16/6 */
        assert_int_equal(snowid_get_layout(cli, &layout), 0);
        atomic_fetch_add(&fake_ns, 10 * MS);
        assert_int_equal(snowid_next_uuid7_batch(cli, us, 64), 0);
        for (int k = 0; k < 64; k++) {
                snowid_parts p = uparts(us[k]);
                assert_int_equal(p.sequence, k);
                assert_int_equal(p.worker, 40000);
                assert_int_equal(be(us[k] + 6, 2) & 0xfff, k);
                assert_int_equal(be(us[k] + 8, 8) >> 46 & 0xffff, 40000);
        }
}

static void test_text(void **state)
{
        (void)state;
        uint8_t u[16], v[16];
        char s[UUID_TEXT_LEN + 1];
        assert_int_equal(snowid_next_uuid7(cli, u), 0);
        assert_ptr_equal(uuid_to_text(u, s), s + 36);
        assert_int_equal(strlen(s), 36);
        assert_true(s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-');
        assert_int_equal(s[14], '7');
        assert_true(strchr("89ab", s[19]) != NULL);
        assert_int_equal(uuid_from_text(s, 36, v), 0);
        assert_memory_equal(u, v, 16);
        for (int i = 0; i < 36; i++)
                if (s[i] >= 'a' && s[i] <= 'f')
                        s[i] = (char)(s[i] - 'a' + 'A');
        memset(v, 0, 16);
        assert_int_equal(uuid_from_text(s, 36, v), 0);
        assert_memory_equal(u, v, 16);
        static const char *const bad[] = {
                "0195c0de-0000-7000-8000-00000000000",   /* short */
                "0195c0de-0000-7000-8000-0000000000000", /* long */
                "0195c0de00000-7000-8000-000000000000",  /* a dash missing */
                "0195c0de-0000-7000-8000-00000000000g",  /* not hex */
                "{195c0de-0000-7000-8000-000000000000",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(v, 0x55, 16);
                assert_int_equal(uuid_from_text(bad[i], strlen(bad[i]), v), -EINVAL);
                assert_int_equal(v[0], 0x55);
        }
}

int main(void)
{
#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        const struct CMUnitTest tests[] = {
                T_(test_bits),
                T_(test_same_fields_as_ids),
                T_(test_forms_share_no_value),
                T_(test_order),
                T_(test_two_workers),
                T_(test_round_trip),
                T_(test_decode_refuses),
                T_(test_bounds_and_failures),
                T_(test_other_layouts),
                T_(test_text),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
