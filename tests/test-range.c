/* SPDX-License-Identifier: MIT */
/*
 * Worker ranges (daemon/holder/range.c): the forms --worker-range accepts and
 * refuses, whether a range fits a layout, overlaps, and region records.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "range.h"

static void test_good_forms(void **state)
{
        static const struct {
                const char *v;
                uint32_t from, to;
        } good[] = {
                {"0-1023", 0, 1023}, {"5-6", 5, 6},           {"7-7", 7, 7},
                {"0-0", 0, 0},       {"512-1023", 512, 1023}, {"0-2147483647", 0, 2147483647},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                uint32_t from = 99, to = 99;
                assert_int_equal(worker_range_parse(good[i].v, &from, &to), 0);
                assert_int_equal(from, good[i].from);
                assert_int_equal(to, good[i].to);
        }
}

static void test_bad_forms(void **state)
{
        static const struct {
                const char *v;
                int err;
        } bad[] = {
                {"5", -EINVAL},
                {"6-5", -ERANGE},
                {"-1-3", -EINVAL},
                {"", -EINVAL},
                {"-", -EINVAL},
                {"5-", -EINVAL},
                {"-5", -EINVAL},
                {"a-b", -EINVAL},
                {"1-2x", -EINVAL},
                {"1 - 2", -EINVAL},
                {" 1-2", -EINVAL},
                {"1-2 ", -EINVAL},
                {"+1-2", -EINVAL},
                {"1-+2", -EINVAL},
                {"01-2", -EINVAL},
                {"1-02", -EINVAL},
                {"1--2", -EINVAL},
                {"1-2-3", -EINVAL},
                {"0x1-0x2", -EINVAL},
                {"1.5-2", -EINVAL},
                {"0-2147483648", -ERANGE},
                {"0-99999999999999999999", -ERANGE},
                {"4294967296-4294967297", -ERANGE},
        };
        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint32_t from = 77, to = 88;
                int r = worker_range_parse(bad[i].v, &from, &to);
                if (r != bad[i].err)
                        fail_msg("'%s': %d, expected %d", bad[i].v, r, bad[i].err);
                /* left alone on failure */
                assert_int_equal(from, 77);
                assert_int_equal(to, 88);
        }
}

static void test_fits(void **state)
{
        uint32_t from, to;
        (void)state;
        /* "0-1024" parses but does not fit 10 worker bits (0 to 1023) */
        assert_int_equal(worker_range_parse("0-1024", &from, &to), 0);
        assert_false(worker_range_fits(from, to, 10));
        assert_true(worker_range_fits(0, 1023, 10));
        assert_true(worker_range_fits(1023, 1023, 10));
        assert_false(worker_range_fits(1024, 1024, 10));
        assert_true(worker_range_fits(0, 0, 0));
        assert_false(worker_range_fits(0, 1, 0));
        assert_true(worker_range_fits(0, 2147483647, 31));
        assert_false(worker_range_fits(6, 5, 10));
        assert_false(worker_range_fits(0, 1, 32));
}

static void test_overlaps(void **state)
{
        (void)state;
        assert_false(worker_range_overlaps(0, 511, 512, 1023));
        assert_false(worker_range_overlaps(512, 1023, 0, 511));
        assert_true(worker_range_overlaps(0, 512, 512, 1023));
        assert_true(worker_range_overlaps(5, 6, 0, 1023));
        assert_true(worker_range_overlaps(0, 1023, 5, 6));
        assert_true(worker_range_overlaps(7, 7, 7, 7));
        assert_false(worker_range_overlaps(7, 7, 8, 8));
}

static void test_records(void **state)
{
        char buf[64];
        uint32_t from = 1, to = 1;
        (void)state;
        range_record_format(buf, sizeof(buf), 512, 1023);
        assert_string_equal(buf, "{\"from\":512,\"to\":1023}");
        assert_int_equal(range_record_parse(buf, strlen(buf), &from, &to), 0);
        assert_int_equal(from, 512);
        assert_int_equal(to, 1023);
        /* written by hand: spaces and key order do not matter */
        const char *hand = "{ \"to\": 9, \"from\": 0 }";
        assert_int_equal(range_record_parse(hand, strlen(hand), &from, &to), 0);
        assert_int_equal(from, 0);
        assert_int_equal(to, 9);
        static const char *const bad[] = {
                "",
                "{",
                "[]",
                "{\"from\":1}",
                "{\"from\":5,\"to\":4}",
                "{\"from\":-1,\"to\":4}",
                "{\"from\":\"1\",\"to\":4}",
                "{\"from\":0,\"to\":2147483648}",
                "0-9",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                from = to = 42;
                if (range_record_parse(bad[i], strlen(bad[i]), &from, &to) != -EBADMSG)
                        fail_msg("record '%s' accepted", bad[i]);
                assert_int_equal(from, 42);
                assert_int_equal(to, 42);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good_forms), cmocka_unit_test(test_bad_forms),
                cmocka_unit_test(test_fits),       cmocka_unit_test(test_overlaps),
                cmocka_unit_test(test_records),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
