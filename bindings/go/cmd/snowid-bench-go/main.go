// SPDX-License-Identifier: MIT

// snowid-bench-go: the Go client against the usual ways of getting an ID in
// Go, in one run.  Run it beside a daemon with HTTP (bindings/with_daemon.py
// --http).  Prints on stdout, one line per row and thread count:
//
//	go<TAB>row<TAB>threads<TAB>ns_per_id<TAB>ids_per_s
//
// Rows: snowid (Next), snowid-batch64 (NextBatch of 64, per ID), textbook
// (a Snowflake generator in this program, one atomic word and a CAS,
// time.Now each ID, cutting IDs as the segment's layout does), uuid (crypto/rand v4 UUIDs as text), http
// (POST $SNOWID_HTTP/v1/ids?count=1 over one keep-alive connection per
// thread, JSON parsed).  With 2 threads the figure is total wall time over
// total IDs.  Each row runs --seconds, three times, the rows taking turns
// (in slices of a fifth of that); the median of the three is printed.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	snowid "github.com/snowid/snowid/bindings/go"
)

// textbook is a textbook Snowflake generator: ms since an epoch, worker,
// sequence (41/10/12 bits by default; the bench cuts its IDs as the
// daemon's segment does, so that both meet the same ceiling of 2^seq_bits
// IDs per ms); the last (ms, seq) in one word, advanced by CAS.
type textbook struct {
	state   atomic.Uint64 // ms << seqBits | seq
	epochMs int64
	worker  uint64
	wb, sb  uint
}

func (g *textbook) next() uint64 {
	mask := uint64(1)<<g.sb - 1
	for {
		now := uint64(time.Now().UnixMilli() - g.epochMs)
		old := g.state.Load()
		ms, seq := old>>g.sb, old&mask
		var nw uint64
		switch {
		case now > ms:
			nw = now << g.sb
		case seq < mask:
			nw = old + 1 // this ms (or a clock that stepped back: stay on ms)
		default:
			continue // this ms is spent: wait for the next
		}
		if g.state.CompareAndSwap(old, nw) {
			return nw>>g.sb<<(g.wb+g.sb) | g.worker<<g.sb | nw&mask
		}
	}
}

func uuid4() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// worker takes IDs until stop; returns how many.  One per goroutine.
type worker func(stop *atomic.Bool) uint64

var sink atomic.Uint64

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "snowid-bench-go: "+format+"\n", a...)
	os.Exit(1)
}

func rowSnowid(c *snowid.Client) func() worker {
	return func() worker {
		return func(stop *atomic.Bool) uint64 {
			var n, x uint64
			for !stop.Load() {
				for i := 0; i < 64; i++ {
					id, err := c.Next()
					if err != nil {
						fail("next: %v", err)
					}
					x ^= id
				}
				n += 64
			}
			sink.Add(x)
			return n
		}
	}
}

func rowBatch(c *snowid.Client) func() worker {
	return func() worker {
		buf := make([]uint64, 64)
		return func(stop *atomic.Bool) uint64 {
			var n, x uint64
			for !stop.Load() {
				if err := c.NextBatch(buf); err != nil {
					fail("next batch: %v", err)
				}
				x ^= buf[63]
				n += 64
			}
			sink.Add(x)
			return n
		}
	}
}

func rowTextbook(l snowid.Layout) func() worker {
	g := &textbook{epochMs: int64(l.EpochMs), worker: 1, wb: l.WorkerBits, sb: l.SeqBits}
	return func() worker {
		return func(stop *atomic.Bool) uint64 {
			var n, x uint64
			for !stop.Load() {
				for i := 0; i < 64; i++ {
					x ^= g.next()
				}
				n += 64
			}
			sink.Add(x)
			return n
		}
	}
}

func rowUUID() func() worker {
	return func() worker {
		return func(stop *atomic.Bool) uint64 {
			var n, x uint64
			for !stop.Load() {
				for i := 0; i < 64; i++ {
					x += uint64(uuid4()[35])
				}
				n += 64
			}
			sink.Add(x)
			return n
		}
	}
}

func rowHTTP(base string) func() worker {
	return func() worker {
		// one keep-alive connection per thread
		cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
			DisableCompression: true}}
		url := base + "/v1/ids?count=1"
		return func(stop *atomic.Bool) uint64 {
			var n, x uint64
			var body struct {
				IDs []string `json:"ids"`
			}
			for !stop.Load() {
				resp, err := cl.Post(url, "", nil)
				if err != nil {
					fail("http: %v", err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					fail("http: %d %v %s", resp.StatusCode, err, b)
				}
				body.IDs = body.IDs[:0]
				if err := json.Unmarshal(b, &body); err != nil || len(body.IDs) != 1 {
					fail("http: %v %s", err, b)
				}
				id, err := strconv.ParseUint(body.IDs[0], 10, 64)
				if err != nil {
					fail("http: %v", err)
				}
				x ^= id
				n++
			}
			cl.CloseIdleConnections()
			sink.Add(x)
			return n
		}
	}
}

// measure runs threads workers for d; ns per ID over the wall time.  With
// lock, each worker's goroutine has an OS thread of its own; the http row
// does without, as Go's network I/O hands a goroutine that waits over to
// the scheduler, and a locked one wakes only on its own thread.
func measure(mk func() worker, threads int, d time.Duration, lock bool) (time.Duration, uint64) {
	var stop atomic.Bool
	var total atomic.Uint64
	var wg, ready sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < threads; i++ {
		w := mk()
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			if lock {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			ready.Done()
			<-start
			total.Add(w(&stop))
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return time.Since(t0), total.Load()
}

func main() {
	seconds := flag.Float64("seconds", 2, "seconds per row")
	flag.Parse()
	d := time.Duration(*seconds * float64(time.Second))
	c, err := snowid.Open("")
	if err != nil {
		fail("%v", err)
	}
	defer c.Close()
	c.SetMaxWait(time.Second)
	l, err := c.Layout()
	if err != nil {
		fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "snowid-bench-go: layout %d/%d/%d bits: at most %d IDs per ms\n",
		l.TimeBits, l.WorkerBits, l.SeqBits, 1<<l.SeqBits)
	type row struct {
		name string
		mk   func() worker
	}
	rows := []row{{"snowid", rowSnowid(c)}, {"snowid-batch64", rowBatch(c)},
		{"textbook", rowTextbook(l)}, {"uuid", rowUUID()}}
	if base := os.Getenv("SNOWID_HTTP"); base != "" {
		rows = append(rows, row{"http", rowHTTP(base)})
	} else {
		fmt.Fprintln(os.Stderr, "snowid-bench-go: SNOWID_HTTP not set: no http row")
	}
	threads := []int{1, 2}
	res := make([][][]float64, len(rows))
	for i := range res {
		res[i] = make([][]float64, len(threads))
	}
	// three runs of d per row; each run of a row is made of slices of d/5,
	// the rows taking turns slice by slice, so that a burst of load from
	// elsewhere falls on every row alike
	const slices = 5
	for run := 0; run < 3; run++ {
		el := make([][]time.Duration, len(rows))
		ids := make([][]uint64, len(rows))
		for i := range rows {
			el[i] = make([]time.Duration, len(threads))
			ids[i] = make([]uint64, len(threads))
		}
		for k := 0; k < slices; k++ {
			for i, r := range rows {
				for j, t := range threads {
					e, n := measure(r.mk, t, d/slices, r.name != "http")
					el[i][j] += e
					ids[i][j] += n
				}
			}
		}
		for i := range rows {
			for j := range threads {
				res[i][j] = append(res[i][j], float64(el[i][j].Nanoseconds())/float64(ids[i][j]))
			}
		}
	}
	for i, r := range rows {
		for j, t := range threads {
			v := res[i][j]
			sort.Float64s(v)
			ns := v[len(v)/2]
			fmt.Printf("go\t%s\t%d\t%.1f\t%.0f\n", r.name, t, ns, 1e9/ns)
		}
	}
}
