/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "barrier.h"
#include "publish.h"

int64_t shm_monotonic_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t shm_realtime_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t shm_offset_for_wall(uint64_t epoch_ms)
{
        return shm_realtime_ns() - (int64_t)epoch_ms * 1000000 - shm_monotonic_ns();
}

static void *map_fd(int fd, size_t size, int prot)
{
        void *m = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
        return m == MAP_FAILED ? NULL : m;
}

/* Opens an existing pair and checks it; 0 with both mapped, or < 0. */
static int pub_reuse(struct shm_pub *p)
{
        char name[SHM_NAME_MAX];
        struct stat st;

        shm_object_name(name, sizeof(name), p->instance, "ctl");
        p->ctl_fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (p->ctl_fd < 0)
                return -errno;
        shm_object_name(name, sizeof(name), p->instance, "ctr");
        p->ctr_fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (p->ctr_fd < 0)
                return -errno;
        if (fstat(p->ctl_fd, &st) < 0 || (size_t)st.st_size != sizeof(struct shm_ctl))
                return -EPROTO;
        if (fstat(p->ctr_fd, &st) < 0 || (size_t)st.st_size != sizeof(struct shm_ctr))
                return -EPROTO;
        p->ctl = map_fd(p->ctl_fd, sizeof(struct shm_ctl), PROT_READ | PROT_WRITE);
        p->ctr = map_fd(p->ctr_fd, sizeof(struct shm_ctr), PROT_READ | PROT_WRITE);
        if (!p->ctl || !p->ctr)
                return -errno;
        if (shm_ctl_check(p->ctl, sizeof(struct shm_ctl)) < 0 ||
            shm_ctr_check(p->ctr, sizeof(struct shm_ctr)) < 0 || p->ctl->nonce != p->ctr->nonce)
                return -EPROTO;
        return 0;
}

static void pub_unmap(struct shm_pub *p)
{
        if (p->ctl)
                munmap(p->ctl, sizeof(struct shm_ctl));
        if (p->ctr)
                munmap(p->ctr, sizeof(struct shm_ctr));
        if (p->ctl_fd >= 0)
                close(p->ctl_fd);
        if (p->ctr_fd >= 0)
                close(p->ctr_fd);
        p->ctl = NULL;
        p->ctr = NULL;
        p->ctl_fd = p->ctr_fd = -1;
}

/* Creates one object under a temporary name; the caller fills it and
 * renames it into place, so that no client ever maps it half-made. */
static int create_object(const char *instance, const char *suffix, size_t size, mode_t mode,
                         gid_t group, int *ret_fd, void **ret_map)
{
        char tmp[SHM_NAME_MAX + 8];
        char sfx[16];

        snprintf(sfx, sizeof(sfx), "%s.new", suffix);
        shm_object_name(tmp, sizeof(tmp), instance, sfx);
        shm_unlink(tmp);
        int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (ftruncate(fd, (off_t)size) < 0 || fchmod(fd, mode) < 0 ||
            (group != (gid_t)-1 && fchown(fd, (uid_t)-1, group) < 0)) {
                r = -errno;
                goto fail;
        }
        void *m = map_fd(fd, size, PROT_READ | PROT_WRITE);
        if (!m) {
                r = -errno;
                goto fail;
        }
        *ret_fd = fd;
        *ret_map = m;
        return 0; /* the caller fills it, then commit_object() renames it */
fail:
        close(fd);
        shm_unlink(tmp);
        return r;
}

static int commit_object(const char *instance, const char *suffix)
{
        char from[sizeof(SHM_DIR) + SHM_NAME_MAX + 8], to[sizeof(SHM_DIR) + SHM_NAME_MAX];

        snprintf(from, sizeof(from), "%s/snowid.%s.%s.new", SHM_DIR, instance, suffix);
        snprintf(to, sizeof(to), "%s/snowid.%s.%s", SHM_DIR, instance, suffix);
        return rename(from, to) < 0 ? -errno : 0;
}

static int pub_create(struct shm_pub *p, gid_t group)
{
        uint64_t nonce;
        void *m;
        int r;

        if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
                return -errno;

        r = create_object(p->instance, "ctr", sizeof(struct shm_ctr), 0660, group, &p->ctr_fd, &m);
        if (r < 0)
                return r;
        p->ctr = m;
        p->ctr->magic = SHM_MAGIC_CTR;
        p->ctr->version = SHM_VERSION;
        p->ctr->size = sizeof(struct shm_ctr);
        p->ctr->nonce = nonce;

        r = create_object(p->instance, "ctl", sizeof(struct shm_ctl), 0644, (gid_t)-1, &p->ctl_fd,
                          &m);
        if (r < 0)
                return r;
        p->ctl = m;
        p->ctl->magic = SHM_MAGIC_CTL;
        p->ctl->version = SHM_VERSION;
        p->ctl->size = sizeof(struct shm_ctl);
        p->ctl->nonce = nonce;
        snowid_layout l;
        snowid_layout_default(&l);
        WRITE_ONCE(p->ctl->epoch_ms, l.epoch_ms);
        WRITE_ONCE(p->ctl->time_bits, (uint8_t)l.time_bits);
        WRITE_ONCE(p->ctl->worker_bits, (uint8_t)l.worker_bits);
        WRITE_ONCE(p->ctl->seq_bits, (uint8_t)l.seq_bits);
        WRITE_ONCE(p->ctl->state, SHM_STATE_STARTING);
        /* odd: nothing published yet; clients wait, then -EAGAIN */
        WRITE_ONCE(p->ctl->gen, 1);

        /* counter first, so that a client that sees the new .ctl finds its .ctr */
        r = commit_object(p->instance, "ctr");
        if (r < 0)
                return r;
        return commit_object(p->instance, "ctl");
}

int shm_pub_open(const char *instance, gid_t group, struct shm_pub **ret)
{
        char name[SHM_NAME_MAX];
        int r;

        if (!shm_instance_valid(instance) || !ret)
                return -EINVAL;
        struct shm_pub *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        snprintf(p->instance, sizeof(p->instance), "%s", instance);
        p->ctl_fd = p->ctr_fd = -1;

        shm_object_name(name, sizeof(name), instance, "lock");
        p->lock_fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (p->lock_fd < 0) {
                r = -errno;
                goto fail;
        }
        if (flock(p->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                goto fail;
        }

        r = pub_reuse(p);
        if (r == 0) {
                p->reused = 1;
                if (fchmod(p->ctl_fd, 0644) < 0 || fchmod(p->ctr_fd, 0660) < 0 ||
                    (group != (gid_t)-1 && fchown(p->ctr_fd, (uid_t)-1, group) < 0)) {
                        r = -errno;
                        goto fail;
                }
        } else {
                pub_unmap(p);
                r = pub_create(p, group);
                if (r < 0)
                        goto fail;
        }
        WRITE_ONCE(p->ctl->pid, (int32_t)getpid());
        *ret = p;
        return 0;
fail:
        shm_pub_close(p);
        return r;
}

struct shm_pub *shm_pub_close(struct shm_pub *p)
{
        if (!p)
                return NULL;
        pub_unmap(p);
        if (p->lock_fd >= 0)
                close(p->lock_fd);
        free(p);
        return NULL;
}

int shm_pub_unlink(const char *instance)
{
        static const char *const suffixes[] = {"ctl", "ctr", "lock", "ctl.new", "ctr.new"};
        char name[SHM_NAME_MAX + 8];
        int r = 0;

        if (!shm_instance_valid(instance))
                return -EINVAL;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                shm_object_name(name, sizeof(name), instance, suffixes[i]);
                if (shm_unlink(name) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        return r;
}

/* Raises a counter line to at least v; a CAS loop, so that no value that a
 * client (even one that slept through switches) takes from it is lost. */
static void line_raise(struct shm_line *line, uint64_t v)
{
        uint64_t cur = READ_ONCE(line->state);
        while (cur < v && !cas_relaxed(line->state, &cur, v))
                ;
}

int shm_pub_switch(struct shm_pub *p, const struct shm_publication *pub)
{
        const snowid_layout *l = &pub->layout;
        struct shm_ctl *ctl = p->ctl;

        if (snowid_layout_check(l) < 0 || (uint64_t)pub->worker >> l->worker_bits)
                return -EINVAL;
        if (pub->deadline >> l->time_bits || pub->start_ms >> l->time_bits ||
            pub->start_ms > pub->deadline)
                return -ERANGE;

        uint64_t gen = READ_ONCE(ctl->gen);
        if (!(gen & 1)) {
                /* a previous publisher killed mid-switch left it odd: finish that one */
                gen++;
                WRITE_ONCE(ctl->gen, gen);
        }
        /* pairs with the smp_rmb() before the second read of gen in next.c: a
         * client that saw any of the stores below sees gen odd or newer */
        smp_wmb();

        uint64_t next = gen + 1;
        uint64_t start = pub->start_ms;
        /* the retiring line's last ms closes here */
        uint64_t old = READ_ONCE(p->ctr->line[shm_line_index(gen - 1)].state);
        uint8_t old_sb = READ_ONCE(ctl->seq_bits) & 31;
        if (gen > 1)
                fetch_add_relaxed(p->ctr->stats.issued, old & ((UINT64_C(1) << old_sb) - 1));
        if (pub->follow) {
                /* after gen went odd: few clients still take from the old line */
                smp_mb();
                uint64_t old_ms = READ_ONCE(p->ctr->line[shm_line_index(gen - 1)].state) >>
                                  READ_ONCE(ctl->seq_bits);
                if (old_ms + 1 > start && old_ms + 1 <= pub->deadline)
                        start = old_ms + 1;
        }
        /* A line is live again 64 switches later, holding the highest value it
         * ever held (lines only grow).  After a spell of ID time far ahead (a
         * clock stepped forward, a number whose mark was ahead), the line next
         * in turn may be hours ahead of `start`: every client would wait on
         * it, and the backstop would move to a fresh number, onto the next
         * such line.  So skip, two generations at a time, to the first line
         * not ahead of start (never the retiring one), or else the lowest. */
        uint64_t want = start << l->seq_bits, low = UINT64_MAX;
        for (uint64_t g = gen + 1, k = 0; k < SHM_LINES - 1; k++, g += 2) {
                uint64_t v = READ_ONCE(p->ctr->line[shm_line_index(g)].state);
                if (v <= want) {
                        next = g;
                        break;
                }
                if (v < low)
                        low = v, next = g;
        }
        line_raise(&p->ctr->line[shm_line_index(next)], want);
        WRITE_ONCE(ctl->epoch_ms, l->epoch_ms);
        WRITE_ONCE(ctl->time_bits, (uint8_t)l->time_bits);
        WRITE_ONCE(ctl->worker_bits, (uint8_t)l->worker_bits);
        WRITE_ONCE(ctl->seq_bits, (uint8_t)l->seq_bits);
        WRITE_ONCE(ctl->lead_ms, pub->lead_ms);
        WRITE_ONCE(ctl->worker, pub->worker);
        WRITE_ONCE(ctl->deadline, pub->deadline);
        WRITE_ONCE(ctl->offset_ns, pub->offset_ns);
        WRITE_ONCE(ctl->state, SHM_STATE_LEASED);
        /* pairs with the load_acquire of gen at the start of a client call:
         * a client that reads this gen sees the new worker, layout and line */
        store_release(ctl->gen, next);
        return 0;
}

int shm_pub_extend(struct shm_pub *p, uint64_t deadline)
{
        struct shm_ctl *ctl = p->ctl;
        uint8_t time_bits = READ_ONCE(ctl->time_bits);

        if (deadline >> time_bits)
                return -ERANGE;
        if (deadline <= READ_ONCE(ctl->deadline))
                return 0;
        /* no pairing: the deadline guards no other data; a client that reads
         * the old value merely waits a little longer */
        WRITE_ONCE(ctl->deadline, deadline);
        return 0;
}

void shm_pub_set_offset(struct shm_pub *p, int64_t offset_ns)
{
        WRITE_ONCE(p->ctl->offset_ns, offset_ns);
}

void shm_pub_set_state(struct shm_pub *p, enum shm_state state)
{
        WRITE_ONCE(p->ctl->state, (uint32_t)state);
}

uint64_t shm_pub_counter_ms(const struct shm_pub *p)
{
        uint64_t gen = READ_ONCE(p->ctl->gen);
        uint8_t seq_bits = READ_ONCE(p->ctl->seq_bits);
        return READ_ONCE(p->ctr->line[shm_line_index(gen)].state) >> seq_bits;
}
