/* SPDX-License-Identifier: MIT */
/*
 * Making the cluster, as a pure core (create.h).
 */
#include <stdio.h>
#include <string.h>

#include "acquire.h"
#include "create.h"
#include "known.h"
#include "rules.h"

#define INIT_BATCH 100      /* marks made per transaction (etcd allows 128 ops) */
#define INIT_MAX (1u << 14) /* more numbers than this: none made; absent means unmarked */
/* the others read again after CREATE_WAIT_MS and a jittered wait that
 * doubles up to CREATE_WAIT_MAX_MS (0.3-0.35 s first, 1.25-2.25 s at
 * most), so that a fleet waiting does not keep the store from the
 * creation, and take over a creation not finished within CREATE_STALE_MS
 * (its host gone) */
#define CREATE_WAIT_MS 250
#define CREATE_WAIT_MAX_MS 2000
#define CREATE_STALE_MS 15000
/* longer than any call waits for its answer (PATIENCE_X times the longest
 * store-timeout, 60 s); and the longest wait of four times an answer */
#define CREATE_ANSWER_MAX_MS 300000
#define CREATE_LEAST_MAX_MS 60000

static struct create_action *act(struct create_ready *out, enum create_do what)
{
        /* at most CREATE_ACTIONS_MAX per step: a full list is a bug of this
         * file, kept from overflowing */
        unsigned i = out->n < CREATE_ACTIONS_MAX ? out->n++ : CREATE_ACTIONS_MAX - 1;
        out->a[i] = (struct create_action){.what = what};
        return &out->a[i];
}

static void reread(struct create_ready *out, uint64_t ms)
{
        act(out, CREATE_DO_REREAD)->a = ms;
}

/* A fleet waiting asks at most a quarter of the time: each host waits at
 * least 4 times as long as the answer to its last call took (at most
 * CREATE_LEAST_MAX_MS), so that a store slowed by the fleet's own
 * questions gets fewer of them. */
static void reread_after(const struct create *c, const struct create_view *v,
                         struct create_ready *out, uint64_t wait, bool sent)
{
        uint64_t least = sent ? 4 * (v->mono_ms - c->sent_ms) : 0;
        least = least < CREATE_LEAST_MAX_MS ? least : CREATE_LEAST_MAX_MS;
        reread(out, wait > least ? wait : least);
}

static uint64_t workers(const struct create *c)
{
        return UINT64_C(1) << c->set.worker_bits;
}

/* `creating` taken (over a stale one at stale_rev) */
static void lock(struct create *c, const struct create_view *v, struct create_ready *out,
                 int64_t stale_rev)
{
        c->sent_ms = v->mono_ms;
        c->lock_rev = stale_rev;
        act(out, CREATE_DO_LOCK)->a = (uint64_t)stale_rev;
}

/* Layout, fence and floor together, only if the cluster is still unused.
 * A store that holds no cluster may have forgotten one (restored from a
 * snapshot taken before it was made, or its prefix wiped) whose hosts'
 * clients still take IDs up to their deadlines: the new cluster claims
 * above the clock bound a fence would, and its floor is there too. */
static void make(struct create *c, const struct create_view *v, struct create_ready *out)
{
        c->state = CREATE_MAKING;
        struct create_action *t = act(out, CREATE_DO_MAKE);
        t->a = rule7_made_above(c->set.epoch_ms, v->wall_ms, c->set.window_s, c->set.mark_step_s);
        t->b = workers(c) <= INIT_MAX;
}

/* Sends batches until CREATE_IN_FLIGHT are in flight; once every batch has
 * succeeded, makes the cluster (its transaction checks every mark anyway). */
static void mark_more(struct create *c, const struct create_view *v, struct create_ready *out)
{
        while (!c->failed && c->pending < CREATE_IN_FLIGHT && c->next < workers(c)) {
                uint64_t to = c->next + INIT_BATCH;
                struct create_action *t = act(out, CREATE_DO_MARK);
                t->a = c->next;
                t->b = to < workers(c) ? to : workers(c);
                c->pending++;
                c->next += INIT_BATCH;
        }
        if (c->pending > 0)
                return;
        if (c->failed) {
                c->state = CREATE_IDLE;
                reread(out, c->failed == 1 ? 0 : KNOWN_REREAD_MS);
        } else
                make(c, v, out);
}

/* What `creating`, as a read of the cluster or a take of it answered,
 * says this host does (sent: whether it asked the store for it, took:
 * whether the take was applied): make the cluster if the key is its own,
 * take it if it is absent or left by a host gone, and otherwise wait for
 * the other host's creation and read the cluster again.  Creating it is
 * idempotent (every step compares), so the key only spares the store a
 * fleet's worth of the same work when a fleet starts on a cluster that
 * does not exist yet. */
static void decide(struct create *c, const struct create_view *v, const struct create_in *in,
                   bool sent, bool took, bool may_take_over, struct create_ready *out)
{
        size_t tl = strlen(c->set.token);
        const char *value = in->value ? in->value : "";
        /* taken now, or taken by this host before (a round of its creation
         * failed): it creates */
        bool mine = in->layout == 0 && in->creating == 1 && strlen(value) > tl &&
                    !strncmp(value, c->set.token, tl) && value[tl] == ' ';
        unsigned long long since = 0;
        bool dated = in->creating == 1 && sscanf(value, "%*16s %llu", &since) == 1;
        if (in->creating == 1 && in->mod_rev != c->seen_rev) {
                c->seen_rev = in->mod_rev;
                c->seen_ms = v->mono_ms;
        }
        if (took || mine) {
                /* the creator, and only it, reads the marks too: whether the
                 * cluster was used (a mark above 0) before it creates */
                c->marks = true;
                reread(out, 0);
        } else if (in->layout > 0) /* made meanwhile: read */
                reread(out, 0);
        else if (!in->layout && !in->creating) /* absent: take it */
                lock(c, v, out, 0);
        else if (!in->layout && in->creating == 1 && may_take_over && in->mod_rev > 0 &&
                 (dated ? (int64_t)v->wall_ms - (int64_t)since > CREATE_STALE_MS
                        : v->mono_ms - c->seen_ms > CREATE_STALE_MS))
                /* its host gone: taken over, comparing its revision (one
                 * with none, written by hand, cannot be compared: waited
                 * on; a takeover just refused waits before another) */
                lock(c, v, out, in->mod_rev);
        else {
                /* another host makes it, or what is there cannot be read:
                 * read again, later */
                reread_after(c, v, out,
                             acq_backoff(&c->backoff_ms, CREATE_WAIT_MAX_MS, core_draw(&c->rng)) +
                                     CREATE_WAIT_MS,
                             sent);
        }
}

static void on_locked(struct create *c, const struct create_view *v, const struct create_in *in,
                      struct create_ready *out)
{
        if (in->unsent) {
                reread(out, KNOWN_REREAD_MS);
                return;
        }
        /* an answer that comes while this host makes the cluster (sent
         * before a round of it) leaves the making as it is */
        if (c->state == CREATE_MARKING || c->state == CREATE_MAKING)
                return;
        c->state = CREATE_IDLE;
        if (!in->ok) {
                unsigned max = acq_failure_max_ms(c->set.lease_ttl_s, in->answered, in->status);
                reread_after(c, v, out, acq_backoff(&c->backoff_ms, max, core_draw(&c->rng)), true);
                return;
        }
        decide(c, v, in, true, in->succeeded, c->lock_rev == 0, out);
}

void create_step(struct create *c, const struct create_view *v, const struct create_in *in,
                 struct create_ready *out)
{
        out->n = 0;
        switch (in->kind) {
        case CREATE_IN_MAKE: {
                /* a read this core asked for (one older than any call's
                 * longest wait was answered elsewhere: the cluster was
                 * there) */
                bool sent = c->reading && v->mono_ms - c->sent_ms <= CREATE_ANSWER_MAX_MS;
                c->reading = false;
                if (c->state == CREATE_MARKING || c->state == CREATE_MAKING)
                        return; /* a read answered meanwhile: the making goes on */
                if (!c->marks) {
                        /* the read says whether another host makes it */
                        decide(c, v,
                               &(struct create_in){.layout = 0,
                                                   .creating = in->creating,
                                                   .value = in->value,
                                                   .mod_rev = in->mod_rev},
                               sent, false, true, out);
                } else if (workers(c) <= INIT_MAX) {
                        /* before the cluster exists: every number's mark, 0,
                         * where it is absent, so that later an absent mark
                         * means a deleted one (rule 3); only while there is
                         * no layout and no floor, so never over a mark
                         * deleted after use.  Several batches at once: the
                         * creation costs the fleet waiting one round trip,
                         * not one per batch */
                        c->state = CREATE_MARKING;
                        c->pending = 0;
                        c->next = 0;
                        c->failed = 0;
                        mark_more(c, v, out);
                } else /* too many numbers: unmarked ones start above the floor */
                        make(c, v, out);
                return;
        }
        case CREATE_IN_REREAD:
                /* a host waiting for another's creation reads the cluster
                 * itself (its read says whether the creation is still under
                 * way): once it is made, that read is the one the host goes
                 * on with.  Only the creator's reads read every mark */
                c->reading = true;
                c->sent_ms = v->mono_ms;
                act(out, CREATE_DO_READ);
                return;
        case CREATE_IN_LOCKED:
                on_locked(c, v, in, out);
                return;
        case CREATE_IN_MARKED:
                if (c->state != CREATE_MARKING)
                        return;
                if (in->unsent || !in->ok || !in->succeeded)
                        c->failed = in->ok ? 1 : 2; /* made meanwhile, or no answer */
                if (c->pending)
                        c->pending--;
                mark_more(c, v, out);
                return;
        case CREATE_IN_MADE:
                if (c->state != CREATE_MAKING)
                        return;
                c->state = CREATE_IDLE;
                if (in->ok && in->succeeded)
                        act(out, CREATE_DO_MADE);
                reread(out, in->ok ? 0 : KNOWN_REREAD_MS);
                return;
        }
}

void create_init(struct create *c, const struct create_settings *set)
{
        *c = (struct create){.set = *set, .rng = set->seed ? set->seed : 1, .seen_rev = -1};
}

bool create_marks(const struct create *c)
{
        return c->marks;
}
