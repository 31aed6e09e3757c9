/* SPDX-License-Identifier: MIT */
/*
 * A damaged or foreign segment, as a client finds it at open.  A valid pair
 * of objects is made once by the publisher; each input changes it:
 *
 *   byte 0   signed: the control object's size change, in 8-byte steps
 *   byte 1   signed: the counter object's size change, in 64-byte steps
 *   then     patches: offset (2 bytes, little-endian, into control||counter),
 *            length (1 byte), that many bytes to write there
 *
 * The result is written under another instance's names and opened with
 * snowid_open(); when it opens, IDs are taken (with no waiting) and the
 * status read.  Any input must end in a clear error or in IDs that decode
 * with the segment's layout: never a crash, a hang or a read out of bounds.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "publish.h"
#include "snowid.h"

static char inst[SHM_INSTANCE_MAX + 1];
static uint8_t *tpl;
static size_t tpl_ctl, tpl_ctr;

static uint8_t *read_object(const char *instance, const char *sfx, size_t *len)
{
        char name[SHM_NAME_MAX];
        shm_object_name(name, sizeof(name), instance, sfx);
        int fd = shm_open(name, O_RDONLY, 0);
        off_t n = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
        uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
        if (!buf || pread(fd, buf, (size_t)n, 0) != n)
                abort();
        close(fd);
        *len = (size_t)n;
        return buf;
}

static void cleanup(void)
{
        shm_pub_unlink(inst);
}

static void setup(void)
{
        char t[SHM_INSTANCE_MAX + 1];
        snprintf(t, sizeof(t), "fuzz-tpl-%d", (int)getpid());
        snprintf(inst, sizeof(inst), "fuzz-seg-%d", (int)getpid());
        struct shm_pub *p;
        if (shm_pub_open(t, (gid_t)-1, &p) < 0)
                abort();
        struct shm_publication pub = {.worker = 7, .lead_ms = 1, .follow = 1};
        snowid_layout_default(&pub.layout);
        pub.offset_ns = shm_offset_for_wall(pub.layout.epoch_ms);
        pub.start_ms = (uint64_t)((shm_monotonic_ns() + pub.offset_ns) / 1000000);
        pub.deadline = pub.start_ms + 3600 * 1000;
        if (shm_pub_switch(p, &pub) < 0)
                abort();
        uint8_t *ctl = read_object(t, "ctl", &tpl_ctl), *ctr = read_object(t, "ctr", &tpl_ctr);
        tpl = malloc(tpl_ctl + tpl_ctr);
        memcpy(tpl, ctl, tpl_ctl);
        memcpy(tpl + tpl_ctl, ctr, tpl_ctr);
        free(ctl);
        free(ctr);
        shm_pub_close(p);
        shm_pub_unlink(t);
        atexit(cleanup);
}

static void write_object(const char *sfx, const uint8_t *data, size_t len)
{
        char name[SHM_NAME_MAX];
        shm_object_name(name, sizeof(name), inst, sfx);
        int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len))
                abort();
        close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!tpl)
                setup();
        if (size < 2)
                return 0;
        long ctl_len = (long)tpl_ctl + (int8_t)data[0] * 8L;
        long ctr_len = (long)tpl_ctr + (int8_t)data[1] * 64L;
        if (ctl_len < 0)
                ctl_len = 0;
        if (ctr_len < 0)
                ctr_len = 0;
        size_t total = (size_t)ctl_len + (size_t)ctr_len;
        uint8_t *img = calloc(1, total + 1);
        memcpy(img, tpl, (size_t)ctl_len < tpl_ctl ? (size_t)ctl_len : tpl_ctl);
        memcpy(img + ctl_len, tpl + tpl_ctl, (size_t)ctr_len < tpl_ctr ? (size_t)ctr_len : tpl_ctr);
        for (size_t i = 2; i + 3 <= size && total;) {
                size_t off = (data[i] | (size_t)data[i + 1] << 8) % total, n = data[i + 2];
                i += 3;
                for (size_t k = 0; k < n && i < size; k++, i++)
                        img[(off + k) % total] = data[i];
        }
        write_object("ctl", img, (size_t)ctl_len);
        write_object("ctr", img + ctl_len, (size_t)ctr_len);
        free(img);

        snowid *s;
        if (snowid_open(inst, &s) < 0)
                return 0;
        snowid_set_max_wait(s, 0);
        snowid_layout layout;
        uint64_t ids[8];
        int have_layout = snowid_get_layout(s, &layout) == 0;
        for (int round = 0; round < 3; round++) {
                int r = round < 2 ? snowid_next(s, ids) : snowid_next_batch(s, ids, 8);
                if (r >= 0 && have_layout) {
                        snowid_parts parts;
                        if (snowid_decode(&layout, ids[0], &parts) < 0)
                                abort(); /* an ID its own layout cannot read */
                }
        }
        snowid_status st;
        snowid_get_status(s, &st);
        snowid_host_stats hs;
        snowid_get_host_stats(s, &hs);
        snowid_close(s);
        return 0;
}
