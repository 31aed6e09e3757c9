/* SPDX-License-Identifier: MIT */
/* The handshake's server side (daemon/serve/serve.c).  At exit: a client whose
 * connection was accepted just before snowidd stops is still answered, and
 * one still queued on the listening socket is left to the next snowidd;
 * one that never sends a hello holds the exit only until its deadline.
 * Under root, as other users: a peer that may not take IDs is refused as it
 * is accepted, before any hello; one uid's idle connections make room among
 * its own, not another's. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "handshake.h"
#include "helpers.h"
#include "log.h"
#include "serve.h"

static struct settings cfg;
static struct shm_pub *pub;
static struct sockaddr_un sa = {.sun_family = AF_UNIX};

static int setup(void **state)
{
        (void)state;
        /* 65534 may take IDs, 65533 may not */
        char uid[32];
        snprintf(uid, sizeof(uid), "%u,65534", (unsigned)getuid());
        char *argv[] = {"snowidd",
                        "--config",
                        "/dev/null",
                        "--instance",
                        (char *)test_instance("serve"),
                        "--log-level",
                        "err",
                        "--runtime-dir",
                        (char *)test_dir(),
                        "--allow-users",
                        uid,
                        NULL};
        if (settings_load(&cfg, NULL, (int)(sizeof(argv) / sizeof(*argv)) - 1, argv) != 0)
                return -1;
        log_max_level = cfg.log_level;
        /* the welcome hands out the segment, published or not */
        if (shm_pub_open(cfg.runtime_dir, cfg.instance, -1, -1, &pub) < 0)
                return -1;
        return shm_socket_path(sa.sun_path, sizeof(sa.sun_path), cfg.runtime_dir, cfg.instance);
}

static int teardown(void **state)
{
        (void)state;
        shm_pub_close(pub);
        settings_free(&cfg);
        return 0;
}

static int client_connect(void)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

/* A connection made by uid (root only): its credentials are those of the
 * child that connected, passed back to this process. */
static int client_connect_as(uid_t uid)
{
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0)
                        _exit(10);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                        _exit(11);
                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(int))];
                } u = {0};
                char x = 0;
                struct iovec iov = {.iov_base = &x, .iov_len = 1};
                struct msghdr m = {.msg_iov = &iov,
                                   .msg_iovlen = 1,
                                   .msg_control = u.buf,
                                   .msg_controllen = sizeof(u.buf)};
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
                _exit(sendmsg(sp[1], &m, 0) == 1 ? 0 : 12);
        }
        close(sp[1]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        char x;
        struct iovec iov = {.iov_base = &x, .iov_len = 1};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        assert_int_equal(recvmsg(sp[0], &m, MSG_CMSG_CLOEXEC), 1);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        assert_non_null(c);
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
        close(sp[0]);
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        return fd;
}

static void send_hello(int fd, size_t from, size_t to)
{
        struct shm_hello h;
        shm_hello_make(&h);
        assert_int_equal(send(fd, (char *)&h + from, to - from, MSG_NOSIGNAL),
                         (ssize_t)(to - from));
}

/* Reads one welcome: its status, or -errno if none came whole; the
 * descriptors that came with it are counted and closed. */
static int read_welcome(int fd, int *nfds)
{
        struct shm_welcome w;
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(4 * sizeof(int))];
        } u;
        struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
        *nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c)) {
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        close(f);
                        (*nfds)++;
                }
        }
        if (n < 0)
                return -errno;
        if (n != (ssize_t)sizeof(w) || memcmp(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic)))
                return -EPROTO;
        return w.status;
}

/* Runs the loop until the server has accepted want connections. */
static void accept_until(sd_event *ev, struct serve *srv, unsigned want)
{
        for (int i = 0; i < 500 && serve_connections(srv) < want; i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        assert_int_equal(serve_connections(srv), want);
}

/* Ends the loop as SIGTERM does, with nothing read since the last turn. */
static void end_loop(sd_event *ev)
{
        assert_int_equal(sd_event_exit(ev, 0), 0);
        assert_true(sd_event_run(ev, 0) >= 0);
        assert_int_equal(sd_event_get_state(ev), SD_EVENT_FINISHED);
}

/* A server on a fresh loop, on a new listening socket (a duplicate of it
 * in *kept, as systemd's fd store keeps it, unless kept is NULL), or, with
 * reuse, on *kept. */
static struct serve *server_on(sd_event **ev, int *kept, bool reuse)
{
        struct serve *srv;
        int lfd;
        assert_int_equal(sd_event_new(ev), 0);
        if (reuse)
                lfd = *kept;
        else {
                assert_int_equal(shm_listen(cfg.runtime_dir, cfg.instance, &lfd), 0);
                if (kept)
                        assert_true((*kept = fcntl(lfd, F_DUPFD_CLOEXEC, 3)) >= 0);
        }
        assert_int_equal(serve_start(*ev, &cfg, pub, lfd, &srv), 0);
        return srv;
}

static void server_end(struct serve *srv, sd_event *ev)
{
        serve_free(srv);
        sd_event_unref(ev);
}

static void test_drain_answers_accepted(void **state)
{
        (void)state;
        sd_event *ev;
        struct serve *srv = server_on(&ev, NULL, false);
        int nfds;

        /* a: accepted, half its hello read by the loop; b: accepted, its
         * whole hello sent but unread when the loop ends */
        int a = client_connect(), b = client_connect();
        accept_until(ev, srv, 2);
        send_hello(a, 0, sizeof(struct shm_hello) / 2);
        assert_true(sd_event_run(ev, 1000000) > 0);
        send_hello(b, 0, sizeof(struct shm_hello));
        end_loop(ev);
        send_hello(a, sizeof(struct shm_hello) / 2, sizeof(struct shm_hello));
        assert_int_equal(serve_connections(srv), 2); /* neither answered yet */

        serve_drain(srv);
        assert_int_equal(serve_connections(srv), 0);
        assert_int_equal(serve_held(srv), 2);
        assert_int_equal(serve_stats(srv)->given, 2);
        srv = serve_free(srv);
        /* the server is gone, its answers are not */
        assert_int_equal(read_welcome(a, &nfds), 0);
        assert_int_equal(nfds, 2);
        assert_int_equal(read_welcome(b, &nfds), 0);
        assert_int_equal(nfds, 2);
        close(a);
        close(b);
        sd_event_unref(ev);
}

static void test_drain_without_hello(void **state)
{
        (void)state;
        sd_event *ev;
        struct serve *srv = server_on(&ev, NULL, false);
        int nfds;
        int a = client_connect();
        accept_until(ev, srv, 1);
        end_loop(ev);
        /* a client that sends nothing holds the stop until its own
         * deadline, a second after its accept, and is then let go */
        serve_drain(srv);
        assert_int_equal(serve_connections(srv), 0);
        assert_int_equal(serve_stats(srv)->timeouts, 1);
        assert_int_equal(serve_stats(srv)->given, 0);
        srv = serve_free(srv);
        assert_int_equal(read_welcome(a, &nfds), -EPROTO); /* end of file: no answer */
        assert_int_equal(nfds, 0);
        close(a);
        sd_event_unref(ev);
}

/* A restart in small: the listening socket kept (as systemd's fd store keeps
 * it), a client queued on it while the first server stops, answered by the
 * second. */
static void test_drain_leaves_queue(void **state)
{
        (void)state;
        sd_event *ev;
        int kept, nfds;
        struct serve *srv = server_on(&ev, &kept, false);
        end_loop(ev);
        int a = client_connect(); /* queued, never accepted by the first server */
        send_hello(a, 0, sizeof(struct shm_hello));
        serve_drain(srv);
        assert_int_equal(serve_stats(srv)->given, 0);
        server_end(srv, ev);

        srv = server_on(&ev, &kept, true);
        for (int i = 0; i < 500 && serve_stats(srv)->given == 0; i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        assert_int_equal(serve_stats(srv)->given, 1);
        assert_int_equal(read_welcome(a, &nfds), 0);
        assert_int_equal(nfds, 2);
        close(a);
        server_end(srv, ev);
}

/* Runs the loop until it has nothing more to do at once. */
static void run_idle(sd_event *ev)
{
        int r;
        while ((r = sd_event_run(ev, 0)) > 0)
                ;
        assert_true(r >= 0);
}

static void test_refused_at_accept(void **state)
{
        (void)state;
        if (geteuid() != 0)
                skip(); /* needs another user */
        sd_event *ev;
        struct serve *srv = server_on(&ev, NULL, false);
        int nfds;
        int a = client_connect_as(65533);
        for (int i = 0; i < 500 && serve_stats(srv)->refused == 0; i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        /* refused with no hello sent, and nothing kept of it: no handshake
         * under way, no deadline */
        assert_int_equal(serve_stats(srv)->refused, 1);
        assert_int_equal(serve_connections(srv), 0);
        assert_int_equal(serve_held(srv), 0);
        /* the hello finds the connection closed; the welcome is there */
        struct shm_hello h;
        shm_hello_make(&h);
        assert_int_equal(send(a, &h, sizeof(h), MSG_NOSIGNAL), -1);
        assert_int_equal(errno, EPIPE);
        assert_int_equal(read_welcome(a, &nfds), -EACCES);
        assert_int_equal(nfds, 0);
        close(a);
        /* and one whose hello came before the accept: the same */
        a = client_connect_as(65533);
        send_hello(a, 0, sizeof(struct shm_hello));
        for (int i = 0; i < 500 && serve_stats(srv)->refused == 1; i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        assert_int_equal(serve_connections(srv), 0);
        assert_int_equal(read_welcome(a, &nfds), -EACCES);
        assert_int_equal(nfds, 0);
        close(a);
        server_end(srv, ev);
}

static void test_idle_of_one_uid(void **state)
{
        (void)state;
        if (geteuid() != 0)
                skip();
        sd_event *ev;
        struct serve *srv = server_on(&ev, NULL, false);
        int nfds, idle[SERVE_CONN_MAX + 44];
        const unsigned n = sizeof(idle) / sizeof(*idle);
        /* another user's handshake under way, then more idle connections of
         * root than the server keeps in all */
        int b = client_connect_as(65534);
        accept_until(ev, srv, 1);
        for (unsigned i = 0; i < n; i++) {
                idle[i] = client_connect();
                run_idle(ev);
        }
        /* root's make room among root's */
        assert_int_equal(serve_connections(srv), SERVE_PENDING_PER_UID + 1);
        assert_int_equal(serve_stats(srv)->evicted, n - SERVE_PENDING_PER_UID);
        send_hello(b, 0, sizeof(struct shm_hello));
        for (int i = 0; i < 500 && serve_stats(srv)->given == 0; i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        assert_int_equal(read_welcome(b, &nfds), 0);
        assert_int_equal(nfds, 2);
        close(b);
        for (unsigned i = 0; i < n; i++)
                close(idle[i]);
        run_idle(ev);

        /* a burst of one uid, accepted in one turn before any hello is read:
         * answered, not evicted */
        uint64_t evicted = serve_stats(srv)->evicted, given = serve_stats(srv)->given;
        int burst[SERVE_PENDING_PER_UID + 16];
        for (unsigned i = 0; i < sizeof(burst) / sizeof(*burst); i++) {
                burst[i] = client_connect();
                send_hello(burst[i], 0, sizeof(struct shm_hello));
        }
        for (int i = 0; i < 500 && serve_stats(srv)->given - given < sizeof(burst) / sizeof(*burst);
             i++)
                assert_true(sd_event_run(ev, 10000) >= 0);
        assert_int_equal(serve_stats(srv)->evicted, evicted);
        for (unsigned i = 0; i < sizeof(burst) / sizeof(*burst); i++) {
                assert_int_equal(read_welcome(burst[i], &nfds), 0);
                assert_int_equal(nfds, 2);
                close(burst[i]);
        }
        server_end(srv, ev);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_drain_answers_accepted),
                cmocka_unit_test(test_drain_without_hello),
                cmocka_unit_test(test_drain_leaves_queue),
                cmocka_unit_test(test_refused_at_accept),
                cmocka_unit_test(test_idle_of_one_uid),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
