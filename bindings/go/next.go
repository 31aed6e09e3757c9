// SPDX-License-Identifier: MIT

package snowid

import (
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
)

// Taking IDs: libclient/next.c, step for step.
//
// take() is the fast path: one load of the segment pointer, one of gen, a
// few from the same cache line, a vDSO clock read, and one atomic
// operation on the live counter line.  Everything that waits lives in
// waitStep() and waitSwitch(), which the fast path never enters while the
// counter is within the lead bound of the clock, before the deadline, and
// the generation is even.

// snap is struct snap: what take() read from one generation.
type snap struct {
	gen        uint64
	epoch      uint64
	worker     uint32
	workerBits uint32
	seqBits    uint32
}

// count is count(): statistics only (fetch_add_relaxed in C).
func count(p *uint64) { atomic.AddUint64(p, 1) }

// budgetSpent is budget_spent(): the budget's end is set on the first wait
// of a call; one past the largest time never runs out.
func (c *Client) budgetSpent(until *int64) bool {
	now := nanotime()
	if *until == 0 {
		b := c.maxWaitNs.Load() // READ_ONCE(s->max_wait_ns)
		if now > math.MaxInt64-b {
			*until = math.MaxInt64
		} else {
			*until = now + b
		}
	}
	return now >= *until
}

// budgetLeft is budget_left(): what is left of the budget in ns (all of it
// before the first wait).
func (c *Client) budgetLeft(until *int64) int64 {
	if *until == 0 {
		return c.maxWaitNs.Load()
	}
	if left := *until - nanotime(); left > 0 {
		return left
	}
	return 0
}

// pauseBriefly is pause_briefly(): short waits (the clock reaching the next
// ms) spin, yielding to other goroutines (the Go form of C's 64 cpu_relax());
// long ones sleep 100 us in nanosleep(), as in C (time.Sleep would round a
// sleep this short up to the runtime's timer granularity).
func pauseBriefly(aheadNs int64) {
	if aheadNs < 200000 {
		runtime.Gosched()
		return
	}
	ts := syscall.Timespec{Nsec: 100000}
	syscall.Nanosleep(&ts, nil)
}

// waitStep is wait_step(): the counter's ms (lastMs: of a value held, or of
// the one about to be taken) is past the deadline or more than lead_ms ahead
// of ID time.  A value held stays good (it is unique), so this waits for the
// clock or the deadline to catch up, re-reading gen all along.  retry: gen
// changed, drop the value; else errno 0: the value may be used.
func (c *Client) waitStep(g *seg, sn *snap, lastMs uint64, until *int64) (retry bool, e syscall.Errno) {
	ctl := g.ctl
	st := &g.ctr.stats
	counted := false
	defer runtime.KeepAlive(g)
	for {
		// READ_ONCE(gen), deadline, lead_ms: each an atomic load
		if atomic.LoadUint64(&ctl.gen) != sn.gen {
			return true, 0
		}
		deadline := atomic.LoadUint64(&ctl.deadline)
		now := idTimeMs(ctl)
		_, _, _, lead := ctl.bits()
		if lastMs <= deadline && lastMs <= now+uint64(lead) {
			return false, 0
		}
		if !counted {
			if lastMs > deadline {
				count(&st.waitsDeadline)
			} else {
				count(&st.waitsCeiling)
			}
			counted = true
		}
		// past the deadline of a segment whose daemon is gone or that was
		// replaced: the socket may have a newer one
		if lastMs > deadline && c.follow(g, c.budgetLeft(until)) {
			return true, 0
		}
		if c.budgetSpent(until) {
			count(&st.eagain)
			return false, syscall.EAGAIN
		}
		ahead := int64(1000000000)
		if lastMs <= deadline {
			ahead = int64(lastMs-uint64(lead)-now) * 1000000
		}
		pauseBriefly(ahead)
	}
}

// waitSwitch is wait_switch(): gen is odd (a switch in progress, a retired
// segment, or one left odd by a daemon that is gone).
func (c *Client) waitSwitch(g *seg, until *int64) syscall.Errno {
	defer runtime.KeepAlive(g)
	if c.follow(g, c.budgetLeft(until)) {
		return 0
	}
	count(&g.ctr.stats.waitsSwitch)
	if c.budgetSpent(until) {
		count(&g.ctr.stats.eagain)
		return syscall.EAGAIN
	}
	pauseBriefly(1000000)
	return 0
}

// take is take() of next.c: n consecutive counter values; the first, and
// the snapshot of the generation they belong to (with its epoch, which only
// the UUID forms use: one more load from the line already read).
func (c *Client) take(n uint64) (uint64, snap, syscall.Errno) {
	var until int64
	for {
		// load_acquire(s->seg), pairing with the store_release in follow():
		// a newer segment is seen mapped
		g := c.seg.Load()
		if g == nil {
			return 0, snap{}, syscall.EINVAL // closed
		}
		ctl := g.ctl
		var sn snap
		// load_acquire(gen), pairing with store_release(gen) in
		// shm_pub_switch(): we see the worker, layout and line that this
		// generation published
		sn.gen = atomic.LoadUint64(&ctl.gen)
		if sn.gen&1 != 0 {
			if e := c.waitSwitch(g, &until); e != 0 {
				return 0, snap{}, e
			}
			continue
		}
		// READ_ONCE of worker, the bits, the epoch, the deadline (between
		// the two reads of gen: they change only in a switch)
		sn.worker = atomic.LoadUint32(&ctl.worker)
		_, wb, sb, lead := ctl.bits()
		sn.workerBits, sn.seqBits = wb, sb
		sn.epoch = atomic.LoadUint64(&ctl.epochMs)
		deadline := atomic.LoadUint64(&ctl.deadline)
		now := idTimeMs(ctl)
		limit := now + uint64(lead)
		if limit > deadline {
			limit = deadline
		}
		if sb > 31 || wb > 31 || sn.worker>>wb != 0 || deadline>>(63-wb-sb) != 0 || n > 1<<sb {
			if n > 1<<(sb&31) {
				return 0, snap{}, syscall.EINVAL
			}
			return 0, snap{}, syscall.EPROTO
		}

		line := &g.ctr.line[shmLineIndex(sn.gen)].state
		x := atomic.LoadUint64(line) // READ_ONCE(*line)
		if x>>sb > limit {
			// no room: wait before taking anything, so that a caller
			// that gives up does not push the counter on
			if _, e := c.waitStep(g, &sn, x>>sb, &until); e != 0 {
				return 0, snap{}, e
			}
			continue
		}
		// relaxed RMWs in C: the value's uniqueness comes from the RMW
		// itself; ordering against gen is the re-read of gen below
		mask := uint64(1)<<sb - 1
		if x>>sb >= now || !atomic.CompareAndSwapUint64(line, x, now<<sb+n) {
			x = atomic.AddUint64(line, n) - n // fetch_add: the value before
			// this call took the last value of a ms: it closes
			if x&mask+n > mask {
				atomic.AddUint64(&g.ctr.stats.issued, mask+1)
			}
		} else {
			// the counter moved on from x's ms: it closes with seq(x) taken
			if x&mask != 0 {
				atomic.AddUint64(&g.ctr.stats.issued, x&mask)
			}
			x = now << sb
			// a batch of a whole ms: it closes at once
			if n > mask {
				atomic.AddUint64(&g.ctr.stats.issued, mask+1)
			}
		}

		if lastMs := (x + n - 1) >> sb; lastMs > limit {
			retry, e := c.waitStep(g, &sn, lastMs, &until)
			if e != 0 {
				return 0, snap{}, e
			}
			if retry {
				count(&g.ctr.stats.dropped)
				runtime.KeepAlive(g) // mapped until the count is done
				continue
			}
		}
		// smp_rmb() in C, pairing with smp_wmb() in shm_pub_switch(): if
		// any load or RMW above saw the work of a later switch, gen reads
		// newer.  Those accesses and this load are sequentially consistent
		// atomics, so this load is not done before them: no fence needed.
		if atomic.LoadUint64(&ctl.gen) != sn.gen {
			count(&g.ctr.stats.dropped)
			runtime.KeepAlive(g) // mapped until the count is done
			continue
		}
		runtime.KeepAlive(g) // the mapping stays until here
		return x, sn, 0
	}
}

// compose is compose(): a counter value and a generation's worker as an ID.
func compose(sn *snap, x uint64) uint64 {
	sb := sn.seqBits
	return x>>sb<<(sn.workerBits+sb) | uint64(sn.worker)<<sb | x&(1<<sb-1)
}

// Next is snowid_next(): one ID, without a system call.  Errors:
// EAGAIN if none could be issued within the wait budget (no lease,
// deadline reached, clock behind the counter); EPROTO for a damaged
// segment; EINVAL once closed.
//
// IDs are uint64 like the C API's; they never have the sign bit set, so
// int64(id) is always positive (a SQL BIGINT holds them).
func (c *Client) Next() (uint64, error) {
	if c == nil {
		return 0, fail("next", syscall.EINVAL)
	}
	x, sn, e := c.take(1)
	if e != 0 {
		return 0, fail("next", e)
	}
	return compose(&sn, x), nil
}

// NextBatch is snowid_next_batch(): len(dst) IDs from one atomic operation,
// increasing.  EINVAL unless 1 <= len(dst) <= 2^seq_bits (4096 in the
// default layout); otherwise the errors of Next.  dst is left untouched on
// failure.
func (c *Client) NextBatch(dst []uint64) error {
	if c == nil || len(dst) == 0 {
		return fail("next batch", syscall.EINVAL)
	}
	x, sn, e := c.take(uint64(len(dst)))
	if e != 0 {
		return fail("next batch", e)
	}
	// values within one ms compose to consecutive IDs: fill runs
	sb := sn.seqBits
	end := x + uint64(len(dst))
	i := 0
	for v := x; v < end; {
		runEnd := (v>>sb + 1) << sb
		if runEnd > end {
			runEnd = end
		}
		id := compose(&sn, v)
		k := int(runEnd - v)
		for j, run := 0, dst[i:i+k]; j < len(run); j++ {
			run[j] = id + uint64(j)
		}
		i += k
		v = runEnd
	}
	return nil
}
