/* SPDX-License-Identifier: MIT */
/*
 * UUIDv7 (RFC 9562) from the same counter as the 64-bit IDs: one counter
 * value, taken by snowid_take() with every check of snowid_next(), becomes
 * one UUID instead of one ID.  docs/uuid7.md has the reasoning; the layout,
 * big-endian, most significant bit first:
 *
 *   bits    0-47  unix_ts_ms   the layout's epoch + the value's ID time (ms)
 *          48-51  ver          0111
 *          52-63  rand_a       the sequence; its high 12 bits when the
 *                              layout has more than 12 sequence bits
 *          64-65  var          10
 *          66-127 rand_b       the sequence's low (seq_bits - 12) bits, if
 *                              any; then the worker number (worker_bits);
 *                              then random bits (at least 43 of them)
 *
 * Time, sequence and worker are the 64-bit ID's, so two UUIDs are equal only
 * if the counter value and the worker number are: never, by the argument
 * that makes IDs unique.  Fields are in the ID's order of significance, so
 * byte-wise order is the order values were taken in.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "internal.h"

/* splitmix64's step (Steele, Lea and Flood, "Fast splittable pseudorandom
 * number generators", 2014): the golden-ratio increment and the finaliser. */
#define SPLITMIX_GAMMA UINT64_C(0x9e3779b97f4a7c15)

static inline uint64_t splitmix_at(uint64_t key, uint64_t i)
{
        uint64_t z = key + i * SPLITMIX_GAMMA;
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static inline uint64_t mask(unsigned bits)
{
        return (UINT64_C(1) << bits) - 1;
}

/* one byte swap and one unaligned store each (the caller's array may sit at
 * any address) */
static inline void put_be64(uint8_t *p, uint64_t v)
{
        v = htobe64(v);
        memcpy(p, &v, sizeof(v));
}

static inline uint64_t get_be64(const uint8_t *p)
{
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return be64toh(v);
}

/* How many low sequence bits go to rand_b: those past rand_a's 12. */
static inline unsigned seq_low_bits(unsigned seq_bits)
{
        return seq_bits > 12 ? seq_bits - 12 : 0;
}

/*
 * The random bits are splitmix64 of the handle's key at position x, the
 * counter value: a generator with no state to advance, so nothing is written
 * per UUID (threads sharing a handle do not contend on it, and a forked child
 * needs no new key: its values differ from its parent's anyway).  They are
 * not what makes a UUID unique, and they are not secret: one UUID gives its
 * x, and with it the key.  Do not use these UUIDs as capabilities.
 */
static void format(const struct snap *sn, uint64_t epoch_ms, uint64_t key, uint64_t x,
                   uint8_t out[16])
{
        unsigned sb = sn->seq_bits, lo = seq_low_bits(sb);
        unsigned rnd = 62 - lo - sn->worker_bits; /* >= 43: seq_bits + worker_bits <= 31 */
        uint64_t seq = x & mask(sb);
        uint64_t hi = (epoch_ms + (x >> sb)) << 16 | UINT64_C(0x7000) | seq >> lo;
        uint64_t b = (seq & mask(lo)) << (62 - lo) | (uint64_t)sn->worker << rnd |
                     (splitmix_at(key, x) & mask(rnd));
        put_be64(out, hi);
        put_be64(out + 8, UINT64_C(2) << 62 | b);
}

static int take_uuids(snowid *s, uint8_t (*ret_uuids)[16], size_t n)
{
        struct snap sn;
        uint64_t x, epoch;

        if (!s || !ret_uuids || n == 0)
                return -EINVAL;
        int r = snowid_take(s, n, &x, &sn, &epoch);
        if (r < 0)
                return r;
        /* take() bounded the ms by the deadline (below 2^63), and an epoch
         * below 2^48 keeps the sum from wrapping; snowidd publishes epochs
         * below 2^42, so a larger one is damage */
        uint64_t last_ms = (x + n - 1) >> sn.seq_bits;
        if (epoch >> 48)
                return -EPROTO;
        /* 48 bits of unix ms end in the year 10889; the values are spent */
        if ((epoch + last_ms) >> 48)
                return -ERANGE;
        uint64_t key = s->uuid_key;
        for (size_t i = 0; i < n; i++)
                format(&sn, epoch, key, x + i, ret_uuids[i]);
        return 0;
}

SNOWID_EXPORT int snowid_next_uuid7(snowid *s, uint8_t ret_uuid[16])
{
        /* take_uuids() writes only once it has succeeded */
        return take_uuids(s, (uint8_t(*)[16])ret_uuid, 1);
}

SNOWID_EXPORT int snowid_next_uuid7_batch(snowid *s, uint8_t (*ret_uuids)[16], size_t n)
{
        return take_uuids(s, ret_uuids, n);
}

SNOWID_EXPORT int snowid_decode_uuid7(const snowid_layout *l, const uint8_t uuid[16],
                                      snowid_parts *ret)
{
        int r = snowid_layout_check(l);
        if (r < 0)
                return r;
        if (!uuid || !ret)
                return -EINVAL;
        uint64_t hi = get_be64(uuid), b = get_be64(uuid + 8);
        if ((hi >> 12 & 0xf) != 7 || b >> 62 != 2)
                return -EINVAL; /* not a UUIDv7 */
        unsigned sb = l->seq_bits, wb = l->worker_bits, lo = seq_low_bits(sb);
        uint64_t unix_ms = hi >> 16, rand_a = hi & 0xfff;
        /* a UUIDv7 of this layout's time span, with no sequence bits that
         * this layout does not have */
        if (unix_ms < l->epoch_ms || (unix_ms - l->epoch_ms) >> l->time_bits || rand_a >> sb)
                return -ERANGE;
        *ret = (snowid_parts){
                .time_ms = unix_ms - l->epoch_ms,
                .unix_ms = unix_ms,
                .worker = (uint32_t)((b >> (62 - lo - wb)) & mask(wb)),
                .sequence = (uint32_t)(rand_a << lo | ((b >> (62 - lo)) & mask(lo))),
        };
        return 0;
}
