/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does when the store forgets (docs/fences.md): the cluster's
 * layout, fence and floor; halting on a restored cluster or a lost key;
 * adopting a new fence; raising marks that read back low.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim.h"
#include "cluster.h"
#include "log.h"
#include "marks.h"
#include "region.h"

#define REREAD_MS 1000
#define INIT_BATCH 100      /* marks made per transaction (etcd allows 128 ops) */
#define INIT_MAX (1u << 14) /* more numbers than this: none made; absent means unmarked */
#define INIT_IN_FLIGHT 16   /* batches sent at once */
/* creating a cluster: one host does it, holding the key `creating`; the
 * others read again after a wait that starts at CREATE_WAIT_MS and doubles
 * to CREATE_WAIT_MAX_MS (jittered), so that a fleet waiting does not keep
 * the store from the creation, and take over a creation not finished
 * within CREATE_STALE_MS (its host gone) */
#define CREATE_WAIT_MS 250
#define CREATE_WAIT_MAX_MS 2000
#define CREATE_STALE_MS 15000

const char *holder_halt_name(enum halt why)
{
        switch (why) {
        case HALT_NONE:
                return NULL;
        case HALT_CHECKING:
                return "checking";
        case HALT_RESTORED:
                return "store-restored";
        case HALT_LAYOUT_LOST:
                return "layout-lost";
        case HALT_FENCE_LOST:
                return "fence-lost";
        }
        return "unknown";
}

/* ---- reading (and, on a cluster never used, creating) layout, fence, floor ---- */

static void create_lock(struct holder *h, int64_t stale_rev, bool poll);

static int on_reread_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct holder *h = userdata;
        (void)s;
        (void)usec;
        /* a host waiting for another's creation asks only whether it has
         * ended (two keys): the full read of a cluster without a layout
         * reads every mark, and a fleet waiting would keep the store from
         * the creation with it */
        if (h->create_waiting)
                create_lock(h, 0, true);
        else
                cluster_read(h);
        return 0;
}

static void reread_in(struct holder *h, unsigned ms)
{
        holder_timer_in(h, &h->reread_timer, ms, on_reread_timer);
}

void cluster_read_in(struct holder *h, unsigned ms)
{
        reread_in(h, ms);
}

static json_t *layout_value(const snowid_layout *l)
{
        char buf[160];
        snprintf(buf, sizeof(buf),
                 "{\"epoch_ms\":%" PRIu64 ",\"time_bits\":%u,\"worker_bits\":%u,\"seq_bits\":%u}",
                 l->epoch_ms, l->time_bits, l->worker_bits, l->seq_bits);
        return store_b64("%s", buf);
}

static int layout_parse(const struct kv *kv, snowid_layout *ret)
{
        json_error_t err;
        json_t *v = json_loadb(kv->value, kv->value_len, 0, &err);
        json_int_t e = -1, tb = -1, wb = -1, sb = -1;
        int bad = !v || json_unpack(v, "{s:I, s:I, s:I, s:I}", "epoch_ms", &e, "time_bits", &tb,
                                    "worker_bits", &wb, "seq_bits", &sb) < 0;
        json_decref(v);
        if (bad || e < 0 || tb < 0 || tb >= 64 || wb < 0 || wb >= 64 || sb < 0 || sb >= 64)
                return -EBADMSG;
        *ret = (snowid_layout){(uint64_t)e, (unsigned)tb, (unsigned)wb, (unsigned)sb};
        return snowid_layout_check(ret) < 0 ? -EBADMSG : 0;
}

/* A cluster never used: no layout, fence, floor or holder, every mark 0 (the
 * read gives at most one holder and the highest mark). */
static bool never_used(const json_t *root, int rf, int rfl)
{
        json_t *kvs = txn_kvs(root, 4), *j;
        size_t i;
        struct kv kv;
        uint64_t m;
        if (rf != 0 || rfl != 0 || json_array_size(txn_kvs(root, 3)) > 0)
                return false;
        json_array_foreach(kvs, i, j)
        {
                bool zero = kv_parse(j, &kv) == 0 && parse_mark(kv.value, kv.value_len, &m) == 0 &&
                            m == 0;
                kv_clear(&kv);
                if (!zero)
                        return false;
        }
        return true;
}

static void create_cluster(struct holder *h);
static void init_marks(struct holder *h);

/* Whether this host creates the cluster.  Creating it is idempotent (every
 * step compares), so the key only spares the store a fleet's worth of the
 * same work when a fleet starts on a cluster that does not exist yet. */
static void on_create_lock(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        bool poll = r->tag == 1;
        /* a poll that got no answer polls again */
        h->create_waiting = poll && !store_ok(r);
        /* a fleet waiting asks at most a quarter of the time: each host
         * waits at least 4 times as long as its last answer took, so a
         * store slowed by the fleet's own questions gets fewer of them */
        unsigned took = (unsigned)(holder_mono_ms() - h->create_sent_ms), least = 4 * took;
        if (!store_ok(r)) {
                unsigned wait = claim_failure_backoff(h, r);
                reread_in(h, wait > least ? wait : least);
                return;
        }
        /* [layout, creating]: the failure branch, or the poll */
        struct kv lk = {0}, ck = {0};
        int rl = txn_kv(r->json, 0, &lk), rc = txn_kv(r->json, 1, &ck);
        unsigned long long since = 0;
        int64_t now_ms = shm_realtime_ns() / 1000000;
        size_t tl = strlen(h->token);
        /* taken now, or taken by this host before (a round of its
         * creation failed): it creates */
        bool mine = rl == 0 && rc == 1 && ck.value_len > tl && !strncmp(ck.value, h->token, tl) &&
                    ck.value[tl] == ' ';
        if ((!poll && json_is_true(json_object_get(r->json, "succeeded"))) || (!poll && mine)) {
                /* the creator, and only it, reads the marks too: whether
                 * the cluster was used (a mark above 0) before it creates */
                h->check_marks = true;
                reread_in(h, 0);
        } else if (rl != 0 || rc != 1) /* made meanwhile, or the creation just ended */
                reread_in(h, 0);
        else if (sscanf(ck.value, "%*16s %llu", &since) == 1 &&
                 now_ms - (int64_t)since > CREATE_STALE_MS)
                create_lock(h, ck.mod_revision, false);
        else {
                unsigned wait = claim_next_backoff(h, CREATE_WAIT_MAX_MS) + CREATE_WAIT_MS;
                h->create_waiting = true;
                reread_in(h, wait > least ? wait : least);
        }
        kv_clear(&lk);
        kv_clear(&ck);
}

/* Takes the key `creating` (stale_rev: over an abandoned creation at that
 * mod revision), while there is no layout.  poll: only reads both keys, a
 * read that the store serves without a write (a transaction that may put
 * is a write whichever branch it takes) */
static void create_lock(struct holder *h, int64_t stale_rev, bool poll)
{
        const char *p = h->prefix;
        h->create_sent_ms = holder_mono_ms();
        if (poll) {
                json_t *body = json_pack("{s:[o, o]}", "success",
                                         txn_range(txn_key(p, "layout", -1), NULL, true),
                                         txn_range(txn_key(p, "creating", -1), NULL, false));
                if (store_call(h->store, "/v3/kv/txn", body, on_create_lock, h, 1) < 0)
                        reread_in(h, REREAD_MS);
                return;
        }
        json_t *body = json_pack(
                "{s:[o, o], s:[o], s:[o, o]}", "compare",
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                stale_rev ? txn_cmp(txn_key(p, "creating", -1), "MOD", "EQUAL", NULL, stale_rev)
                          : txn_cmp(txn_key(p, "creating", -1), "CREATE", "EQUAL", NULL, 0),
                "success",
                txn_put(txn_key(p, "creating", -1),
                        store_b64("%s %" PRId64, h->token, shm_realtime_ns() / 1000000), 0),
                "failure", txn_range(txn_key(p, "layout", -1), NULL, true),
                txn_range(txn_key(p, "creating", -1), NULL, false));
        if (store_call(h->store, "/v3/kv/txn", body, on_create_lock, h, 0) < 0)
                reread_in(h, REREAD_MS);
}

static int init_batch(struct holder *h, uint64_t from);

/* Sends batches until INIT_IN_FLIGHT are in flight; once every batch has
 * succeeded, makes the cluster (its transaction checks every mark anyway). */
static void init_more(struct holder *h)
{
        uint64_t workers = UINT64_C(1) << h->cfg->layout.worker_bits;
        while (!h->init_failed && h->init_pending < INIT_IN_FLIGHT && h->init_next < workers) {
                if (init_batch(h, h->init_next) < 0)
                        h->init_failed = 2;
                else
                        h->init_pending++;
                h->init_next += INIT_BATCH;
        }
        if (h->init_pending > 0)
                return;
        if (h->init_failed)
                reread_in(h, h->init_failed == 1 ? 0 : REREAD_MS);
        else
                create_cluster(h);
}

/* the batches answer in any order */
static void on_init(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id;
        if (!store_ok(r) || !json_is_true(json_object_get(r->json, "succeeded")))
                h->init_failed = store_ok(r) ? 1 : 2; /* created meanwhile, or no answer */
        h->init_pending--;
        init_more(h);
}

/* Before the cluster exists: every number's mark, 0, where it is absent, so
 * that later an absent mark means a deleted one (rule 3).  Only while there
 * is no layout and no floor, so never over a mark deleted after use.  Up to
 * INIT_IN_FLIGHT batches at once: a creation of the default layout's 1,024
 * marks costs the fleet waiting for it one round trip, not one per batch,
 * and no batch of a larger layout waits behind so many others that it times
 * out unsent. */
static void init_marks(struct holder *h)
{
        h->init_pending = 0;
        h->init_next = 0;
        h->init_failed = 0;
        init_more(h);
}

static int init_batch(struct holder *h, uint64_t from)
{
        const char *p = h->prefix;
        uint64_t workers = UINT64_C(1) << h->cfg->layout.worker_bits, to = from + INIT_BATCH;
        to = to < workers ? to : workers;
        json_t *ops = json_array();
        for (uint64_t n = from; n < to; n++)
                json_array_append_new(
                        ops, json_pack("{s:{s:[o], s:[o]}}", "request_txn", "compare",
                                       txn_cmp(txn_key(p, "hwm/", (int64_t)n), "CREATE", "EQUAL",
                                               NULL, 0),
                                       "success",
                                       txn_put(txn_key(p, "hwm/", (int64_t)n), txn_mark(0), 0)));
        json_t *body = json_pack("{s:[o, o], s:o}", "compare",
                                 txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                                 txn_cmp(txn_key(p, "floor", -1), "CREATE", "EQUAL", NULL, 0),
                                 "success", ops);
        return store_call(h->store, "/v3/kv/txn", body, on_init, h, 0);
}

static void on_create(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        if (store_ok(r) && json_is_true(json_object_get(r->json, "succeeded")))
                log_notice("Created the cluster's layout, fence, floor and marks at %s", h->prefix);
        reread_in(h, store_ok(r) ? 0 : REREAD_MS);
}

/* Layout, fence and floor together, only if the cluster is still unused */
static void create_cluster(struct holder *h)
{
        const char *p = h->prefix;
        bool marked = (UINT64_C(1) << h->cfg->layout.worker_bits) <= INIT_MAX;
        struct cluster_ident c;
        /* A store that holds no cluster may have forgotten one (restored
         * from a snapshot taken before it was made, or its prefix wiped)
         * whose hosts' clients still take IDs up to their deadlines: the
         * new cluster claims above the clock bound a fence would, and its
         * floor is there too.  The fence names the cluster it is made on
         * (the last answer's) */
        uint64_t above =
                rule7_made_above(h->cfg->layout.epoch_ms, (uint64_t)(shm_realtime_ns() / 1000000),
                                 h->cfg->window_s, h->cfg->mark_step_s);
        if (fence_make(above, 0, h->cluster_id, true, &c) < 0) {
                reread_in(h, REREAD_MS);
                return;
        }
        json_t *body = json_pack(
                "{s:[o, o, o, o, o, o], s:[o, o, o, {s:{s:o}}]}", "compare",
                txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(p, "fence", -1), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(p, "floor", -1), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(p, "workers/", -1), "CREATE", "EQUAL", NULL, 0),
                txn_cmp(txn_key(p, "witness/", -1), "CREATE", "EQUAL", NULL, 0),
                marked ? txn_cmp(txn_key(p, "hwm/", -1), "VALUE", "EQUAL", txn_mark(0), 0)
                       : txn_cmp(txn_key(p, "hwm/", -1), "CREATE", "EQUAL", NULL, 0),
                "success", txn_put(txn_key(p, "layout", -1), layout_value(&h->cfg->layout), 0),
                txn_put(txn_key(p, "fence", -1), store_b64("%s", c.fence), 0),
                txn_put(txn_key(p, "floor", -1), txn_mark(above), 0), "request_delete_range", "key",
                txn_key(p, "creating", -1));
        /* range compares: no holder and no witness at all; every mark 0 */
        json_t *cmp = json_object_get(body, "compare");
        json_object_set_new(json_array_get(cmp, 3), "range_end", txn_key(p, "workers0", -1));
        json_object_set_new(json_array_get(cmp, 4), "range_end", txn_key(p, "witness0", -1));
        json_object_set_new(json_array_get(cmp, 5), "range_end", txn_key(p, "hwm0", -1));
        if (store_call(h->store, "/v3/kv/txn", body, on_create, h, 0) < 0)
                reread_in(h, REREAD_MS);
}

/* ---- a witness: what a halted daemon knew, for the fence to cover ---- */

static void on_witness(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        h->witness_sending = false;
        /* an answer for an earlier halt, or none: sent again at the next
         * read of the cluster while halted */
        if (!store_ok(r) || r->tag != h->witness_gen || h->halted == HALT_NONE || h->witnessed)
                return;
        h->witnessed = true;
        log_notice("Left a witness at %switness/%s: the fence this daemon knew and its "
                   "highest deadline, for `snowid fence` to claim above",
                   h->prefix, h->token);
}

/* A daemon halted on a cluster it knew (the store restored or replaced,
 * its layout or fence gone) writes down what the store may have forgotten
 * and a fence must cover: the fence it knew (a lead that hosts which
 * claimed under it may still run, where the fence is lost) and the
 * highest deadline it published.  No lease and no compare: a restored
 * store keeps it whatever it holds, until `snowid fence` reads and deletes
 * it, and a daemon that finds it on a store without the cluster does not
 * make the cluster anew (never_used). */
static json_t *witness_key(const struct holder *h)
{
        char what[40];
        snprintf(what, sizeof(what), "witness/%s", h->token);
        return txn_key(h->prefix, what, -1);
}

static void witness_send(struct holder *h)
{
        if (h->witnessed || h->witness_sending || !h->layout_ready || h->halted == HALT_NONE ||
            h->halted == HALT_CHECKING)
                return;
        json_t *v =
                json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "host", h->host, "instance",
                          h->cfg->instance, "era", (json_int_t)h->cl.era, "claims_above",
                          (json_int_t)h->cl.claims_above, "deadline", (json_int_t)marks_highest(h),
                          "wall_ms", (json_int_t)(shm_realtime_ns() / 1000000));
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        if (!text)
                return;
        json_t *body =
                json_pack("{s:[o]}", "success", txn_put(witness_key(h), store_b64("%s", text), 0));
        free(text);
        h->witness_sending =
                store_call(h->store, "/v3/kv/txn", body, on_witness, h, h->witness_gen) >= 0;
}

static void on_witness_deleted(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        (void)r; /* a witness left behind only asks more of the next fence */
        h->witness_sending = false;
}

/* A halt ends (a fence adopted, or the cluster as it was): the witness is
 * gone with the fence that covered it, or, where the halt ended without
 * one (a key put back by hand), is deleted here, so that no witness of a
 * halt long over outlives it in the store and its snapshots. */
void cluster_witness_done(struct holder *h)
{
        bool left = h->witnessed || h->witness_sending;
        h->witnessed = false;
        h->witness_gen++;
        if (!left)
                return;
        json_t *body = json_pack("{s:[{s:{s:o}}]}", "success", "request_delete_range", "key",
                                 witness_key(h));
        h->witness_sending =
                store_call(h->store, "/v3/kv/txn", body, on_witness_deleted, h, 0) >= 0;
}

static void on_cluster(void *userdata, const struct store_reply *r)
{
        struct holder *h = userdata;
        struct kv lk = {0}, fk = {0}, flk = {0};
        struct cluster_ident c = {0};
        snowid_layout l;
        if (r->cluster_id)
                h->cluster_id = r->cluster_id; /* the cluster a fence made here names */
        if (!store_ok(r)) {
                if (r->err == STORE_ERR_NONE) /* a refusal is said once, by refusal.c */
                        log_warning("Cannot read the cluster's layout from %s: %s",
                                    store_endpoint(h->store), r->error);
                reread_in(h, claim_failure_backoff(h, r));
                return;
        }
        /* [layout, fence, floor, workers/, hwm/, ranges/, witness/] */
        int rl = txn_kv(r->json, 0, &lk), rf = txn_kv(r->json, 1, &fk),
            rfl = txn_kv(r->json, 2, &flk);
        if (rl < 0 || rf < 0 || rfl < 0) {
                log_warning("%s's answer about the layout is malformed; asking again",
                            store_title(h->store));
                goto retry;
        }
        /* at most one witness is read */
        bool witnessed = json_array_size(txn_kvs(r->json, 6)) > 0;
        if (rl == 0 && !h->layout_ready &&
            rule7_may_make(never_used(r->json, rf, rfl), witnessed)) {
                /* a layout the range does not fit is not made */
                if (!region_range_fits(h, h->cfg->layout.worker_bits))
                        goto out;
                if (!h->check_marks)
                        create_lock(h, 0, false);
                else if ((UINT64_C(1) << h->cfg->layout.worker_bits) <= INIT_MAX)
                        init_marks(h); /* holding `creating`, every mark read */
                else                   /* too many numbers: unmarked ones start above the floor */
                        create_cluster(h);
                goto out;
        }
        if (rl == 0) {
                if (h->halted != HALT_LAYOUT_LOST)
                        log_error("The cluster's layout key is gone (%slayout), but the cluster "
                                  "has been used%s: not re-creating it, and extending nothing. "
                                  "Run `snowid fence` with this cluster's layout to restore it",
                                  h->prefix,
                                  witnessed ? " (a daemon that knew it left a witness: the store "
                                              "forgot it)"
                                            : "");
                cluster_halt(h, HALT_LAYOUT_LOST);
                goto retry;
        }
        if (layout_parse(&lk, &l) < 0) {
                log_error("The layout stored at %slayout is not valid: '%.200s'", h->prefix,
                          lk.value);
                holder_fatal(h, EX_CONFIG_);
                goto out;
        }
        uint64_t floor;
        if (rfl == 1 && parse_mark(flk.value, flk.value_len, &floor) < 0)
                rfl = 0; /* a damaged floor fences nothing: as if lost */
        if (rf == 0 || rfl == 0 || fence_parse(fk.value, fk.value_len, &c) < 0) {
                if (h->halted != HALT_FENCE_LOST)
                        log_error("The cluster's %s key is %s (%s): the cluster was made by an "
                                  "earlier snowid, or keys were deleted. Extending nothing until "
                                  "`snowid fence` has run",
                                  rf == 0 || fence_parse(fk.value, fk.value_len, &c) < 0 ? "fence"
                                                                                         : "floor",
                                  rf == 0 || rfl == 0 ? "missing" : "not valid", h->prefix);
                cluster_halt(h, HALT_FENCE_LOST);
                goto retry;
        }
        c.layout_rev = lk.create_revision;
        /* a fence written on another cluster: the store was restored (etcd
         * with a new cluster token, as the procedure says) or replaced, and not fenced
         * since.  Nothing is acted on until a fence names this cluster */
        if (rule5_foreign_fence(c.cluster_id, r->cluster_id)) {
                if (h->halted != HALT_RESTORED)
                        log_error("The fence at %sfence was written on cluster %" PRIu64
                                  ", but %s answers as cluster %" PRIu64 ": it was restored "
                                  "or replaced, and not fenced since. Claiming and extending "
                                  "nothing on it until `snowid fence` has run there",
                                  h->prefix, c.cluster_id, store_title(h->store), r->cluster_id);
                cluster_halt(h, HALT_RESTORED);
                goto retry;
        }
        /* the mark of the number held when the read was sent, whose last
         * write by this daemon the store had acknowledged at revision r->tag */
        struct kv own = {0};
        if (h->halted == HALT_NONE && r->tag && txn_kv(r->json, 7, &own) == 1) {
                const char *n = strrchr(own.key, '/');
                int64_t modrev = own.mod_revision;
                int32_t worker = n ? (int32_t)strtol(n + 1, NULL, 10) : -1;
                kv_clear(&own);
                if (holder_forgotten(h, worker, (int64_t)r->tag, modrev, "reading the cluster"))
                        goto out;
        }
        /* a fence made later is adopted; the one known with a restore seen
         * (however: it lasts until a new fence), an older one, or a cluster's
         * first fence to a daemon that knew the cluster (its prefix wiped, or
         * the store restored to a snapshot without it) is a restore not yet
         * fenced */
        bool restored = r->went_back || h->halted == HALT_RESTORED;
        if (h->layout_ready && rule6_fence_read(&h->cl, &c, restored) == RULE6_RESTORED) {
                bool same = c.fence_len == h->cl.fence_len &&
                            !memcmp(c.fence, h->cl.fence, c.fence_len);
                if (!same && h->halted != HALT_RESTORED)
                        log_error("%s in %s (era %" PRIu64 ", this daemon knows era %" PRIu64 ")",
                                  fence_first(&c) ? "The cluster was made anew"
                                                  : "An older fence is back",
                                  store_title(h->store), c.era, h->cl.era);
                cluster_halt(h, HALT_RESTORED);
                goto retry;
        }
        /* once, before the first claim; a layout other than the one given
         * is refused first (holder_layout_read), with nothing recorded */
        bool given_differs = h->cfg->layout_given && (l.epoch_ms != h->cfg->layout.epoch_ms ||
                                                      l.time_bits != h->cfg->layout.time_bits ||
                                                      l.worker_bits != h->cfg->layout.worker_bits ||
                                                      l.seq_bits != h->cfg->layout.seq_bits);
        if (!h->layout_ready && !given_differs &&
            region_check(h, r, 5, l.worker_bits, lk.create_revision) <= 0)
                goto out;
        holder_layout_read(h, &l, &c);
        goto out;
retry:
        witness_send(h);
        reread_in(h, REREAD_MS);
out:
        kv_clear(&lk);
        kv_clear(&fk);
        kv_clear(&flk);
}

void cluster_read(struct holder *h)
{
        const char *p = h->prefix;
        /* [layout, fence, floor, workers/, hwm/, ranges/, witness/]: while
         * there is no layout, workers/, hwm/ and witness/ are what
         * never_used() needs: whether any number is held, the highest mark,
         * and whether a daemon that knew the cluster said the store forgot
         * it (one key each; marks are 20 digits: their order is their
         * value's).  Once there is a layout they are not needed, and
         * reading the highest mark would cost the store every number's key
         * on every read of every host: the failure branch reads three keys
         * that never exist instead, so
         * that the answer has the same shape.  The highest mark is read
         * only by the host that holds `creating` (check_marks): a fleet
         * starting on a cluster not made yet would otherwise read every
         * mark once per host, which a store that serves one call at a
         * time cannot carry */
        json_t *body =
                json_pack("{s:[o], s:[o, o, o, o, o, o, o], s:[o, o, o, o, o, o, o]}", "compare",
                          txn_cmp(txn_key(p, "layout", -1), "CREATE", "EQUAL", NULL, 0), "success",
                          txn_range(txn_key(p, "layout", -1), NULL, false),
                          txn_range(txn_key(p, "fence", -1), NULL, false),
                          txn_range(txn_key(p, "floor", -1), NULL, false),
                          txn_range(txn_key(p, "workers/", -1), txn_key(p, "workers0", -1), true),
                          txn_range(txn_key(p, "hwm/", -1), txn_key(p, "hwm0", -1), false),
                          txn_range(txn_key(p, "ranges/", -1), txn_key(p, "ranges0", -1), false),
                          txn_range(txn_key(p, "witness/", -1), txn_key(p, "witness0", -1), true),
                          "failure", txn_range(txn_key(p, "layout", -1), NULL, false),
                          txn_range(txn_key(p, "fence", -1), NULL, false),
                          txn_range(txn_key(p, "floor", -1), NULL, false),
                          txn_range(txn_key(p, "workers/", -1), NULL, true),
                          txn_range(txn_key(p, "hwm/", -1), NULL, false),
                          txn_range(txn_key(p, "ranges/", -1), txn_key(p, "ranges0", -1), false),
                          txn_range(txn_key(p, "witness/", -1), NULL, true));
        json_t *ops = json_object_get(body, "success");
        json_t *held = json_object_get(json_array_get(ops, 3), "request_range");
        json_object_set_new(json_object_get(json_array_get(ops, 6), "request_range"), "limit",
                            json_integer(1));
        json_t *top = json_object_get(json_array_get(ops, 4), "request_range");
        json_object_set_new(held, "limit", json_integer(1));
        if (h->check_marks) {
                json_object_set_new(top, "limit", json_integer(1));
                json_object_set_new(top, "sort_order", json_string("DESCEND"));
                json_object_set_new(top, "sort_target", json_string("VALUE"));
        } else
                json_object_del(top, "range_end"); /* the key hwm/ alone: never there */
        /* and the mark of the number held, to check that the store still
         * has this daemon's last write of it */
        uint64_t tag = 0;
        if (h->halted == HALT_NONE && h->cur.state != H_NONE && h->cur.mark_rev) {
                json_array_append_new(ops,
                                      txn_range(txn_key(p, "hwm/", h->cur.worker), NULL, false));
                json_array_append_new(json_object_get(body, "failure"),
                                      txn_range(txn_key(p, "hwm/", h->cur.worker), NULL, false));
                tag = (uint64_t)h->cur.mark_rev;
        }
        if (store_call(h->store, "/v3/kv/txn", body, on_cluster, h, tag) < 0)
                reread_in(h, REREAD_MS);
}

/* ---- halting, and acting only on answers from the cluster we know ---- */

void cluster_halt(struct holder *h, enum halt why)
{
        if (h->halted == why)
                return;
        if (why == HALT_RESTORED) {
                h->stats.restores_seen++;
                log_error("%s was restored from a snapshot or replaced (its revision went back, "
                          "its cluster ID changed, or it forgot what it acknowledged to this "
                          "daemon): extending nothing and claiming nothing on it. "
                          "Run `snowid fence` against the cluster (docs/fences.md); this daemon "
                          "goes on by itself once the fence has changed",
                          store_title(h->store));
        }
        h->halted = why;
        holder_halted(h);
        if (why == HALT_RESTORED)
                marks_protect(h);
        holder_update_status(h);
}

/* Whether to act on an answer: not from a restored cluster, and (for a
 * transaction that failed, with the fence and layout read at fence_op and
 * fence_op + 1) not failed because the fence or layout changed.  Otherwise
 * it halts or reads the cluster again, and the answer is ignored. */
bool cluster_ok(struct holder *h, const struct store_reply *r, int fence_op)
{
        if (h->halted != HALT_NONE)
                return false;
        if (r->went_back) {
                cluster_halt(h, HALT_RESTORED);
                reread_in(h, REREAD_MS);
                return false;
        }
        if (fence_op < 0 || !store_ok(r) || json_is_true(json_object_get(r->json, "succeeded")))
                return true;
        int same = txn_cluster_same(r->json, (size_t)fence_op, &h->cl);
        if (same == 1)
                return true;
        if (same == 0) {
                log_notice("%s's answer names another fence or layout; reading them",
                           store_title(h->store));
                cluster_halt(h, HALT_CHECKING);
                cluster_read(h);
        }
        return false;
}

/* ---- the pause after a fence (rule 6) ---- */

uint64_t holder_settle_ms(const struct holder *h)
{
        return rule6_settle_ms(h->cfg->mark_step_s, h->cfg->renew_ms, h->cfg->store_timeout_ms);
}
