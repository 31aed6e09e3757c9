/* SPDX-License-Identifier: MIT */
/*
 * The creation's pure core (daemon/core/create.c), input by input: who
 * makes the cluster, how the others wait, a creation taken over when its
 * host is gone, the marks made in batches, and the claims above the clock
 * bound a new cluster starts with.  The same tests built with mutant 23 (a
 * cluster made anew claims above 0) must fail (create-mutant-23).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "create.h"
#include "rules.h"

#define EPOCH UINT64_C(1735689600000)
#define WALL (EPOCH + UINT64_C(60000000000))
#define TOKEN "0123456789abcdef"

static struct create c;
static struct create_view v;
static struct create_ready out;

static void setup_bits(unsigned bits)
{
        const struct create_settings set = {.worker_bits = bits,
                                            .window_s = 10,
                                            .mark_step_s = 20,
                                            .lease_ttl_s = 10,
                                            .epoch_ms = EPOCH,
                                            .token = TOKEN,
                                            .seed = 3};
        create_init(&c, &set);
        v = (struct create_view){.mono_ms = 1000000, .wall_ms = WALL};
}

static int setup(void **state)
{
        (void)state;
        setup_bits(10);
        return 0;
}

static void step(const struct create_in *in)
{
        create_step(&c, &v, in, &out);
}

static int count(enum create_do what)
{
        int n = 0;
        for (unsigned i = 0; i < out.n; i++)
                n += out.a[i].what == what;
        return n;
}

static const struct create_action *first(enum create_do what)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == what)
                        return &out.a[i];
        fail_msg("no action %d", what);
        return NULL;
}

static void locked(bool succeeded, int layout, int creating, const char *value)
{
        step(&(struct create_in){.kind = CREATE_IN_LOCKED,
                                 .ok = true,
                                 .succeeded = succeeded,
                                 .answered = true,
                                 .status = 200,
                                 .layout = layout,
                                 .creating = creating,
                                 .value = value,
                                 .mod_rev = 33});
}

/* A read of the cluster that found none, with `creating` as it read it */
static void make_read(int creating, const char *value)
{
        step(&(struct create_in){
                .kind = CREATE_IN_MAKE, .creating = creating, .value = value, .mod_rev = 33});
}

/* This host takes `creating`, reads every mark, marks in batches, makes. */
static void test_creator(void **state)
{
        (void)state;
        make_read(0, NULL);
        assert_int_equal(out.n, 1);
        assert_int_equal(first(CREATE_DO_LOCK)->a, 0);
        assert_false(create_marks(&c));
        locked(true, 0, 1, TOKEN " 1");
        assert_true(create_marks(&c));
        assert_int_equal(first(CREATE_DO_REREAD)->a, 0);
        /* the read says make it: 1,024 numbers, 11 batches, at most 16 at once */
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        assert_int_equal(count(CREATE_DO_MARK), 11);
        assert_int_equal(out.a[10].a, 1000);
        assert_int_equal(out.a[10].b, 1024);
        for (int i = 0; i < 10; i++) {
                step(&(struct create_in){.kind = CREATE_IN_MARKED, .ok = true, .succeeded = true});
                assert_int_equal(out.n, 0);
        }
        /* a take's answer that comes late, or a read answered meanwhile,
         * leaves the making as it is */
        locked(false, 0, 1, "fedcba9876543210 1");
        assert_int_equal(out.n, 0);
        make_read(1, TOKEN " 1");
        assert_int_equal(out.n, 0);
        step(&(struct create_in){.kind = CREATE_IN_MARKED, .ok = true, .succeeded = true});
        const struct create_action *m = first(CREATE_DO_MAKE);
        assert_int_equal(m->b, 1);
        /* above the clock bound a fence would set, never 0 */
        assert_int_equal(m->a, rule7_made_above(EPOCH, WALL, 10, 20));
        assert_true(m->a > WALL - EPOCH);
        step(&(struct create_in){.kind = CREATE_IN_MADE, .ok = true, .succeeded = true});
        assert_int_equal(count(CREATE_DO_MADE), 1);
        assert_int_equal(first(CREATE_DO_REREAD)->a, 0);
        /* its answer again: nothing */
        step(&(struct create_in){.kind = CREATE_IN_MADE, .ok = true, .succeeded = true});
        assert_int_equal(out.n, 0);
}

static void test_batches(void **state)
{
        (void)state;
        /* 2^12 numbers: 41 batches, 16 in flight at a time */
        setup_bits(12);
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        locked(true, 0, 1, TOKEN " 1");
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        assert_int_equal(count(CREATE_DO_MARK), CREATE_IN_FLIGHT);
        unsigned sent = CREATE_IN_FLIGHT, made = 0;
        while (!made) {
                step(&(struct create_in){.kind = CREATE_IN_MARKED, .ok = true, .succeeded = true});
                sent += (unsigned)count(CREATE_DO_MARK);
                made = (unsigned)count(CREATE_DO_MAKE);
        }
        assert_int_equal(sent, 41);
        /* one failed (made meanwhile): no make, read again at once */
        setup_bits(10);
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        locked(true, 0, 1, TOKEN " 1");
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        step(&(struct create_in){.kind = CREATE_IN_MARKED, .ok = true, .succeeded = false});
        for (int i = 0; i < 10; i++)
                step(&(struct create_in){.kind = CREATE_IN_MARKED, .ok = true, .succeeded = true});
        assert_int_equal(count(CREATE_DO_MAKE), 0);
        assert_int_equal(first(CREATE_DO_REREAD)->a, 0);
        /* too many numbers to mark: made at once, unmarked */
        setup_bits(15);
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        locked(true, 0, 1, TOKEN " 1");
        step(&(struct create_in){.kind = CREATE_IN_MAKE});
        assert_int_equal(count(CREATE_DO_MARK), 0);
        assert_int_equal(first(CREATE_DO_MAKE)->b, 0);
}

/* Another host creates: this one reads the cluster again, waiting longer
 * each time, and at least four times as long as the store took to answer;
 * a read that already shows another host's creation takes nothing. */
static void test_waiting(void **state)
{
        (void)state;
        char value[64];
        snprintf(value, sizeof(value), "fedcba9876543210 %llu", (unsigned long long)WALL - 1000);
        make_read(0, NULL);
        locked(false, 0, 1, value);
        assert_false(create_marks(&c));
        assert_int_equal(out.n, 1);
        uint64_t w = first(CREATE_DO_REREAD)->a;
        assert_true(w >= 250 && w <= 2250);
        /* the reread reads the cluster, never `creating` alone */
        step(&(struct create_in){.kind = CREATE_IN_REREAD});
        assert_int_equal(out.n, 1);
        assert_int_equal(count(CREATE_DO_READ), 1);
        v.mono_ms += 3000; /* the store took 3 s */
        make_read(1, value);
        assert_int_equal(out.n, 1);
        assert_true(first(CREATE_DO_REREAD)->a >= 12000);
        /* the creation ended without a cluster: this host takes it */
        step(&(struct create_in){.kind = CREATE_IN_REREAD});
        make_read(0, NULL);
        assert_int_equal(first(CREATE_DO_LOCK)->a, 0);
        /* the first read already shows another's: no take, a wait */
        setup(NULL);
        make_read(1, value);
        assert_int_equal(out.n, 1);
        w = first(CREATE_DO_REREAD)->a;
        assert_true(w >= 250 && w <= 2250);
        /* `creating` not readable: read again later, never take */
        setup(NULL);
        make_read(-1, NULL);
        assert_int_equal(out.n, 1);
        assert_true(first(CREATE_DO_REREAD)->a >= 250);
        /* a read whose answer took longer than any call waits was not
         * this core's (the cluster was there, and is gone again): no wait
         * of four times that */
        setup(NULL);
        step(&(struct create_in){.kind = CREATE_IN_REREAD});
        v.mono_ms += 3600000;
        make_read(1, value);
        assert_true(first(CREATE_DO_REREAD)->a <= 2250);
        /* a value with no time in it (written by hand): taken over once
         * it has stayed the same 15 s, on this host's own clock */
        setup(NULL);
        make_read(1, "by hand");
        assert_int_equal(count(CREATE_DO_LOCK), 0);
        v.mono_ms += 15000;
        make_read(1, "by hand");
        assert_int_equal(count(CREATE_DO_LOCK), 0);
        v.mono_ms += 1;
        make_read(1, "by hand");
        assert_int_equal(first(CREATE_DO_LOCK)->a, 33);
        /* a takeover refused (another took it over first): a wait before
         * any other, even if what is there now looks stale too */
        locked(false, 0, 1, "by hand");
        assert_int_equal(count(CREATE_DO_LOCK), 0);
        assert_int_equal(count(CREATE_DO_REREAD), 1);
        /* with no revision (a row written by hand on PostgreSQL): nothing
         * to compare a takeover with, so waited on, never taken */
        setup(NULL);
        for (int i = 0; i < 3; i++) {
                step(&(struct create_in){
                        .kind = CREATE_IN_MAKE, .creating = 1, .value = "by hand", .mod_rev = 0});
                assert_int_equal(count(CREATE_DO_LOCK), 0);
                assert_true(first(CREATE_DO_REREAD)->a >= 250);
                v.mono_ms += 20000;
        }
        /* a creation left 15 s: taken over at its mod revision, whether a
         * read or a take found it */
        setup(NULL);
        snprintf(value, sizeof(value), "fedcba9876543210 %llu", (unsigned long long)WALL - 16000);
        make_read(1, value);
        assert_int_equal(first(CREATE_DO_LOCK)->a, 33);
        setup(NULL);
        make_read(0, NULL);
        locked(false, 0, 1, value);
        assert_int_equal(first(CREATE_DO_LOCK)->a, 33);
        /* this host's own, from a round that failed: it makes it, found by
         * a take or by a read */
        setup(NULL);
        make_read(0, NULL);
        locked(false, 0, 1, TOKEN " 5");
        assert_true(create_marks(&c));
        setup(NULL);
        make_read(1, TOKEN " 5");
        assert_true(create_marks(&c));
        assert_int_equal(first(CREATE_DO_REREAD)->a, 0);
        /* made meanwhile: read at once */
        setup(NULL);
        make_read(0, NULL);
        locked(false, 1, 0, "");
        assert_int_equal(first(CREATE_DO_REREAD)->a, 0);
        /* no answer: again, backing off */
        setup(NULL);
        make_read(0, NULL);
        step(&(struct create_in){.kind = CREATE_IN_LOCKED, .ok = false});
        assert_true(first(CREATE_DO_REREAD)->a <= 5000);
        step(&(struct create_in){.kind = CREATE_IN_LOCKED, .unsent = true});
        assert_int_equal(first(CREATE_DO_REREAD)->a, 1000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_creator, setup),
                cmocka_unit_test_setup(test_batches, setup),
                cmocka_unit_test_setup(test_waiting, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
