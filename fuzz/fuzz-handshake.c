/* SPDX-License-Identifier: MIT */
/*
 * The handshake's server side (daemon/serve/serve.c) on an sd-event loop, as in
 * snowidd: a real publisher, the settings from settings_load() (allow-users
 * 4242, allow-groups 4343), a fresh listening socket for each input.  The
 * input is a script of operations over many clients of this process; each
 * operation is one byte, op = b % 10 and arg = b / 10, some followed by
 * bytes of their own.  A client is picked by arg: 0-12 the oldest open
 * clients, 13-25 the newest (modulo how many are open).
 *
 *   0 connect     [id] a new client; when this process may change its
 *                 thread's credentials (root), it connects as the uid, gid
 *                 and groups that id picks (see identity(): ids from 24 on
 *                 are uids of their own, allowed by their group)
 *   1 write       [len] [len bytes] to a client (what it manages to send)
 *   2 hello       a valid hello to a client, all 16 bytes at once
 *   3 shutdown    [how] 0 write side, 1 read side, 2 both
 *   4 close       a client, unread; arg 25: every client of the newest
 *                 client's uid
 *   5 run         1 + arg turns of the loop: sd_event_run(e, 0); arg 25:
 *                 until it is idle
 *   6 read        a client's answer, and check it (below)
 *   7 flood       [n] connect 1 + n clients at once (past SERVE_CONN_MAX
 *                 the server evicts its oldest); arg & 1: each sends a valid
 *                 hello at once; arg >> 1 = k: as id k (0-3) or 20 + k (4-12:
 *                 uids of their own), so that one uid can pass
 *                 SERVE_HELD_PER_UID unread answers and eight SERVE_HELD_MAX
 *   8 write+fds   [len] [len bytes] with a descriptor attached (SCM_RIGHTS)
 *   9 some hello  the next 1 + arg % 16 bytes of a valid hello
 *
 * Clients never block and need not read: the daemon must not wait on them.
 * Every turn of the loop must take under a second; the server never has
 * more than SERVE_CONN_MAX connections waiting for a hello nor more than
 * SERVE_HELD_MAX answered ones held.
 *
 * What a client reads must be nothing, an EOF (or a reset: closed with its
 * data unread), or one 64-byte welcome: the right magic, the version, status
 * -EACCES when the peer is not allowed (answered as it is accepted, whatever
 * it sent, even nothing), else -EPROTO when the first 16 bytes sent were not
 * a valid hello, else 0 or -EAGAIN; with status 0 exactly two
 * descriptors, sealed memfds of the sizes announced (the first read-only,
 * the second read-write) holding the nonce announced, and no descriptor
 * otherwise; mono_ns between the connect and the read.  After a refusal the
 * connection ends; after status 0 it stays open (the server holds it until
 * the client closes), so what follows is nothing, or an EOF only once the
 * client shut its own side down.
 *
 * After each turn, every welcome that arrived is classified (peeked, not
 * read) and held against a model: the status-0 welcomes still unread in
 * open clients, per uid.  A status 0 must leave at most SERVE_HELD_PER_UID of
 * them for its uid and SERVE_HELD_MAX in all; an -EAGAIN needs its uid at
 * SERVE_HELD_PER_UID or the server at SERVE_HELD_MAX (counting what it held
 * before the turn, which may include clients closed since that it has not
 * seen yet); serve_held() is never below the model's count, and once the
 * loop is idle never above the open clients answered with status 0; the
 * stats' given equals the status-0 welcomes that arrived.  A client that
 * shut down its write side with its welcome unread counts too (its
 * descriptors are still in flight; the seed shutwr-unread); $FUZZ_HANDSHAKE_LAX
 * set leaves such clients out of the lower bounds.
 *
 * After the script, the loop runs until it is idle; then, unless the server
 * evicted or timed out any connection, every client that sent 16 bytes has
 * its answer and every other client that shut down its write side has its
 * EOF.  Then every client closes, the loop runs until idle, and the server
 * must hold no connection; every descriptor opened for an input is closed
 * after it.
 *
 * $FUZZ_HANDSHAKE_TRACE set: what each read got, to stderr.  Under root the
 * kernel's limit on descriptors in flight (a welcome's memfds that a client
 * has not read count against the sender's RLIMIT_NOFILE) does not apply, so
 * this checks serve.c's bookkeeping of them, not what the kernel does to
 * snowidd, which has no capabilities.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fuzz-dir.h"
#include "handshake.h"
#include "log.h"
#include "publish.h"
#include "serve.h"

#define CLIENTS_MAX (SERVE_HELD_MAX + SERVE_CONN_MAX + 64)
#define ALLOWED_UID 4242
#define ALLOWED_GID 4343
#define OTHER_ID 65534
#define EXTRA_UID 5000 /* + id, for ids from 24 on */
#define IDLE_TURNS (4 * CLIENTS_MAX + 64)
#define TURN_MAX_NS INT64_C(1000000000)

struct client {
        int fd;
        size_t sent;             /* bytes the socket took */
        unsigned char first[16]; /* the first 16 of them: the hello the server reads */
        size_t hello_pos;        /* op 9: how much of a valid hello went out */
        bool allowed;            /* by its credentials, as the allow lists say */
        uid_t uid;               /* as the server sees it (SO_PEERCRED) */
        bool shut_wr, shut_rd, answered, ended;
        bool arrived; /* a welcome came (peeked after the turn that sent it) */
        int status;   /* its status */
        bool unread;  /* status 0, and not read yet: its descriptors are in flight */
        int64_t connected_ns;
};

static struct settings cfg;
static struct shm_pub *pub;
static struct sockaddr_un sa = {.sun_family = AF_UNIX};
static bool can_switch; /* root: each thread's credentials may change */
static gid_t groups0[64];
static int n_groups0 = -1;
static int null_fd = -1;
static int fds_base = -1;
static bool trace;          /* $FUZZ_HANDSHAKE_TRACE: what each read got, to stderr */
static bool strict;         /* unless $FUZZ_HANDSHAKE_LAX: see the top */
static uint64_t n_given;    /* status-0 welcomes that arrived, this input */
static uint64_t n_answered; /* welcomes the server counted (sent or not), this input */

static struct client clients[CLIENTS_MAX];
static unsigned n_clients;
static sd_event *ev;
static struct serve *srv;

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fail(const char *what)
{
        fprintf(stderr, "fuzz-handshake: %s\n", what);
        abort();
}

static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int n = 0;
        if (!d)
                abort();
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own */
}

static void cleanup(void)
{
        shm_pub_close(pub);
        settings_free(&cfg);
        if (null_fd >= 0)
                close(null_fd);
}

/* The raw system calls change only the calling thread's credentials (glibc's
 * wrappers would change every thread's): the peer credentials of a socket
 * are the connecting thread's. */
static bool set_ids(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
        if (syscall(SYS_setresuid, -1, 0, -1) < 0) /* back to root first */
                return false;
        return syscall(SYS_setgroups, n, groups) == 0 && syscall(SYS_setresgid, -1, gid, -1) == 0 &&
               syscall(SYS_setresuid, -1, uid, -1) == 0;
}

static void restore_ids(void)
{
        if (can_switch && !set_ids(0, getgid(), groups0, (size_t)n_groups0))
                fail("cannot restore the thread's credentials");
}

static void setup(void)
{
        char inst[64];
        snprintf(inst, sizeof(inst), "fuzz-hs-%d", (int)getpid());
        char *argv[] = {"snowidd",
                        "--config",
                        "/dev/null",
                        "--instance",
                        inst,
                        "--log-level",
                        "err",
                        "--runtime-dir",
                        (char *)fuzz_dir(),
                        "--allow-users",
                        "4242",
                        "--allow-groups",
                        "4343",
                        NULL};
        if (settings_load(&cfg, NULL, (int)(sizeof(argv) / sizeof(*argv)) - 1, argv) != 0)
                abort();
        log_max_level = cfg.log_level;
        trace = getenv("FUZZ_HANDSHAKE_TRACE") != NULL;
        strict = getenv("FUZZ_HANDSHAKE_LAX") == NULL;
        if (shm_pub_open(cfg.runtime_dir, cfg.instance, -1, -1, &pub) < 0)
                abort();
        struct shm_publication p = {.layout = cfg.layout, .worker = 3, .lead_ms = 1, .follow = 1};
        p.offset_ns = shm_offset_for_wall(p.layout.epoch_ms);
        p.start_ms = (uint64_t)((shm_monotonic_ns() + p.offset_ns) / 1000000);
        p.deadline = p.start_ms + 86400 * 1000;
        if (shm_pub_switch(pub, &p) < 0)
                abort();
        if (shm_socket_path(sa.sun_path, sizeof(sa.sun_path), cfg.runtime_dir, cfg.instance) < 0)
                abort();
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* the clients, the server's ends and what comes with the answers */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * CLIENTS_MAX + 256) {
                rl.rlim_cur =
                        rl.rlim_max < 4 * CLIENTS_MAX + 256 ? rl.rlim_max : 4 * CLIENTS_MAX + 256;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        n_groups0 = getgroups((int)(sizeof(groups0) / sizeof(*groups0)), groups0);
        if (geteuid() == 0 && n_groups0 >= 0) {
                gid_t g[1] = {OTHER_ID};
                can_switch = set_ids(OTHER_ID, OTHER_ID, g, 1);
                /* a thread stuck with other credentials would spoil the run */
                if (!set_ids(0, getgid(), groups0, (size_t)n_groups0))
                        fail("cannot restore the thread's credentials");
        }
        atexit(cleanup);
}

static bool hello_valid(const unsigned char *b)
{
        uint32_t min, max;
        memcpy(&min, b + 8, 4);
        memcpy(&max, b + 12, 4);
        return !memcmp(b, SHM_HS_HELLO_MAGIC, 8) && min <= SHM_VERSION && max >= SHM_VERSION;
}

/* The status a client's first 16 bytes and credentials call for, short of
 * -EAGAIN (which the server may answer instead of 0). */
static int status_for(const struct client *c)
{
        return !c->allowed ? -EACCES : !hello_valid(c->first) ? -EPROTO : 0;
}

/* Status-0 welcomes still unread in open clients, of uid (or of all): their
 * descriptors are in flight, and the server must still hold them.  Unless
 * strict, a client that shut down its write side is left out: serve.c lets
 * its connection go at the EOF. */
static unsigned unread(bool one_uid, uid_t uid, bool lenient)
{
        unsigned n = 0;
        for (unsigned i = 0; i < n_clients; i++) {
                const struct client *c = &clients[i];
                n += c->unread && (!one_uid || c->uid == uid) && !(lenient && c->shut_wr);
        }
        return n;
}

/* What the last turn sent: every welcome that arrived, peeked (not read) and
 * checked against the caps.  held_before: serve_held() before the turn;
 * answers: how many the server counted in it (at least as many came). */
static void observe(unsigned held_before, uint64_t answers)
{
        static unsigned again[CLIENTS_MAX], given[CLIENTS_MAX];
        unsigned zeros = 0, n_again = 0, n_other = 0;
        for (unsigned i = 0; i < n_clients && zeros + n_again + n_other < answers; i++) {
                struct client *c = &clients[i];
                int inq = 0;
                int32_t status;
                unsigned char head[12];
                /* the server answers a whole hello, and nothing else; a
                 * peer that may not take IDs as it is accepted */
                if (c->arrived || (c->sent < sizeof(c->first) && c->allowed))
                        continue;
                if (ioctl(c->fd, SIOCINQ, &inq) < 0)
                        fail("SIOCINQ");
                if (inq <= 0)
                        continue;
                /* no room for descriptors: a peek drops its copies of them */
                ssize_t n = recv(c->fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);
                if (inq < (int)sizeof(struct shm_welcome) || n != (ssize_t)sizeof(head))
                        fail("a welcome that did not come in one piece");
                memcpy(&status, head + 8, sizeof(status));
                c->arrived = true;
                c->status = status;
                c->unread = status == 0;
                int want = status_for(c);
                if (status != want && !(want == 0 && status == -EAGAIN)) {
                        fprintf(stderr, "fuzz-handshake: status %d, expected %d\n", status, want);
                        abort();
                }
                if (status == -EAGAIN)
                        again[n_again++] = i;
                else if (status == 0) {
                        given[zeros++] = i;
                        n_given++;
                } else
                        n_other++;
        }
        if (!zeros && !n_again)
                return;
        /* status 0: its uid had fewer than the cap unread, and the server
         * held fewer than SERVE_HELD_MAX (at least the model's count) */
        for (unsigned k = 0; k < zeros; k++)
                if (unread(true, clients[given[k]].uid, !strict) > SERVE_HELD_PER_UID)
                        fail("status 0 past SERVE_HELD_PER_UID unread answers of a uid");
        if (unread(false, 0, !strict) > SERVE_HELD_MAX)
                fail("status 0 past SERVE_HELD_MAX unread answers");
        /* -EAGAIN: its uid's unread answers at the cap (nothing in the model
         * changes during a turn but that more come), or the server's held
         * connections at SERVE_HELD_MAX: at most what it held before the
         * turn (closed clients it has not seen yet included) and the turn's
         * status-0 answers */
        for (unsigned k = 0; k < n_again; k++) {
                const struct client *c = &clients[again[k]];
                if (unread(true, c->uid, false) < SERVE_HELD_PER_UID &&
                    held_before + zeros < SERVE_HELD_MAX) {
                        fprintf(stderr,
                                "fuzz-handshake: -EAGAIN to uid %u with %u unread answers, %u "
                                "held before the turn, %u given in it\n",
                                (unsigned)c->uid, unread(true, c->uid, false), held_before, zeros);
                        abort();
                }
        }
}

/* One turn of the loop, which must never wait. */
static int turn(void)
{
        unsigned held_before = serve_held(srv);
        int64_t t0 = now_ns();
        int r = sd_event_run(ev, 0);
        int64_t t = now_ns() - t0;
        if (r < 0) {
                fprintf(stderr, "fuzz-handshake: sd_event_run: %s\n", strerror(-r));
                abort();
        }
        if (t >= TURN_MAX_NS) {
                fprintf(stderr, "fuzz-handshake: a turn of the loop took %lld ms\n",
                        (long long)(t / 1000000));
                abort();
        }
        if (serve_connections(srv) > SERVE_CONN_MAX)
                fail("more connections waiting for a hello than SERVE_CONN_MAX");
        if (serve_held(srv) > SERVE_HELD_MAX)
                fail("more connections held than SERVE_HELD_MAX");
        const struct serve_stats *st = serve_stats(srv);
        uint64_t answered = st->given + st->busy + st->bad + st->refused;
        if (answered < n_answered || (r == 0 && answered != n_answered))
                fail("answers counted out of a turn of the loop");
        /* a welcome is counted as it is sent (given: once sent): none, none came */
        if (answered != n_answered)
                observe(held_before, answered - n_answered);
        n_answered = answered;
        if (st->given != n_given)
                fail("the stats' given is not the status-0 welcomes that came");
        if (serve_held(srv) < unread(false, 0, !strict))
                fail("a status-0 welcome still unread whose connection the server let go");
        if (r == 0) {
                /* idle: every close has been seen */
                unsigned open0 = 0;
                for (unsigned i = 0; i < n_clients; i++)
                        open0 += clients[i].arrived && clients[i].status == 0;
                if (serve_held(srv) > open0)
                        fail("a held connection whose client has closed, once the loop was idle");
        }
        return r;
}

/* Until the loop has nothing left to do now (the timeouts aside). */
static void run_idle(void)
{
        for (unsigned i = 0; i < IDLE_TURNS && turn() > 0; i++)
                ;
}

/* Who the client is, from id: uid (own, allowed, other, 1), gid (own,
 * allowed, other), supplementary groups (own, or [other, allowed]); from 24
 * on, uid EXTRA_UID + id, allowed by its group (gid or supplementary). */
static bool identity(uint8_t id, bool *allowed, uid_t *ret_uid)
{
        uid_t uids[4] = {geteuid(), ALLOWED_UID, OTHER_ID, 1};
        gid_t gids[3] = {getegid(), ALLOWED_GID, OTHER_ID};
        uid_t uid = uids[id % 4];
        gid_t gid = gids[(id / 4) % 3];
        bool own_groups = !((id / 12) & 1);
        gid_t extra[2] = {OTHER_ID, ALLOWED_GID};

        if (id >= 24) {
                uid = EXTRA_UID + id;
                gid = id & 1 ? ALLOWED_GID : OTHER_ID;
                own_groups = id & 1;
        }
        if (!can_switch)
                uid = geteuid(), gid = getegid(), own_groups = true;
        *ret_uid = uid;
        *allowed = uid == 0 || uid == geteuid() || uid == ALLOWED_UID || gid == ALLOWED_GID;
        if (!own_groups)
                *allowed = true; /* ALLOWED_GID among the groups */
        else
                for (int i = 0; i < n_groups0; i++)
                        *allowed |= groups0[i] == ALLOWED_GID;
        if (!can_switch || (uid == geteuid() && gid == getegid() && own_groups))
                return true;
        if (!set_ids(uid, gid, own_groups ? groups0 : extra, own_groups ? (size_t)n_groups0 : 2)) {
                restore_ids();
                return false;
        }
        return true;
}

static struct client *connect_one(uint8_t id)
{
        if (n_clients == CLIENTS_MAX)
                return NULL;
        bool allowed;
        uid_t uid;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                fail("socket");
        if (!identity(id, &allowed, &uid)) {
                close(fd);
                return NULL;
        }
        int64_t t = now_ns();
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        restore_ids();
        if (r < 0) {
                /* the backlog is full: the server accepts a batch per turn */
                if (e != EAGAIN) {
                        fprintf(stderr, "fuzz-handshake: connect: %s\n", strerror(e));
                        abort();
                }
                close(fd);
                return NULL;
        }
        clients[n_clients] =
                (struct client){.fd = fd, .allowed = allowed, .uid = uid, .connected_ns = t};
        return &clients[n_clients++];
}

static struct client *pick(unsigned arg)
{
        if (!n_clients)
                return NULL;
        return &clients[arg < 13 ? arg % n_clients : n_clients - 1 - (arg - 13) % n_clients];
}

static void drop(struct client *c)
{
        close(c->fd);
        size_t i = (size_t)(c - clients);
        memmove(c, c + 1, (n_clients - i - 1) * sizeof(*c));
        n_clients--;
}

/* Every client of the newest one's uid. */
static void drop_uid(void)
{
        if (!n_clients)
                return;
        uid_t uid = clients[n_clients - 1].uid;
        for (unsigned i = n_clients; i-- > 0;)
                if (clients[i].uid == uid)
                        drop(&clients[i]);
}

static void sent(struct client *c, const void *buf, ssize_t n)
{
        if (n <= 0)
                return;
        if (c->sent < sizeof(c->first)) {
                size_t k = sizeof(c->first) - c->sent;
                memcpy(c->first + c->sent, buf, (size_t)n < k ? (size_t)n : k);
        }
        c->sent += (size_t)n;
}

static void write_to(struct client *c, const uint8_t *buf, size_t len, bool with_fd)
{
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (with_fd) {
                memset(&u, 0, sizeof(u));
                m.msg_control = u.buf;
                m.msg_controllen = sizeof(u.buf);
                struct cmsghdr *h = CMSG_FIRSTHDR(&m);
                h->cmsg_level = SOL_SOCKET;
                h->cmsg_type = SCM_RIGHTS;
                h->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(h), &null_fd, sizeof(int));
        }
        /* the server closed (EPIPE), or the buffer is full: a client's lot */
        sent(c, buf, sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL));
}

static void check_memfd(int fd, size_t size, int mode, off_t nonce_at, uint64_t nonce)
{
        const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
        struct stat st;
        uint64_t got;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != size)
                fail("a descriptor that is not a memfd of the size announced");
        int s = fcntl(fd, F_GET_SEALS);
        if (s < 0 || (s & seals) != seals)
                fail("a memfd without its seals");
        if ((fcntl(fd, F_GETFL) & O_ACCMODE) != mode)
                fail("a memfd opened for the wrong access");
        if (pread(fd, &got, sizeof(got), nonce_at) != (ssize_t)sizeof(got) || got != nonce)
                fail("a memfd without the nonce announced");
}

/* No more data: the end, a reset, or (open: not answered yet, or held) nothing yet. */
static bool ended(ssize_t n, int e)
{
        if (n == 0 || (n < 0 && e == ECONNRESET))
                return true;
        if (n < 0 && e == EAGAIN)
                return false;
        fprintf(stderr, "fuzz-handshake: read: %zd %s\n", n, strerror(e));
        abort();
}

static void read_from(struct client *c, bool final)
{
        struct shm_welcome w;
        unsigned char buf[128];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(8 * sizeof(int))];
        } u;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        int fds[8], nfds = 0;
        bool quiet; /* the server may have dropped anyone: no liveness check */
        const struct serve_stats *st = serve_stats(srv);

        quiet = st->evicted || st->timeouts;
        if (c->ended)
                return;
        ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        int e = errno;
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); n > 0 && h; h = CMSG_NXTHDR(&m, h)) {
                if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                        fail("a control message that is not SCM_RIGHTS");
                size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k && nfds < 8; i++)
                        memcpy(&fds[nfds++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
        }
        if (n <= 0) {
                if (trace)
                        fprintf(stderr, "fuzz-handshake: client %zu: %s%s\n", (size_t)(c - clients),
                                n == 0 ? "EOF" : strerror(e), final ? " (at the end)" : "");
                if (c->shut_rd)
                        quiet = true;
                if (ended(n, e)) {
                        c->ended = true;
                        if (!c->answered && c->sent >= sizeof(c->first) && !quiet)
                                fail("closed without an answer to 16 bytes");
                } else if (final && !quiet && !c->answered &&
                           (c->sent >= sizeof(c->first) || c->shut_wr))
                        fail("no answer, and not closed, once the loop was idle");
                return;
        }
        int64_t t = now_ns();
        if (trace)
                fprintf(stderr,
                        "fuzz-handshake: client %zu (uid %u): %zd bytes, %d fds, status %d\n",
                        (size_t)(c - clients), (unsigned)c->uid, n, nfds,
                        n >= 12 ? *(int32_t *)(buf + 8) : 0);
        if (c->answered)
                fail("data after the welcome");
        if (m.msg_flags & MSG_CTRUNC)
                fail("more descriptors than the welcome has");
        if (n != (ssize_t)sizeof(w))
                fail("an answer that is not 64 bytes");
        c->answered = true;
        memcpy(&w, buf, sizeof(w));
        if (memcmp(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic)) || w.version != SHM_VERSION)
                fail("a welcome with a bad magic or version");
        if (w.mono_ns < c->connected_ns || w.mono_ns > t)
                fail("a welcome's mono_ns outside connect..read");
        for (size_t i = 0; i < sizeof(w.reserved); i++)
                if (w.reserved[i])
                        fail("a welcome's reserved bytes not zero");
        if (c->sent < sizeof(c->first) && c->allowed)
                fail("an answer before 16 bytes came");
        /* observe() saw it come, after the turn that sent it, and checked
         * its status against the caps */
        if (!c->arrived || w.status != c->status)
                fail("a welcome that did not come in a turn of the loop");
        int want = status_for(c);
        if (w.status != want && !(want == 0 && w.status == -EAGAIN)) {
                fprintf(stderr, "fuzz-handshake: status %d, expected %d\n", w.status, want);
                abort();
        }
        c->unread = false;
        if (w.status == 0) {
                if (nfds != 2 || w.ctl_size != sizeof(struct shm_ctl) ||
                    w.ctr_size != sizeof(struct shm_ctr) || w.nonce != shm_pub_nonce(pub) ||
                    w.uid != (uint32_t)geteuid())
                        fail("a welcome of status 0 that does not hold together");
                check_memfd(fds[0], w.ctl_size, O_RDONLY, offsetof(struct shm_ctl, nonce), w.nonce);
                check_memfd(fds[1], w.ctr_size, O_RDWR, offsetof(struct shm_ctr, nonce), w.nonce);
        } else if (nfds)
                fail("descriptors with a refusal");
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        /* a refusal: the daemon closed right after it; status 0: the daemon
         * holds the connection until this client closes (it may let it go
         * now that the welcome is read, but has not run since) */
        n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        e = errno;
        if (n > 0)
                fail("data after the welcome");
        if (ended(n, e))
                c->ended = true;
        if (w.status != 0 && !c->ended)
                fail("the connection stays open after a refusal");
        if (w.status == 0 && c->ended && !c->shut_wr && !c->shut_rd)
                fail("the connection closed at once after a welcome with descriptors");
}

static const uint8_t *take(const uint8_t **p, const uint8_t *end, size_t n)
{
        if ((size_t)(end - *p) < n)
                return NULL;
        const uint8_t *r = *p;
        *p += n;
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!pub)
                setup();
        if (fds_base < 0)
                fds_base = count_fds();
        if (sd_event_new(&ev) < 0)
                abort();
        int lfd;
        /* a fresh socket for each input (renamed over the last one) */
        if (shm_listen(cfg.runtime_dir, cfg.instance, &lfd) < 0 ||
            serve_start(ev, &cfg, pub, lfd, &srv) < 0)
                abort();
        n_given = n_answered = 0;
        struct shm_hello hello;
        shm_hello_make(&hello);

        const uint8_t *p = data, *end = data + size, *a;
        while (p < end) {
                unsigned op = *p % 10, arg = *p / 10;
                p++;
                struct client *c = pick(arg);
                switch (op) {
                case 0:
                        if ((a = take(&p, end, 1)))
                                connect_one(*a);
                        break;
                case 1:
                case 8: {
                        if (!(a = take(&p, end, 1)))
                                break;
                        size_t len = *a < (size_t)(end - p) ? *a : (size_t)(end - p);
                        if (c)
                                write_to(c, p, len, op == 8);
                        p += len;
                        break;
                }
                case 2:
                        if (c)
                                write_to(c, (const uint8_t *)&hello, sizeof(hello), false);
                        break;
                case 3:
                        if (!(a = take(&p, end, 1)) || !c)
                                break;
                        shutdown(c->fd, *a % 3 == 0 ? SHUT_WR : *a % 3 == 1 ? SHUT_RD : SHUT_RDWR);
                        c->shut_wr |= *a % 3 != 1;
                        c->shut_rd |= *a % 3 != 0; /* reads end at once; no welcome can come */
                        break;
                case 4:
                        if (arg == 25)
                                drop_uid();
                        else if (c)
                                drop(c);
                        break;
                case 5:
                        if (arg == 25)
                                run_idle();
                        else
                                for (unsigned i = 0; i <= arg; i++)
                                        turn();
                        break;
                case 6:
                        if (c)
                                read_from(c, false);
                        break;
                case 7: {
                        if (!(a = take(&p, end, 1)))
                                break;
                        unsigned k = arg >> 1;
                        for (unsigned i = 0; i <= *a; i++) {
                                struct client *f = connect_one((uint8_t)(k < 4 ? k : 20 + k));
                                if (f && (arg & 1))
                                        write_to(f, (const uint8_t *)&hello, sizeof(hello), false);
                        }
                        break;
                }
                case 9:
                        if (c && c->hello_pos < sizeof(hello)) {
                                size_t n = 1 + arg % 16, left = sizeof(hello) - c->hello_pos;
                                write_to(c, (const uint8_t *)&hello + c->hello_pos,
                                         n < left ? n : left, false);
                                c->hello_pos += n < left ? n : left;
                        }
                        break;
                }
        }
        run_idle();
        for (unsigned i = 0; i < n_clients; i++)
                read_from(&clients[i], true);
        /* every client closes: the server lets go of everything it held */
        while (n_clients)
                drop(&clients[n_clients - 1]);
        run_idle();
        if (serve_held(srv) || serve_connections(srv)) {
                fprintf(stderr,
                        "fuzz-handshake: %u held and %u waiting once every client closed and the "
                        "loop was idle\n",
                        serve_held(srv), serve_connections(srv));
                abort();
        }
        srv = serve_free(srv);
        ev = sd_event_unref(ev);
        if (count_fds() != fds_base) {
                fprintf(stderr, "fuzz-handshake: %d descriptors open after the input, %d before\n",
                        count_fds(), fds_base);
                abort();
        }
        return 0;
}
