/* SPDX-License-Identifier: MIT */
/*
 * The holder's inside (holder.h is its outside), private to holder/: the
 * state, and the calls of holder.c, which the parts (claim.c,
 * cluster.c, region.c, refused.c) use.  Each part's own calls are in its
 * header (claim.h, cluster.h, region.h, refused.h), which includes this
 * one and no other part's.
 *
 * A holding is one claim attempt under a lease.  `cur` is the
 * holding published in the segment; `acq` acquires the next (at start,
 * after a lost lease, or for a fresh number after a clock step back), as a
 * pure core (daemon/core/acquire.h) that claim.c drives.  Every store
 * request carries its holding's id, and an answer whose id is neither
 * cur's nor the acquisition's is ignored.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "acquire.h"
#include "clock.h"
#include "create.h"
#include "config.h"
#include "hold.h"
#include "known.h"
#include "holding.h"
#include "holder.h"
#include "publish.h"
#include "raise.h"
#include "rules.h"
#include "store-api.h"
#include "values.h"
#include "verbs.h"

#define ACQ_QUEUE_MAX 8
#define HOLD_QUEUE_MAX 4
/* a step of the marks sends at most one raise per slot, each of which may
 * come back unsent, and a halt's protection may follow */
#define RAISE_QUEUE_MAX (2 * RAISES_MAX)
/* a step sends at most CREATE_IN_FLIGHT batches, each may come back unsent */
#define CREATE_QUEUE_MAX (CREATE_IN_FLIGHT + 4)
/* inputs made while the cluster's core steps: a verb unsent, a check or a
 * forgotten write from another part, a read */
#define KNOWN_QUEUE_MAX 16

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
        /* making the cluster where there is none (cluster.c drives it) */
        struct create create;
        bool create_driving;
        unsigned create_queued;
        struct create_queued {
                struct create_in in;
                char value[128]; /* in.value's copy: the store's answer does not outlive it */
        } create_queue[CREATE_QUEUE_MAX];
        /* the layout, the fence, halts and the witness (cluster.c drives it) */
        struct known known;
        bool known_driving;
        unsigned known_queued;
        struct known_in known_queue[KNOWN_QUEUE_MAX];
        uint32_t range_from, range_to; /* the numbers claimed in, once the layout is read */
        char prefix[96];               /* "/snowid/<cluster>/" */
        char host[128];
        char token[17];
        /* the number published, renewed (renew.c drives it); hold.cur is the
         * holding, read by the other parts, changed only by the core */
        struct hold hold;
        bool hold_driving;
        unsigned hold_queued;
        struct hold_in hold_queue[HOLD_QUEUE_MAX];
        /* the acquisition of the next number (claim.c drives it) */
        struct acquire acq;
        bool acq_driving;
        unsigned acq_queued;
        struct acq_in acq_queue[ACQ_QUEUE_MAX];
        struct clock_state clock;      /* offset_ns: ID time minus CLOCK_MONOTONIC, as published */
        uint64_t fresh_not_before_ms;  /* monotonic ms: throttles fresh-number attempts */
        uint64_t claims_not_before_ms; /* monotonic ms: after a new fence */
        sd_event_source *renew_timer, *clock_timer, *retry_timer, *setclock_io, *stop_timer;
        sd_event_source *stop_post; /* stopping: after every event, whether anything is left */
        bool ready_sent, stopping, store_reachable;
        uint64_t cluster_id; /* header.cluster_id of the last answer that had one */
        /* the marks published, and their raises (marks.c drives them) */
        struct raises raises;
        bool raise_driving;
        unsigned raise_queued;
        struct raise_in raise_queue[RAISE_QUEUE_MAX];
        sd_event_source *reread_timer, *raise_timer;
        sd_event_source *raise_keep_timer; /* keeps alive the leases raises revoke */
        int exit_code;
        bool done_said; /* the callbacks' done() ran */
        struct holder_stats stats;
        struct holder_callbacks cb;
};

/* ---- holder.c ---- */

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
/* Every answer: reachability, a full store, a restore seen (cluster.c). */
void holder_note_answer(struct holder *h, const struct store_answer *r);
/* The store full or not: said once, on every report. */
void holder_store_full(struct holder *h, bool full, const char *member);
void holder_check_alarms(struct holder *h);
/* How long after a fence no claim starts, with this holder's settings
 * (rule6_settle_ms()). */
uint64_t holder_settle_ms(const struct holder *h);
/* The highest deadline this daemon published in the last hour (marks.c). */
uint64_t marks_highest(const struct holder *h);
/* The number acquired becomes hold.cur: published in the segment. */
void holder_publish(struct holder *h);
void holder_update_status(struct holder *h);
void holder_give_up_lease(struct holder *h, int64_t lease);
/* The wall clock and ID time read together, for the clock policy. */
struct clock_reading holder_clock_read(const struct holder *h);
/* The segment's state while halted. */
enum shm_state holder_halted_state(const struct holder *h);
