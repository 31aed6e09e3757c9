// SPDX-License-Identifier: MIT

package snowid

import (
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The shared segment, field for field as shm/segment.h declares it (an ABI
// between snowidd and every client on the host; segment_test.go checks each
// offset against the C compiler's offsetof).
//
// Memory ordering.  Every access to the segment below goes through
// sync/atomic, whose operations are sequentially consistent (the Go memory
// model, "Atomic Values"): at least as strong as each ordering the C client
// asks for.  READ_ONCE and WRITE_ONCE (relaxed) become atomic loads and
// stores; load_acquire becomes an atomic load, which is at least an
// acquire; the relaxed RMWs (CAS, fetch_add) become atomic.CompareAndSwap
// and atomic.Add.  Where the C client uses a fence (smp_rmb(), pairing with
// smp_wmb() in the publisher's shm_pub_switch()), the Go client needs none:
// the fence orders the loads before it against the load of gen after it,
// and sequentially consistent loads and RMWs are never reordered with a
// later load, so the publisher's release fence synchronizes with whichever
// of those accesses read a value written after it.  On amd64 these compile
// to the same instructions as the C code (MOV, LOCK XADD, LOCK CMPXCHG).

const (
	shmMagicCtl         = 0x314c54434449574e // "NWIDCTL1" little-endian
	shmMagicCtr         = 0x3152544344495753 // "SWIDCTR1" little-endian
	shmVersion          = 2
	shmLines            = 64
	shmLineSize         = 64
	shmHeartbeatStaleMs = 1000
	shmStateRetired     = 5
	shmCtlSize          = 192
	shmCtrSize          = (shmLines + 2) * shmLineSize
)

// shmCtl is struct shm_ctl: written by snowidd only, mapped read-only.
type shmCtl struct {
	// line 0: identity, written once at create
	magic   uint64
	version uint32
	size    uint32
	pid     int32
	state   uint32
	nonce   uint64
	_       [32]byte

	// line 1: everything the fast path reads
	gen        uint64
	deadline   uint64 // last ID time (ms) a client may use
	offsetNs   int64  // ID time ns = CLOCK_MONOTONIC ns + offsetNs
	epochMs    uint64 // unix ms of ID time 0
	worker     uint32
	timeBits   uint8 // these four bytes are read as one aligned 32-bit word
	workerBits uint8
	seqBits    uint8
	leadMs     uint8 // how far the counter may run ahead of ID time
	_          [24]byte

	// line 2: liveness
	heartbeatMs uint64 // CLOCK_MONOTONIC ms of the daemon's last tick
	rangeFrom   uint32
	rangeEnd    uint32
	// the TSC clock's line (struct shm_tsc): this client keeps Go's own
	// clock and reads only tscSpan, for Status (0: no line published)
	_       [8]byte // seq, shift
	_       uint64  // base
	tscSpan uint64
	_       [16]byte // mult, ns
	_       [8]byte
}

// shmLine is struct shm_line: one counter per cache line.
type shmLine struct {
	state uint64
	_     [shmLineSize - 8]byte
}

// shmStats is struct shm_stats: host-wide counts, kept on slow paths.
type shmStats struct {
	waitsCeiling  uint64
	waitsDeadline uint64
	waitsSwitch   uint64
	eagain        uint64
	dropped       uint64
	issued        uint64
	_             [16]byte
}

// shmCtr is struct shm_ctr: the counter lines every client writes.
type shmCtr struct {
	line    [shmLines]shmLine
	stats   shmStats
	magic   uint64
	version uint32
	size    uint32
	nonce   uint64
	_       [40]byte
}

// bits reads time_bits, worker_bits, seq_bits and lead_ms with one atomic
// 32-bit load (each is READ_ONCE of a byte in C; sync/atomic has no byte
// loads, and the four share one aligned word that only snowidd writes).
func (c *shmCtl) bits() (tb, wb, sb, lead uint32) {
	return unpackBits(atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.timeBits))))
}

// shmLineIndex is shm_line_index(): the live line of a generation.
func shmLineIndex(gen uint64) uint64 {
	return gen / 2 % shmLines
}

// seg is struct seg of libclient/internal.h: one segment as snowidd handed
// it out.  The C handle keeps every segment it mapped until snowid_close(),
// since a thread may still be inside take() on an older one; here each call
// holds its own reference to the segment it works on, and the garbage
// collector unmaps a segment once nothing refers to it any more (see
// (*seg).unmap), so Close never pulls memory from under a call in flight.
type seg struct {
	ctl    *shmCtl
	ctr    *shmCtr
	ctlMem []byte
	ctrMem []byte
}

func (g *seg) unmap() {
	if g.ctlMem != nil {
		syscall.Munmap(g.ctlMem)
	}
	if g.ctrMem != nil {
		syscall.Munmap(g.ctrMem)
	}
	g.ctlMem, g.ctrMem, g.ctl, g.ctr = nil, nil, nil, nil
}

// free unmaps a segment nobody else has seen yet (seg_free()).
func (g *seg) free() {
	runtime.SetFinalizer(g, nil)
	g.unmap()
}

// nanotime is CLOCK_MONOTONIC in ns, read through the vDSO as the C
// client's monotonic_ns() does: the Go runtime's own clock (runtime.nanotime
// is clock_gettime(CLOCK_MONOTONIC) on Linux).  That it is the daemon's
// CLOCK_MONOTONIC is not assumed: every handshake checks the daemon's clock
// reading against two readings of this very function (-EXDEV otherwise).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// idTimeMs is id_time_ms(): ID time in ms, CLOCK_MONOTONIC plus the offset
// snowidd publishes (READ_ONCE); before the epoch it reads as 0.
func idTimeMs(ctl *shmCtl) uint64 {
	offset := atomic.LoadInt64(&ctl.offsetNs)
	now := nanotime()
	t := now + offset
	// a damaged offset must not overflow: past either end reads as that end
	if offset > 0 && t < now {
		t = math.MaxInt64
	} else if offset < 0 && t > now {
		t = 0
	}
	if t > 0 {
		return uint64(t) / 1000000
	}
	return 0
}
