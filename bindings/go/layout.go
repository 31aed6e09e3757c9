// SPDX-License-Identifier: MIT

package snowid

import (
	"syscall"
	"time"
)

// DefaultEpochMs is the unix ms of ID time 0 in the default layout
// (2025-01-01T00:00:00Z), SNOWID_EPOCH_DEFAULT_MS.
const DefaultEpochMs = 1735689600000

// epochMaxMs: the largest epoch that leaves every time representable
// (EPOCH_MAX_MS of libclient/layout.c).
const epochMaxMs = 1 << 42

// Layout is how an ID is cut (snowid_layout): TimeBits + WorkerBits +
// SeqBits == 63, TimeBits >= 32.
type Layout struct {
	EpochMs    uint64 // unix ms of ID time 0
	TimeBits   uint
	WorkerBits uint
	SeqBits    uint
}

// Parts are the fields of one ID (snowid_parts).
type Parts struct {
	TimeMs   uint64 // ms since the layout's epoch
	UnixMs   uint64 // EpochMs + TimeMs
	Worker   uint32
	Sequence uint32
}

// Time is the ID's time as a time.Time (UTC).
func (p Parts) Time() time.Time {
	return time.UnixMilli(int64(p.UnixMs)).UTC()
}

// DefaultLayout is snowid_layout_default(): 41/10/12 bits from 2025-01-01Z.
func DefaultLayout() Layout {
	return Layout{EpochMs: DefaultEpochMs, TimeBits: 41, WorkerBits: 10, SeqBits: 12}
}

// Check is snowid_layout_check(): nil, or EINVAL.
func (l Layout) Check() error {
	if l.check() != 0 {
		return fail("layout", syscall.EINVAL)
	}
	return nil
}

func (l Layout) check() syscall.Errno {
	if l.TimeBits < 32 || l.TimeBits > 63 || l.WorkerBits > 31 || l.SeqBits > 31 {
		return syscall.EINVAL
	}
	if l.TimeBits+l.WorkerBits+l.SeqBits != 63 || l.EpochMs >= epochMaxMs {
		return syscall.EINVAL
	}
	return 0
}

// Decode is snowid_decode(): EINVAL for a bad layout, ERANGE for a value
// with the sign bit set (never an ID).
func Decode(l Layout, id uint64) (Parts, error) {
	if e := l.check(); e != 0 {
		return Parts{}, fail("decode", e)
	}
	if id>>63 != 0 {
		return Parts{}, fail("decode", syscall.ERANGE)
	}
	// epoch < 2^42 and time < 2^63: the unix ms cannot wrap
	t := id >> (l.WorkerBits + l.SeqBits)
	return Parts{
		TimeMs:   t,
		UnixMs:   l.EpochMs + t,
		Worker:   uint32(id >> l.SeqBits & (1<<l.WorkerBits - 1)),
		Sequence: uint32(id & (1<<l.SeqBits - 1)),
	}, nil
}

// Encode is snowid_encode(): uses p.TimeMs, p.Worker and p.Sequence;
// EINVAL for a bad layout, ERANGE if one of them does not fit.
func Encode(l Layout, p Parts) (uint64, error) {
	if e := l.check(); e != 0 {
		return 0, fail("encode", e)
	}
	if p.TimeMs>>l.TimeBits != 0 || uint64(p.Worker)>>l.WorkerBits != 0 ||
		uint64(p.Sequence)>>l.SeqBits != 0 {
		return 0, fail("encode", syscall.ERANGE)
	}
	return p.TimeMs<<(l.WorkerBits+l.SeqBits) | uint64(p.Worker)<<l.SeqBits |
		uint64(p.Sequence), nil
}
