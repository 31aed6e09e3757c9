/* SPDX-License-Identifier: MIT */
/* The handshake's server side: hands the segment to clients (handshake.h). */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "publish.h"

/* Handshakes under way (accepted, waiting for a hello) at once, and of one
 * peer uid: past either, the oldest of that uid, or of the uid with the
 * most, makes room.  Peers that may not take IDs are refused as they are
 * accepted and never count. */
#define SERVE_CONN_MAX 256
#define SERVE_PENDING_PER_UID 64
/* Descriptors sent and not yet taken stay charged to snowidd's user until the
 * peer reads or closes (past RLIMIT_NOFILE of them, the kernel refuses to
 * send any): an answered connection is held until the peer closes it, at
 * most this many per peer uid and in all; past that, -EAGAIN and no
 * descriptors. */
#define SERVE_HELD_PER_UID 128
#define SERVE_HELD_MAX 1024

struct serve_stats {
        uint64_t given;    /* segments handed out */
        uint64_t refused;  /* peers that may not take IDs (refused at accept) */
        uint64_t bad;      /* malformed hellos */
        uint64_t timeouts; /* no hello within SHM_HS_TIMEOUT_MS */
        uint64_t evicted;  /* dropped to make room for a newer connection */
        uint64_t busy;     /* -EAGAIN: the peer's user holds too many unread answers */
};

struct serve;

/* Serves on listen_fd (taken over) from the event loop. */
int serve_start(sd_event *event, const struct settings *cfg, struct shm_pub *pub, int listen_fd,
                struct serve **ret);
/* At exit, with the loop ended: answers the connections already accepted
 * as their hellos come, each until its own deadline (SHM_HS_TIMEOUT_MS from
 * its accept).  Closed unanswered, their clients would be reset: a restart
 * must not fail a client starting then.  Accepts NULL. */
void serve_drain(struct serve *s);
struct serve *serve_free(struct serve *s);
const struct serve_stats *serve_stats(const struct serve *s);
/* Handshakes waiting for a hello; answered ones waiting for the peer to close. */
unsigned serve_connections(const struct serve *s);
unsigned serve_held(const struct serve *s);

/* Under systemd: puts the segment and the listening socket in its file
 * descriptor store, so that a restarted snowidd gets them back. */
void serve_store_fds(const struct shm_pub *pub, int listen_fd);
/* The segment changed (a fresh one replaced a damaged one): store it anew. */
void serve_store_segment(const struct shm_pub *pub);
