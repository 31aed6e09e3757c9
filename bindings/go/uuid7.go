// SPDX-License-Identifier: MIT

package snowid

import (
	"encoding/binary"
	"os"
	"syscall"
	"time"
)

// UUIDv7 (RFC 9562) from the same counter as the 64-bit IDs: libclient/uuid7.c.
// One counter value, taken by take() with every check of Next, becomes one
// UUID instead of one ID.  Big-endian, most significant bit first:
//
//	bits    0-47  unix_ts_ms   the layout's epoch + the value's ID time (ms)
//	       48-51  ver          0111
//	       52-63  rand_a       the sequence; its high 12 bits when the layout
//	                           has more than 12 sequence bits
//	       64-65  var          10
//	       66-127 rand_b       the sequence's low (seq_bits - 12) bits, if
//	                           any; then the worker number; then random bits
//
// The random bits are splitmix64 of the Client's key at the counter value:
// not what makes a UUID unique, and not secret (docs/uuid7.md).

const splitmixGamma = 0x9e3779b97f4a7c15

func splitmixAt(key, i uint64) uint64 {
	z := key + i*splitmixGamma
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func mask(bits uint32) uint64 { return 1<<bits - 1 }

// seqLowBits: how many low sequence bits go to rand_b (those past rand_a's 12).
func seqLowBits(sb uint32) uint32 {
	if sb > 12 {
		return sb - 12
	}
	return 0
}

// uuidKeyNew is uuid_key_new(): the key of a Client's UUID random bits.  It
// makes nothing unique, so it never waits for the kernel's pool (urandom)
// and makes do with the clock and the pid where that fails.
func uuidKeyNew() uint64 {
	var b [8]byte
	if f, err := os.Open("/dev/urandom"); err == nil {
		n, _ := f.Read(b[:])
		f.Close()
		if n == len(b) {
			return binary.LittleEndian.Uint64(b[:])
		}
	}
	t := time.Now()
	return uint64(t.Unix())<<32 ^ uint64(t.Nanosecond()) ^ uint64(syscall.Getpid())<<20
}

// format is format() of uuid7.c.
func format(sn *snap, key, x uint64, out *[16]byte) {
	sb, lo := sn.seqBits, seqLowBits(sn.seqBits)
	rnd := 62 - lo - sn.workerBits // >= 43: seq_bits + worker_bits <= 31
	seq := x & mask(sb)
	hi := (sn.epoch+x>>sb)<<16 | 0x7000 | seq>>lo
	b := (seq&mask(lo))<<(62-lo) | uint64(sn.worker)<<rnd | splitmixAt(key, x)&mask(rnd)
	binary.BigEndian.PutUint64(out[0:], hi)
	binary.BigEndian.PutUint64(out[8:], 2<<62|b)
}

func (c *Client) takeUUIDs(op string, dst [][16]byte) error {
	if c == nil || len(dst) == 0 {
		return fail(op, syscall.EINVAL)
	}
	x, sn, e := c.take(uint64(len(dst)))
	if e != 0 {
		return fail(op, e)
	}
	// take() bounded the ms by the deadline (below 2^63), and an epoch
	// below 2^48 keeps the sum from wrapping; snowidd publishes epochs
	// below 2^42, so a larger one is damage
	lastMs := (x + uint64(len(dst)) - 1) >> sn.seqBits
	if sn.epoch>>48 != 0 {
		return fail(op, syscall.EPROTO)
	}
	// 48 bits of unix ms end in the year 10889; the values are spent
	if (sn.epoch+lastMs)>>48 != 0 {
		return fail(op, syscall.ERANGE)
	}
	for i := range dst {
		format(&sn, c.uuidKey, x+uint64(i), &dst[i])
	}
	return nil
}

// NextUUID7 is snowid_next_uuid7(): one UUIDv7 (16 bytes, big-endian) from
// one counter value, taken exactly as Next takes one (same checks, same
// errors; ERANGE after the year 10889), so a UUID and a 64-bit ID never
// share a value.
func (c *Client) NextUUID7() ([16]byte, error) {
	var u [1][16]byte
	err := c.takeUUIDs("next uuid7", u[:])
	return u[0], err
}

// NextUUID7Batch is snowid_next_uuid7_batch(): len(dst) UUIDs from one
// atomic operation, increasing; 1 <= len(dst) <= 2^seq_bits.
func (c *Client) NextUUID7Batch(dst [][16]byte) error {
	return c.takeUUIDs("next uuid7 batch", dst)
}

// DecodeUUID7 is snowid_decode_uuid7(): the time, worker and sequence of a
// UUID made by NextUUID7 under layout l.  EINVAL: a bad layout or not a
// UUIDv7; ERANGE: its time or sequence does not fit l.
func DecodeUUID7(l Layout, u [16]byte) (Parts, error) {
	if e := l.check(); e != 0 {
		return Parts{}, fail("decode uuid7", e)
	}
	hi, b := binary.BigEndian.Uint64(u[0:]), binary.BigEndian.Uint64(u[8:])
	if hi>>12&0xf != 7 || b>>62 != 2 {
		return Parts{}, fail("decode uuid7", syscall.EINVAL) // not a UUIDv7
	}
	sb, wb := uint32(l.SeqBits), uint32(l.WorkerBits)
	lo := seqLowBits(sb)
	unixMs, randA := hi>>16, hi&0xfff
	if unixMs < l.EpochMs || (unixMs-l.EpochMs)>>l.TimeBits != 0 || randA>>sb != 0 {
		return Parts{}, fail("decode uuid7", syscall.ERANGE)
	}
	return Parts{
		TimeMs:   unixMs - l.EpochMs,
		UnixMs:   unixMs,
		Worker:   uint32(b >> (62 - lo - wb) & mask(wb)),
		Sequence: uint32(randA<<lo | b>>(62-lo)&mask(lo)),
	}, nil
}

// FormatUUID is the 8-4-4-4-12 lowercase hex text of a UUID.
func FormatUUID(u [16]byte) string {
	const hexd = "0123456789abcdef"
	var s [36]byte
	j := 0
	for i, v := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[j] = '-'
			j++
		}
		s[j], s[j+1] = hexd[v>>4], hexd[v&15]
		j += 2
	}
	return string(s[:])
}
