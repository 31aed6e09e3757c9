/* SPDX-License-Identifier: MIT */
/*
 * The store's contract (docs/design.md, "The store's verbs"), checked on a
 * real store through the verbs the holder calls (verbs.h): what each verb
 * must guarantee, whichever backend says it.  Run by
 * tests/integration/test_contract.py against etcd and PostgreSQL.
 *
 * Usage: snowid-store-contract SNOWIDD-SETTINGS...  (--etcd URLS, or --store
 * postgres --postgres CONNINFO; --cluster NAME, unused on that store;
 * --worker-bits 3)
 * Prints one line per check ("ok N - ..." or "not ok N - ..."), then
 * "N passed, N failed"; exits 1 if one failed, 2 if it could not run.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "store.h"
#include "values.h"
#include "verbs.h"

static sd_event *ev;
static struct store *st, *st2; /* two clients: two connections to PostgreSQL */
static unsigned passed, failed;
static int64_t revision_seen; /* the highest revision an answer carried */
static bool revision_back;    /* an answer carried a lower one than before */

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
        va_list ap;
        printf("%s %u - ", ok ? "ok" : "not ok", passed + failed + 1);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
        if (ok)
                passed++;
        else
                failed++;
}

/* Each answer's revision: a store's revisions never go back (rule 5's
 * evidence of a restore). */
static void seen(const struct store_answer *a)
{
        if (!a->answered || !a->revision)
                return;
        if (a->revision < revision_seen)
                revision_back = true;
        if (a->revision > revision_seen)
                revision_seen = a->revision;
}

/* Runs the loop until *done is set, 20 s at most. */
static void wait_done(const bool *done, const char *what)
{
        for (unsigned i = 0; !*done && i < 200; i++)
                sd_event_run(ev, 100000);
        if (!*done) {
                printf("Bail out! no answer to %s in 20 s\n", what);
                exit(2);
        }
}

/* ---- each verb, waited for ---- */

struct lease_res {
        bool done, answered;
        int64_t lease, ttl;
};
static void on_lease(void *u, const struct store_answer *a, int64_t lease, int64_t ttl)
{
        struct lease_res *r = u;
        seen(a);
        *r = (struct lease_res){.done = true, .answered = a->answered, .lease = lease, .ttl = ttl};
}
static struct lease_res grant(unsigned ttl)
{
        struct lease_res r = {0};
        if (store_grant(st, ttl, on_lease, &r, 0) == 0)
                wait_done(&r.done, "a grant");
        return r;
}
static struct lease_res keepalive(int64_t lease)
{
        struct lease_res r = {0};
        if (store_keepalive(st, lease, on_lease, &r, 0) == 0)
                wait_done(&r.done, "a keepalive");
        return r;
}

struct revoke_res {
        bool done, gone;
};
static void on_revoke(void *u, const struct store_answer *a, bool gone)
{
        struct revoke_res *r = u;
        seen(a);
        r->done = true;
        r->gone = gone;
}

struct done_res {
        bool done, ok, succeeded;
};
static void on_done(void *u, const struct store_answer *a, bool ok, bool succeeded)
{
        struct done_res *r = u;
        seen(a);
        *r = (struct done_res){.done = true, .ok = ok, .succeeded = succeeded};
}

struct cluster_res {
        bool done;
        struct store_cluster c; /* records not kept */
};
static void on_cluster(void *u, const struct store_answer *a, const struct store_cluster *c)
{
        struct cluster_res *r = u;
        seen(a);
        r->done = true;
        r->c = *c;
        r->c.records = NULL;
}
static struct store_cluster read_cluster(bool marks)
{
        struct cluster_res r = {0};
        if (store_read_cluster(st, marks, -1, on_cluster, &r, 0) == 0)
                wait_done(&r.done, "a read of the cluster");
        return r.c;
}

struct creating_res {
        bool done;
        struct store_creating c;
};
static void on_creating(void *u, const struct store_answer *a, const struct store_creating *c)
{
        struct creating_res *r = u;
        seen(a);
        r->done = true;
        r->c = *c;
}

#define WORKERS_MAX 64
struct scan_res {
        bool done;
        struct store_scan s;
        struct store_number n[WORKERS_MAX];
};
static void on_scan(void *u, const struct store_answer *a, const struct store_scan *s)
{
        struct scan_res *r = u;
        seen(a);
        r->done = true;
        r->s = *s;
        for (uint64_t i = 0; s->numbers && i < s->workers && i < WORKERS_MAX; i++)
                r->n[i] = s->numbers[i];
        r->s.numbers = NULL;
}

struct claim_res {
        bool done;
        struct store_claimed c;
};
static void on_claim(void *u, const struct store_answer *a, const struct store_claimed *c)
{
        struct claim_res *r = u;
        seen(a);
        r->done = true;
        r->c = *c;
}

struct read_res {
        bool done;
        struct store_read rd;
};
static void on_read(void *u, const struct store_answer *a, const struct store_read *rd)
{
        struct read_res *r = u;
        seen(a);
        r->done = true;
        r->rd = *rd;
}

struct extend_res {
        bool done;
        struct store_extended e;
};
static void on_extend(void *u, const struct store_answer *a, const struct store_extended *e)
{
        struct extend_res *r = u;
        seen(a);
        r->done = true;
        r->e = *e;
}

struct raise_res {
        bool done;
        struct store_raised rs;
};
static void on_raise(void *u, const struct store_answer *a, const struct store_raised *rs)
{
        struct raise_res *r = u;
        seen(a);
        r->done = true;
        r->rs = *rs;
}

static struct cluster_ident cl; /* the cluster as read, for every verb that names it */
static unsigned time_bits;

static struct store_claimed claim(uint32_t worker, int64_t lease, const char *value, uint64_t start,
                                  uint64_t mark, int64_t modrev)
{
        struct claim_res r = {0};
        const struct store_claim_req req = {.cl = &cl,
                                            .worker = worker,
                                            .lease = lease,
                                            .value = value,
                                            .start = start,
                                            .mark = mark,
                                            .modrev = modrev,
                                            .own_worker = -1};
        if (store_claim(st, &req, on_claim, &r, 0) == 0)
                wait_done(&r.done, "a claim");
        return r.c;
}

static struct store_read read_number(uint32_t worker, const char *value)
{
        struct read_res r = {0};
        if (store_read_number(st, &cl, worker, value, on_read, &r, 0) == 0)
                wait_done(&r.done, "a read of a number");
        return r.rd;
}

static struct store_extended extend(uint32_t worker, int64_t lease, const char *value,
                                    uint64_t mark)
{
        struct extend_res r = {0};
        if (store_extend(st, &cl, worker, lease, value, mark, 0, on_extend, &r, 0) == 0)
                wait_done(&r.done, "an extension");
        return r.e;
}

static struct store_raised raise_mark(uint32_t worker, bool put, uint64_t mark, int64_t modrev)
{
        struct raise_res r = {0};
        if (store_raise(st, &cl, worker, put, mark, modrev, on_raise, &r, 0) == 0)
                wait_done(&r.done, "a raise");
        return r.rs;
}

static struct store_scan scan(uint64_t workers, struct store_number *numbers)
{
        struct scan_res r = {0};
        if (store_scan(st, &cl, workers, NULL, 0, time_bits, on_scan, &r, 0) == 0)
                wait_done(&r.done, "a scan");
        memcpy(numbers, r.n, sizeof(r.n));
        return r.s;
}

int main(int argc, char **argv)
{
        struct settings cfg = {0};
        int r = settings_load(&cfg, &settings_checks_postgres, argc, argv);
        if (r != 0)
                return settings_exit_status(r) ? 2 : 0;
        uint64_t workers = UINT64_C(1) << cfg.layout.worker_bits;
        time_bits = cfg.layout.time_bits;
        if (workers > WORKERS_MAX) {
                fprintf(stderr, "store-contract: at most %d numbers (--worker-bits)\n",
                        WORKERS_MAX);
                return 2;
        }
        if (sd_event_new(&ev) < 0 || store_new(ev, &cfg, &st) < 0 ||
            store_new(ev, &cfg, &st2) < 0) {
                fprintf(stderr, "store-contract: cannot make the store\n");
                return 2;
        }
        char prefix[96];
        snprintf(prefix, sizeof(prefix), "/snowid/%s/", cfg.cluster);
        store_set_prefix(st, prefix);
        store_set_prefix(st2, prefix);
        printf("# the contract of %s's verbs, under %s\n", store_title(st), prefix);

        /* a store that never held the cluster says so */
        struct store_cluster c = read_cluster(true);
        check(c.ok && !c.malformed && c.layout == 0 && c.fence == 0 && c.floor == 0 && !c.held &&
                      c.marks_zero && !c.witnessed && c.creating == 0,
              "read_cluster on a store that never held the cluster: nothing of it, never used");

        /* one host makes a cluster: `creating` is taken once */
        struct creating_res cr1 = {0}, cr2 = {0};
        store_creating(st, "host-a 1", 0, on_creating, &cr1, 0);
        wait_done(&cr1.done, "creating");
        store_creating(st, "host-b 2", 0, on_creating, &cr2, 0);
        wait_done(&cr2.done, "creating");
        check(cr1.c.ok && cr1.c.succeeded && cr2.c.ok && !cr2.c.succeeded && cr2.c.creating == 1 &&
                      !strcmp(cr2.c.value, "host-a 1"),
              "store_creating: taken by the first host; the second reads the first's (%s)",
              cr2.c.value);

        struct done_res d = {0};
        store_init_marks(st, 0, workers, on_done, &d);
        wait_done(&d.done, "init_marks");
        check(d.ok && d.succeeded, "store_init_marks: every mark 0");
        c = read_cluster(true);
        check(c.ok && c.layout == 0 && c.marks_zero && !c.held && c.creating == 1 &&
                      !strcmp(c.creating_value, "host-a 1") && c.creating_rev == cr2.c.mod_rev,
              "read_cluster after the marks: still never used (every mark 0, no holder), "
              "and the host making it (%s)",
              c.creating_value);

        struct cluster_ident made;
        if (fence_make(1000, 0, 0, true, &made) < 0)
                return 2;
        d = (struct done_res){0};
        store_make_cluster(st, &cfg.layout, made.fence, 1000, true, on_done, &d);
        wait_done(&d.done, "make_cluster");
        check(d.ok && d.succeeded, "store_make_cluster on a store that holds nothing of it");
        d = (struct done_res){0};
        store_make_cluster(st, &cfg.layout, made.fence, 5, true, on_done, &d);
        wait_done(&d.done, "make_cluster");
        check(d.ok && !d.succeeded, "store_make_cluster again: refused, the cluster exists");

        c = read_cluster(false);
        cl = c.c;
        check(c.ok && c.layout == 1 && c.l.worker_bits == cfg.layout.worker_bits && c.fence == 1 &&
                      cl.fence_len == made.fence_len &&
                      !memcmp(cl.fence, made.fence, made.fence_len) && c.floor == 1 &&
                      c.floor_value == 1000 && c.creating == 0,
              "read_cluster: the layout, the fence's exact bytes and the floor (%" PRIu64
              "); no host making it",
              c.floor_value);

        /* leases: granted, kept alive; one the store does not know is said so */
        struct lease_res l1 = grant(5), l2 = grant(5);
        check(l1.lease > 0 && l2.lease > 0 && l1.lease != l2.lease && l1.ttl > 0 && l1.ttl <= 5,
              "store_grant: two leases, TTL %" PRId64 " s", l1.ttl);
        struct lease_res k = keepalive(l1.lease);
        check(k.answered && k.ttl > 0 && k.ttl <= 5, "store_keepalive: TTL %" PRId64 " s", k.ttl);
        k = keepalive(l1.lease ^ 0x5a5a5a5a);
        check(k.answered && k.ttl == 0,
              "store_keepalive of a lease the store does not know: TTL 0");

        /* a scan: every number free, its mark 0, with the floor */
        struct store_number nums[WORKERS_MAX];
        struct store_scan sc = scan(workers, nums);
        bool free_zero = sc.ok && sc.same == 1 && sc.workers == workers;
        for (uint64_t i = 0; free_zero && i < workers; i++)
                free_zero = !nums[i].held && nums[i].marked && nums[i].mark_valid &&
                            nums[i].mark == 0 && nums[i].mark_rev > 0;
        check(free_zero && sc.floor_read == 1 && sc.floor == 1000,
              "store_scan: %" PRIu64 " numbers free, each marked 0, the floor 1000", workers);

        /* claims: per number, only one */
        const char *va = "{\"host\":\"a\"}", *vb = "{\"host\":\"b\"}";
        struct store_claimed c1 = claim(3, l1.lease, va, 2000, 5000, nums[3].mark_rev);
        check(c1.ok && c1.succeeded && c1.same == 1 && c1.revision > 0,
              "store_claim of a free number");
        /* with the mark as it is now, so that only the holder refuses it */
        struct store_read held = read_number(3, vb);
        struct store_claimed c2 = claim(3, l2.lease, vb, 6000, 9000, held.n.mark_rev);
        check(held.ok && held.n.held && c2.ok && !c2.succeeded,
              "store_claim of a held number, comparing its current mark: refused");
        struct store_claimed c3 = claim(4, l2.lease, vb, 2000, 5000, nums[4].mark_rev + 1000);
        check(c3.ok && !c3.succeeded,
              "store_claim comparing another mark than the stored: refused");
        /* above the floor, so that only the mark refuses it */
        struct store_claimed c4 = claim(4, l2.lease, vb, 20000, 25000, 0);
        check(c4.ok && !c4.succeeded, "store_claim of a marked number as unmarked: refused");

        /* two claims of one number at once: one wins */
        struct claim_res ra = {0}, rb = {0};
        const struct store_claim_req qa = {.cl = &cl,
                                           .worker = 5,
                                           .lease = l1.lease,
                                           .value = va,
                                           .start = 2000,
                                           .mark = 5000,
                                           .modrev = nums[5].mark_rev,
                                           .own_worker = -1},
                                     qb = {.cl = &cl,
                                           .worker = 5,
                                           .lease = l2.lease,
                                           .value = vb,
                                           .start = 2000,
                                           .mark = 5000,
                                           .modrev = nums[5].mark_rev,
                                           .own_worker = -1};
        store_claim(st, &qa, on_claim, &ra, 0);
        store_claim(st2, &qb, on_claim, &rb, 0);
        wait_done(&ra.done, "a claim");
        wait_done(&rb.done, "a claim");
        check(ra.c.ok && rb.c.ok && ra.c.succeeded + rb.c.succeeded == 1,
              "two claims of one number sent together by two clients: exactly one succeeds");

        struct store_read rd = read_number(3, va);
        check(rd.ok && rd.n.held && rd.n.value_is && rd.n.lease == l1.lease && rd.n.mark == 5000,
              "store_read_number: the holder's lease and value, the claim's mark");

        /* marks only go up, and only under the holding */
        struct store_extended e = extend(3, l1.lease, va, 9000);
        check(e.ok && e.succeeded && e.revision > c1.revision, "store_extend under the holding");
        e = extend(3, l1.lease, va, 7000);
        check(e.ok && !e.succeeded && e.n.mark == 9000,
              "store_extend to a lower mark: refused, the mark read back (%" PRIu64 ")", e.n.mark);
        e = extend(3, l2.lease, vb, 12000);
        check(e.ok && !e.succeeded && e.n.held && e.n.lease == l1.lease,
              "store_extend by another lease: refused, the holder read back");
        c = read_cluster(false);
        check(c.ok && c.floor == 1 && c.floor_value >= 9000,
              "the floor rose with the marks (%" PRIu64 ")", c.floor_value);

        /* a raise compares the mark's mod revision */
        struct store_raised rs = raise_mark(6, false, 0, 0);
        check(rs.ok && !rs.put && rs.n.marked && rs.n.mark == 0 && rs.n.mark_rev > 0,
              "store_raise, read: the mark and its mod revision");
        int64_t rev6 = rs.n.mark_rev;
        rs = raise_mark(6, true, 6000, rev6);
        check(rs.ok && rs.put, "store_raise, put at the mod revision read");
        rs = raise_mark(6, true, 8000, rev6);
        check(rs.ok && !rs.put && rs.n.mark == 6000,
              "store_raise at a stale mod revision: refused, the mark read back (%" PRIu64 ")",
              rs.n.mark);

        /* a lease revoked: its number free, its mark kept */
        struct revoke_res rv = {0};
        store_revoke(st, l1.lease, on_revoke, &rv);
        wait_done(&rv.done, "a revoke");
        check(rv.gone, "store_revoke");
        k = keepalive(l1.lease);
        check(k.answered && k.ttl == 0, "store_keepalive of a revoked lease: TTL 0");
        rd = read_number(3, va);
        check(rd.ok && !rd.n.held && rd.n.mark == 9000,
              "a revoked lease's number: free, its mark kept (%" PRIu64 ")", rd.n.mark);
        /* a claim that comes after its lease was revoked (its answer lost,
         * the lease revoked before trying again) takes nothing: refused, or
         * (etcd) failed as a put under a lease not found */
        struct store_claimed c5 = claim(3, l1.lease, va, 10000, 12000, rd.n.mark_rev);
        rd = read_number(3, va);
        check(!c5.succeeded && rd.ok && !rd.n.held && rd.n.mark == 9000,
              "store_claim under a revoked lease: refused, nothing written");

        /* the regions' records, the witnesses */
        d = (struct done_res){0};
        store_record_range(st, "contract", "{\"from\":0,\"to\":3}", 0, c.layout_rev, on_done, &d);
        wait_done(&d.done, "record_range");
        check(d.ok && d.succeeded, "store_record_range: a new record");
        d = (struct done_res){0};
        const struct store_witness w = {.host = "a",
                                        .instance = "i",
                                        .era = 1,
                                        .claims_above = 2,
                                        .deadline = 3,
                                        .wall_ms = 4};
        store_witness_put(st, "0123456789abcdef", &w, on_done, &d, 0);
        wait_done(&d.done, "witness_put");
        check(d.ok && d.succeeded, "store_witness_put");
        d = (struct done_res){0};
        store_witness_delete(st, "0123456789abcdef", on_done, &d);
        wait_done(&d.done, "witness_delete");
        check(d.ok && d.succeeded, "store_witness_delete");

        /* a cluster made with no marks: numbers the store holds nothing of */
        char prefix2[112];
        snprintf(prefix2, sizeof(prefix2), "/snowid/%s-unmarked/", cfg.cluster);
        store_set_prefix(st, prefix2);
        store_set_prefix(st2, prefix2);
        d = (struct done_res){0};
        store_make_cluster(st, &cfg.layout, made.fence, 1000, false, on_done, &d);
        wait_done(&d.done, "make_cluster");
        struct cluster_ident known = cl;
        c = read_cluster(false);
        cl = c.c;
        struct lease_res l3 = grant(5), l4 = grant(5);
        struct claim_res rc = {0}, rdd = {0};
        struct store_claim_req q3 = {.cl = &cl,
                                     .worker = 1,
                                     .lease = l3.lease,
                                     .value = va,
                                     .start = 2000,
                                     .mark = 5000,
                                     .own_worker = -1},
                               q4 = q3;
        q4.lease = l4.lease;
        q4.value = vb;
        store_claim(st, &q3, on_claim, &rc, 0);
        store_claim(st2, &q4, on_claim, &rdd, 0);
        wait_done(&rc.done, "a claim");
        wait_done(&rdd.done, "a claim");
        rd = read_number(1, rc.c.succeeded ? va : vb);
        check(d.ok && d.succeeded && rc.c.ok && rdd.c.ok && rc.c.succeeded + rdd.c.succeeded == 1 &&
                      rd.n.held && rd.n.value_is &&
                      rd.n.lease == (rc.c.succeeded ? l3.lease : l4.lease),
              "two claims of a number with no mark, by two clients: exactly one succeeds, and "
              "holds it");
        /* a raise, read only, that names another fence: refused */
        struct cluster_ident other = cl;
        other.fence[0] ^= 1;
        struct raise_res rr = {0};
        store_raise(st, &other, 1, false, 0, 0, on_raise, &rr, 0);
        wait_done(&rr.done, "a raise");
        check(rr.rs.ok && !rr.rs.succeeded && rr.rs.same == 0,
              "store_raise, read, under another fence: refused, the fence named as another");
        cl = known;

        check(revision_seen > 0 && !revision_back,
              "every answer's revision at or above the ones before (last %" PRId64 ")",
              revision_seen);

        store_free(st);
        store_free(st2);
        sd_event_unref(ev);
        settings_free(&cfg);
        printf("%u passed, %u failed\n", passed, failed);
        return failed ? 1 : 0;
}
