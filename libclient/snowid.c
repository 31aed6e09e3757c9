/* SPDX-License-Identifier: MIT */
/* Opening, closing and inspecting a segment; the ID path is in next.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int map_object(const char *instance, const char *suffix, int flags, size_t size,
                      void **ret)
{
        char name[SHM_NAME_MAX];
        struct stat st;

        shm_object_name(name, sizeof(name), instance, suffix);
        int fd = shm_open(name, flags | O_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (fstat(fd, &st) < 0)
                r = -errno;
        else if ((size_t)st.st_size != size)
                r = -EPROTO; /* truncated, or not ours */
        else {
                int prot = (flags & O_ACCMODE) == O_RDWR ? PROT_READ | PROT_WRITE : PROT_READ;
                void *m = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
                if (m == MAP_FAILED)
                        r = -errno;
                else
                        *ret = m;
        }
        close(fd);
        return r;
}

static int open_once(const char *instance, snowid *s)
{
        void *ctl = NULL, *ctr = NULL;
        int r = map_object(instance, "ctl", O_RDONLY, sizeof(struct shm_ctl), &ctl);
        if (r < 0)
                return r;
        r = shm_ctl_check(ctl, sizeof(struct shm_ctl));
        if (r < 0)
                goto fail;
        r = map_object(instance, "ctr", O_RDWR, sizeof(struct shm_ctr), &ctr);
        if (r < 0)
                goto fail;
        r = shm_ctr_check(ctr, sizeof(struct shm_ctr));
        if (r < 0)
                goto fail;
        if (((struct shm_ctl *)ctl)->nonce != ((struct shm_ctr *)ctr)->nonce) {
                r = -ESTALE; /* the two objects are of different segments */
                goto fail;
        }
        s->ctl = ctl;
        s->ctr = ctr;
        return 0;
fail:
        if (ctl)
                munmap(ctl, sizeof(struct shm_ctl));
        if (ctr)
                munmap(ctr, sizeof(struct shm_ctr));
        return r;
}

SNOWID_EXPORT int snowid_open(const char *instance, snowid **ret)
{
        if (!ret)
                return -EINVAL;
        instance = shm_instance_pick(instance);
        if (!instance)
                return -EINVAL;

        snowid *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        atomic_init(&s->max_wait_ns, SNOWID_MAX_WAIT_DEFAULT_USEC * 1000);
        int r;
        /* a daemon replacing the pair can be caught between its two renames */
        for (int attempt = 0; attempt < 3; attempt++) {
                r = open_once(instance, s);
                if (r != -ESTALE)
                        break;
        }
        if (r < 0) {
                free(s);
                return r == -ESTALE ? -EPROTO : r;
        }
        *ret = s;
        return 0;
}

SNOWID_EXPORT snowid *snowid_close(snowid *s)
{
        if (!s)
                return NULL;
        munmap((void *)s->ctl, sizeof(struct shm_ctl));
        munmap(s->ctr, sizeof(struct shm_ctr));
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
        int r = read_layout(s->ctl, &l, &gen);
        if (r < 0)
                return r;
        *ret = l;
        return 0;
}

SNOWID_EXPORT int snowid_get_host_stats(snowid *s, snowid_host_stats *ret)
{
        if (!s || !ret)
                return -EINVAL;
        const struct shm_stats *st = &s->ctr->stats;
        const struct shm_ctl *ctl = s->ctl;
        uint64_t gen = load_acquire(ctl->gen); /* pairs with shm_pub_switch() */
        unsigned sb = READ_ONCE(ctl->seq_bits) & 31;
        /* the live counter's current ms has not closed yet: count it too */
        uint64_t open = READ_ONCE(s->ctr->line[shm_line_index(gen)].state) & ((UINT64_C(1) << sb) - 1);
        *ret = (snowid_host_stats){
                .issued = READ_ONCE(st->issued) + (gen & 1 ? 0 : open),
                .waits_ceiling = READ_ONCE(st->waits_ceiling),
                .waits_deadline = READ_ONCE(st->waits_deadline),
                .waits_switch = READ_ONCE(st->waits_switch),
                .eagain = READ_ONCE(st->eagain),
                .dropped = READ_ONCE(st->dropped),
        };
        return 0;
}

SNOWID_EXPORT int snowid_get_status(snowid *s, snowid_status *ret)
{
        if (!s || !ret)
                return -EINVAL;
        const struct shm_ctl *ctl = s->ctl;
        snowid_status st = {
                .worker = READ_ONCE(ctl->worker),
                .state = (int)READ_ONCE(ctl->state),
                .generation = load_acquire(ctl->gen), /* pairs with shm_pub_switch() */
                .deadline_ms = READ_ONCE(ctl->deadline),
                .offset_ns = READ_ONCE(ctl->offset_ns),
                .daemon_pid = READ_ONCE(ctl->pid),
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
