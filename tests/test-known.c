/* SPDX-License-Identifier: MIT */
/*
 * The pure core of what a daemon knows of the cluster (daemon/core/known.c),
 * input by input: the first read and its settle pause, the gate every
 * answer passes (rule 1), the halts and their witness, a new fence adopted
 * with the number held given up to its mark, a forgotten write, a cluster
 * made only where no witness says it was forgotten.  The same tests built
 * with mutant 24 (a cluster made over a witness) must fail
 * (known-mutant-24).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "known.h"
#include "rules.h"

#define EPOCH UINT64_C(1735689600000)
#define WALL (EPOCH + UINT64_C(60000000000))
#define SETTLE UINT64_C(45000)
#define MONO UINT64_C(1000000)

static struct known k;
static struct holding cur;
static struct known_view v;
static struct known_ready out;
static const snowid_layout layout = {
        .epoch_ms = EPOCH, .time_bits = 41, .worker_bits = 10, .seq_bits = 12};

static void setup_given(bool given, const snowid_layout *l)
{
        const struct known_settings set = {.given = *l,
                                           .layout_given = given,
                                           .lease_ttl_s = 10,
                                           .settle_ms = SETTLE,
                                           .seed = 7};
        known_init(&k, &set);
        cur = (struct holding){.state = H_NONE, .worker = -1};
        v = (struct known_view){.mono_ms = MONO, .wall_ms = WALL, .cur = &cur, .highest = 0};
}

static int setup(void **state)
{
        (void)state;
        setup_given(false, &layout);
        return 0;
}

static void step(const struct known_in *in)
{
        known_step(&k, &v, in, &out);
}

static int count(enum known_do what)
{
        int n = 0;
        for (unsigned i = 0; i < out.n; i++)
                n += out.a[i].what == what;
        return n;
}

static int index_of(enum known_do what)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == what)
                        return (int)i;
        return -1;
}

static const struct known_action *first(enum known_do what)
{
        int i = index_of(what);
        if (i < 0)
                fail_msg("no action %d", what);
        return &out.a[i < 0 ? 0 : i];
}

static bool said(enum known_ev ev)
{
        for (unsigned i = 0; i < out.n; i++)
                if (out.a[i].what == KNOWN_DO_SAY && out.a[i].ev == ev)
                        return true;
        return false;
}

/* a fence: era, claims above, its token; first: made with the cluster */
static struct cluster_ident fence(uint64_t era, uint64_t above, const char *token, bool made)
{
        struct cluster_ident c = {
                .era = era, .claims_above = above, .cluster_id = 77, .made = made, .layout_rev = 5};
        c.fence_len = (size_t)snprintf(c.fence, sizeof(c.fence), "%s %llu %llu", token,
                                       (unsigned long long)era, (unsigned long long)above);
        snprintf(c.token, sizeof(c.token), "%s", token);
        return c;
}

static struct store_cluster cluster(const struct cluster_ident *c)
{
        return (struct store_cluster){.ok = true,
                                      .layout = 1,
                                      .l = layout,
                                      .layout_rev = c->layout_rev,
                                      .fence = 1,
                                      .c = *c,
                                      .floor = 1,
                                      .floor_value = c->claims_above};
}

static void read_answer(const struct store_cluster *cr, bool went_back, int64_t acked)
{
        step(&(struct known_in){.kind = KNOWN_IN_CLUSTER,
                                .cr = cr,
                                .answered = true,
                                .status = 200,
                                .went_back = went_back,
                                .cluster = 77,
                                .acked_rev = acked});
}

/* a read answered by cluster id */
static void read_from(const struct store_cluster *cr, uint64_t id)
{
        step(&(struct known_in){.kind = KNOWN_IN_CLUSTER,
                                .cr = cr,
                                .answered = true,
                                .status = 200,
                                .cluster = id});
}

static bool gate(bool ok, int same, bool went_back)
{
        step(&(struct known_in){
                .kind = KNOWN_IN_GATE, .ok = ok, .same = same, .went_back = went_back});
        return out.current;
}

/* The first read of a cluster made long ago: the range checked, then the
 * clock starts on the layout and the acquisition with it. */
static void start(const struct cluster_ident *c)
{
        struct store_cluster cr = cluster(c);
        read_answer(&cr, false, 0);
        assert_int_equal(out.n, 1);
        assert_int_equal(out.a[0].what, KNOWN_DO_RANGE);
        assert_ptr_equal(out.a[0].cr, &cr); /* the read, to check the range against */
        assert_false(k.layout_ready);
        step(&(struct known_in){.kind = KNOWN_IN_RANGED});
        assert_true(k.layout_ready);
        assert_true(fence_same(&k.cl, c));
        assert_int_equal(first(KNOWN_DO_EXPECT)->a, 77);
        assert_true(index_of(KNOWN_DO_FIRST) < index_of(KNOWN_DO_CLAIM));
}

/* Started on a cluster fenced an hour ago (no pause): its fence. */
static struct cluster_ident started(void)
{
        const struct cluster_ident c = fence(WALL - 3600000, 500, "f1", false);
        start(&c);
        return c;
}

static void hold(int32_t worker, uint64_t mark, int64_t lease)
{
        cur = (struct holding){
                .state = H_HELD, .worker = worker, .mark = mark, .lease = lease, .mark_rev = 40};
}

static void test_first_read(void **state)
{
        (void)state;
        started();
        assert_int_equal(count(KNOWN_DO_PAUSE), 0); /* an hour old: no pause */
        assert_int_equal(count(KNOWN_DO_CLAIM), 1);
        /* a second RANGED (the range's answer twice) does nothing */
        step(&(struct known_in){.kind = KNOWN_IN_RANGED});
        assert_int_equal(out.n, 0);
}

/* A fence younger than the settle pause: no claim before its end, where
 * live daemons have raised their marks past it (rule 6). */
static void test_first_read_young_fence(void **state)
{
        (void)state;
        const struct cluster_ident c = fence(WALL - 5000, 500, "f1", false);
        start(&c);
        assert_int_equal(first(KNOWN_DO_PAUSE)->a, MONO + SETTLE - 5000);
        assert_true(said(KNOWN_EV_SETTLE_LEFT));
        assert_true(index_of(KNOWN_DO_PAUSE) < index_of(KNOWN_DO_CLAIM));
        /* a cluster's first fence waits for nothing */
        setup_given(false, &layout);
        const struct cluster_ident made = fence(WALL - 5000, 500, "f0", true);
        start(&made);
        assert_int_equal(count(KNOWN_DO_PAUSE), 0);
}

static void test_layout_given_differs(void **state)
{
        (void)state;
        snowid_layout other = layout;
        other.worker_bits = 8;
        setup_given(true, &other);
        const struct cluster_ident c = fence(WALL - 3600000, 500, "f1", false);
        struct store_cluster cr = cluster(&c);
        read_answer(&cr, false, 0);
        /* refused before anything is recorded */
        assert_int_equal(count(KNOWN_DO_RANGE), 0);
        assert_true(said(KNOWN_EV_LAYOUT_DIFFERS));
        assert_int_equal(count(KNOWN_DO_FATAL), 1);
        assert_int_equal(count(KNOWN_DO_CLAIM), 0);
        assert_false(k.layout_ready);
}

/* Rule 1: an answer naming another fence halts while the cluster is read;
 * nothing is acted on while halted. */
static void test_gate(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        hold(3, 900, 11);
        assert_true(gate(true, 1, false));
        assert_true(gate(false, -1, false)); /* a failure: its own end is noted */
        assert_int_equal(out.n, 0);
        assert_false(gate(true, -1, false)); /* not known: not acted on, nothing done */
        assert_int_equal(out.n, 0);
        assert_int_equal(k.halted, HALT_NONE);
        assert_false(gate(true, 0, false));
        assert_int_equal(k.halted, HALT_CHECKING);
        assert_int_equal(first(KNOWN_DO_HALTED)->why, HALT_CHECKING);
        assert_int_equal(first(KNOWN_DO_HALTED)->b, 0);     /* the segment not told */
        assert_int_equal(first(KNOWN_DO_READ)->worker, -1); /* halted: no own mark */
        assert_int_equal(count(KNOWN_DO_PROTECT), 0);
        /* halted: nothing current, nothing done */
        assert_false(gate(true, 1, false));
        assert_int_equal(out.n, 0);
        assert_false(gate(true, 1, true));
        assert_int_equal(out.n, 0);
        /* the cluster as it was: going on, the number still held */
        struct store_cluster cr = cluster(&c);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_NONE);
        assert_true(said(KNOWN_EV_AS_WAS));
        assert_int_equal(count(KNOWN_DO_LEASED), 1);
        assert_int_equal(count(KNOWN_DO_CLAIM), 0);
        assert_int_equal(count(KNOWN_DO_RAISE), 0);
        assert_int_equal(count(KNOWN_DO_FENCED), 0);
        assert_true(gate(true, 1, false));
}

/* An answer whose revision went back: a restore, halted at once, every
 * mark raised again, the segment told. */
static void test_gate_went_back(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        hold(3, 900, 11);
        assert_false(gate(true, 1, true));
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_true(said(KNOWN_EV_RESTORE_SEEN));
        assert_int_equal(first(KNOWN_DO_HALTED)->b, 1);
        assert_int_equal(count(KNOWN_DO_PROTECT), 1);
        assert_int_equal(first(KNOWN_DO_REREAD)->a, 1000);
        /* the same fence read again: the restore lasts until a new fence */
        struct store_cluster cr = cluster(&c);
        v.highest = 1234;
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_int_equal(count(KNOWN_DO_CLAIM) + count(KNOWN_DO_LEASED), 0);
        /* the witness: the fence known, the highest deadline published */
        const struct known_action *w = first(KNOWN_DO_WITNESS);
        assert_int_equal(w->a, c.era);
        assert_int_equal(w->b, c.claims_above);
        assert_int_equal(w->c, 1234);
}

/* A new fence: the number held is given up to its mark (raised, its lease
 * revoked once confirmed), every mark published past the fence raised,
 * and no claim before the settle pause ends. */
static void test_new_fence(void **state)
{
        (void)state;
        started();
        hold(3, 900, 11);
        assert_false(gate(true, 0, false));
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_NONE);
        assert_true(fence_same(&k.cl, &n));
        assert_true(said(KNOWN_EV_NEW_FENCE));
        assert_int_equal(count(KNOWN_DO_FORGET), 1);
        /* an acquisition under way is given up first: it would claim under
         * the new fence before the pause */
        assert_int_equal(count(KNOWN_DO_DROP), 1);
        assert_true(index_of(KNOWN_DO_DROP) < index_of(KNOWN_DO_CLAIM));
        /* the number held under the old fence: dropped, given up to its
         * mark, claimed again first */
        assert_int_equal(first(KNOWN_DO_DROPPED)->worker, 3);
        assert_int_equal(count(KNOWN_DO_FENCED), 1);
        assert_int_equal(first(KNOWN_DO_RETIRED)->worker, 3);
        assert_int_equal(first(KNOWN_DO_RETIRED)->a, 900);
        const struct known_action *r = first(KNOWN_DO_RAISE);
        assert_int_equal(r->worker, 3);
        assert_int_equal(r->a, 900);
        assert_int_equal(r->lease, 11);
        assert_int_equal(first(KNOWN_DO_PREFER)->worker, 3);
        assert_true(index_of(KNOWN_DO_FENCED) < index_of(KNOWN_DO_RAISE));
        assert_int_equal(count(KNOWN_DO_RERAISE), 1);
        assert_int_equal(first(KNOWN_DO_PAUSE)->a, MONO + SETTLE);
        /* never extended again under the new fence: claimed anew */
        assert_int_equal(count(KNOWN_DO_LEASED), 0);
        assert_int_equal(count(KNOWN_DO_CLAIM), 1);
        assert_true(index_of(KNOWN_DO_PAUSE) < index_of(KNOWN_DO_CLAIM));
        /* a new fence with the layout made again (another create revision) too */
        hold(4, 950, 12);
        struct cluster_ident m = n;
        m.layout_rev = 9;
        cr = cluster(&m);
        read_answer(&cr, false, 0);
        assert_int_equal(first(KNOWN_DO_RAISE)->worker, 4);
        assert_int_equal(count(KNOWN_DO_LEASED), 0);
}

/* A new fence reaching a daemon that holds nothing published (given up,
 * the raise still under way): nothing to give up, the pause all the same. */
static void test_new_fence_lost(void **state)
{
        (void)state;
        started();
        cur = (struct holding){.state = H_LOST, .worker = 6, .mark = 700, .lease = 0};
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_answer(&cr, false, 0);
        assert_int_equal(count(KNOWN_DO_DROPPED), 0);
        assert_int_equal(count(KNOWN_DO_FENCED), 1);
        assert_int_equal(first(KNOWN_DO_RETIRED)->a, 700);
        assert_int_equal(count(KNOWN_DO_RAISE), 0);
        assert_int_equal(count(KNOWN_DO_PAUSE), 1);
        assert_int_equal(count(KNOWN_DO_CLAIM), 1);
}

/* An older fence back, or the cluster made anew under a daemon that knew
 * it: a restore, never adopted. */
static void test_older_fence(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        hold(3, 900, 11);
        const struct cluster_ident old = fence(WALL - 7200000, 100, "f0", false);
        struct store_cluster cr = cluster(&old);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_true(said(KNOWN_EV_RESTORED));
        assert_true(fence_same(&k.cl, &c)); /* the fence known stays */
        assert_int_equal(count(KNOWN_DO_CLAIM) + count(KNOWN_DO_LEASED), 0);
        assert_int_equal(count(KNOWN_DO_WITNESS), 1);
        setup_given(false, &layout);
        start(&c);
        const struct cluster_ident anew = fence(WALL, 9000, "f9", true);
        cr = cluster(&anew);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_int_equal(count(KNOWN_DO_CLAIM), 0);
}

/* A fence written on another cluster than the one answering. */
static void test_foreign(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_from(&cr, 78);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_true(said(KNOWN_EV_FOREIGN));
        assert_int_equal(count(KNOWN_DO_CLAIM), 0);
        assert_true(fence_same(&k.cl, &c));
}

/* The witness: once per halt, acknowledged only for the halt it was sent
 * for, deleted when the halt ends. */
static void test_witness(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        struct store_cluster lost = cluster(&c);
        lost.fence = 0;
        read_answer(&lost, false, 0);
        assert_int_equal(k.halted, HALT_FENCE_LOST);
        assert_true(said(KNOWN_EV_FENCE_LOST));
        uint64_t tag = first(KNOWN_DO_WITNESS)->tag;
        assert_int_equal(first(KNOWN_DO_REREAD)->a, 1000);
        /* read again while it is on its way: not sent twice, not said twice */
        read_answer(&lost, false, 0);
        assert_int_equal(count(KNOWN_DO_WITNESS), 0);
        assert_false(said(KNOWN_EV_FENCE_LOST));
        /* not sent: sent at the next read */
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .unsent = true});
        assert_int_equal(k.witness, WITNESS_NONE);
        read_answer(&lost, false, 0);
        tag = first(KNOWN_DO_WITNESS)->tag;
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = true, .tag = tag});
        assert_int_equal(k.witness, WITNESS_LEFT);
        assert_true(said(KNOWN_EV_WITNESS_LEFT));
        read_answer(&lost, false, 0);
        assert_int_equal(count(KNOWN_DO_WITNESS), 0);
        /* the halt ends with a new fence: the witness deleted */
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_answer(&cr, false, 0);
        assert_int_equal(count(KNOWN_DO_UNWITNESS), 1);
        assert_int_equal(k.witness, WITNESS_DELETING);
        step(&(struct known_in){.kind = KNOWN_IN_UNWITNESSED});
        assert_int_equal(k.witness, WITNESS_NONE);
        /* an answer for an earlier halt is no witness of this one */
        struct store_cluster gone = cluster(&n);
        gone.layout = 0;
        read_answer(&gone, false, 0);
        assert_int_equal(k.halted, HALT_LAYOUT_LOST);
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = true, .tag = tag});
        assert_int_equal(k.witness, WITNESS_PUTTING);
        uint64_t tag2 = 0;
        read_answer(&gone, false, 0); /* still on its way */
        assert_int_equal(count(KNOWN_DO_WITNESS), 0);
        tag2 = k.witness_gen;
        assert_true(tag2 != tag);
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = true, .tag = tag2});
        assert_int_equal(k.witness, WITNESS_LEFT);
}

/* Halted while checking: no witness (nothing was forgotten yet). */
static void test_no_witness_while_checking(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        assert_false(gate(true, 0, false));
        struct store_cluster bad = cluster(&c);
        bad.malformed = true;
        read_answer(&bad, false, 0);
        assert_true(said(KNOWN_EV_MALFORMED));
        assert_int_equal(count(KNOWN_DO_WITNESS), 0);
        assert_int_equal(first(KNOWN_DO_REREAD)->a, 1000);
}

/* Rule 5: the held number's mark read at a mod revision below the one the
 * store acknowledged to this daemon: a restore, said once. */
static void test_forgotten(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        hold(3, 900, 11);
        step(&(struct known_in){.kind = KNOWN_IN_READ});
        assert_int_equal(first(KNOWN_DO_READ)->worker, 3);
        assert_int_equal(first(KNOWN_DO_READ)->a, 40);
        struct store_cluster cr = cluster(&c);
        cr.own_read = true;
        cr.own_worker = 3;
        cr.own_mark_rev = 40;
        read_answer(&cr, false, 40);
        assert_int_equal(k.halted, HALT_NONE); /* as acknowledged */
        cr.own_mark_rev = 12;
        read_answer(&cr, false, 40);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_true(said(KNOWN_EV_FORGOTTEN));
        assert_int_equal(count(KNOWN_DO_PROTECT), 1);
        assert_int_equal(count(KNOWN_DO_CLAIM) + count(KNOWN_DO_LEASED), 0);
        /* another part's finding of the same: said already */
        step(&(struct known_in){.kind = KNOWN_IN_FORGOTTEN, .forgot = FORGOT_LOW, .worker = 3});
        assert_int_equal(out.n, 0);
        /* halted: the read names no own mark */
        step(&(struct known_in){.kind = KNOWN_IN_READ});
        assert_int_equal(first(KNOWN_DO_READ)->worker, -1);
}

/* Rule 7: a store without the cluster is made anew only if never used and
 * no witness says a daemon knew it. */
static void test_make(void **state)
{
        (void)state;
        struct store_cluster none = {
                .ok = true, .layout = 0, .fence = 0, .floor = 0, .marks_zero = true};
        read_answer(&none, false, 0);
        assert_int_equal(out.n, 1);
        assert_int_equal(out.a[0].what, KNOWN_DO_MAKE);
        none.witnessed = true;
        read_answer(&none, false, 0);
        assert_int_equal(count(KNOWN_DO_MAKE), 0);
        assert_int_equal(k.halted, HALT_LAYOUT_LOST);
        /* a daemon that knew it: never made over, whatever it holds */
        setup_given(false, &layout);
        started();
        none.witnessed = false;
        read_answer(&none, false, 0);
        assert_int_equal(count(KNOWN_DO_MAKE), 0);
        assert_int_equal(k.halted, HALT_LAYOUT_LOST);
}

/* Reads that fail back off, up to half a lease TTL when no answer came. */
static void test_read_fails(void **state)
{
        (void)state;
        struct store_cluster no = {.ok = false};
        uint64_t last = 0;
        for (int i = 0; i < 12; i++) {
                step(&(struct known_in){.kind = KNOWN_IN_CLUSTER, .cr = &no, .error = "down"});
                assert_true(said(KNOWN_EV_UNREADABLE));
                last = first(KNOWN_DO_REREAD)->a;
                assert_true(last <= 5000);
        }
        assert_true(last >= 2500);
        /* refused: said elsewhere */
        step(&(struct known_in){.kind = KNOWN_IN_CLUSTER, .cr = &no, .refused = true});
        assert_false(said(KNOWN_EV_UNREADABLE));
        assert_int_equal(count(KNOWN_DO_REREAD), 1);
        step(&(struct known_in){.kind = KNOWN_IN_READ, .unsent = true});
        assert_int_equal(first(KNOWN_DO_REREAD)->a, 1000);
}

/* Any answer: a lease answer that went back halts; one that lags has the
 * cluster read; a refusal is read for nothing. */
static void test_seen(void **state)
{
        (void)state;
        step(&(struct known_in){.kind = KNOWN_IN_SEEN,
                                .seen = {.answered = true, .status = 200, .went_back = true}});
        assert_int_equal(k.halted, HALT_NONE); /* nothing known yet */
        assert_true(out.reachable);
        started();
        step(&(struct known_in){.kind = KNOWN_IN_SEEN,
                                .seen = {.answered = true, .status = 200, .behind = true},
                                .revision = 88});
        assert_int_equal(k.halted, HALT_NONE);
        assert_int_equal(count(KNOWN_DO_READ), 1);
        assert_true(said(KNOWN_EV_LAGGING));
        step(&(struct known_in){.kind = KNOWN_IN_SEEN,
                                .seen = {.answered = true, .status = 503, .nospace = true}});
        assert_false(out.reachable);
        assert_true(out.full);
        step(&(struct known_in){.kind = KNOWN_IN_SEEN, .seen = {.refused = true}});
        assert_true(out.skip);
        step(&(struct known_in){.kind = KNOWN_IN_SEEN,
                                .seen = {.answered = true, .status = 200, .went_back = true}});
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_int_equal(count(KNOWN_DO_PROTECT), 1);
}

/* A restore lasts until a new fence, whatever halt a read finds between:
 * the fence lost, then put back as it was, is still a restore. */
static void test_restore_lasts(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        hold(3, 900, 11);
        assert_false(gate(true, 1, true));
        assert_int_equal(k.halted, HALT_RESTORED);
        struct store_cluster lost = cluster(&c);
        lost.fence = 0;
        read_answer(&lost, false, 0);
        assert_int_equal(k.halted, HALT_FENCE_LOST);
        /* a check meanwhile does not end it either */
        step(&(struct known_in){.kind = KNOWN_IN_CHECK});
        assert_int_equal(k.halted, HALT_FENCE_LOST);
        struct store_cluster back = cluster(&c);
        read_answer(&back, false, 0);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_int_equal(count(KNOWN_DO_LEASED) + count(KNOWN_DO_CLAIM), 0);
        assert_false(said(KNOWN_EV_RESTORE_SEEN)); /* said once */
        step(&(struct known_in){.kind = KNOWN_IN_CHECK});
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_int_equal(count(KNOWN_DO_HALTED), 0);
        /* a new fence ends it */
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_NONE);
        assert_false(k.restored);
        assert_int_equal(count(KNOWN_DO_CLAIM), 1);
}

/* An answer naming another fence, found by another part: halted while the
 * cluster is read; the same fence read back, going on. */
static void test_check(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        step(&(struct known_in){.kind = KNOWN_IN_CHECK});
        assert_int_equal(k.halted, HALT_CHECKING);
        assert_int_equal(count(KNOWN_DO_READ), 1);
        assert_int_equal(count(KNOWN_DO_PROTECT), 0);
        struct store_cluster cr = cluster(&c);
        read_answer(&cr, false, 0);
        assert_int_equal(k.halted, HALT_NONE);
        assert_int_equal(count(KNOWN_DO_CLAIM), 1); /* nothing held: claimed */
}

/* The layout in use changed under the daemon: it stops. */
static void test_layout_changed(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        struct store_cluster cr = cluster(&c);
        cr.l.seq_bits = 11;
        read_answer(&cr, false, 0);
        assert_true(said(KNOWN_EV_LAYOUT_DIFFERS));
        assert_int_equal(first(KNOWN_DO_SAY)->a, 1); /* the one in use */
        assert_int_equal(count(KNOWN_DO_FATAL), 1);
        assert_int_equal(count(KNOWN_DO_LEASED) + count(KNOWN_DO_CLAIM), 0);
}

/* A halt that ends while its witness is on its way: the put's answer is
 * for nothing, the witness deleted; a put that failed is sent again. */
static void test_witness_ends(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        struct store_cluster lost = cluster(&c);
        lost.fence = 0;
        read_answer(&lost, false, 0);
        uint64_t tag = first(KNOWN_DO_WITNESS)->tag;
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = false, .tag = tag});
        assert_int_equal(k.witness, WITNESS_NONE);
        assert_false(said(KNOWN_EV_WITNESS_LEFT));
        read_answer(&lost, false, 0);
        tag = first(KNOWN_DO_WITNESS)->tag;
        struct store_cluster cr = cluster(&c);
        read_answer(&cr, false, 0); /* put back by hand, as it was */
        assert_int_equal(k.halted, HALT_NONE);
        assert_int_equal(count(KNOWN_DO_UNWITNESS), 1);
        step(&(struct known_in){.kind = KNOWN_IN_WITNESSED, .ok = true, .tag = tag});
        assert_int_equal(k.witness, WITNESS_DELETING);
        assert_false(said(KNOWN_EV_WITNESS_LEFT));
        step(&(struct known_in){.kind = KNOWN_IN_UNWITNESSED});
        assert_int_equal(k.witness, WITNESS_NONE);
}

/* A read that succeeds ends the backoff of the reads that failed. */
static void test_backoff_reset(void **state)
{
        (void)state;
        struct store_cluster no = {.ok = false};
        for (int i = 0; i < 10; i++)
                step(&(struct known_in){.kind = KNOWN_IN_CLUSTER, .cr = &no, .error = "down"});
        assert_true(first(KNOWN_DO_REREAD)->a >= 2500);
        started();
        step(&(struct known_in){.kind = KNOWN_IN_CLUSTER, .cr = &no, .error = "down"});
        assert_true(first(KNOWN_DO_REREAD)->a <= 100);
}

/* A new fence found while not halted (a read after a lagging answer): the
 * acquisition under way is given up before the pause, or it would claim
 * under the new fence before live daemons raised their marks. */
static void test_new_fence_unhalted(void **state)
{
        (void)state;
        started();
        const struct cluster_ident n = fence(WALL - 1000, 5000, "f2", false);
        struct store_cluster cr = cluster(&n);
        read_answer(&cr, false, 0);
        assert_int_equal(count(KNOWN_DO_HALTED), 0);
        assert_int_equal(count(KNOWN_DO_DROP), 1);
        assert_true(index_of(KNOWN_DO_DROP) < index_of(KNOWN_DO_PAUSE));
        assert_true(index_of(KNOWN_DO_PAUSE) < index_of(KNOWN_DO_CLAIM));
}

/* A first read that finds a fence written on another cluster: halted as
 * restored, then going on with a fence that names this one, and not
 * halted by it later. */
static void test_first_read_foreign(void **state)
{
        (void)state;
        const struct cluster_ident old = fence(WALL - 3600000, 500, "f1", false);
        struct store_cluster cr = cluster(&old);
        read_from(&cr, 78);
        assert_int_equal(k.halted, HALT_RESTORED);
        assert_false(k.layout_ready);
        struct cluster_ident n = fence(WALL - 3600000, 600, "f2", false);
        n.cluster_id = 78;
        cr = cluster(&n);
        read_from(&cr, 78);
        assert_int_equal(count(KNOWN_DO_RANGE), 1);
        step(&(struct known_in){.kind = KNOWN_IN_RANGED});
        assert_int_equal(k.halted, HALT_NONE);
        assert_false(k.restored);
        assert_int_equal(count(KNOWN_DO_CLAIM), 1);
        read_from(&cr, 78);
        assert_int_equal(k.halted, HALT_NONE);
        assert_int_equal(count(KNOWN_DO_HALTED) + count(KNOWN_DO_DROP), 0);
}

/* A forgotten write found while a restore lasts under another halt: said
 * already, nothing done; the reason said stays the restore. */
static void test_forgotten_while_restored(void **state)
{
        (void)state;
        const struct cluster_ident c = started();
        assert_false(gate(true, 1, true));
        struct store_cluster lost = cluster(&c);
        lost.fence = 0;
        read_answer(&lost, false, 0);
        assert_int_equal(k.halted, HALT_FENCE_LOST);
        assert_int_equal(known_reason(&k), HALT_RESTORED);
        step(&(struct known_in){.kind = KNOWN_IN_FORGOTTEN, .forgot = FORGOT_MARK, .worker = 3});
        assert_int_equal(out.n, 0);
        assert_int_equal(k.halted, HALT_FENCE_LOST);
}

static uint64_t draw(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

/* Random inputs against the invariants a duplicate ID would break: a
 * number is extended again (LEASED) only under the fence it was held
 * under; every fence change gives a held number up to its mark and pauses
 * the claims; no answer is acted on while halted; a halt for a restore
 * ends only with a new fence. */
static void test_random(void **state)
{
        (void)state;
        uint64_t x = 0x9e3779b97f4a7c15;
        const struct cluster_ident fences[4] = {
                fence(WALL - 7200000, 100, "f0", false), fence(WALL - 3600000, 500, "f1", false),
                fence(WALL - 1000, 5000, "f2", false), fence(WALL - 500, 6000, "f3", false)};
        for (int run = 0; run < 200; run++) {
                setup_given(false, &layout);
                start(&fences[1]);
                struct cluster_ident held_under = fences[1];
                int newest = 1;
                bool restored = false;
                hold(3, 900, 11);
                for (int i = 0; i < 60; i++) {
                        uint64_t d = draw(&x);
                        enum halt before = k.halted;
                        struct cluster_ident known_before = k.cl;
                        bool claim_ok = false;
                        switch (d % 9) {
                        case 0:
                        case 1: {
                                /* a read: a fence of the four (a later one may come once) */
                                int f = (int)((d >> 8) % 4);
                                struct store_cluster cr = cluster(&fences[f]);
                                bool back = (d >> 12) % 5 == 0;
                                read_answer(&cr, back, 0);
                                if (f > newest)
                                        newest = f;
                                break;
                        }
                        case 2:
                                claim_ok = gate(true, (int)((d >> 8) % 3) - 1, (d >> 12) % 7 == 0);
                                if (before != HALT_NONE)
                                        assert_false(claim_ok);
                                break;
                        case 3:
                                step(&(struct known_in){.kind = KNOWN_IN_SEEN,
                                                        .seen = {.answered = true,
                                                                 .status = 200,
                                                                 .went_back = (d >> 8) % 4 == 0,
                                                                 .behind = (d >> 10) % 3 == 0}});
                                break;
                        case 4:
                                step(&(struct known_in){.kind = KNOWN_IN_WITNESSED,
                                                        .ok = true,
                                                        .tag = k.witness_gen - (d >> 8) % 2});
                                break;
                        case 6: {
                                /* the layout or the fence lost */
                                struct store_cluster cr = cluster(&fences[newest]);
                                if ((d >> 8) % 2)
                                        cr.fence = 0;
                                else
                                        cr.layout = 0;
                                read_answer(&cr, false, 0);
                                break;
                        }
                        case 7:
                                step(&(struct known_in){.kind = KNOWN_IN_CHECK});
                                break;
                        case 8:
                                step(&(struct known_in){.kind = KNOWN_IN_FORGOTTEN,
                                                        .forgot = FORGOT_MARK,
                                                        .worker = 3});
                                break;
                        case 5:
                                /* the acquisition claims a number under the fence known */
                                if (cur.state != H_HELD && k.halted == HALT_NONE) {
                                        hold((int32_t)(d >> 8) % 1024, 1000 + i, 20 + i);
                                        held_under = k.cl;
                                }
                                break;
                        }
                        bool changed = !fence_same(&known_before, &k.cl);
                        if (count(KNOWN_DO_LEASED))
                                assert_true(fence_same(&held_under, &k.cl));
                        if (changed) {
                                /* adopted: no halt left, the acquisition under
                                 * way dropped, the claims paused */
                                assert_int_equal(k.halted, HALT_NONE);
                                assert_int_equal(count(KNOWN_DO_DROP), 1);
                                assert_int_equal(first(KNOWN_DO_PAUSE)->a, MONO + SETTLE);
                                assert_true(index_of(KNOWN_DO_PAUSE) < index_of(KNOWN_DO_CLAIM));
                                if (cur.state == H_HELD) {
                                        assert_int_equal(first(KNOWN_DO_RAISE)->a, cur.mark);
                                        assert_int_equal(first(KNOWN_DO_RAISE)->lease, cur.lease);
                                }
                        }
                        /* a restore seen lasts until a new fence */
                        if (k.halted == HALT_RESTORED)
                                restored = true;
                        if (changed)
                                restored = false;
                        if (restored) {
                                assert_true(k.halted != HALT_NONE);
                                assert_int_equal(count(KNOWN_DO_LEASED) + count(KNOWN_DO_CLAIM), 0);
                                assert_false(claim_ok);
                        }
                        (void)before;
                        if (count(KNOWN_DO_FENCED) && cur.state != H_NONE)
                                cur.state = H_LOST; /* as the hold core does */
                        if (count(KNOWN_DO_CLAIM))
                                assert_int_equal(k.halted, HALT_NONE);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_first_read, setup),
                cmocka_unit_test_setup(test_first_read_young_fence, setup),
                cmocka_unit_test_setup(test_layout_given_differs, setup),
                cmocka_unit_test_setup(test_gate, setup),
                cmocka_unit_test_setup(test_gate_went_back, setup),
                cmocka_unit_test_setup(test_new_fence, setup),
                cmocka_unit_test_setup(test_new_fence_lost, setup),
                cmocka_unit_test_setup(test_older_fence, setup),
                cmocka_unit_test_setup(test_foreign, setup),
                cmocka_unit_test_setup(test_witness, setup),
                cmocka_unit_test_setup(test_no_witness_while_checking, setup),
                cmocka_unit_test_setup(test_forgotten, setup),
                cmocka_unit_test_setup(test_make, setup),
                cmocka_unit_test_setup(test_read_fails, setup),
                cmocka_unit_test_setup(test_seen, setup),
                cmocka_unit_test_setup(test_restore_lasts, setup),
                cmocka_unit_test_setup(test_check, setup),
                cmocka_unit_test_setup(test_layout_changed, setup),
                cmocka_unit_test_setup(test_witness_ends, setup),
                cmocka_unit_test_setup(test_backoff_reset, setup),
                cmocka_unit_test_setup(test_new_fence_unhalted, setup),
                cmocka_unit_test_setup(test_first_read_foreign, setup),
                cmocka_unit_test_setup(test_forgotten_while_restored, setup),
                cmocka_unit_test_setup(test_random, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
