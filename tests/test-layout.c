/* SPDX-License-Identifier: MIT */
/* The ID layout: round trips and every bound. */
#include <errno.h>
#include <stdint.h>

#include "helpers.h"
#include "snowid.h"

static void test_default(void **state)
{
        (void)state;
        snowid_layout l;
        assert_int_equal(snowid_layout_default(&l), 0);
        assert_int_equal(l.epoch_ms, UINT64_C(1735689600000));
        assert_int_equal(l.time_bits, 41);
        assert_int_equal(l.worker_bits, 10);
        assert_int_equal(l.seq_bits, 12);
        assert_int_equal(snowid_layout_check(&l), 0);
}

static void test_check_bounds(void **state)
{
        (void)state;
        snowid_layout l = {.epoch_ms = 0, .time_bits = 32, .worker_bits = 0, .seq_bits = 31};
        assert_int_equal(snowid_layout_check(&l), 0);
        l = (snowid_layout){0, 63, 0, 0};
        assert_int_equal(snowid_layout_check(&l), 0);
        l = (snowid_layout){0, 31, 16, 16}; /* time < 32 */
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        l = (snowid_layout){0, 41, 10, 13}; /* sums to 64 */
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        l = (snowid_layout){0, 41, 10, 11}; /* sums to 62 */
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        l = (snowid_layout){0, 32, 32, UINT32_MAX}; /* wraps to 63 in 32 bits */
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        /* the epoch in ns must fit an int64 (clock offsets): before 2^42 ms */
        l = (snowid_layout){(UINT64_C(1) << 42) - 1, 41, 10, 12};
        assert_int_equal(snowid_layout_check(&l), 0);
        l = (snowid_layout){UINT64_C(1) << 42, 41, 10, 12};
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        l = (snowid_layout){UINT64_C(9735689600000), 41, 10, 12};
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        l = (snowid_layout){UINT64_MAX, 41, 10, 12};
        assert_int_equal(snowid_layout_check(&l), -EINVAL);
        assert_int_equal(snowid_layout_check(NULL), -EINVAL);
}

static void round_trip(const snowid_layout *l, uint64_t t, uint32_t w, uint32_t s)
{
        snowid_parts in = {.time_ms = t, .worker = w, .sequence = s}, out;
        uint64_t id;
        assert_int_equal(snowid_encode(l, &in, &id), 0);
        assert_true(id < (UINT64_C(1) << 63));
        assert_int_equal(snowid_decode(l, id, &out), 0);
        assert_int_equal(out.time_ms, t);
        assert_int_equal(out.unix_ms, l->epoch_ms + t);
        assert_int_equal(out.worker, w);
        assert_int_equal(out.sequence, s);
}

static void test_round_trips(void **state)
{
        (void)state;
        static const snowid_layout layouts[] = {
                {UINT64_C(1735689600000), 41, 10, 12}, {0, 32, 0, 31}, {0, 33, 10, 20},
                {UINT64_C(1288834974657), 39, 8, 16},  {5, 63, 0, 0},  {7, 32, 31, 0},
        };
        for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
                const snowid_layout *l = &layouts[i];
                uint64_t tmax = (UINT64_C(1) << l->time_bits) - 1;
                uint32_t wmax = (uint32_t)((UINT64_C(1) << l->worker_bits) - 1);
                uint32_t smax = (uint32_t)((UINT64_C(1) << l->seq_bits) - 1);
                round_trip(l, 0, 0, 0);
                round_trip(l, tmax, wmax, smax);
                round_trip(l, tmax / 3, wmax / 2, smax / 5);
                round_trip(l, 1, wmax, 0);
        }
}

static void test_encode_bounds(void **state)
{
        (void)state;
        snowid_layout l;
        snowid_layout_default(&l);
        uint64_t id = 42;
        snowid_parts p = {.time_ms = UINT64_C(1) << 41, .worker = 0, .sequence = 0};
        assert_int_equal(snowid_encode(&l, &p, &id), -ERANGE);
        p = (snowid_parts){.time_ms = 1, .worker = 1024, .sequence = 0};
        assert_int_equal(snowid_encode(&l, &p, &id), -ERANGE);
        p = (snowid_parts){.time_ms = 1, .worker = 0, .sequence = 4096};
        assert_int_equal(snowid_encode(&l, &p, &id), -ERANGE);
        assert_int_equal(id, 42); /* untouched on failure */
        p = (snowid_parts){.time_ms = 1, .worker = 1023, .sequence = 4095};
        assert_int_equal(snowid_encode(&l, &p, &id), 0);
        assert_int_equal(id, (UINT64_C(1) << 22) | (UINT64_C(1023) << 12) | 4095);
        assert_int_equal(snowid_encode(&l, NULL, &id), -EINVAL);
        assert_int_equal(snowid_encode(&l, &p, NULL), -EINVAL);
}

static void test_decode_bounds(void **state)
{
        (void)state;
        snowid_layout l;
        snowid_parts p = {.worker = 77};
        snowid_layout_default(&l);
        assert_int_equal(snowid_decode(&l, UINT64_C(1) << 63, &p), -ERANGE);
        assert_int_equal(snowid_decode(&l, UINT64_MAX, &p), -ERANGE);
        assert_int_equal(p.worker, 77);
        assert_int_equal(snowid_decode(&l, 1, NULL), -EINVAL);
        l.seq_bits = 13;
        assert_int_equal(snowid_decode(&l, 1, &p), -EINVAL);
        snowid_layout_default(&l);
        assert_int_equal(snowid_decode(&l, INT64_MAX, &p), 0);
        assert_int_equal(p.time_ms, (UINT64_C(1) << 41) - 1);
        assert_int_equal(p.worker, 1023);
        assert_int_equal(p.sequence, 4095);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_default),       cmocka_unit_test(test_check_bounds),
                cmocka_unit_test(test_round_trips),   cmocka_unit_test(test_encode_bounds),
                cmocka_unit_test(test_decode_bounds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
