/* SPDX-License-Identifier: MIT */
/*
 * A damaged or foreign segment, as a client gets it: the two descriptors
 * that a handshake hands over, made here instead of by snowidd.  A valid
 * segment is made once by the publisher; each input spoils a copy of it:
 *
 *   byte 0   flags:
 *              bits 0-1  the control memfd's seals: 0 what snowidd adds
 *                        (SHRINK|GROW|SEAL), 1 none, 2 SHRINK|GROW only,
 *                        3 SHRINK|GROW|SEAL and WRITE
 *              bits 2-3  the same for the counter memfd
 *              bit 4     control handed read-write (snowidd: read-only)
 *              bit 5     counter handed read-only (snowidd: read-write)
 *              bit 6     a fresh heartbeat (before the patches): the daemon
 *                        looks alive, else it looks gone
 *              bit 7     a socket path to follow through (one that does not
 *                        exist), else none
 *   byte 1   signed: the control memfd's size change, in 8-byte steps
 *   byte 2   signed: the counter memfd's size change, in 64-byte steps
 *   then     patches: offset (2 bytes, little-endian, into control||counter),
 *            length (1 byte), that many bytes to write there
 *
 * The two memfds go to snowid_open_fds() (what the client does with the
 * descriptors of a welcome; no socket, thread or process needed); when it
 * opens, IDs are taken (with no waiting) and the status read.  Any input
 * must end in a clear error or in IDs that decode with the segment's
 * layout: never a crash, a hang or a read out of bounds.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-dir.h"
#include "handshake.h"
#include "publish.h"
#include "snowid.h"

static uint8_t *tpl;
static size_t tpl_ctl, tpl_ctr;
static char absent[SHM_SOCK_PATH_MAX];

static uint8_t *read_object(int fd, size_t *len)
{
        off_t n = lseek(fd, 0, SEEK_END);
        uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
        if (!buf || pread(fd, buf, (size_t)n, 0) != n)
                abort();
        *len = (size_t)n;
        return buf;
}

static void setup(void)
{
        char t[SHM_INSTANCE_MAX + 1];
        snprintf(t, sizeof(t), "fuzz-tpl-%d", (int)getpid());
        struct shm_pub *p;
        if (shm_pub_open(NULL, t, -1, -1, &p) < 0)
                abort();
        struct shm_publication pub = {.worker = 7, .lead_ms = 1, .follow = 1};
        snowid_layout_default(&pub.layout);
        pub.offset_ns = shm_offset_for_wall(pub.layout.epoch_ms);
        pub.start_ms = (uint64_t)((shm_monotonic_ns() + pub.offset_ns) / 1000000);
        pub.deadline = pub.start_ms + 3600 * 1000;
        if (shm_pub_switch(p, &pub) < 0)
                abort();
        uint8_t *ctl = read_object(p->ctl_fd, &tpl_ctl), *ctr = read_object(p->ctr_fd, &tpl_ctr);
        if (tpl_ctl != sizeof(struct shm_ctl) || tpl_ctr != sizeof(struct shm_ctr))
                abort();
        tpl = malloc(tpl_ctl + tpl_ctr);
        memcpy(tpl, ctl, tpl_ctl);
        memcpy(tpl + tpl_ctl, ctr, tpl_ctr);
        free(ctl);
        free(ctr);
        shm_pub_close(p);
        /* a socket that is not there: following fails at once */
        snprintf(absent, sizeof(absent), "%s/absent.sock", fuzz_dir());
}

static const int seal_sets[4] = {
        F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL,
        0,
        F_SEAL_SHRINK | F_SEAL_GROW,
        F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_WRITE,
};

/* A memfd holding data, sealed with seals, reopened with flags when they
 * are not O_RDWR (as snowidd hands out the control object). */
static int make_object(const char *name, const uint8_t *data, size_t len, int seals, int flags)
{
        int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)len) < 0 ||
            (len && pwrite(fd, data, len, 0) != (ssize_t)len) ||
            (seals && fcntl(fd, F_ADD_SEALS, seals) < 0))
                abort();
        if (flags == O_RDWR)
                return fd;
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        int ro = open(path, flags | O_CLOEXEC);
        if (ro < 0)
                abort();
        close(fd);
        return ro;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!tpl)
                setup();
        if (size < 3)
                return 0;
        unsigned flags = data[0];
        long ctl_len = (long)tpl_ctl + (int8_t)data[1] * 8L;
        long ctr_len = (long)tpl_ctr + (int8_t)data[2] * 64L;
        if (ctl_len < 0)
                ctl_len = 0;
        if (ctr_len < 0)
                ctr_len = 0;
        size_t total = (size_t)ctl_len + (size_t)ctr_len;
        uint8_t *img = calloc(1, total + 1);
        memcpy(img, tpl, (size_t)ctl_len < tpl_ctl ? (size_t)ctl_len : tpl_ctl);
        memcpy(img + ctl_len, tpl + tpl_ctl, (size_t)ctr_len < tpl_ctr ? (size_t)ctr_len : tpl_ctr);
        size_t hb = offsetof(struct shm_ctl, heartbeat_ms);
        if ((flags & 0x40) && (size_t)ctl_len >= hb + sizeof(uint64_t)) {
                uint64_t now_ms = (uint64_t)shm_monotonic_ns() / 1000000;
                memcpy(img + hb, &now_ms, sizeof(now_ms));
        }
        for (size_t i = 3; i + 3 <= size && total;) {
                size_t off = (data[i] | (size_t)data[i + 1] << 8) % total, n = data[i + 2];
                i += 3;
                for (size_t k = 0; k < n && i < size; k++, i++)
                        img[(off + k) % total] = data[i];
        }
        int ctl_fd = make_object("fuzz-ctl", img, (size_t)ctl_len, seal_sets[flags & 3],
                                 flags & 0x10 ? O_RDWR : O_RDONLY);
        int ctr_fd = make_object("fuzz-ctr", img + ctl_len, (size_t)ctr_len,
                                 seal_sets[(flags >> 2) & 3], flags & 0x20 ? O_RDONLY : O_RDWR);
        free(img);

        snowid *s;
        /* takes both descriptors, whatever it returns */
        if (snowid_open_fds(ctl_fd, ctr_fd, flags & 0x80 ? absent : NULL, &s) < 0)
                return 0;
        snowid_set_max_wait(s, 0);
        snowid_layout layout;
        uint64_t ids[8];
        int have_layout = snowid_get_layout(s, &layout) == 0;
        uint8_t uuids[8][16];
        for (int round = 0; round < 3; round++) {
                int r = round < 2 ? snowid_next(s, ids) : snowid_next_batch(s, ids, 8);
                if (r >= 0 && have_layout) {
                        snowid_parts parts;
                        if (snowid_decode(&layout, ids[0], &parts) < 0)
                                abort(); /* an ID its own layout cannot read */
                }
                /* the UUID forms read the epoch as well, through the same checks */
                r = round < 2 ? snowid_next_uuid7(s, uuids[0])
                              : snowid_next_uuid7_batch(s, uuids, 8);
                if (r >= 0 && have_layout) {
                        snowid_parts parts;
                        if (snowid_decode_uuid7(&layout, uuids[0], &parts) < 0)
                                abort(); /* a UUID its own layout cannot read */
                }
        }
        snowid_status st = SNOWID_STATUS_INIT;
        snowid_get_status(s, &st);
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        snowid_get_host_stats(s, &hs);
        snowid_close(s);
        return 0;
}
