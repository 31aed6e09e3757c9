// SPDX-License-Identifier: MIT

// snowid-taker: the Go client's taker for the conformance test, with the
// options of tests/taker.c.  Takes IDs in a loop, one goroutine locked to
// its own OS thread per -t, until SIGTERM or -n per thread; each thread
// appends every ID it took as 8 bytes, native order, to PREFIX.<thread>.
// Threads with an odd index take batches of -b (when it is above 1), even
// ones one ID at a time.  With -r a thread takes at most RATE IDs a second,
// a share every millisecond.  After opening it prints {"started":true}; at
// the end one JSON line of counts.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	snowid "github.com/snowid/snowid/bindings/go"
)

var stop atomic.Bool

type result struct {
	ids, eagain, other uint64
	lastError          syscall.Errno
	maxGapMs           int64
	byErrno            map[syscall.Errno]uint64
}

// nativeOrder is the host's byte order, for the ID files.
func nativeOrder() binary.ByteOrder {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

var start = time.Now()

func nowMs() int64 { return time.Since(start).Milliseconds() }

func taker(c *snowid.Client, index, batch int, perThread, rate uint64, prefix string, res *result) {
	// a real OS thread per taker, as the C taker's pthreads
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	path := fmt.Sprintf("%s.%d", prefix, index)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	order := nativeOrder()
	n := 1
	if index%2 == 1 && batch > 1 {
		n = batch
	}
	ids := make([]uint64, n)
	var buf [8]byte
	res.byErrno = map[syscall.Errno]uint64{}
	lastOK := nowMs()
	// with a rate: at most perMs IDs each millisecond (rate / 1000, rounded up)
	tick, inTick, perMs := nowMs(), uint64(0), rate/1000
	if rate%1000 != 0 {
		perMs++
	}
	for !stop.Load() && res.ids < perThread {
		if rate != 0 && inTick >= perMs {
			// until the next ms (nanosleep: time.Sleep would round up)
			d := time.Duration(tick+1)*time.Millisecond - time.Since(start)
			if d > 0 {
				ts := syscall.NsecToTimespec(int64(d))
				syscall.Nanosleep(&ts, nil)
			}
			tick, inTick = nowMs(), 0
		}
		if n == 1 {
			ids[0], err = c.Next()
		} else {
			err = c.NextBatch(ids)
		}
		now := nowMs()
		if err != nil {
			var e syscall.Errno
			if !errors.As(err, &e) {
				e = syscall.EIO
			}
			if e == syscall.EAGAIN {
				res.eagain++
			} else {
				res.other++
			}
			res.lastError = e
			res.byErrno[e]++
			continue
		}
		if now-lastOK > res.maxGapMs {
			res.maxGapMs = now - lastOK
		}
		lastOK = now
		inTick += uint64(n)
		for _, id := range ids {
			order.PutUint64(buf[:], id)
			w.Write(buf[:])
		}
		res.ids += uint64(n)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	f.Close()
}

func main() {
	instance := flag.String("i", "", "instance (default: $SNOWID_INSTANCE or \"default\")")
	prefix := flag.String("o", "ids", "prefix of the ID files")
	threads := flag.Int("t", 1, "threads")
	perThread := flag.Uint64("n", math.MaxUint64, "IDs per thread")
	waitUs := flag.Uint64("w", 100000, "wait budget (us)")
	batch := flag.Int("b", 1, "batch size of odd threads")
	rate := flag.Uint64("r", 0, "IDs per second per thread (0: unlimited)")
	flag.Parse()
	if *threads < 1 || *threads > 16 || *batch < 1 {
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		stop.Store(true)
	}()
	c, err := snowid.Open(*instance)
	if err != nil {
		fmt.Fprintf(os.Stderr, "snowid-taker: %v\n", err)
		os.Exit(1)
	}
	wait := time.Duration(math.MaxInt64)
	if *waitUs < uint64(math.MaxInt64/1000) {
		wait = time.Duration(*waitUs) * time.Microsecond
	}
	c.SetMaxWait(wait)
	res := make([]result, *threads)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			taker(c, i, *batch, *perThread, *rate, *prefix, &res[i])
		}(i)
	}
	// tell the test we are taking
	fmt.Println(`{"started":true}`)
	wg.Wait()
	var ids, eagain, other uint64
	var gap int64
	var last syscall.Errno
	by := map[string]uint64{}
	for _, r := range res {
		ids += r.ids
		eagain += r.eagain
		other += r.other
		if r.maxGapMs > gap {
			gap = r.maxGapMs
		}
		if r.lastError != 0 {
			last = r.lastError
		}
		for e, k := range r.byErrno {
			by[snowid.ErrnoName(e)] += k
		}
	}
	lastName := ""
	if last != 0 {
		lastName = snowid.ErrnoName(last)
	}
	var parts []string
	for name, k := range by {
		parts = append(parts, fmt.Sprintf("%q:%d", name, k))
	}
	sort.Strings(parts)
	fmt.Printf("{\"ids\":%d,\"eagain\":%d,\"other_errors\":%d,\"last_error\":%q,\"max_gap_ms\":%d,\"errors\":{%s}}\n",
		ids, eagain, other, lastName, gap, strings.Join(parts, ","))
	c.Close()
}
