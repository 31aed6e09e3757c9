/* SPDX-License-Identifier: MIT */
/*
 * The handshake's server side.  Every step is non-blocking and bounded.  A
 * peer that may not take IDs is refused as it is accepted: its credentials
 * read from the new socket, an -EACCES welcome sent and the socket closed,
 * with nothing allocated and no timer, so that a flood of them costs the
 * others a few system calls each.  Any other connection is read when it is
 * readable, answered with one sendmsg() of 64 bytes into its empty buffer; a
 * peer that sends nothing is closed after SHM_HS_TIMEOUT_MS, and past
 * SERVE_PENDING_PER_UID of one uid, or SERVE_CONN_MAX in all, the oldest of
 * the uid with the most goes.  An answer with descriptors is held open until
 * the peer closes (serve.h: the kernel charges unread descriptors to
 * snowidd), within per-uid and total caps.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "handshake.h"
#include "log.h"
#include "monotonic.h"
#include "serve.h"

/* accept4() calls per turn of the loop: refusals cost a few system calls
 * each, and the loop's other work (renewals) must go on under a flood */
#define ACCEPT_PER_TURN 256
#define PEER_GROUPS_MAX 256

struct conn {
        struct serve *srv;
        struct conn *prev, *next; /* oldest first, in pending or held */
        bool held;                /* answered with descriptors: waits for the peer to close */
        bool draining;            /* held, its peer gone quiet, the welcome still unread */
        uid_t uid;
        int fd;
        size_t got;
        unsigned char buf[sizeof(struct shm_hello)];
        sd_event_source *io, *timer;
};

struct serve {
        sd_event *event;
        const struct settings *cfg;
        struct shm_pub *pub;
        int listen_fd;
        sd_event_source *listen_src;
        struct list {
                struct conn *head, *tail;
                unsigned n;
        } pending, held;
        /* handshakes waiting for a hello, per uid: one entry per uid with
         * any (so at most SERVE_CONN_MAX) */
        struct uid_count {
                uid_t uid;
                unsigned n;
        } pending_uids[SERVE_CONN_MAX];
        unsigned n_pending_uids;
        sd_event_source *accept_retry; /* accept4() ran out of descriptors */
        uint64_t refused_logged_ms, refused_unlogged;
        unsigned held_max; /* SERVE_HELD_MAX, or less where RLIMIT_NOFILE is low */
        bool accept_paused;
        struct serve_stats stats;
};

static void list_add(struct list *l, struct conn *c)
{
        c->next = NULL;
        c->prev = l->tail;
        if (l->tail)
                l->tail->next = c;
        else
                l->head = c;
        l->tail = c;
        l->n++;
}

static void list_del(struct list *l, struct conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                l->head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                l->tail = c->prev;
        c->prev = c->next = NULL;
        l->n--;
}

static struct uid_count *pending_of(struct serve *s, uid_t uid)
{
        for (unsigned i = 0; i < s->n_pending_uids; i++)
                if (s->pending_uids[i].uid == uid)
                        return &s->pending_uids[i];
        return NULL;
}

static void pending_add(struct serve *s, struct conn *c)
{
        struct uid_count *u = pending_of(s, c->uid);
        if (!u) {
                /* never full: an entry per uid with a pending connection */
                u = &s->pending_uids[s->n_pending_uids++];
                *u = (struct uid_count){.uid = c->uid};
        }
        u->n++;
        list_add(&s->pending, c);
}

static void pending_del(struct serve *s, struct conn *c)
{
        struct uid_count *u = pending_of(s, c->uid);
        if (u && --u->n == 0)
                *u = s->pending_uids[--s->n_pending_uids];
        list_del(&s->pending, c);
}

static void conn_free(struct conn *c)
{
        struct serve *s = c->srv;
        if (c->held)
                list_del(&s->held, c);
        else
                pending_del(s, c);
        if (s->accept_paused && !s->accept_retry) {
                /* a descriptor is free again (the pause had no timer) */
                s->accept_paused = false;
                sd_event_source_set_enabled(s->listen_src, SD_EVENT_ON);
        }
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        close(c->fd);
        free(c);
}

/* Is the welcome still unread in the peer's socket (its descriptors in
 * flight, charged to snowidd's user)? */
static bool in_flight(const struct conn *c)
{
        int outq = 0;
        return ioctl(c->fd, SIOCOUTQ, &outq) < 0 || outq > 0;
}

/* Lets go of held answers that were read (or whose peer closed): of uid, or
 * of everyone when all; returns how many of uid's remain. */
static unsigned sweep(struct serve *s, uid_t uid, bool all)
{
        unsigned n = 0;
        for (struct conn *c = s->held.head, *next; c; c = next) {
                next = c->next;
                if (!all && c->uid != uid)
                        continue;
                if (!in_flight(c))
                        conn_free(c);
                else if (c->uid == uid)
                        n++;
        }
        return n;
}

/* May this peer take IDs?  Its uid, primary gid and supplementary groups,
 * as the kernel recorded them at connect(). */
static int peer_allowed(struct serve *s, int fd, uid_t *ret_uid)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        gid_t gids[PEER_GROUPS_MAX + 1];

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return 0;
        *ret_uid = cred.uid;
        gids[0] = cred.gid;
        len = (socklen_t)(PEER_GROUPS_MAX * sizeof(gid_t));
        unsigned n = 1;
        /* more groups than fit: judged by the primary group and the uid */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids + 1, &len) == 0)
                n += len / sizeof(gid_t);
        int ok = settings_allowed(s->cfg, cred.uid, gids, n);
        if (!ok) {
                /* anyone may connect: one line a second at most */
                uint64_t now = now_msec();
                if (now >= s->refused_logged_ms + 1000) {
                        log_info("Refused the segment to uid %u gid %u (pid %d): not in "
                                 "allow-users or allow-groups (%" PRIu64 " more refused since "
                                 "the last such line)",
                                 (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid,
                                 s->refused_unlogged);
                        s->refused_logged_ms = now;
                        s->refused_unlogged = 0;
                } else
                        s->refused_unlogged++;
        }
        return ok;
}

static void answer(struct conn *c)
{
        struct serve *s = c->srv;
        struct shm_welcome w = {.version = SHM_VERSION};
        uint32_t version;

        memcpy(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic));
        if (shm_hello_check(c->buf, c->got, &version) < 0) {
                w.status = -EPROTO;
                s->stats.bad++;
        } else if (sweep(s, c->uid, s->held.n >= s->held_max) >= SERVE_HELD_PER_UID ||
                   s->held.n >= s->held_max) {
                w.status = -EAGAIN;
                s->stats.busy++;
        } else {
                w.ctl_size = sizeof(struct shm_ctl);
                w.ctr_size = sizeof(struct shm_ctr);
                w.nonce = shm_pub_nonce(s->pub);
                w.uid = (uint32_t)geteuid();
        }
        w.mono_ns = shm_monotonic_ns();
        int r = shm_welcome_send(c->fd, &w, s->pub->ctl_ro_fd, s->pub->ctr_fd);
        if (r < 0)
                log_warning_errno(r, "Cannot answer a handshake: %m");
        if (r < 0 || w.status != 0) {
                conn_free(c);
                return;
        }
        s->stats.given++;
        /* held until the peer closes: then its descriptors are no longer
         * in flight (libsnowid closes right after reading) */
        pending_del(s, c);
        c->held = true;
        list_add(&s->held, c);
        sd_event_source_disable_unref(c->timer);
        c->timer = NULL;
}

static int on_conn_io(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
        struct conn *c = userdata;
        (void)src;
        (void)revents;
        if (c->draining) {
                /* the peer's socket took or dropped the welcome: its
                 * descriptors left flight (sock_wfree woke EPOLLOUT) */
                if (!in_flight(c))
                        conn_free(c);
                return 0;
        }
        if (c->held) {
                char sink[64];
                ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
                /* anything more from an answered peer is ignored */
                if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
                        return 0;
                /* its end closed, or only shut down: if the welcome is still
                 * unread in its socket, the descriptors are still in flight
                 * and the connection stays counted, woken (edge-triggered)
                 * when the peer's socket frees the welcome */
                if (in_flight(c) && sd_event_source_set_io_events(c->io, EPOLLOUT | EPOLLET) >= 0) {
                        c->draining = true;
                        if (!in_flight(c)) /* freed in between */
                                conn_free(c);
                } else
                        conn_free(c);
                return 0;
        }
        ssize_t n = recv(fd, c->buf + c->got, sizeof(c->buf) - c->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                conn_free(c); /* gone, or an error: nothing to answer */
                return 0;
        }
        c->got += (size_t)n;
        if (c->got == sizeof(c->buf))
                answer(c);
        return 0;
}

static int on_conn_timeout(sd_event_source *src, uint64_t usec, void *userdata)
{
        struct conn *c = userdata;
        (void)src;
        (void)usec;
        c->srv->stats.timeouts++;
        conn_free(c);
        return 0;
}

/* Makes room for a handshake of uid: past SERVE_PENDING_PER_UID of its own,
 * its oldest goes; past SERVE_CONN_MAX in all, the oldest of the uid with
 * the most.  Answered if its hello has come (a burst accepted in one turn,
 * not read yet), else closed: a client that means it has sent it by now. */
static void make_room(struct serve *s, uid_t uid)
{
        const struct uid_count *u = pending_of(s, uid);
        if ((!u || u->n < SERVE_PENDING_PER_UID) && s->pending.n < SERVE_CONN_MAX)
                return;
        if (!u || u->n < SERVE_PENDING_PER_UID)
                for (unsigned i = 0; i < s->n_pending_uids; i++)
                        if (!u || s->pending_uids[i].n > u->n)
                                u = &s->pending_uids[i];
        uid_t victim = u->uid;
        struct conn *c = s->pending.head;
        while (c->uid != victim)
                c = c->next;
        ssize_t n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - c->got, MSG_DONTWAIT);
        if (n > 0)
                c->got += (size_t)n;
        if (c->got == sizeof(c->buf)) {
                answer(c); /* out of pending: held, or closed */
                return;
        }
        s->stats.evicted++;
        conn_free(c);
}

/* Refuses a peer that may not take IDs at once: the welcome, -EACCES, into
 * the new socket's empty buffer (read by the client after its hello, even
 * once closed), and the socket closed; 1 if it was refused. */
static int refuse_early(struct serve *s, int fd, uid_t *ret_uid)
{
        if (peer_allowed(s, fd, ret_uid))
                return 0;
        struct shm_welcome w = {.version = SHM_VERSION, .status = -EACCES};
        memcpy(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic));
        w.mono_ns = shm_monotonic_ns();
        (void)shm_welcome_send(fd, &w, -1, -1); /* a peer gone already: nothing to say */
        close(fd);
        s->stats.refused++;
        return 1;
}

static void conn_add(struct serve *s, int fd)
{
        uid_t uid = 0;
        if (refuse_early(s, fd, &uid))
                return;
        make_room(s, uid);
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return;
        }
        c->srv = s;
        c->fd = fd;
        c->uid = uid;
        pending_add(s, c);
        uint64_t now;
        sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_io(s->event, &c->io, fd, EPOLLIN, on_conn_io, c) < 0 ||
            sd_event_add_time(s->event, &c->timer, CLOCK_MONOTONIC,
                              now + (uint64_t)SHM_HS_TIMEOUT_MS * 1000, 0, on_conn_timeout, c) < 0)
                conn_free(c);
}

static int on_accept_retry(sd_event_source *src, uint64_t usec, void *userdata)
{
        struct serve *s = userdata;
        (void)src;
        (void)usec;
        s->accept_retry = sd_event_source_disable_unref(s->accept_retry);
        s->accept_paused = false;
        sd_event_source_set_enabled(s->listen_src, SD_EVENT_ON);
        return 0;
}

static int on_listen(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
        struct serve *s = userdata;
        (void)revents;
        /* a bounded batch per turn: the loop's other work goes on */
        for (int i = 0; i < ACCEPT_PER_TURN; i++) {
                int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c >= 0) {
                        conn_add(s, c);
                        continue;
                }
                if (errno == EMFILE || errno == ENFILE) {
                        /* the socket stays readable: pause accepting for a
                         * moment rather than spin on it */
                        log_warning_errno(errno, "Cannot accept a handshake: %m; pausing 100 ms "
                                                 "(raise LimitNOFILE=)");
                        uint64_t now;
                        sd_event_now(s->event, CLOCK_MONOTONIC, &now);
                        if (!s->accept_retry)
                                sd_event_add_time(s->event, &s->accept_retry, CLOCK_MONOTONIC,
                                                  now + 100000, 0, on_accept_retry, s);
                        /* without a timer, the next freed descriptor resumes it */
                        s->accept_paused = true;
                        sd_event_source_set_enabled(src, SD_EVENT_OFF);
                }
                break;
        }
        return 0;
}

int serve_start(sd_event *event, const struct settings *cfg, struct shm_pub *pub, int listen_fd,
                struct serve **ret)
{
        struct serve *s = calloc(1, sizeof(*s));
        if (!s) {
                close(listen_fd);
                return -ENOMEM;
        }
        s->event = sd_event_ref(event);
        s->cfg = cfg;
        s->pub = pub;
        s->listen_fd = listen_fd;
        /* two descriptors in flight per held answer count against the soft
         * RLIMIT_NOFILE (past it the kernel refuses every send): half of
         * what is left after the loop's own descriptors, at most */
        struct rlimit rl;
        s->held_max = SERVE_HELD_MAX;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur / 4 < SERVE_HELD_MAX)
                s->held_max = rl.rlim_cur / 4 > 1 ? (unsigned)(rl.rlim_cur / 4) : 1;
        int r = sd_event_add_io(event, &s->listen_src, listen_fd, EPOLLIN, on_listen, s);
        if (r < 0) {
                serve_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

void serve_drain(struct serve *s)
{
        struct pollfd pfd[SERVE_CONN_MAX];
        struct conn *cs[SERVE_CONN_MAX];
        if (!s)
                return;
        /* nothing more is accepted (the loop has ended); the connections
         * still queued stay on the listening socket, which outlives this
         * process in systemd's fd store: the next snowidd accepts them */
        while (s->pending.n > 0) {
                uint64_t now = now_usec(), first = UINT64_MAX;
                nfds_t n = 0;
                for (struct conn *c = s->pending.head, *next; c; c = next) {
                        next = c->next;
                        /* each keeps the deadline it was given at accept */
                        uint64_t deadline = 0;
                        sd_event_source_get_time(c->timer, &deadline);
                        if (deadline <= now) {
                                s->stats.timeouts++;
                                conn_free(c);
                                continue;
                        }
                        first = deadline < first ? deadline : first;
                        pfd[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
                        cs[n++] = c;
                }
                if (n == 0)
                        break;
                int r = poll(pfd, n, (int)((first - now + 999) / 1000));
                if (r < 0 && errno != EINTR)
                        break;
                /* on_conn_io() frees or answers only the connection it is
                 * given (an answer's sweep frees held ones, never pending) */
                for (nfds_t i = 0; r > 0 && i < n; i++)
                        if (pfd[i].revents)
                                on_conn_io(NULL, pfd[i].fd, (uint32_t)pfd[i].revents, cs[i]);
        }
}

struct serve *serve_free(struct serve *s)
{
        if (!s)
                return NULL;
        while (s->pending.head)
                conn_free(s->pending.head);
        while (s->held.head)
                conn_free(s->held.head);
        sd_event_source_disable_unref(s->accept_retry);
        sd_event_source_disable_unref(s->listen_src);
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

const struct serve_stats *serve_stats(const struct serve *s)
{
        return &s->stats;
}

unsigned serve_connections(const struct serve *s)
{
        return s->pending.n;
}

unsigned serve_held(const struct serve *s)
{
        return s->held.n;
}

static void store(const char *name, int fd)
{
        char msg[64];
        snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
        int r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
        if (r < 0)
                log_warning("Cannot keep %s in systemd's fd store: %s; a restart makes a new "
                            "segment",
                            name, strerror(-r));
}

void serve_store_segment(const struct shm_pub *pub)
{
        if (!getenv("NOTIFY_SOCKET"))
                return;
        sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=snowid-ctl");
        sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=snowid-ctr");
        store("snowid-ctl", pub->ctl_fd);
        store("snowid-ctr", pub->ctr_fd);
}

void serve_store_fds(const struct shm_pub *pub, int listen_fd)
{
        if (!getenv("NOTIFY_SOCKET"))
                return;
        serve_store_segment(pub);
        sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=snowid-listen");
        store("snowid-listen", listen_fd);
}
