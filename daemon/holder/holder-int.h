/* SPDX-License-Identifier: MIT */
/*
 * The holder's inside (holder.h is its outside), private to holder/: the
 * state, and the calls of holder.c, the core, which the parts (claim.c,
 * cluster.c, region.c, refused.c) use.  Each part's own calls are in its
 * header (claim.h, cluster.h, region.h, refused.h), which includes this
 * one and no other part's.
 *
 * A holding is one lease with at most one claim attempt.  `cur` is the
 * holding published in the segment; `next` is an acquisition under way
 * (at start, after a lost lease, or for a fresh number after a clock step
 * back).  Every store request carries its holding's id, and an answer whose
 * id is neither cur's nor next's is ignored.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "clock.h"
#include "config.h"
#include "holder.h"
#include "publish.h"
#include "rules.h"
#include "store-api.h"
#include "values.h"
#include "verbs.h"

enum hstate {
        H_NONE,   /* no holding */
        H_GRANT,  /* waiting for a lease */
        H_SCAN,   /* reading workers/ and hwm/ to choose a number */
        H_CLAIM,  /* the claim transaction is in flight */
        H_SETTLE, /* the claim's answer never came: reading back */
        H_HELD,   /* claimed; renewing */
        H_LOST,   /* the lease or the number is gone */
};

struct holding {
        uint64_t id;
        enum hstate state;
        int64_t lease;
        int32_t worker;
        char value[320];    /* workers/<n>: host, instance, pid, token */
        uint64_t start_ms;  /* the claim's first ID time */
        uint64_t mark;      /* the claim's mark, then the highest acknowledged */
        uint64_t pending;   /* the mark of the extension in flight */
        int64_t hwm_modrev; /* hwm/<n>'s mod revision when scanned; 0 if absent */
        /* the revision at which the store acknowledged this holding's last write
         * of hwm/<n> (0: none known); a restore that forgot the write shows
         * hwm/<n> at a lower mod revision, whatever the revisions since */
        int64_t mark_rev;
        /* CLOCK_BOOTTIME ms before which the lease cannot have expired
         * (the last TTL the store gave, counted from when it was asked, less
         * a margin): the store not knowing it before then is a restore */
        uint64_t lease_until_ms;
        uint64_t lease_asked_ms; /* CLOCK_BOOTTIME ms the grant or keepalive in flight was sent */
        /* what the claim in flight compared: the holding's own last write of
         * its mark (worker, revision), or -1 */
        int32_t own_worker;
        int64_t own_rev;
        bool lease_checking; /* its lease unknown early: reading its mark to tell why */
        /* an extension found workers/<n> another's while the lease has time:
         * the lease is asked for at once, and its answer tells a number
         * written over by hand (the lease lives: lost) from a restore (the
         * lease unknown: lease_check) */
        bool taken_seen;
        bool fresh; /* a clock reset: ID time back to the wall clock */
        bool keepalive_busy, extend_busy;
        uint64_t keepalive_next_ms; /* CLOCK_MONOTONIC ms of the next keepalive */
        bool raising;               /* its mark read back low: raised before anything else */
        /* the scan: a sample of SCAN_SAMPLE numbers (sampled > 0), else every
         * number of the range */
        unsigned sampled;
        uint32_t sample[8];
};
#define SCAN_SAMPLE 8

/* Why the daemon extends nothing on this cluster (docs/fences.md). */
enum halt {
        HALT_NONE,
        HALT_CHECKING,    /* an answer named another fence or layout: reading them */
        HALT_RESTORED,    /* revisions went back or the cluster ID changed */
        HALT_LAYOUT_LOST, /* the layout key is gone */
        HALT_FENCE_LOST,  /* the fence or floor key is gone (or never made) */
};

/* A mark being raised to at least `mark` (rule 4): read, then compare its
 * mod revision and put. */
struct mark_raise {
        uint64_t id;
        int32_t worker;
        uint64_t mark;
        uint64_t sent;        /* the mark the compare-and-put in flight writes */
        int64_t lease;        /* revoked once the mark is confirmed; 0: none */
        int64_t lease2;       /* a second holding of the number retiring meanwhile */
        uint64_t for_holding; /* the holding whose renewal waits for it; 0: none */
        int64_t acked_rev;    /* this daemon's last acknowledged write of the mark; 0: unknown */
        int64_t acked_sent;   /* acked_rev as it was when the request in flight was sent */
        unsigned tries;
        bool active, waiting;
        bool lease_gone; /* a keepalive found the lease gone (said once) */
};

/* A number this daemon published, with the last deadline it published. */
struct published {
        int32_t worker;
        uint64_t mark;
        uint64_t mono_ms; /* when it was retired */
};

#define PUBLISHED_MAX 32
#define RAISES_MAX (PUBLISHED_MAX + 2)

struct holder {
        const struct settings *cfg;
        sd_event *event;
        struct store *store;
        struct shm_pub *pub;
        unsigned pub_replaced; /* pub->replaced when last seen */
        /* the store refuses writes: full (etcd's NOSPACE alarm, PostgreSQL's disk) */
        bool store_full;
        enum store_err store_err; /* the store refuses us: a setting is wrong (refused.c) */
        char store_err_message[256];
        bool alarm_busy; /* an alarm list request is in flight */
        bool said_full;  /* every number of the range was found taken (said once) */
        /* the number this host held when a new fence came: given up once its
         * mark is confirmed, and claimed again first (its hosts' numbers
         * stay where they were, and a full space needs no search) */
        int32_t prefer;
        bool create_waiting;     /* another host creates the cluster: ask whether it ended */
        bool check_marks;        /* holding `creating`: the cluster read reads the highest mark */
        bool witnessed;          /* halted: the store acknowledged this daemon's witness */
        bool witness_sending;    /* a witness's put (or its deletion) in flight */
        uint32_t witness_gen;    /* the halt a witness's answer is for */
        uint64_t create_sent_ms; /* monotonic: when the last question about `creating` went */
        unsigned init_pending;   /* creating it: batches of marks not answered yet */
        uint64_t init_next;      /* the first number of the next batch to send */
        int init_failed;         /* one failed: 1 answered (made meanwhile), 2 no answer */
        snowid_layout layout;
        bool layout_ready;
        uint32_t range_from, range_to; /* the numbers claimed in, once the layout is read */
        char prefix[96];               /* "/snowid/<cluster>/" */
        char host[128];
        char token[17];
        uint64_t ids;
        struct holding cur, next;
        struct clock_state clock; /* offset_ns: ID time minus CLOCK_MONOTONIC, as published */
        unsigned backoff_ms;
        uint64_t fresh_not_before_ms;  /* monotonic ms: throttles fresh-number attempts */
        uint64_t claims_not_before_ms; /* monotonic ms: after a new fence */
        sd_event_source *renew_timer, *clock_timer, *retry_timer, *setclock_io, *stop_timer;
        sd_event_source *stop_post; /* stopping: after every event, whether anything is left */
        bool ready_sent, stopping, store_reachable;
        struct cluster_ident cl;
        uint64_t cluster_id; /* header.cluster_id of the last answer that had one */
        enum halt halted;
        struct published published[PUBLISHED_MAX];
        unsigned n_published;
        struct mark_raise raises[RAISES_MAX];
        sd_event_source *reread_timer, *raise_timer, *settle_timer;
        sd_event_source *raise_keep_timer; /* keeps alive the leases raises revoke */
        int exit_code;
        bool done_said; /* the callbacks' done() ran */
        struct holder_stats stats;
        struct holder_callbacks cb;
};

/* ---- holder.c, the core ---- */

/* Stopping, and nothing left to wait for: done. */
void holder_stop_check(struct holder *h);
/* Done with code: the callbacks' done(), or the loop exits. */
void holder_fatal(struct holder *h, int code);
const char *holder_halt_name(enum halt why);
uint64_t holder_mono_ms(void);
/* CLOCK_BOOTTIME ms: a lease's time runs on in the store while this host is
 * suspended or paused, which CLOCK_MONOTONIC does not count */
uint64_t holder_boot_ms(void);
/* Arms *src (made on first use) to call cb once, ms from now. */
void holder_timer_in(struct holder *h, sd_event_source **src, unsigned ms,
                     sd_event_time_handler_t cb);
/* ID time now, in ms of the layout's epoch (wall: the wall clock's) */
uint64_t holder_id_ms(const struct holder *h, bool wall);
/* The holding a request's tag names, or NULL. */
struct holding *holder_by_tag(struct holder *h, uint64_t tag);
/* Every answer: reachability, a full store, a restore seen. */
void holder_note_answer(struct holder *h, const struct store_answer *r);
/* The store full or not: said once, on every report. */
void holder_store_full(struct holder *h, bool full, const char *member);
void holder_check_alarms(struct holder *h);
/* The acquisition an answer is for, if it is still at that step; NULL for an
 * answer that arrives for an earlier holding or step (ignored). */
struct holding *holder_acquiring(struct holder *h, const struct store_answer *r, enum hstate want);
/* Whether a number read holds this holding (its lease and value). */
bool holder_ours(const struct holding *g, const struct store_number *n);
/* Whether the answer about a number read could not be read, or its mark
 * is not a mark. */
bool holder_read_malformed(const struct store_number *n);
/* Whether hwm/<worker>, read at mod revision modrev (0: absent), shows that
 * the store forgot this daemon's write of it acknowledged at acked_rev (0:
 * none known): then halted as restored. */
bool holder_forgotten(struct holder *h, int32_t worker, int64_t acked_rev, int64_t modrev,
                      const char *where);
/* How long after a fence no claim starts, with this holder's settings
 * (rule6_settle_ms()). */
uint64_t holder_settle_ms(const struct holder *h);
/* The highest deadline this daemon published in the last hour (marks.c). */
uint64_t marks_highest(const struct holder *h);
/* A halt ended: the witness this daemon left for it is deleted (cluster.c). */
void cluster_witness_done(struct holder *h);
/* The lease's TTL as the store gave it, asked at g->lease_asked_ms: lease_until_ms. */
void holder_lease_lives(struct holding *g, int64_t ttl_s);
/* next becomes cur: published in the segment. */
void holder_publish(struct holder *h);
void holder_update_status(struct holder *h);
void holder_layout_read(struct holder *h, const snowid_layout *l, const struct cluster_ident *c);
void holder_halted(struct holder *h);
void holder_give_up_lease(struct holder *h, int64_t lease);
/* The wall clock and ID time read together, for the clock policy. */
struct clock_reading holder_clock_read(const struct holder *h);
/* The segment's state while halted. */
enum shm_state holder_halted_state(const struct holder *h);
