/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
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
#include "handshake.h"
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

/* What the lock file remembers: where ID time stood, for a restart that gets
 * no segment back (no fd store).  CLOCK_MONOTONIC, and so the offset, means
 * something only within one boot. */
struct memo {
        char magic[8];
        char boot_id[40];
        uint64_t epoch_ms;
        int64_t offset_ns;
        /* since the worker was remembered too: after the fields above, which
         * an earlier snowidd reads (and writes) alone; with a copy of them,
         * so that a worker left behind by a later snowidd before an earlier
         * one wrote the fields anew is not taken for the earlier one's */
        char worker_tag[4];
        int32_t worker;
        uint64_t worker_epoch_ms;
        int64_t worker_offset_ns;
};
#define MEMO_MAGIC "SNOWIDm1"
#define MEMO_WORKER_TAG "wkr1"
#define MEMO_FIRST offsetof(struct memo, worker_tag) /* what an earlier one wrote */

static void boot_id(char out[40])
{
        memset(out, 0, 40);
        int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, out, 39);
        close(fd);
        if (n < 36)
                memset(out, 0, 40);
}

static void memo_write(struct shm_pub *p, uint64_t epoch_ms, int64_t offset_ns, int32_t worker)
{
        if (p->lock_fd < 0 || (p->memo_epoch_ms == epoch_ms && p->memo_offset_ns == offset_ns &&
                               p->memo_worker == worker))
                return;
        struct memo m = {.magic = MEMO_MAGIC,
                         .epoch_ms = epoch_ms,
                         .offset_ns = offset_ns,
                         .worker_tag = MEMO_WORKER_TAG,
                         .worker = worker,
                         .worker_epoch_ms = epoch_ms,
                         .worker_offset_ns = offset_ns};
        boot_id(m.boot_id);
        /* best effort: without it, a restart without the fd store starts on
         * the wall clock, as before, and claims any number */
        if (pwrite(p->lock_fd, &m, sizeof(m), 0) == (ssize_t)sizeof(m))
                p->memo_epoch_ms = epoch_ms, p->memo_offset_ns = offset_ns, p->memo_worker = worker;
}

static void memo_read(struct shm_pub *p)
{
        struct memo m;
        char id[40];
        boot_id(id);
        ssize_t n = pread(p->lock_fd, &m, sizeof(m), 0);
        if (n < (ssize_t)MEMO_FIRST || memcmp(m.magic, MEMO_MAGIC, 8) || !id[0] ||
            memcmp(m.boot_id, id, sizeof(id)))
                return;
        p->memo_epoch_ms = m.epoch_ms;
        p->memo_offset_ns = m.offset_ns;
        if (n == (ssize_t)sizeof(m) && !memcmp(m.worker_tag, MEMO_WORKER_TAG, 4) && m.worker >= 0 &&
            m.worker_epoch_ms == m.epoch_ms && m.worker_offset_ns == m.offset_ns)
                p->memo_worker = m.worker;
}

int shm_pub_remembered(const struct shm_pub *p, uint64_t epoch_ms, int64_t *ret_offset_ns)
{
        if (!p->memo_epoch_ms || p->memo_epoch_ms != epoch_ms)
                return 0;
        *ret_offset_ns = p->memo_offset_ns;
        return 1;
}

int32_t shm_pub_remembered_worker(const struct shm_pub *p, uint64_t epoch_ms)
{
        if (!p->memo_epoch_ms || p->memo_epoch_ms != epoch_ms)
                return -1;
        return p->memo_worker;
}

static void *map_fd(int fd, size_t size, int prot)
{
        void *m = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
        return m == MAP_FAILED ? NULL : m;
}

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Checks that fd is a sealed memfd of exactly size bytes. */
static int memfd_check(int fd, size_t size)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size != size)
                return -EPROTO;
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & SEALS) != SEALS)
                return -EPROTO;
        return 0;
}

/* A read-only descriptor of the same memfd: what clients get.  The memfd is
 * 0600, so a client of another user cannot reopen it for writing. */
static int reopen_ro(int fd)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        return ro < 0 ? -errno : ro;
}

static void pub_unmap(struct shm_pub *p)
{
        if (p->ctl)
                munmap(p->ctl, sizeof(struct shm_ctl));
        if (p->ctr)
                munmap(p->ctr, sizeof(struct shm_ctr));
        if (p->ctl_fd >= 0)
                close(p->ctl_fd);
        if (p->ctl_ro_fd >= 0)
                close(p->ctl_ro_fd);
        if (p->ctr_fd >= 0)
                close(p->ctr_fd);
        p->ctl = NULL;
        p->ctr = NULL;
        p->ctl_fd = p->ctl_ro_fd = p->ctr_fd = -1;
}

/* ID time now (ms) by the segment's own offset. */
static uint64_t seg_now_ms(const struct shm_ctl *ctl)
{
        int64_t t;
        if (__builtin_add_overflow(shm_monotonic_ns(), READ_ONCE(ctl->offset_ns), &t) || t < 0)
                return 0;
        return (uint64_t)t / 1000000;
}

/* Adopts a segment handed back across a restart (the fd store): 0 with both
 * mapped, or < 0 (the caller makes a new one). */
static int pub_adopt(struct shm_pub *p)
{
        int r;
        if ((r = memfd_check(p->ctl_fd, sizeof(struct shm_ctl))) < 0 ||
            (r = memfd_check(p->ctr_fd, sizeof(struct shm_ctr))) < 0)
                return r;
        p->ctl = map_fd(p->ctl_fd, sizeof(struct shm_ctl), PROT_READ | PROT_WRITE);
        p->ctr = map_fd(p->ctr_fd, sizeof(struct shm_ctr), PROT_READ | PROT_WRITE);
        if (!p->ctl || !p->ctr)
                return -errno;
        if (shm_ctl_check(p->ctl, sizeof(struct shm_ctl)) < 0 ||
            shm_ctr_check(p->ctr, sizeof(struct shm_ctr)) < 0 || p->ctl->nonce != p->ctr->nonce ||
            READ_ONCE(p->ctl->state) == SHM_STATE_RETIRED)
                return -EPROTO;
        /* counters far ahead of ID time were written by a client: never
         * reuse them (every switch would have to skip them, or clients wait) */
        uint8_t sb = READ_ONCE(p->ctl->seq_bits);
        uint64_t deadline = READ_ONCE(p->ctl->deadline), now = seg_now_ms(p->ctl);
        uint64_t bound = (deadline > now ? deadline : now) + SHM_AHEAD_REUSE_MS;
        if (sb > 31)
                return -EPROTO;
        for (unsigned i = 0; i < SHM_LINES; i++)
                if (READ_ONCE(p->ctr->line[i].state) >> sb > bound)
                        return -ERANGE;
        r = reopen_ro(p->ctl_fd);
        if (r < 0)
                return r;
        p->ctl_ro_fd = r;
        /* the TSC line of the daemon before: off until this one has its own */
        shm_pub_set_tsc(p, NULL);
        return 0;
}

static int make_memfd(const char *name, size_t size, int *ret_fd, void **ret_map)
{
        int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        void *m = NULL;
        if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)size) < 0 ||
            fcntl(fd, F_ADD_SEALS, SEALS) < 0 || !(m = map_fd(fd, size, PROT_READ | PROT_WRITE))) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        *ret_map = m;
        return 0;
}

/* A fresh segment into p (whose fds and maps are free): generation 1, odd,
 * so that clients wait until the first switch. */
static int pub_create(struct shm_pub *p)
{
        uint64_t nonce;
        void *m;
        int r;

        if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
                return -errno;
        r = make_memfd("snowid-ctr", sizeof(struct shm_ctr), &p->ctr_fd, &m);
        if (r < 0)
                return r;
        p->ctr = m;
        p->ctr->magic = SHM_MAGIC_CTR;
        p->ctr->version = SHM_VERSION;
        p->ctr->size = sizeof(struct shm_ctr);
        p->ctr->nonce = nonce;

        r = make_memfd("snowid-ctl", sizeof(struct shm_ctl), &p->ctl_fd, &m);
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
        WRITE_ONCE(p->ctl->pid, (int32_t)getpid());
        WRITE_ONCE(p->ctl->gen, 1);
        shm_pub_heartbeat(p);
        r = reopen_ro(p->ctl_fd);
        if (r < 0)
                return r;
        p->ctl_ro_fd = r;
        return 0;
}

int shm_pub_open(const char *dir, const char *instance, int ctl_fd, int ctr_fd,
                 struct shm_pub **ret)
{
        int r;

        struct shm_pub *p = calloc(1, sizeof(*p));
        if (!p) {
                r = -ENOMEM;
                goto fail_fds;
        }
        p->memo_worker = -1;
        p->lock_fd = -1;
        p->ctl_fd = ctl_fd;
        p->ctr_fd = ctr_fd;
        p->ctl_ro_fd = -1;
        if (!shm_instance_valid(instance) || !ret) {
                r = -EINVAL;
                goto fail;
        }
        if (dir) {
                char name[SHM_SOCK_PATH_MAX + 16];
                snprintf(name, sizeof(name), "%s/%s.lock", dir, instance);
                p->lock_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (p->lock_fd < 0) {
                        r = -errno;
                        goto fail;
                }
                if (flock(p->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                        r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                        goto fail;
                }
                memo_read(p);
        }
        if (ctl_fd >= 0 && ctr_fd >= 0 && pub_adopt(p) == 0)
                p->reused = 1;
        else {
                pub_unmap(p);
                r = pub_create(p);
                if (r < 0)
                        goto fail;
        }
        WRITE_ONCE(p->ctl->pid, (int32_t)getpid());
        shm_pub_heartbeat(p);
        *ret = p;
        return 0;
fail_fds:
        if (ctl_fd >= 0)
                close(ctl_fd);
        if (ctr_fd >= 0)
                close(ctr_fd);
        return r;
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

void shm_pub_heartbeat(struct shm_pub *p)
{
        WRITE_ONCE(p->ctl->heartbeat_ms, (uint64_t)shm_monotonic_ns() / 1000000);
}

/* Moves p to a fresh segment and retires the old one: its gen stays odd and
 * its state says RETIRED, so its clients fetch the new one. */
static int pub_replace(struct shm_pub *p)
{
        struct shm_pub old = *p;
        p->ctl = NULL;
        p->ctr = NULL;
        p->ctl_fd = p->ctl_ro_fd = p->ctr_fd = -1;
        int r = pub_create(p);
        if (r < 0) {
                pub_unmap(p);
                *p = old;
                return r;
        }
        /* the host's totals go on */
        struct shm_stats *from = &old.ctr->stats, *to = &p->ctr->stats;
        WRITE_ONCE(to->waits_ceiling, READ_ONCE(from->waits_ceiling));
        WRITE_ONCE(to->waits_deadline, READ_ONCE(from->waits_deadline));
        WRITE_ONCE(to->waits_switch, READ_ONCE(from->waits_switch));
        WRITE_ONCE(to->eagain, READ_ONCE(from->eagain));
        WRITE_ONCE(to->dropped, READ_ONCE(from->dropped));
        WRITE_ONCE(to->issued, READ_ONCE(from->issued));
        WRITE_ONCE(p->ctl->range_from, READ_ONCE(old.ctl->range_from));
        WRITE_ONCE(p->ctl->range_end, READ_ONCE(old.ctl->range_end));
        WRITE_ONCE(old.ctl->state, SHM_STATE_RETIRED);
        pub_unmap(&old);
        p->replaced++;
        return 0;
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
        /* odd already: a previous publisher was killed mid-switch, and this
         * switch finishes that one */
        if (!(gen & 1)) {
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
                        next = g, low = UINT64_MAX;
                        break;
                }
                if (v < low)
                        low = v, next = g;
        }
        /* Every line far ahead: written by a client (or an old spell far
         * ahead).  Clients would wait on any of them, so publish into a fresh
         * segment; the old one, its gen left odd, is retired. */
        if (low != UINT64_MAX && low - want > (uint64_t)SHM_AHEAD_REPLACE_MS << l->seq_bits) {
                int r = pub_replace(p);
                if (r < 0)
                        return r;
                ctl = p->ctl;
                gen = READ_ONCE(ctl->gen); /* 1: odd, as a switch wants it */
                next = gen + 1;
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
        memo_write(p, l->epoch_ms, pub->offset_ns, (int32_t)pub->worker);
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
        memo_write(p, READ_ONCE(p->ctl->epoch_ms), offset_ns, p->memo_worker);
}

void shm_pub_set_state(struct shm_pub *p, enum shm_state state)
{
        WRITE_ONCE(p->ctl->state, (uint32_t)state);
}

void shm_pub_set_range(struct shm_pub *p, uint32_t from, uint32_t to)
{
        WRITE_ONCE(p->ctl->range_from, from);
        WRITE_ONCE(p->ctl->range_end, to + 1); /* to < 2^31 */
}

uint64_t shm_pub_counter_ms(const struct shm_pub *p)
{
        uint64_t gen = READ_ONCE(p->ctl->gen);
        uint8_t seq_bits = READ_ONCE(p->ctl->seq_bits);
        return READ_ONCE(p->ctr->line[shm_line_index(gen)].state) >> seq_bits;
}

uint64_t shm_pub_deadline(const struct shm_pub *p)
{
        return READ_ONCE(p->ctl->deadline);
}

uint64_t shm_pub_epoch_ms(const struct shm_pub *p)
{
        return READ_ONCE(p->ctl->epoch_ms);
}

int64_t shm_pub_offset_ns(const struct shm_pub *p)
{
        return READ_ONCE(p->ctl->offset_ns);
}

uint64_t shm_pub_nonce(const struct shm_pub *p)
{
        return p->ctl->nonce;
}

void shm_pub_set_tsc(struct shm_pub *p, const struct tsc_line *l)
{
        struct shm_tsc *t = &p->ctl->tsc;
        /* odd, whatever an earlier daemon killed in the middle left */
        uint32_t seq = (READ_ONCE(t->seq) + 1) | 1;
        const struct tsc_line off = {0};
        if (!l)
                l = &off;
        /* a seqlock: odd while the line changes; clients that read any of
         * it meanwhile see seq odd or changed and use the vDSO once */
        WRITE_ONCE(t->seq, seq);
        /* pairs with smp_rmb() in the client's read (clock_ns() in
         * libclient/internal.h): a client that sees a field below from this
         * write sees seq odd, or seq moved on */
        smp_wmb();
        WRITE_ONCE(t->base, l->base);
        WRITE_ONCE(t->span, l->span);
        WRITE_ONCE(t->mult, l->mult);
        WRITE_ONCE(t->shift, l->shift);
        WRITE_ONCE(t->ns, l->ns);
        /* pairs with load_acquire(tsc.seq) in the client: a client that
         * reads this even seq reads the fields above */
        store_release(t->seq, seq + 1);
}

const char *shm_state_name(int state, bool old_names)
{
        static const char *const names[] = {"starting",    "leased",  "no-lease",  "store-restored",
                                            "layout-lost", "retired", "store-full"};
        if (old_names && state == SNOWID_STATE_RESTORED)
                return "etcd-restored";
        if (old_names && state == SNOWID_STATE_STORE_FULL)
                return "etcd-full";
        return state >= 0 && state < 7 ? names[state] : "unknown";
}
