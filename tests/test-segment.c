/* SPDX-License-Identifier: MIT */
/* The segment: its offsets, the publisher, the handshake, and every way
 * getting a segment fails. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "barrier.h"
#include "handshake.h"
#include "helpers.h"
#include "snowid.h"

static const char *inst;

static int setup(void **state)
{
        (void)state;
        inst = test_instance("segment");
        test_dir();
        return 0;
}

static void test_offsets(void **state)
{
        (void)state;
        /* the hot fields share one line, apart from the identity fields */
        assert_int_equal(offsetof(struct shm_ctl, gen) % 64, 0);
        assert_true(offsetof(struct shm_ctl, lead_ms) < 128);
        for (unsigned i = 0; i < SHM_LINES; i++)
                assert_int_equal(offsetof(struct shm_ctr, line[i]), i * 64);
        /* each generation starts on a fresh line; 64 switches go round */
        assert_int_not_equal(shm_line_index(2), shm_line_index(4));
        assert_int_equal(shm_line_index(2), shm_line_index(2 + 2 * SHM_LINES));
}

static void test_instance_names(void **state)
{
        (void)state;
        char longname[66];
        memset(longname, 'a', 65);
        longname[65] = 0;
        assert_true(shm_instance_valid("default"));
        assert_true(shm_instance_valid("A-z_09"));
        assert_false(shm_instance_valid(""));
        assert_false(shm_instance_valid("a/b"));
        assert_false(shm_instance_valid("a.b"));
        assert_false(shm_instance_valid(longname));
        longname[64] = 0;
        assert_true(shm_instance_valid(longname));
        snowid *s = (snowid *)0x1;
        assert_int_equal(snowid_open("../etc", &s), -EINVAL);
        assert_ptr_equal(s, (snowid *)0x1);
        setenv("SNOWID_INSTANCE", "bad name", 1);
        assert_int_equal(snowid_open(NULL, &s), -EINVAL);
        setenv("SNOWID_INSTANCE", inst, 1);
        assert_int_equal(snowid_open(NULL, &s), -ENOENT);
        unsetenv("SNOWID_INSTANCE");
        /* a relative runtime directory: refused before any connect */
        const char *rd = getenv("SNOWID_RUNTIME_DIR");
        char *saved = rd ? strdup(rd) : NULL;
        setenv("SNOWID_RUNTIME_DIR", "run/snowid", 1);
        assert_int_equal(snowid_open(inst, &s), -EINVAL);
        assert_ptr_equal(s, (snowid *)0x1);
        if (saved)
                setenv("SNOWID_RUNTIME_DIR", saved, 1);
        else
                unsetenv("SNOWID_RUNTIME_DIR");
        free(saved);
        /* a socket path that cannot fit a sun_path */
        char path[SHM_SOCK_PATH_MAX];
        char dir[80];
        memset(dir, 'd', sizeof(dir) - 1);
        dir[0] = '/';
        dir[sizeof(dir) - 1] = 0;
        assert_int_equal(shm_socket_path(path, sizeof(path), dir, longname), -ENAMETOOLONG);
}

static void test_absent(void **state)
{
        (void)state;
        snowid *s = NULL;
        assert_int_equal(snowid_open(inst, &s), -ENOENT);
        assert_null(s);
        assert_null(snowid_close(NULL));
}

static void test_publisher_lock_and_adopt(void **state)
{
        (void)state;
        struct shm_pub *a, *b;
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &a), 0);
        assert_false(a->reused);
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), -EBUSY);
        struct shm_publication p = test_publication(3, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(a, &p), 0);
        uint64_t nonce = a->ctl->nonce;
        /* what systemd's fd store keeps across a restart */
        int ctl = dup(a->ctl_fd), ctr = dup(a->ctr_fd);
        a = shm_pub_close(a);
        assert_int_equal(shm_pub_open(test_dir(), inst, ctl, ctr, &b), 0);
        assert_true(b->reused);
        assert_int_equal(b->ctl->nonce, nonce);
        assert_int_equal(READ_ONCE(b->ctl->gen), 2);
        assert_int_equal(READ_ONCE(b->ctl->worker), 3);
        /* bad publications change nothing */
        p = test_publication(1024, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(b, &p), -EINVAL);
        p = test_publication(1, 3000, 2000, 0);
        assert_int_equal(shm_pub_switch(b, &p), -ERANGE);
        p = test_publication(1, 1, UINT64_C(1) << 41, 0);
        assert_int_equal(shm_pub_switch(b, &p), -ERANGE);
        assert_int_equal(READ_ONCE(b->ctl->gen), 2);
        /* the deadline only rises */
        assert_int_equal(shm_pub_extend(b, 1500), 0);
        assert_int_equal(READ_ONCE(b->ctl->deadline), 2000);
        assert_int_equal(shm_pub_extend(b, 2500), 0);
        assert_int_equal(READ_ONCE(b->ctl->deadline), 2500);
        shm_pub_close(b);
}

/* A restart that gets no segment back (no fd store) finds where ID time
 * stood in the lock file: for the same epoch, in the same boot, undamaged. */
static void test_lock_file_remembers_id_time(void **state)
{
        (void)state;
        struct shm_pub *a, *b;
        int64_t off = 0;
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &a), 0);
        assert_false(shm_pub_remembered(a, 1, &off)); /* a first start: nothing */
        assert_int_equal(shm_pub_remembered_worker(a, 1), -1);
        struct shm_publication p = test_publication(3, 1000, 2000, INT64_C(7000000000));
        assert_int_equal(shm_pub_switch(a, &p), 0);
        shm_pub_set_offset(a, INT64_C(6500000000)); /* slewing back */
        uint64_t epoch = p.layout.epoch_ms;
        a = shm_pub_close(a); /* as kill -9 leaves it: nothing cleaned up */
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), 0);
        assert_false(b->reused);
        assert_true(shm_pub_remembered(b, epoch, &off));
        assert_int_equal(off, INT64_C(6500000000));
        assert_false(shm_pub_remembered(b, epoch + 1, &off)); /* another epoch */
        /* and the number it published, which the holder claims first */
        assert_int_equal(shm_pub_remembered_worker(b, epoch), 3);
        assert_int_equal(shm_pub_remembered_worker(b, epoch + 1), -1);
        b = shm_pub_close(b);

        /* a lock file whose first fields an earlier snowidd wrote anew (an
         * offset of its own): its ID time counts, the number left behind
         * does not */
        char name[4096];
        snprintf(name, sizeof(name), "%s/%s.lock", test_dir(), inst);
        int fd = open(name, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        int64_t other = INT64_C(6600000000);
        assert_int_equal(pwrite(fd, &other, sizeof(other), 56), (ssize_t)sizeof(other));
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), 0);
        assert_true(shm_pub_remembered(b, epoch, &off));
        assert_int_equal(off, other);
        assert_int_equal(shm_pub_remembered_worker(b, epoch), -1);
        b = shm_pub_close(b);
        /* one it wrote from scratch (no number in it) */
        assert_int_equal(ftruncate(fd, 64), 0);
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), 0);
        assert_true(shm_pub_remembered(b, epoch, &off));
        assert_int_equal(off, other);
        assert_int_equal(shm_pub_remembered_worker(b, epoch), -1);
        b = shm_pub_close(b);

        /* damaged, or from another boot: forgotten */
        assert_int_equal(pwrite(fd, "X", 1, 0), 1);
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), 0);
        assert_false(shm_pub_remembered(b, epoch, &off));
        assert_int_equal(shm_pub_switch(b, &p), 0); /* written anew */
        b = shm_pub_close(b);
        assert_int_equal(pwrite(fd, "x", 1, 8), 1); /* no boot id has this byte */
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &b), 0);
        assert_false(shm_pub_remembered(b, epoch, &off));
        shm_pub_close(b);
        close(fd);
}

/* Adopting what the fd store hands back refuses anything damaged. */
static void adopt_after(void (*damage)(struct shm_pub *p), int want_reused)
{
        struct shm_pub *a, *b;
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &a), 0);
        struct shm_publication p = test_publication(3, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(a, &p), 0);
        uint64_t nonce = a->ctl->nonce;
        damage(a);
        int ctl = dup(a->ctl_fd), ctr = dup(a->ctr_fd);
        shm_pub_close(a);
        assert_int_equal(shm_pub_open(test_dir(), inst, ctl, ctr, &b), 0);
        assert_int_equal(b->reused, want_reused);
        assert_int_equal(b->ctl->nonce == nonce, want_reused);
        assert_int_equal(b->ctl->version, SHM_VERSION);
        shm_pub_close(b);
}

static void nothing(struct shm_pub *p)
{
        (void)p;
}
static void bad_version(struct shm_pub *p)
{
        p->ctl->version = 99;
}
static void foreign_ctr(struct shm_pub *p)
{
        p->ctr->nonce ^= 0xdead;
}
static void retired(struct shm_pub *p)
{
        WRITE_ONCE(p->ctl->state, SHM_STATE_RETIRED);
}
static void one_line_far_ahead(struct shm_pub *p)
{
        /* 2000 ms is ID time 0 + deadline: a line a day ahead was written by a client */
        WRITE_ONCE(p->ctr->line[17].state, (UINT64_C(86400000) * 2) << 12);
}
static void all_lines_huge(struct shm_pub *p)
{
        for (unsigned i = 0; i < SHM_LINES; i++)
                WRITE_ONCE(p->ctr->line[i].state, UINT64_C(1) << 62);
}

static void test_adopt_refuses_damaged(void **state)
{
        (void)state;
        adopt_after(nothing, 1);
        adopt_after(bad_version, 0);
        adopt_after(foreign_ctr, 0);
        adopt_after(retired, 0);
        adopt_after(one_line_far_ahead, 0);
        adopt_after(all_lines_huge, 0);
        /* descriptors that are not sealed memfds at all */
        struct shm_pub *b;
        int fd1 = open("/dev/null", O_RDWR), fd2 = open("/dev/null", O_RDWR);
        assert_int_equal(shm_pub_open(test_dir(), inst, fd1, fd2, &b), 0);
        assert_false(b->reused);
        shm_pub_close(b);
}

/* The segment's objects resist every client: no resize, no writes to the
 * control data, not even through a reopened descriptor. */
static void test_seals_and_modes(void **state)
{
        (void)state;
        struct shm_pub *p;
        struct stat st;
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &p), 0);
        assert_int_equal(fstat(p->ctl_fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
        assert_int_equal(fcntl(p->ctl_fd, F_GET_SEALS) & want, want);
        assert_int_equal(fcntl(p->ctr_fd, F_GET_SEALS) & want, want);
        assert_int_equal(fcntl(p->ctl_ro_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        /* the SIGBUS of old: a truncate or a resize of either object */
        errno = 0;
        assert_int_equal(ftruncate(p->ctr_fd, 0), -1);
        assert_int_equal(errno, EPERM);
        assert_int_equal(ftruncate(p->ctr_fd, 1 << 20), -1);
        assert_int_equal(errno, EPERM);
        assert_int_equal(ftruncate(p->ctl_fd, 0), -1);
        assert_int_equal(fcntl(p->ctr_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
        /* the control descriptor clients get maps read-only, and stays so */
        assert_ptr_equal(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, p->ctl_ro_fd, 0),
                         MAP_FAILED);
        void *m = mmap(NULL, sizeof(struct shm_ctl), PROT_READ, MAP_SHARED, p->ctl_ro_fd, 0);
        assert_ptr_not_equal(m, MAP_FAILED);
        assert_int_equal(mprotect(m, sizeof(struct shm_ctl), PROT_READ | PROT_WRITE), -1);
        munmap(m, sizeof(struct shm_ctl));
        if (geteuid() == 0) {
                /* a client of another user cannot reopen it for writing */
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        char path[64];
                        snprintf(path, sizeof(path), "/proc/self/fd/%d", p->ctl_ro_fd);
                        if (setgid(65534) < 0 || setuid(65534) < 0)
                                _exit(10);
                        int fd = open(path, O_RDWR);
                        _exit(fd < 0 && errno == EACCES ? 0 : 11);
                }
                int status;
                assert_int_equal(waitpid(pid, &status, 0), pid);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
        shm_pub_close(p);
}

/* Opens a publisher, publishes, lets damage() spoil one object, opens. */
static int open_after(void (*damage)(struct shm_pub *p))
{
        struct shm_pub *p;
        snowid *s = NULL;
        assert_int_equal(test_pub_open(inst, &p), 0);
        struct shm_publication pub = test_publication(3, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(p, &pub), 0);
        damage(p);
        int r = snowid_open(inst, &s);
        if (r == 0)
                snowid_close(s);
        else
                assert_null(s);
        test_pub_close(p);
        return r;
}

static void bad_magic(struct shm_pub *p)
{
        p->ctl->magic ^= 1;
}
static void bad_size_field(struct shm_pub *p)
{
        p->ctl->size = 4096;
}
static void bad_ctr_magic(struct shm_pub *p)
{
        p->ctr->magic = 0;
}

static void test_open_errors(void **state)
{
        (void)state;
        assert_int_equal(open_after(nothing), 0);
        assert_int_equal(open_after(bad_magic), -EPROTO);
        assert_int_equal(open_after(bad_version), -EPROTO);
        assert_int_equal(open_after(bad_size_field), -EPROTO);
        /* the counter object is every client's to write: its identity line
         * is not trusted, and a client that spoils it stops nobody */
        assert_int_equal(open_after(bad_ctr_magic), 0);
        assert_int_equal(open_after(foreign_ctr), 0);
}

static int refuse_nobody(uid_t uid, gid_t gid, void *userdata)
{
        (void)gid;
        (void)userdata;
        return uid != 65534;
}

static void test_refused_peer(void **state)
{
        (void)state;
        struct shm_pub *p;
        struct shm_server *srv;
        if (geteuid() != 0)
                skip(); /* it takes root to become another user */
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &p), 0);
        assert_int_equal(shm_server_start(p, test_dir(), inst, refuse_nobody, NULL, &srv), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                snowid *s = NULL;
                int r = snowid_open(inst, &s);
                _exit(r == -EACCES && s == NULL ? 0 : 11);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        /* root still may */
        snowid *s = NULL;
        assert_int_equal(snowid_open(inst, &s), 0);
        snowid_close(s);
        shm_server_stop(srv);
        shm_pub_close(p);
}

/* A socket in a directory that others can write is somebody's plant. */
static void test_planted_socket(void **state)
{
        (void)state;
        struct shm_pub *p;
        struct shm_server *srv;
        char dir[] = "/tmp/snowid-plant-XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(chmod(dir, 01777), 0);
        assert_int_equal(shm_pub_open(dir, inst, -1, -1, &p), 0);
        assert_int_equal(shm_server_start(p, dir, inst, NULL, NULL, &srv), 0);
        setenv("SNOWID_RUNTIME_DIR", dir, 1);
        snowid *s = NULL;
        assert_int_equal(snowid_open(inst, &s), -EPERM);
        assert_null(s);
        /* the same directory made safe: accepted */
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(snowid_open(inst, &s), 0);
        snowid_close(s);
        if (geteuid() == 0) {
                /* a directory of another user than the daemon's (root here) */
                assert_int_equal(chown(dir, 65534, 65534), 0);
                assert_int_equal(snowid_open(inst, &s), -EPERM);
                assert_int_equal(chown(dir, 0, 0), 0);
        }
        setenv("SNOWID_RUNTIME_DIR", test_dir(), 1);
        shm_server_stop(srv);
        shm_pub_close(p);
        char path[128];
        snprintf(path, sizeof(path), "%s/%s.sock", dir, inst);
        unlink(path);
        snprintf(path, sizeof(path), "%s/%s.lock", dir, inst);
        unlink(path);
        assert_int_equal(rmdir(dir), 0);
}

/* A snowidd killed mid-handshake, under systemd: the connection closes
 * unanswered, the listening socket stays, and the next snowidd answers.  The
 * fake reads one byte of each hello (the rest unread, so its close resets
 * the client), and before its last close moves the real server's socket
 * into place. */
struct resetter {
        int lfd, resets, seen;
        char real[SHM_SOCK_PATH_MAX], path[SHM_SOCK_PATH_MAX];
};

static void *resetter_run(void *arg)
{
        struct resetter *f = arg;
        for (int i = 0; i < f->resets; i++) {
                int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        break;
                char b;
                if (recv(c, &b, 1, 0) == 1)
                        f->seen++;
                if (i == f->resets - 1 && f->real[0] && rename(f->real, f->path) < 0)
                        f->seen = -1;
                close(c);
        }
        return NULL;
}

static int open_past_resets(int resets, bool real, int *seen)
{
        struct shm_pub *p;
        struct shm_server *srv = NULL;
        struct resetter f = {.resets = resets};
        char real_inst[SHM_INSTANCE_MAX + 1];
        snprintf(real_inst, sizeof(real_inst), "%s-real", inst);
        assert_int_equal(shm_pub_open(test_dir(), inst, -1, -1, &p), 0);
        if (real) {
                assert_int_equal(shm_server_start(p, test_dir(), real_inst, NULL, NULL, &srv), 0);
                assert_int_equal(shm_socket_path(f.real, sizeof(f.real), test_dir(), real_inst), 0);
        }
        assert_int_equal(shm_socket_path(f.path, sizeof(f.path), test_dir(), inst), 0);
        assert_int_equal(shm_listen(test_dir(), inst, &f.lfd), 0);
        assert_int_equal(fcntl(f.lfd, F_SETFL, 0), 0); /* the fake blocks in accept */
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, resetter_run, &f), 0);
        snowid *s = NULL;
        int r = snowid_open(inst, &s);
        snowid_close(s);
        if (r < 0)
                shutdown(f.lfd, SHUT_RDWR); /* ends the fake's accept */
        pthread_join(t, NULL);
        close(f.lfd);
        shm_server_stop(srv);
        shm_pub_close(p);
        unlink(f.path);
        *seen = f.seen;
        return r;
}

static void test_open_past_resets(void **state)
{
        (void)state;
        int seen;
        /* three closed unanswered, the fourth try served */
        assert_int_equal(open_past_resets(3, true, &seen), 0);
        assert_int_equal(seen, 3);
        /* four: the caller is told */
        assert_int_equal(open_past_resets(4, false, &seen), -ECONNRESET);
        assert_int_equal(seen, 4);
}

/* Raw handshakes, as another language's client would make them. */
static int raw_connect(void)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        assert_int_equal(shm_socket_path(sa.sun_path, sizeof(sa.sun_path), NULL, inst), 0);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

static int raw_status(const void *hello, size_t len)
{
        struct shm_welcome w;
        int fd = raw_connect();
        assert_int_equal(send(fd, hello, len, MSG_NOSIGNAL), (ssize_t)len);
        ssize_t n = recv(fd, &w, sizeof(w), MSG_WAITALL);
        close(fd);
        if (n != (ssize_t)sizeof(w))
                return 1;
        assert_memory_equal(w.magic, SHM_HS_WELCOME_MAGIC, 8);
        return w.status;
}

static void test_raw_handshake(void **state)
{
        (void)state;
        struct shm_pub *p;
        assert_int_equal(test_pub_open(inst, &p), 0);
        struct shm_hello h;
        shm_hello_make(&h);
        assert_int_equal(raw_status(&h, sizeof(h)), 0);
        struct shm_hello bad = h;
        bad.magic[0] = 'x';
        assert_int_equal(raw_status(&bad, sizeof(bad)), -EPROTO);
        bad = h;
        bad.min_version = bad.max_version = SHM_VERSION + 1;
        assert_int_equal(raw_status(&bad, sizeof(bad)), -EPROTO);
        bad = h;
        bad.min_version = 0, bad.max_version = 0xffffffff;
        assert_int_equal(raw_status(&bad, sizeof(bad)), 0);
        test_pub_close(p);
}

/* A client far behind: a segment that snowidd replaced is followed at once. */
static void test_follows_replacement(void **state)
{
        (void)state;
        struct shm_pub *p;
        snowid *s;
        uint64_t a, b;
        assert_int_equal(test_pub_open(inst, &p), 0);
        int64_t offset = shm_offset_for_wall(SNOWID_EPOCH_DEFAULT_MS);
        uint64_t now = (uint64_t)(shm_monotonic_ns() + offset) / 1000000;
        struct shm_publication pub = test_publication(3, now, now + 60000, offset);
        assert_int_equal(shm_pub_switch(p, &pub), 0);
        assert_int_equal(snowid_open(inst, &s), 0);
        assert_int_equal(snowid_next(s, &a), 0);
        uint64_t nonce = p->ctl->nonce;
        const struct shm_ctl *old = p->ctl;
        (void)old;
        /* a client writes every counter line far ahead: the next switch
         * publishes into a fresh segment and retires this one */
        all_lines_huge(p);
        pub = test_publication(4, now, now + 60000, offset);
        assert_int_equal(shm_pub_switch(p, &pub), 0);
        assert_int_equal(p->replaced, 1);
        assert_int_not_equal(p->ctl->nonce, nonce);
        assert_int_equal(snowid_next(s, &b), 0);
        snowid_status st = SNOWID_STATUS_INIT;
        assert_int_equal(snowid_get_status(s, &st), 0);
        assert_int_equal(st.worker, 4);
        assert_int_not_equal(a, b);
        snowid_close(s);
        test_pub_close(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_offsets),
                cmocka_unit_test_setup(test_instance_names, setup),
                cmocka_unit_test_setup(test_absent, setup),
                cmocka_unit_test_setup(test_publisher_lock_and_adopt, setup),
                cmocka_unit_test_setup(test_lock_file_remembers_id_time, setup),
                cmocka_unit_test_setup(test_adopt_refuses_damaged, setup),
                cmocka_unit_test_setup(test_seals_and_modes, setup),
                cmocka_unit_test_setup(test_open_errors, setup),
                cmocka_unit_test_setup(test_refused_peer, setup),
                cmocka_unit_test_setup(test_planted_socket, setup),
                cmocka_unit_test_setup(test_open_past_resets, setup),
                cmocka_unit_test_setup(test_raw_handshake, setup),
                cmocka_unit_test_setup(test_follows_replacement, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
