/* SPDX-License-Identifier: MIT */
/*
 * The handshake's server side.  Every step is non-blocking and bounded: a
 * connection is read when it is readable, answered with one sendmsg() of 64
 * bytes into its empty buffer, and closed; a peer that sends nothing is
 * closed after SHM_HS_TIMEOUT_MS; past SERVE_CONN_MAX the oldest goes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"
#include "log.h"
#include "serve.h"

#define ACCEPT_PER_TURN 64
#define PEER_GROUPS_MAX 256

struct conn {
        struct serve *srv;
        struct conn *prev, *next; /* oldest first */
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
        struct conn *head, *tail;
        unsigned n;
        struct serve_stats stats;
};

static void conn_free(struct conn *c)
{
        struct serve *s = c->srv;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                s->tail = c->prev;
        s->n--;
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        close(c->fd);
        free(c);
}

static int64_t monotonic_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* May this peer take IDs?  Its uid, primary gid and supplementary groups. */
static int peer_allowed(struct serve *s, int fd)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        gid_t gids[PEER_GROUPS_MAX + 1];

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return 0;
        gids[0] = cred.gid;
        len = (socklen_t)(PEER_GROUPS_MAX * sizeof(gid_t));
        unsigned n = 1;
        /* more groups than fit: judged by the primary group and the uid */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids + 1, &len) == 0)
                n += len / sizeof(gid_t);
        int ok = settings_allowed(s->cfg, cred.uid, gids, n);
        if (!ok)
                log_info("Refused the segment to uid %u gid %u (pid %d): not in allow-users or "
                         "allow-groups",
                         (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid);
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
        } else if (!peer_allowed(s, c->fd)) {
                w.status = -EACCES;
                s->stats.refused++;
        } else {
                w.ctl_size = sizeof(struct shm_ctl);
                w.ctr_size = sizeof(struct shm_ctr);
                w.nonce = s->pub->ctl->nonce;
                w.uid = (uint32_t)geteuid();
        }
        w.mono_ns = monotonic_now_ns();
        int r = shm_welcome_send(c->fd, &w, s->pub->ctl_ro_fd, s->pub->ctr_fd);
        if (r < 0)
                log_debug("Cannot answer a handshake: %s", strerror(-r));
        else if (w.status == 0)
                s->stats.given++;
        conn_free(c);
}

static int on_conn_io(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
        struct conn *c = userdata;
        (void)src;
        (void)revents;
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

static void conn_add(struct serve *s, int fd)
{
        if (s->n >= SERVE_CONN_MAX) {
                s->stats.evicted++;
                conn_free(s->head); /* a client that means it has sent its hello by now */
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return;
        }
        c->srv = s;
        c->fd = fd;
        c->prev = s->tail;
        if (s->tail)
                s->tail->next = c;
        else
                s->head = c;
        s->tail = c;
        s->n++;
        uint64_t now;
        sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_io(s->event, &c->io, fd, EPOLLIN, on_conn_io, c) < 0 ||
            sd_event_add_time(s->event, &c->timer, CLOCK_MONOTONIC,
                              now + (uint64_t)SHM_HS_TIMEOUT_MS * 1000, 0, on_conn_timeout,
                              c) < 0)
                conn_free(c);
}

static int on_listen(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
        struct serve *s = userdata;
        (void)src;
        (void)revents;
        /* a bounded batch per turn: the loop's other work goes on */
        for (int i = 0; i < ACCEPT_PER_TURN; i++) {
                int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno == EMFILE || errno == ENFILE)
                                log_warning("Cannot accept a handshake: %m (raise LimitNOFILE=)");
                        break;
                }
                conn_add(s, c);
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
        int r = sd_event_add_io(event, &s->listen_src, listen_fd, EPOLLIN, on_listen, s);
        if (r < 0) {
                serve_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

struct serve *serve_free(struct serve *s)
{
        if (!s)
                return NULL;
        while (s->head)
                conn_free(s->head);
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
        return s->n;
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
