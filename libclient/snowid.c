/* SPDX-License-Identifier: MIT */
/* Getting a segment from snowidd (handshake.h), following a newer one,
 * closing, inspecting; the ID path is in next.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

/* How often a waiting handle may ask the socket for a newer segment. */
#define FOLLOW_EVERY_NS INT64_C(20000000)
/* snowid_open() asks again after a connection closed unanswered, this many
 * times (10 ms apart) */
#define SNOWID_OPEN_RESETS 3

_Atomic int snowid_tsc_allowed;
__thread int snowid_thread_tsc;

/* RDTSC made to fault in this thread (prctl PR_SET_TSC, PR_TSC_SIGSEGV):
 * no TSC clock here, and no vDSO either (it may read the TSC itself). */
int snowid_thread_tsc_check(void)
{
        int mode = 0, t = 1;
#ifdef PR_GET_TSC
        if (prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_SIGSEGV)
                t = -1;
#endif
        (void)mode;
        snowid_thread_tsc = t;
        return t;
}

/* CLOCK_MONOTONIC from the kernel itself, for a process in which RDTSC
 * faults (and the vDSO with it, on a host whose clocksource is tsc). */
int64_t snowid_syscall_monotonic_ns(void)
{
        struct timespec ts;
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t snowid_monotonic_ns_call(void)
{
        return monotonic_ns();
}

/* The real CLOCK_MONOTONIC (tests fake monotonic_ns(), not this). */
static int64_t real_monotonic_ns(void)
{
        if (thread_tsc() < 0)
                return snowid_syscall_monotonic_ns();
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void seg_free(struct seg *g)
{
        if (!g)
                return;
        if (g->ctl)
                munmap((void *)g->ctl, sizeof(struct shm_ctl));
        if (g->ctr)
                munmap(g->ctr, sizeof(struct shm_ctr));
        free(g);
}

static int memfd_sealed(int fd, size_t size)
{
        const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != size)
                return 0;
        int got = fcntl(fd, F_GET_SEALS);
        /* no other process can resize it under us (SIGBUS) */
        return got >= 0 && (got & seals) == seals;
}

/* Maps the two descriptors (not closed here) as one segment. */
static int seg_map(int ctl_fd, int ctr_fd, struct seg **ret)
{
        if (!memfd_sealed(ctl_fd, sizeof(struct shm_ctl)) ||
            !memfd_sealed(ctr_fd, sizeof(struct shm_ctr)))
                return -EPROTO;
        struct seg *g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        void *ctl = mmap(NULL, sizeof(struct shm_ctl), PROT_READ, MAP_SHARED, ctl_fd, 0);
        void *ctr =
                mmap(NULL, sizeof(struct shm_ctr), PROT_READ | PROT_WRITE, MAP_SHARED, ctr_fd, 0);
        g->ctl = ctl == MAP_FAILED ? NULL : ctl;
        g->ctr = ctr == MAP_FAILED ? NULL : ctr;
        int r = !g->ctl || !g->ctr ? -errno : 0;
        /* only the control object's identity counts: the counter object is
         * writable by every client, so its identity line proves nothing
         * (and a client that spoils it must not stop the others) */
        if (r == 0 && shm_ctl_check(g->ctl, sizeof(struct shm_ctl)) < 0)
                r = -EPROTO;
        if (r < 0) {
                seg_free(g);
                return r;
        }
        *ret = g;
        return 0;
}

/* The socket may only be made by the daemon or root.  Every directory on
 * the way is owned by root or the peer; the last one is writable by its
 * owner alone, the others too or sticky (like /tmp); the socket is root's or
 * the peer's. */
static int dir_trusted(const char *d, uid_t peer, int final)
{
        struct stat st;
        if (lstat(d, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != peer))
                return -EPERM;
        if ((st.st_mode & 0022) && (final || !(st.st_mode & S_ISVTX)))
                return -EPERM;
        return 0;
}

static int socket_trusted(const char *path, uid_t peer)
{
        char dir[SHM_SOCK_PATH_MAX];
        struct stat st;

        if (path[0] != '/')
                return -EINVAL;
        snprintf(dir, sizeof(dir), "%s", path);
        size_t end = (size_t)(strrchr(dir, '/') - dir); /* the socket's directory ends here */
        for (size_t k = 0; k <= end; k++) {
                if (dir[k] != '/')
                        continue;
                int r;
                if (k == 0)
                        r = dir_trusted("/", peer, end == 0);
                else {
                        dir[k] = 0;
                        r = dir_trusted(dir, peer, k == end);
                        dir[k] = '/';
                }
                if (r < 0)
                        return r;
        }
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode) || (st.st_uid != 0 && st.st_uid != peer))
                return -EPERM;
        return 0;
}

/* Reads the welcome and the descriptors that come with it. */
static int read_welcome(int fd, struct shm_welcome *w, int fds[2], int *nfds)
{
        size_t got = 0;
        *nfds = 0;
        while (got < sizeof(*w)) {
                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(4 * sizeof(int))];
                } u;
                struct iovec iov = {.iov_base = (char *)w + got, .iov_len = sizeof(*w) - got};
                struct msghdr m = {.msg_iov = &iov,
                                   .msg_iovlen = 1,
                                   .msg_control = u.buf,
                                   .msg_controllen = sizeof(u.buf)};
                ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                int bad = n < 0 || (m.msg_flags & MSG_CTRUNC);
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c; c = CMSG_NXTHDR(&m, c)) {
                        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                                continue;
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int f;
                                memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (*nfds < 2)
                                        fds[(*nfds)++] = f;
                                else {
                                        close(f);
                                        bad = 1;
                                }
                        }
                }
                if (n < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
                if (bad)
                        return -EPROTO; /* more than it should send */
                if (n == 0)
                        return -ECONNRESET; /* closed without (all of) an answer */
                got += (size_t)n;
        }
        return 0;
}

/* One handshake with the daemon at path (handshake.h). */
static int handshake(const char *path, int64_t timeout_ns, struct seg **ret)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct timeval tv = {.tv_sec = timeout_ns / 1000000000,
                             .tv_usec = timeout_ns % 1000000000 / 1000};
        struct ucred cred;
        socklen_t len = sizeof(cred);
        struct shm_hello hello;
        struct shm_welcome w;
        int fds[2] = {-1, -1}, nfds = 0, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
                goto out;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                r = -errno;
                goto out;
        }
        r = socket_trusted(path, cred.uid);
        if (r < 0)
                goto out;

        shm_hello_make(&hello);
        int64_t t0 = real_monotonic_ns();
        ssize_t n = send(fd, &hello, sizeof(hello), MSG_NOSIGNAL);
        bool sent = n == (ssize_t)sizeof(hello);
        if (!sent && !(n < 0 && errno == EPIPE)) {
                r = n < 0 && errno == EAGAIN ? -ETIMEDOUT : -EPROTO;
                goto out;
        }
        /* EPIPE: closed before the hello, which a refusal at accept does
         * after its welcome: that may be waiting still */
        r = read_welcome(fd, &w, fds, &nfds);
        if (!sent && (r < 0 || w.status == 0))
                r = -ECONNRESET;
        int64_t t1 = real_monotonic_ns();
        if (r < 0)
                goto out;
        r = -EPROTO;
        if (memcmp(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic)) != 0)
                goto out;
        if (w.status != 0) {
                r = w.status == -EACCES || w.status == -EAGAIN ? w.status : -EPROTO;
                goto out;
        }
        if (nfds != 2 || w.version != SHM_VERSION || w.ctl_size != sizeof(struct shm_ctl) ||
            w.ctr_size != sizeof(struct shm_ctr))
                goto out;
        /* the daemon read its clock between our two readings, unless its
         * CLOCK_MONOTONIC is not ours (another time namespace) */
        if (w.mono_ns < t0 || w.mono_ns > t1) {
                r = -EXDEV;
                goto out;
        }
        if ((fcntl(fds[0], F_GETFL) & O_ACCMODE) != O_RDONLY)
                goto out; /* the control data must come read-only */
        struct seg *g;
        r = seg_map(fds[0], fds[1], &g);
        if (r < 0)
                goto out;
        if (g->ctl->nonce != w.nonce) {
                seg_free(g);
                r = -EPROTO;
                goto out;
        }
        *ret = g;
out:
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        close(fd);
        return r;
}

/* The key of a handle's UUID random bits (uuid7.c).  It makes nothing
 * unique, so it never waits for the kernel's pool (GRND_NONBLOCK, early at
 * boot) and makes do with the clock and the pid where getrandom() fails. */
static uint64_t uuid_key_new(void)
{
        uint64_t k;
        if (getrandom(&k, sizeof(k), GRND_NONBLOCK) == (ssize_t)sizeof(k))
                return k;
        struct timespec ts;
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts); /* not the vDSO: see tsc_policy() */
        return (uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 20 ^
               (uint64_t)(uintptr_t)&k;
}

/* The TSC clock is a process's to refuse: SNOWID_NO_TSC set (to anything
 * but 0).  Read at each open. */
static void tsc_policy(void)
{
        int allowed = SHM_HAVE_TSC;
        const char *e = getenv("SNOWID_NO_TSC");
        if (e && *e && strcmp(e, "0") != 0)
                allowed = 0;
        WRITE_ONCE(snowid_tsc_allowed, allowed);
        /* and this thread's RDTSC, afresh (a prctl since its last check) */
        snowid_thread_tsc_check();
}

static snowid *handle_new(const char *path)
{
        snowid *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        tsc_policy();
        atomic_init(&s->max_wait_ns, SNOWID_MAX_WAIT_DEFAULT_USEC * 1000);
        atomic_init(&s->next_follow_ns, 0);
        atomic_init(&s->seg, NULL);
        atomic_init(&s->follower, 0);
        s->uuid_key = uuid_key_new();
        snprintf(s->path, sizeof(s->path), "%s", path ? path : "");
        return s;
}

SNOWID_EXPORT int snowid_open(const char *instance, snowid **ret)
{
        char path[SHM_SOCK_PATH_MAX];
        struct seg *g;

        if (!ret)
                return -EINVAL;
        instance = shm_instance_pick(instance);
        if (!instance)
                return -EINVAL;
        int r = shm_socket_path(path, sizeof(path), NULL, instance);
        if (r < 0)
                return r;
        snowid *s = handle_new(path);
        if (!s)
                return -ENOMEM;
        /* -EAGAIN: snowidd holds many answers this user has not closed yet
         * (a burst of clients starting at once): they go within moments.
         * -ECONNRESET: closed unanswered (a snowidd killed mid-handshake, or
         * evicting under a flood): the socket outlives a restart, and the
         * next snowidd answers from its backlog */
        for (int attempt = 0, resets = 0;; attempt++) {
                r = handshake(path, (int64_t)SHM_HS_TIMEOUT_MS * 1000000, &g);
                if (r == -ECONNRESET ? ++resets > SNOWID_OPEN_RESETS
                                     : r != -EAGAIN || attempt == 100)
                        break;
                struct timespec ts = {.tv_nsec = 10000000};
                nanosleep(&ts, NULL);
        }
        if (r < 0) {
                snowid_close(s);
                return r;
        }
        atomic_init(&s->seg, g);
        *ret = s;
        return 0;
}

SNOWID_EXPORT int snowid_open_fds(int ctl_fd, int ctr_fd, const char *path, snowid **ret)
{
        struct seg *g = NULL;
        int r = seg_map(ctl_fd, ctr_fd, &g);
        close(ctl_fd);
        close(ctr_fd);
        if (r < 0)
                return r;
        snowid *s = handle_new(path);
        if (!s) {
                seg_free(g);
                return -ENOMEM;
        }
        atomic_init(&s->seg, g);
        *ret = s;
        return 0;
}

/* Moving from old to n, a newer segment, keeps each thread's IDs increasing:
 * n's live counter is raised past the ms old's live counter reached (the
 * daemon does the same at a switch).  Raising a counter is always safe: a
 * value is still checked against n's deadline and ceiling.  A counter far
 * ahead of n's ID time (damage) is not carried over.  0 while n is not
 * published yet (the caller waits on old, and asks again). */
static int carry_over(const struct seg *old, const struct seg *n)
{
        const struct shm_ctl *oc = old->ctl, *nc = n->ctl;
        /* pairs with store_release(gen) in shm_pub_switch(): n's layout and
         * line are those of this generation */
        uint64_t ng = load_acquire(nc->gen), og = READ_ONCE(oc->gen);
        if (ng & 1)
                return 0;
        if (og <= 1 || READ_ONCE(oc->epoch_ms) != READ_ONCE(nc->epoch_ms))
                return 1;
        unsigned osb = READ_ONCE(oc->seq_bits) & 31, nsb = READ_ONCE(nc->seq_bits) & 31;
        /* an odd gen's line is the one live before it went odd */
        uint64_t want = (READ_ONCE(old->ctr->line[shm_line_index(og)].state) >> osb) + 1;
        if (want > READ_ONCE(nc->deadline) || want > id_time_ms(nc) + 1000 || want >> (63 - nsb))
                return 1;
        /* pairs with smp_wmb() in shm_pub_switch(): what was read above
         * belongs to generation ng, unless gen moved meanwhile */
        smp_rmb();
        if (READ_ONCE(nc->gen) != ng)
                return 1;
        _Atomic uint64_t *line = &n->ctr->line[shm_line_index(ng)].state;
        uint64_t cur = READ_ONCE(*line);
        /* relaxed: uniqueness comes from the RMW; a switch in between leaves
         * this on a retired line, and the daemon's switch follows it anyway */
        while (cur < want << nsb && !cas_relaxed(*line, &cur, want << nsb))
                ;
        return 1;
}

int snowid_follow(snowid *s, const struct seg *g, int64_t budget_ns)
{
        const struct shm_ctl *ctl = g->ctl;
        int64_t now = real_monotonic_ns();
        uint64_t now_ms = (uint64_t)now / 1000000, beat = READ_ONCE(ctl->heartbeat_ms);

        /* a live daemon's segment that is not retired: nothing newer exists */
        if (READ_ONCE(ctl->state) != SHM_STATE_RETIRED && beat <= now_ms &&
            now_ms - beat <= SHM_HEARTBEAT_STALE_MS)
                return 0;
        struct seg *cur = load_acquire(s->seg); /* pairs with the store_release below */
        if (cur != g) {
                /* another thread moved the handle: carry what this thread
                 * may have taken from g over, too */
                carry_over(g, cur);
                return 1;
        }
        if (now < READ_ONCE(s->next_follow_ns) || !s->path[0] || budget_ns < 1000000)
                return 0;
        /* one thread at a time; a flag left by a thread of the parent
         * process (a fork during a follow) is taken over */
        int me = getpid(), owner = READ_ONCE(s->follower);
        if (owner == me ||
            !atomic_compare_exchange_strong_explicit(&s->follower, &owner, me, memory_order_acquire,
                                                     memory_order_relaxed))
                return 0;
        int moved = 0;
        cur = load_acquire(s->seg);
        if (cur != g) {
                /* moved by another thread since the check above: carry
                 * over what this thread may have taken from g, as there */
                carry_over(g, cur);
                moved = 1;
        } else {
                WRITE_ONCE(s->next_follow_ns, now + FOLLOW_EVERY_NS);
                int64_t timeout = budget_ns < (int64_t)SHM_HS_TIMEOUT_MS * 1000000
                                          ? budget_ns
                                          : (int64_t)SHM_HS_TIMEOUT_MS * 1000000;
                struct seg *n;
                if (handshake(s->path, timeout, &n) == 0) {
                        if (n->ctl->nonce == g->ctl->nonce || !carry_over(cur, n))
                                seg_free(n); /* the same one, or not published yet */
                        else {
                                n->older = cur;
                                /* pairs with load_acquire(s->seg) in take():
                                 * a thread that sees n sees it mapped */
                                store_release(s->seg, n);
                                moved = 1;
                        }
                }
        }
        /* pairs with the acquire of the next follower's CAS */
        atomic_store_explicit(&s->follower, 0, memory_order_release);
        return moved;
}

SNOWID_EXPORT snowid *snowid_close(snowid *s)
{
        if (!s)
                return NULL;
        struct seg *g = atomic_load_explicit(&s->seg, memory_order_acquire);
        while (g) {
                struct seg *older = g->older;
                seg_free(g);
                g = older;
        }
        free(s);
        return NULL;
}

SNOWID_EXPORT int snowid_set_max_wait(snowid *s, uint64_t usec)
{
        if (!s)
                return -EINVAL;
        /* budget_spent() reads the budget as an int64_t: a longer one (about
         * 292 years and up) saturates to INT64_MAX, "wait as long as it takes" */
        uint64_t ns = usec > (uint64_t)INT64_MAX / 1000 ? (uint64_t)INT64_MAX : usec * 1000;
        WRITE_ONCE(s->max_wait_ns, ns);
        return 0;
}

/* Reads the layout as one consistent snapshot (the seqlock of next.c). */
static int read_layout(const struct shm_ctl *ctl, snowid_layout *l, uint64_t *ret_gen)
{
        for (int attempt = 0; attempt < 1000; attempt++) {
                /* pairs with store_release(gen) in shm_pub_switch() */
                uint64_t gen = load_acquire(ctl->gen);
                if (gen & 1) {
                        cpu_relax();
                        continue;
                }
                l->epoch_ms = READ_ONCE(ctl->epoch_ms);
                l->time_bits = READ_ONCE(ctl->time_bits);
                l->worker_bits = READ_ONCE(ctl->worker_bits);
                l->seq_bits = READ_ONCE(ctl->seq_bits);
                /* pairs with smp_wmb() in shm_pub_switch() */
                smp_rmb();
                if (READ_ONCE(ctl->gen) == gen) {
                        *ret_gen = gen;
                        return snowid_layout_check(l) < 0 ? -EPROTO : 0;
                }
        }
        return -EAGAIN;
}

SNOWID_EXPORT int snowid_get_layout(snowid *s, snowid_layout *ret)
{
        snowid_layout l;
        uint64_t gen;

        if (!s || !ret)
                return -EINVAL;
        /* pairs with snowid_follow(): a newer segment is seen mapped */
        const struct seg *g = load_acquire(s->seg);
        int r = read_layout(g->ctl, &l, &gen);
        /* gen odd for good: a retired segment, or its daemon gone mid-switch */
        if (r == -EAGAIN && snowid_follow(s, g, (int64_t)READ_ONCE(s->max_wait_ns)))
                r = read_layout(load_acquire(s->seg)->ctl, &l, &gen);
        if (r < 0)
                return r;
        *ret = l;
        return 0;
}

/* The status calls' versions (libsnowid.map).  The shared library has two
 * of each: name@@SNOWID_1.2, the sized struct that programs link to now, and
 * name@SNOWID_1.0, the struct of then, for programs built against it.  GCC
 * sets them with its symver attribute (which LTO keeps), clang with .symver
 * directives.  The static library (SNOWID_STATIC) has no versions, so that
 * it links into shared objects too: the sized calls under their own names. */
#ifdef SNOWID_STATIC
#define SIZED(name) name
#define SYMVER(impl, versioned)
#else
#define SIZED(name) name##_v1_2
#if __has_attribute(symver)
#define SYMVER(impl, versioned) __attribute__((symver(versioned)))
#else
#define SYMVER(impl, versioned) __asm__(".symver " #impl ", " versioned);
#endif
#endif

/* The bytes of type up to the end of field: the least a caller's struct may
 * have, its size and first field. */
#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Copies as much of a filled struct as the caller's holds (its size field,
 * the first member, says how much) and sets that size field to what was
 * copied; -EINVAL if the caller's struct ends before first_end. */
static int fill_sized(void *ret, const void *full, size_t full_size, size_t first_end)
{
        size_t want;
        memcpy(&want, ret, sizeof(want));
        if (want < first_end)
                return -EINVAL;
        size_t n = want < full_size ? want : full_size;
        memcpy(ret, full, n);
        memcpy(ret, &n, sizeof(n));
        return 0;
}

static int host_stats(snowid *s, snowid_host_stats *ret)
{
        if (!s)
                return -EINVAL;
        const struct seg *g = load_acquire(s->seg); /* pairs with snowid_follow() */
        const struct shm_stats *st = &g->ctr->stats;
        const struct shm_ctl *ctl = g->ctl;
        uint64_t gen = load_acquire(ctl->gen); /* pairs with shm_pub_switch() */
        unsigned sb = READ_ONCE(ctl->seq_bits) & 31;
        /* the live counter's current ms has not closed yet: count it too */
        uint64_t open =
                READ_ONCE(g->ctr->line[shm_line_index(gen)].state) & ((UINT64_C(1) << sb) - 1);
        *ret = (snowid_host_stats){
                .size = sizeof(*ret),
                .issued = READ_ONCE(st->issued) + (gen & 1 ? 0 : open),
                .waits_ceiling = READ_ONCE(st->waits_ceiling),
                .waits_deadline = READ_ONCE(st->waits_deadline),
                .waits_switch = READ_ONCE(st->waits_switch),
                .eagain = READ_ONCE(st->eagain),
                .dropped = READ_ONCE(st->dropped),
        };
        return 0;
}

/* SNOWID_1.2 and later: the caller says how large its struct is */
SYMVER(snowid_get_host_stats_v1_2, "snowid_get_host_stats@@SNOWID_1.2")
SNOWID_EXPORT int SIZED(snowid_get_host_stats)(snowid *s, snowid_host_stats *ret)
{
        snowid_host_stats hs;
        if (!ret)
                return -EINVAL;
        int r = host_stats(s, &hs);
        return r < 0 ? r : fill_sized(ret, &hs, sizeof(hs), FIELD_END(snowid_host_stats, issued));
}

#ifndef SNOWID_STATIC
/* SNOWID_1.0: the struct as it was then, without size */
struct snowid_host_stats_v1_0 {
        uint64_t issued, waits_ceiling, waits_deadline, waits_switch, eagain, dropped;
};

SYMVER(snowid_get_host_stats_v1_0, "snowid_get_host_stats@SNOWID_1.0")
SNOWID_EXPORT int snowid_get_host_stats_v1_0(snowid *s, struct snowid_host_stats_v1_0 *ret)
{
        snowid_host_stats hs;
        if (!ret)
                return -EINVAL;
        int r = host_stats(s, &hs);
        if (r < 0)
                return r;
        *ret = (struct snowid_host_stats_v1_0){hs.issued,       hs.waits_ceiling, hs.waits_deadline,
                                               hs.waits_switch, hs.eagain,        hs.dropped};
        return 0;
}
#endif

SNOWID_EXPORT int snowid_get_worker_range(snowid *s, uint32_t *ret_from, uint32_t *ret_to)
{
        if (!s || !ret_from || !ret_to)
                return -EINVAL;
        const struct shm_ctl *ctl = load_acquire(s->seg)->ctl; /* pairs with snowid_follow() */
        uint32_t from = READ_ONCE(ctl->range_from), end = READ_ONCE(ctl->range_end);
        if (end == 0 || from >= end)
                return -ENODATA;
        *ret_from = from;
        *ret_to = end - 1;
        return 0;
}

SNOWID_EXPORT int snowid_get_segment(snowid *s, const void **ret_ctl, void **ret_ctr)
{
        if (!s || !ret_ctl || !ret_ctr)
                return -EINVAL;
        const struct seg *g = load_acquire(s->seg); /* pairs with snowid_follow() */
        *ret_ctl = g->ctl;
        *ret_ctr = g->ctr;
        return 0;
}

static int status(snowid *s, snowid_status *ret)
{
        if (!s)
                return -EINVAL;
        const struct shm_ctl *ctl = load_acquire(s->seg)->ctl; /* pairs with snowid_follow() */
        snowid_status st = {
                .size = sizeof(st),
                .worker = READ_ONCE(ctl->worker),
                .state = (int)READ_ONCE(ctl->state),
                .generation = load_acquire(ctl->gen), /* pairs with shm_pub_switch() */
                .deadline_ms = READ_ONCE(ctl->deadline),
                .offset_ns = READ_ONCE(ctl->offset_ns),
                .daemon_pid = READ_ONCE(ctl->pid),
                /* a line is published: span != 0 (tsc.h); whether it is
                 * current is each client's check, at each read */
                .tsc_clock = READ_ONCE(ctl->tsc.span) != 0,
        };
        st.deadline_unix_ms = READ_ONCE(ctl->epoch_ms) + st.deadline_ms;
        /* saturating: a damaged deadline is far from now either way */
        uint64_t now = id_time_ms(ctl), d = st.deadline_ms;
        st.headroom_ms = d >= now ? (int64_t)(d - now > INT64_MAX ? INT64_MAX : d - now)
                                  : -(int64_t)(now - d > INT64_MAX ? INT64_MAX : now - d);
        if (st.generation & 1)
                st.headroom_ms = 0;
        *ret = st;
        return 0;
}

/* SNOWID_1.2 and later: the caller says how large its struct is */
SYMVER(snowid_get_status_v1_2, "snowid_get_status@@SNOWID_1.2")
SNOWID_EXPORT int SIZED(snowid_get_status)(snowid *s, snowid_status *ret)
{
        snowid_status st;
        if (!ret)
                return -EINVAL;
        int r = status(s, &st);
        return r < 0 ? r : fill_sized(ret, &st, sizeof(st), FIELD_END(snowid_status, worker));
}

#ifndef SNOWID_STATIC
/* SNOWID_1.0: the struct as it was then, without size and tsc_clock */
struct snowid_status_v1_0 {
        uint32_t worker;
        int state;
        uint64_t generation, deadline_ms, deadline_unix_ms;
        int64_t headroom_ms, offset_ns;
        int32_t daemon_pid;
};

SYMVER(snowid_get_status_v1_0, "snowid_get_status@SNOWID_1.0")
SNOWID_EXPORT int snowid_get_status_v1_0(snowid *s, struct snowid_status_v1_0 *ret)
{
        snowid_status st;
        if (!ret)
                return -EINVAL;
        int r = status(s, &st);
        if (r < 0)
                return r;
        *ret = (struct snowid_status_v1_0){
                .worker = st.worker,
                .state = st.state,
                .generation = st.generation,
                .deadline_ms = st.deadline_ms,
                .deadline_unix_ms = st.deadline_unix_ms,
                .headroom_ms = st.headroom_ms,
                .offset_ns = st.offset_ns,
                .daemon_pid = st.daemon_pid,
        };
        return 0;
}
#endif
