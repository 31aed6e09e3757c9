/* SPDX-License-Identifier: MIT */
/*
 * The acquisition's pure core (daemon/core/acquire.c), step by step: each
 * input with the view it is given, and the actions it returns.  No store,
 * no loop and no clock: the answers are made here, so every corner of the
 * protocol can be reached, among them the ones a real store makes only by
 * failing (an answer lost, a write forgotten, a mark lowered by hand).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "acquire.h"
#include "choose.h"
#include "rules.h"

#define NOW UINT64_C(60000000000)
#define WORKERS 1024
#define TTL_S 10
#define RENEW_MS 2000
#define WINDOW_S 10
#define STEP_S 20
#define SPAN_MS ((uint64_t)(WINDOW_S + STEP_S) * 1000)

struct fixture {
        struct acquire a;
        struct acq_view v;
        struct holding cur;
        struct published published[PUBLISHED_MAX];
        struct store_number numbers[WORKERS];
        struct acq_ready out;
};

static struct fixture f;

static void setup_with(uint32_t from, uint32_t to)
{
        memset(&f, 0, sizeof(f));
        const struct acq_settings set = {
                .lease_ttl_s = TTL_S,
                .renew_ms = RENEW_MS,
                .window_s = WINDOW_S,
                .mark_step_s = STEP_S,
                .host = "h1",
                .instance = "default",
                .token = "0123456789abcdef",
                .pid = 42,
                .seed = 7,
        };
        acq_init(&f.a, &set);
        f.cur = (struct holding){.state = H_NONE, .worker = -1};
        f.v = (struct acq_view){
                .mono_ms = 1000000,
                .boot_ms = 2000000,
                .id_ms = NOW,
                .wall_id_ms = NOW,
                .layout_ready = true,
                .range_from = from,
                .range_to = to,
                .worker_bits = 10,
                .time_bits = 41,
                .cur = &f.cur,
                .published = f.published,
        };
        /* every number held, until a test frees some */
        for (unsigned i = 0; i < WORKERS; i++)
                f.numbers[i] = (struct store_number){.held = true, .lease = 99};
}

static int setup(void **state)
{
        (void)state;
        setup_with(0, WORKERS - 1);
        return 0;
}

static const struct acq_ready *step(const struct acq_in *in)
{
        acq_step(&f.a, &f.v, in, &f.out);
        return &f.out;
}

/* the index of the first action `what` (from), or -1 */
static int find(enum acq_do what, unsigned from)
{
        for (unsigned i = from; i < f.out.n; i++)
                if (f.out.a[i].what == what)
                        return (int)i;
        return -1;
}

static const struct acq_action *only(enum acq_do what)
{
        int i = find(what, 0);
        assert_true(i >= 0);
        assert_int_equal(find(what, (unsigned)i + 1), -1);
        return &f.out.a[i];
}

static bool said(enum acq_say s)
{
        for (unsigned i = 0; i < f.out.n; i++)
                if (f.out.a[i].what == ACQ_DO_SAY && f.out.a[i].say == s)
                        return true;
        return false;
}

static uint64_t id(void)
{
        return acq_holding(&f.a)->id;
}

static void start(void)
{
        step(&(struct acq_in){.kind = ACQ_IN_START});
        assert_int_equal(f.a.state, ACQ_GRANT);
        only(ACQ_DO_GRANT);
}

static void granted(int64_t lease)
{
        step(&(struct acq_in){.kind = ACQ_IN_GRANTED,
                              .r = {.tag = id(), .answered = true, .status = 200},
                              .lease = lease,
                              .ttl_s = TTL_S});
}

static struct store_scan scan_of(uint64_t floor)
{
        return (struct store_scan){.ok = true,
                                   .succeeded = true,
                                   .same = 1,
                                   .floor_read = 1,
                                   .floor = floor,
                                   .workers = WORKERS,
                                   .numbers = f.numbers};
}

static void scanned(const struct store_scan *sc)
{
        step(&(struct acq_in){.kind = ACQ_IN_SCANNED,
                              .r = {.tag = id(), .answered = true, .status = 200},
                              .scan = sc});
}

static void claimed_as(const struct store_claimed *c)
{
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED,
                              .r = {.tag = id(), .answered = true, .status = 200},
                              .claimed = c});
}

/* A number free, its mark at mark (0: none) with mod revision rev. */
static void set_free(uint32_t n, uint64_t mark, int64_t rev)
{
        f.numbers[n] = (struct store_number){
                .marked = rev != 0, .mark_valid = rev != 0, .mark = mark, .mark_rev = rev};
}

/* Start, grant, scan with only number n free: the claim sent. */
static void to_claim(uint32_t n, uint64_t mark, int64_t rev, uint64_t floor)
{
        start();
        granted(77);
        assert_int_equal(f.a.state, ACQ_SCAN);
        set_free(n, mark, rev);
        struct store_scan sc = scan_of(floor);
        scanned(&sc);
        if (f.a.state == ACQ_SCAN) /* the sample missed it: every number read */
                scanned(&sc);
        assert_int_equal(f.a.state, ACQ_CLAIM);
        only(ACQ_DO_CLAIM);
        assert_int_equal(acq_holding(&f.a)->worker, (int32_t)n);
}

static void test_start(void **state)
{
        (void)state;
        /* not while halted, stopping, or before the layout is read */
        f.v.halted = true;
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_START})->n, 0);
        f.v.halted = false;
        f.v.stopping = true;
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_START})->n, 0);
        f.v.stopping = false;
        f.v.layout_ready = false;
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_START})->n, 0);
        assert_true(acq_idle(&f.a));
        f.v.layout_ready = true;
        /* rule 6's pause: a wait first, then the grant */
        f.v.claims_not_before_ms = f.v.mono_ms + 4321;
        step(&(struct acq_in){.kind = ACQ_IN_START});
        assert_int_equal(only(ACQ_DO_WAIT)->ms, 4321);
        assert_int_equal(find(ACQ_DO_GRANT, 0), -1);
        assert_string_equal(acq_state_name(&f.a), "grant");
        /* a second start changes nothing */
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_START})->n, 0);
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        only(ACQ_DO_GRANT);
        assert_int_equal(acq_holding(&f.a)->lease_asked_ms, f.v.boot_ms);
        /* a timer in a step that waits for no timer does nothing */
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_TIMER})->n, 0);
}

static void test_grant(void **state)
{
        (void)state;
        start();
        /* a grant for another holding: its lease revoked, nothing else */
        step(&(struct acq_in){.kind = ACQ_IN_GRANTED,
                              .r = {.tag = id() + 1, .answered = true},
                              .lease = 555,
                              .ttl_s = TTL_S});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 555);
        assert_int_equal(f.out.n, 1);
        assert_int_equal(f.a.state, ACQ_GRANT);
        /* no answer: waits grow, up to half the TTL */
        for (int i = 0; i < 12; i++) {
                step(&(struct acq_in){.kind = ACQ_IN_GRANTED, .r = {.tag = id()}});
                assert_true(said(ACQ_SAY_GRANT_FAILED));
                unsigned ms = only(ACQ_DO_WAIT)->ms;
                assert_true(ms <= TTL_S * 500);
                if (i == 11)
                        assert_true(ms >= TTL_S * 250);
                step(&(struct acq_in){.kind = ACQ_IN_TIMER});
                only(ACQ_DO_GRANT);
        }
        /* an answer that refuses (4xx): at most a second; a refusal of a
         * setting is not said here */
        step(&(struct acq_in){
                .kind = ACQ_IN_GRANTED,
                .r = {.tag = id(), .answered = true, .status = 401, .refused = true}});
        assert_false(said(ACQ_SAY_GRANT_FAILED));
        assert_true(only(ACQ_DO_WAIT)->ms <= 1000);
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        granted(77);
        assert_int_equal(acq_holding(&f.a)->lease, 77);
        assert_int_equal(acq_holding(&f.a)->lease_until_ms, rule5_lease_until(f.v.boot_ms, TTL_S));
}

static void test_sample(void **state)
{
        (void)state;
        /* the number held when a fence came is read first */
        step(&(struct acq_in){.kind = ACQ_IN_PREFER, .worker = 700});
        start();
        granted(77);
        const struct holding *g = acq_holding(&f.a);
        assert_int_equal(only(ACQ_DO_SCAN)->what, ACQ_DO_SCAN);
        assert_int_equal(g->sampled, SCAN_SAMPLE);
        assert_int_equal(g->sample[0], 700);
        for (unsigned i = 0; i < g->sampled; i++)
                for (unsigned j = 0; j < i; j++)
                        assert_int_not_equal(g->sample[i], g->sample[j]);
        /* every sampled number free and ahead of the clock, by no more
         * than a live holder's mark leads it: claimed from the sample */
        for (unsigned i = 0; i < g->sampled; i++)
                set_free(g->sample[i], NOW + SPAN_MS - 100 * i, 40);
        struct store_scan sc = scan_of(0);
        scanned(&sc);
        assert_int_equal(f.a.state, ACQ_CLAIM);
        assert_true(said(ACQ_SAY_AHEAD));
        assert_true(acq_holding(&f.a)->start_ms > NOW);
        step(&(struct acq_in){.kind = ACQ_IN_DROP});
        /* further ahead: every number read, for one behind the clock */
        setup(NULL);
        start();
        granted(77);
        g = acq_holding(&f.a);
        for (unsigned i = 0; i < g->sampled; i++)
                set_free(g->sample[i], NOW + SPAN_MS + 1 + i, 40);
        sc = scan_of(0);
        scanned(&sc);
        assert_true(said(ACQ_SAY_SCAN_ALL));
        only(ACQ_DO_SCAN);
        assert_int_equal(acq_holding(&f.a)->sampled, 0);
        set_free(3, NOW - 5000, 40);
        scanned(&sc);
        assert_int_equal(acq_holding(&f.a)->worker, 3);
        assert_int_equal(acq_holding(&f.a)->start_ms, NOW);
        /* the preferred number (a restart's last) is still claimed first
         * after the sample sends every number to be read: every free mark
         * is ahead, and its mark within a mark step of the lowest (but not
         * within the 1 s of it that a number is drawn from) */
        setup(NULL);
        step(&(struct acq_in){.kind = ACQ_IN_PREFER, .worker = 700});
        start();
        granted(77);
        g = acq_holding(&f.a);
        assert_int_equal(g->sample[0], 700);
        for (unsigned i = 1; i < g->sampled; i++)
                set_free(g->sample[i], NOW + SPAN_MS + 1 + i, 40);
        set_free(700, NOW + SPAN_MS + 1 + CHOOSE_SPREAD_MS + 1000, 40);
        sc = scan_of(0);
        scanned(&sc);
        assert_true(said(ACQ_SAY_SCAN_ALL));
        only(ACQ_DO_SCAN);
        scanned(&sc);
        assert_int_equal(f.a.state, ACQ_CLAIM);
        assert_int_equal(acq_holding(&f.a)->worker, 700);
        step(&(struct acq_in){.kind = ACQ_IN_DROP});
        /* a small range: every number */
        setup_with(3, 20);
        start();
        granted(77);
        assert_int_equal(acq_holding(&f.a)->sampled, 0);
        /* a sample in the range */
        setup_with(100, 199);
        for (int k = 0; k < 50; k++) {
                start();
                granted(77);
                g = acq_holding(&f.a);
                for (unsigned i = 0; i < g->sampled; i++)
                        assert_true(g->sample[i] >= 100 && g->sample[i] <= 199);
                step(&(struct acq_in){.kind = ACQ_IN_DROP});
        }
}

static void test_claim_start(void **state)
{
        (void)state;
        /* the mark ahead of the clock: just above it; the claim's mark a
         * window and a step above the start */
        to_claim(5, NOW + 3000, 40, 0);
        const struct holding *g = acq_holding(&f.a);
        assert_int_equal(g->start_ms, NOW + 3001);
        assert_int_equal(g->mark, NOW + 3001 + SPAN_MS);
        assert_int_equal(g->hwm_modrev, 40);
        assert_int_equal(g->own_worker, -1);
        char want[64];
        snprintf(want, sizeof(want), "\"token\":\"0123456789abcdef-%llu\"",
                 (unsigned long long)g->id);
        assert_non_null(strstr(g->value, want));
        assert_non_null(strstr(g->value, "\"pid\":42"));
        /* above this daemon's own last deadline for the number, and the
         * fence's claims_above */
        setup(NULL);
        f.published[0] = (struct published){.worker = 5, .mark = NOW + 9000};
        f.v.n_published = 1;
        to_claim(5, NOW - 10, 40, 0);
        assert_int_equal(acq_holding(&f.a)->start_ms, NOW + 9001);
        setup(NULL);
        f.v.claims_above = NOW + 20000;
        to_claim(5, 0, 0, 0);
        assert_int_equal(acq_holding(&f.a)->start_ms, NOW + 20001);
        /* a claim compares the last write of the number published */
        setup(NULL);
        f.cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 500, .mark_rev = 321};
        to_claim(5, 0, 0, 0);
        assert_int_equal(acq_holding(&f.a)->own_worker, 9);
        assert_int_equal(acq_holding(&f.a)->own_rev, 321);
}

/* The test that would catch a duplicate ID in the acquisition: whatever the
 * scan read, a claim starts above the mark it read (or the floor, for a
 * number with no mark), above claims_above, and above every deadline this
 * daemon published for the number. */
static void test_claim_never_repeats(void **state)
{
        (void)state;
        uint64_t x = 12345;
        for (int k = 0; k < 2000; k++) {
                setup(NULL);
                x = x * 6364136223846793005u + 1442695040888963407u;
                uint64_t mark = NOW - 50000 + (x >> 33) % 100000;
                bool marked = (x >> 20) & 1;
                uint64_t floor = NOW - 50000 + (x >> 13) % 100000;
                uint64_t above = NOW - 50000 + (x >> 7) % 100000;
                uint64_t own = NOW - 50000 + (x >> 3) % 100000;
                f.v.claims_above = above;
                f.published[(x >> 40) % PUBLISHED_MAX] =
                        (struct published){.worker = 5, .mark = own};
                f.v.n_published = PUBLISHED_MAX;
                if ((x >> 50) & 1)
                        f.cur = (struct holding){.state = H_HELD, .worker = 5, .mark = own + 7};
                to_claim(5, mark, marked ? 40 : 0, floor);
                uint64_t s = acq_holding(&f.a)->start_ms;
                if (marked)
                        assert_true(s > mark);
                else
                        assert_true(s > floor);
                assert_true(s > above);
                assert_true(s > own);
                if (f.cur.state == H_HELD)
                        assert_true(s > f.cur.mark);
                assert_true(acq_holding(&f.a)->mark > s);
        }
}

static void test_claim_answers(void **state)
{
        (void)state;
        /* claimed: published, then over */
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.ok = true, .succeeded = true, .revision = 88});
        assert_true(said(ACQ_SAY_CLAIMED));
        only(ACQ_DO_PUBLISH);
        assert_int_equal(acq_holding(&f.a)->mark_rev, 88);
        assert_int_equal(acq_holding(&f.a)->state, H_HELD);
        assert_string_equal(acq_state_name(&f.a), "held");
        step(&(struct acq_in){.kind = ACQ_IN_PUBLISHED});
        assert_true(acq_idle(&f.a));
        /* refused outright (taken: the compares failed, nothing written):
         * a new holding under the same lease scans again (rule 9) */
        to_claim(5, 0, 0, 0);
        uint64_t first = id();
        claimed_as(&(struct store_claimed){.ok = true});
        assert_true(said(ACQ_SAY_NOT_CLAIMED));
        assert_int_equal(find(ACQ_DO_REVOKE, 0), -1);
        only(ACQ_DO_SCAN);
        assert_int_equal(f.a.state, ACQ_SCAN);
        assert_true(id() > first);
        assert_int_equal(acq_holding(&f.a)->lease, 77);
        assert_int_equal(acq_holding(&f.a)->lease_until_ms, rule5_lease_until(f.v.boot_ms, TTL_S));
        /* ... an answer to the refused attempt's holding is not this one's */
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED,
                              .r = {.tag = first, .answered = true, .status = 200},
                              .claimed = &(struct store_claimed){.ok = true, .succeeded = true}});
        assert_int_equal(f.out.n, 0);
        /* ... at most CLAIMS_PER_LEASE (4) claims under one lease */
        for (int k = 2; k <= 4; k++) {
                struct store_scan sc = scan_of(0);
                scanned(&sc);
                if (f.a.state == ACQ_SCAN)
                        scanned(&sc);
                assert_int_equal(f.a.state, ACQ_CLAIM);
                claimed_as(&(struct store_claimed){.ok = true});
                if (k < 4)
                        only(ACQ_DO_SCAN);
        }
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        assert_true(only(ACQ_DO_WAIT)->ms < 60);
        assert_int_equal(find(ACQ_DO_PUBLISH, 0), -1);
        assert_int_equal(f.a.state, ACQ_WAIT);
        /* ... and while half the lease's TTL is left: past it, given up */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        f.v.boot_ms = acq_holding(&f.a)->lease_until_ms - TTL_S * 500 + 1;
        claimed_as(&(struct store_claimed){.ok = true});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        assert_int_equal(find(ACQ_DO_SCAN, 0), -1);
        /* refused with an error (the lease gone): given up */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED,
                              .r = {.tag = id(), .answered = true, .status = 400},
                              .claimed = &(struct store_claimed){0}});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        assert_int_equal(find(ACQ_DO_SCAN, 0), -1);
        /* the publication failed: the same */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.ok = true, .succeeded = true, .revision = 88});
        step(&(struct acq_in){.kind = ACQ_IN_UNPUBLISHED});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        only(ACQ_DO_WAIT);
        assert_int_equal(f.a.state, ACQ_WAIT);
        /* an answer for an earlier step is ignored */
        step(&(struct acq_in){.kind = ACQ_IN_GRANTED});
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        claimed_as(&(struct store_claimed){.ok = true, .succeeded = true});
        assert_int_equal(f.out.n, 0);
        assert_int_equal(f.a.state, ACQ_GRANT);
}

static void test_settle(void **state)
{
        (void)state;
        /* no answer: read back; applied only if ours with the claim's mark */
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.no_answer = true});
        assert_true(said(ACQ_SAY_NO_ANSWER));
        only(ACQ_DO_READ);
        const struct holding *g = acq_holding(&f.a);
        struct store_read rd = {.ok = true,
                                .succeeded = true,
                                .same = 1,
                                .n = {.held = true,
                                      .lease = 77,
                                      .value_is = true,
                                      .marked = true,
                                      .mark_valid = true,
                                      .mark = g->mark,
                                      .mark_rev = 91}};
        /* malformed: asked again later */
        rd.n.malformed = true;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = id(), .answered = true}, .read = &rd});
        only(ACQ_DO_WAIT);
        assert_int_equal(f.a.state, ACQ_SETTLE_WAIT);
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        only(ACQ_DO_READ);
        rd.n.malformed = false;
        /* another value: not ours */
        rd.n.value_is = false;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = id(), .answered = true}, .read = &rd});
        assert_true(said(ACQ_SAY_NOT_APPLIED));
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        assert_int_equal(find(ACQ_DO_PUBLISH, 0), -1);
        /* ours, but the mark is not the claim's: not applied either */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.no_answer = true});
        rd.n.value_is = true;
        rd.n.mark = acq_holding(&f.a)->mark - 1;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = id(), .answered = true}, .read = &rd});
        assert_int_equal(find(ACQ_DO_PUBLISH, 0), -1);
        /* ours with the mark: claimed, at the mark's revision */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.no_answer = true});
        rd.n.mark = acq_holding(&f.a)->mark;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = id(), .answered = true}, .read = &rd});
        assert_true(said(ACQ_SAY_APPLIED));
        only(ACQ_DO_PUBLISH);
        assert_int_equal(acq_holding(&f.a)->mark_rev, 91);
        /* another fence: the cluster read, nothing claimed */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){.no_answer = true});
        rd.same = 0;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = id(), .answered = true}, .read = &rd});
        only(ACQ_DO_CHECK_CLUSTER);
        only(ACQ_DO_REVOKE);
        assert_true(acq_idle(&f.a));
}

static void test_own_write(void **state)
{
        (void)state;
        /* the claim failed on this daemon's own write of its number: gone
         * to a lower mod revision, the store forgot it (rule 5) */
        f.cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 500, .mark_rev = 321};
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){
                .ok = true,
                .own_read = true,
                .own = {.marked = true, .mark_valid = true, .mark = NOW + 500, .mark_rev = 300}});
        const struct acq_action *t = only(ACQ_DO_RESTORED);
        assert_int_equal(t->worker, 9);
        assert_int_equal(t->a, 321);
        assert_int_equal(t->b, 300);
        only(ACQ_DO_REVOKE);
        assert_true(acq_idle(&f.a));
        /* lowered by hand, at a later revision: raised back, then again */
        setup(NULL);
        f.cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 500, .mark_rev = 321};
        to_claim(5, 0, 0, 0);
        claimed_as(&(struct store_claimed){
                .ok = true,
                .own_read = true,
                .own = {.marked = true, .mark_valid = true, .mark = NOW - 1, .mark_rev = 400}});
        t = only(ACQ_DO_RAISE);
        assert_int_equal(t->worker, 9);
        assert_int_equal(t->a, NOW + 500);
        only(ACQ_DO_WAIT);
        assert_int_equal(find(ACQ_DO_RESTORED, 0), -1);
}

static void test_scan_answers(void **state)
{
        (void)state;
        /* every number taken: said once while it lasts, looked at again
         * each renewal interval, under the same lease while half its TTL
         * is left, then under a new one */
        setup_with(0, 15);
        start();
        granted(77);
        struct store_scan sc = scan_of(0);
        uint64_t until = acq_holding(&f.a)->lease_until_ms;
        for (int k = 0; k < 6; k++) {
                uint64_t was = id();
                scanned(&sc);
                assert_int_equal(said(ACQ_SAY_ALL_TAKEN), k == 0);
                unsigned ms = only(ACQ_DO_WAIT)->ms;
                assert_true(ms >= RENEW_MS / 2 && ms <= RENEW_MS);
                bool kept = f.v.boot_ms + ms + TTL_S * 500 <= until;
                assert_int_equal(find(ACQ_DO_REVOKE, 0) >= 0, !kept);
                assert_true(id() > was); /* a late answer is not the next read's */
                step(&(struct acq_in){.kind = ACQ_IN_TIMER});
                if (kept) {
                        only(ACQ_DO_SCAN);
                        assert_int_equal(acq_holding(&f.a)->lease, 77);
                } else {
                        only(ACQ_DO_GRANT);
                        granted(77);
                        until = acq_holding(&f.a)->lease_until_ms;
                }
                f.v.boot_ms += ms;
                f.v.mono_ms += ms;
        }
        set_free(3, 0, 0);
        scanned(&sc);
        only(ACQ_DO_CLAIM);
        claimed_as(&(struct store_claimed){.ok = true, .succeeded = true, .revision = 5});
        assert_true(said(ACQ_SAY_CAME_FREE));
        /* another fence or floor: the cluster read */
        setup(NULL);
        start();
        granted(77);
        sc = scan_of(0);
        sc.floor_read = 0;
        scanned(&sc);
        assert_true(said(ACQ_SAY_FENCE_CHANGED));
        only(ACQ_DO_CHECK_CLUSTER);
        assert_true(acq_idle(&f.a));
        /* a failed read: read again after a wait, under the same lease;
         * the late answer of the failed one is not taken for the next
         * one's; a number outside the layout's never read */
        setup(NULL);
        start();
        granted(77);
        uint64_t failed = id();
        sc = scan_of(0);
        sc.ok = false;
        scanned(&sc);
        assert_true(said(ACQ_SAY_SCAN_FAILED));
        only(ACQ_DO_WAIT);
        assert_int_equal(find(ACQ_DO_REVOKE, 0), -1);
        assert_string_equal(acq_state_name(&f.a), "scan");
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        only(ACQ_DO_SCAN);
        set_free(3, 0, 0);
        struct store_scan late = scan_of(0);
        step(&(struct acq_in){.kind = ACQ_IN_SCANNED,
                              .r = {.tag = failed, .answered = true, .status = 200},
                              .scan = &late});
        assert_int_equal(f.out.n, 0);
        assert_int_equal(f.a.state, ACQ_SCAN);
        f.numbers[3].held = true;
        /* a failed read with less than half the lease's TTL left after
         * its wait: a new lease */
        sc.ok = false;
        f.v.boot_ms = acq_holding(&f.a)->lease_until_ms - TTL_S * 500;
        scanned(&sc);
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        step(&(struct acq_in){.kind = ACQ_IN_TIMER});
        granted(78);
        sc = scan_of(0);
        sc.workers = 512;
        scanned(&sc);
        assert_int_equal(find(ACQ_DO_CLAIM, 0), -1);
        only(ACQ_DO_WAIT);
        /* a fresh number wanted, none behind the wall clock: given up for
         * a while */
        setup(NULL);
        step(&(struct acq_in){.kind = ACQ_IN_START, .fresh = true});
        granted(77);
        for (unsigned i = 0; i < WORKERS; i++)
                set_free(i, NOW + 5000, 40);
        sc = scan_of(0);
        scanned(&sc);
        if (f.a.state == ACQ_SCAN)
                scanned(&sc);
        assert_true(said(ACQ_SAY_NONE_FRESH));
        assert_int_equal(only(ACQ_DO_FRESH_LATER)->a, f.v.mono_ms + 10000);
        assert_true(acq_idle(&f.a));
}

static void test_time_bits(void **state)
{
        (void)state;
        f.v.time_bits = 35; /* NOW is past 2^35 */
        start();
        granted(77);
        set_free(5, 0, 0);
        struct store_scan sc = scan_of(0);
        scanned(&sc);
        if (f.a.state == ACQ_SCAN)
                scanned(&sc);
        assert_true(only(ACQ_DO_FATAL)->a >> 35);
        assert_int_equal(find(ACQ_DO_CLAIM, 0), -1);
        /* its lease given up before the holder ends, and nothing started
         * again */
        assert_true(find(ACQ_DO_REVOKE, 0) >= 0 && find(ACQ_DO_REVOKE, 0) < find(ACQ_DO_FATAL, 0));
        assert_true(acq_idle(&f.a));
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_START})->n, 0);
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_DROP})->n, 0);
}

/* Rule 14: an answer is the holding's, at the step it is at, or nothing. */
static void test_stale(void **state)
{
        (void)state;
        struct store_scan sc = scan_of(0);
        const struct store_claimed ok = {.ok = true, .succeeded = true, .revision = 9};
        struct store_read rd = {.ok = true,
                                .succeeded = true,
                                .same = 1,
                                .n = {.held = true,
                                      .lease = 77,
                                      .value_is = true,
                                      .marked = true,
                                      .mark_valid = true}};
        start();
        granted(77);
        uint64_t tag = id();
        /* another holding's scan, claim or read: nothing */
        step(&(struct acq_in){.kind = ACQ_IN_SCANNED, .r = {.tag = tag + 1}, .scan = &sc});
        assert_int_equal(f.out.n, 0);
        set_free(5, 0, 0);
        scanned(&sc);
        if (f.a.state == ACQ_SCAN)
                scanned(&sc);
        assert_int_equal(f.a.state, ACQ_CLAIM);
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED, .r = {.tag = tag + 1}, .claimed = &ok});
        assert_int_equal(f.out.n, 0);
        /* this holding's, at another step: nothing */
        step(&(struct acq_in){.kind = ACQ_IN_SCANNED, .r = {.tag = tag}, .scan = &sc});
        assert_int_equal(f.out.n, 0);
        step(&(struct acq_in){.kind = ACQ_IN_READ, .r = {.tag = tag}, .read = &rd});
        assert_int_equal(f.out.n, 0);
        step(&(struct acq_in){.kind = ACQ_IN_PUBLISHED});
        step(&(struct acq_in){.kind = ACQ_IN_UNPUBLISHED});
        assert_int_equal(f.out.n, 0);
        assert_int_equal(f.a.state, ACQ_CLAIM);
        /* a claim not sent: read back */
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED, .r = {.tag = tag, .unsent = true}});
        only(ACQ_DO_READ);
        /* a claim's answer, and a timer, while reading back: nothing */
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED, .r = {.tag = tag}, .claimed = &ok});
        assert_int_equal(f.out.n, 0);
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_TIMER})->n, 0);
        /* the number under another lease, with this value and mark: not
         * this claim */
        rd.n.lease = 78;
        rd.n.mark = acq_holding(&f.a)->mark;
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = tag, .answered = true}, .read = &rd});
        assert_int_equal(find(ACQ_DO_PUBLISH, 0), -1);
        assert_int_equal(f.a.state, ACQ_WAIT);
        /* a new attempt is a new holding: the last one's answers are stale */
        assert_true(id() > tag);
        step(&(struct acq_in){
                .kind = ACQ_IN_READ, .r = {.tag = tag, .answered = true}, .read = &rd});
        assert_int_equal(f.out.n, 0);
}

static void test_odd_answers(void **state)
{
        (void)state;
        /* a lease granted without a TTL: given up */
        start();
        step(&(struct acq_in){.kind = ACQ_IN_GRANTED,
                              .r = {.tag = id(), .answered = true},
                              .lease = 555,
                              .ttl_s = 0});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 555);
        only(ACQ_DO_WAIT);
        /* a scan naming another fence */
        setup(NULL);
        start();
        granted(77);
        struct store_scan sc = scan_of(0);
        sc.same = 0;
        scanned(&sc);
        only(ACQ_DO_CHECK_CLUSTER);
        assert_true(acq_idle(&f.a));
        /* a claim that failed without saying which fence it compared, the
         * cluster not halted: tried again, never left waiting */
        setup(NULL);
        to_claim(5, 0, 0, 0);
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED,
                              .r = {.tag = id(), .answered = true, .not_current = true},
                              .claimed = &(struct store_claimed){.ok = true, .same = -1}});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        only(ACQ_DO_WAIT);
        assert_int_equal(f.a.state, ACQ_WAIT);
        /* the number published changed since the claim was sent: its mark
         * read low is not this claim's to raise */
        setup(NULL);
        f.cur = (struct holding){.state = H_HELD, .worker = 9, .mark = NOW + 500, .mark_rev = 321};
        to_claim(5, 0, 0, 0);
        f.cur.worker = 10;
        claimed_as(&(struct store_claimed){
                .ok = true,
                .own_read = true,
                .own = {.marked = true, .mark_valid = true, .mark = NOW - 1, .mark_rev = 400}});
        assert_int_equal(find(ACQ_DO_RAISE, 0), -1);
}

/* A fresh number (after the wall clock went back) starts from the wall
 * clock, any other from ID time. */
static void test_fresh_clock(void **state)
{
        (void)state;
        f.v.wall_id_ms = NOW - 5000;
        to_claim(5, NOW - 9000, 40, 0);
        assert_int_equal(acq_holding(&f.a)->start_ms, NOW);
        setup(NULL);
        f.v.wall_id_ms = NOW - 5000;
        step(&(struct acq_in){.kind = ACQ_IN_START, .fresh = true});
        granted(77);
        set_free(5, NOW - 9000, 40);
        struct store_scan sc = scan_of(0);
        scanned(&sc);
        if (f.a.state == ACQ_SCAN)
                scanned(&sc);
        only(ACQ_DO_CLAIM);
        assert_int_equal(acq_holding(&f.a)->start_ms, NOW - 5000);
}

static void test_drop(void **state)
{
        (void)state;
        to_claim(5, 0, 0, 0);
        uint64_t tag = id();
        step(&(struct acq_in){.kind = ACQ_IN_DROP});
        assert_int_equal(only(ACQ_DO_REVOKE)->lease, 77);
        assert_true(acq_idle(&f.a));
        assert_null(acq_state_name(&f.a));
        /* its claim's answer comes after: ignored */
        step(&(struct acq_in){.kind = ACQ_IN_CLAIMED,
                              .r = {.tag = tag, .answered = true},
                              .claimed = &(struct store_claimed){.ok = true, .succeeded = true}});
        assert_int_equal(f.out.n, 0);
        assert_int_equal(step(&(struct acq_in){.kind = ACQ_IN_DROP})->n, 0);
}

static void test_backoff(void **state)
{
        (void)state;
        unsigned b = 0;
        assert_int_equal(acq_backoff(&b, 1000, 0), 50);
        assert_int_equal(b, 200);
        for (int i = 0; i < 10; i++)
                assert_true(acq_backoff(&b, 1000, UINT64_MAX) <= 1000);
        assert_int_equal(b, 1000);
        assert_int_equal(acq_failure_max_ms(10, true, 200), 1000);
        assert_int_equal(acq_failure_max_ms(10, true, 503), 5000);
        assert_int_equal(acq_failure_max_ms(10, false, 0), 5000);
        assert_int_equal(acq_failure_max_ms(600, false, 0), 30000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_start, setup),
                cmocka_unit_test_setup(test_grant, setup),
                cmocka_unit_test_setup(test_sample, setup),
                cmocka_unit_test_setup(test_claim_start, setup),
                cmocka_unit_test_setup(test_claim_never_repeats, setup),
                cmocka_unit_test_setup(test_claim_answers, setup),
                cmocka_unit_test_setup(test_settle, setup),
                cmocka_unit_test_setup(test_own_write, setup),
                cmocka_unit_test_setup(test_scan_answers, setup),
                cmocka_unit_test_setup(test_time_bits, setup),
                cmocka_unit_test_setup(test_drop, setup),
                cmocka_unit_test_setup(test_stale, setup),
                cmocka_unit_test_setup(test_odd_answers, setup),
                cmocka_unit_test_setup(test_fresh_clock, setup),
                cmocka_unit_test(test_backoff),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
