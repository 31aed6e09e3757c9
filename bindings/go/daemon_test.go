// SPDX-License-Identifier: MIT

package snowid

// Tests against a real snowidd: run under bindings/with_daemon.py, which sets
// SNOWID_RUNTIME_DIR and SNOWID_INSTANCE (and SNOWID_BUILD for the snowid
// command).  Without them these tests skip, unless SNOWID_GO_REQUIRE_DAEMON
// is set (meson test sets it): then they fail.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func needDaemon(t *testing.T) {
	t.Helper()
	if os.Getenv("SNOWID_INSTANCE") == "" || os.Getenv("SNOWID_RUNTIME_DIR") == "" {
		if os.Getenv("SNOWID_GO_REQUIRE_DAEMON") != "" {
			t.Fatal("no daemon: run under bindings/with_daemon.py")
		}
		t.Skip("no daemon (run under bindings/with_daemon.py)")
	}
}

func open(t *testing.T) *Client {
	t.Helper()
	needDaemon(t)
	c, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func snowidCmd(t *testing.T, args ...string) string {
	t.Helper()
	b := os.Getenv("SNOWID_BUILD")
	if b == "" {
		if os.Getenv("SNOWID_GO_REQUIRE_DAEMON") != "" {
			t.Fatal("SNOWID_BUILD not set")
		}
		t.Skip("SNOWID_BUILD not set")
	}
	out, err := exec.Command(filepath.Join(b, "cli", "snowid"), args...).Output()
	if err != nil {
		t.Fatalf("snowid %v: %v", args, err)
	}
	return string(out)
}

func TestOpenStatusLayout(t *testing.T) {
	c := open(t)
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateLeased || st.Generation&1 != 0 || st.Generation == 0 ||
		st.DaemonPID <= 0 || st.HeadroomMs <= 0 {
		t.Fatalf("status %+v", st)
	}
	l, err := c.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.Check() != nil || st.Worker>>l.WorkerBits != 0 || st.DeadlineUnixMs != l.EpochMs+st.DeadlineMs {
		t.Fatalf("layout %+v status %+v", l, st)
	}
	id, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(l, id)
	if err != nil || p.Worker != st.Worker {
		t.Fatalf("id %d decodes to %+v (%v), status worker %d", id, p, err, st.Worker)
	}
	// its time is ID time now, which is the wall clock give or take the offset slewing
	if d := time.Since(p.Time()); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("id time %v, now %v", p.Time(), time.Now())
	}
	// the layout `snowid status` prints
	out := snowidCmd(t, "status")
	want := "epoch " + strconv.FormatUint(l.EpochMs, 10) + " ms, " +
		strconv.Itoa(int(l.TimeBits)) + "/" + strconv.Itoa(int(l.WorkerBits)) + "/" +
		strconv.Itoa(int(l.SeqBits)) + " bits"
	if !strings.Contains(out, want) || !strings.Contains(out, "worker:      "+strconv.Itoa(int(st.Worker))+"\n") {
		t.Fatalf("snowid status says\n%s\nwant %q and worker %d", out, want, st.Worker)
	}
}

// Many goroutines on one Client: each one's IDs increase, all are unique,
// all carry the status's worker.
func TestNextConcurrent(t *testing.T) {
	c := open(t)
	c.SetMaxWait(5 * time.Second)
	st, _ := c.Status()
	l, _ := c.Layout()
	const G, N = 8, 30000
	ids := make([][]uint64, G)
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			mine := make([]uint64, 0, N)
			batch := make([]uint64, 37)
			for len(mine) < N {
				if g%2 == 1 && len(mine)%3 == 0 {
					if err := c.NextBatch(batch); err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, batch...)
					continue
				}
				id, err := c.Next()
				if err != nil {
					t.Error(err)
					return
				}
				mine = append(mine, id)
			}
			ids[g] = mine
		}(g)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var all []uint64
	for g, mine := range ids {
		for i := 1; i < len(mine); i++ {
			if mine[i] <= mine[i-1] {
				t.Fatalf("goroutine %d: id %d after %d", g, mine[i], mine[i-1])
			}
		}
		all = append(all, mine...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("id %d taken twice", all[i])
		}
	}
	for _, id := range []uint64{all[0], all[len(all)/2], all[len(all)-1]} {
		if p, err := Decode(l, id); err != nil || p.Worker != st.Worker {
			t.Fatalf("id %d: %+v %v, worker %d", id, p, err, st.Worker)
		}
	}
}

func TestNextBatch(t *testing.T) {
	c := open(t)
	c.SetMaxWait(5 * time.Second)
	l, _ := c.Layout()
	for _, n := range []int{1, 2, 64, 1000, 1 << l.SeqBits} {
		dst := make([]uint64, n)
		if err := c.NextBatch(dst); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		for i := 1; i < n; i++ {
			if dst[i] <= dst[i-1] {
				t.Fatalf("batch %d: %d after %d", n, dst[i], dst[i-1])
			}
			// within one ms they are consecutive
			a, _ := Decode(l, dst[i-1])
			b, _ := Decode(l, dst[i])
			if a.TimeMs == b.TimeMs && dst[i] != dst[i-1]+1 {
				t.Fatalf("batch %d: %d then %d in one ms", n, dst[i-1], dst[i])
			}
		}
	}
	// too big, empty: EINVAL, and dst untouched
	dst := make([]uint64, 1<<l.SeqBits+1)
	wantErrno(t, c.NextBatch(dst), syscall.EINVAL)
	for _, v := range dst {
		if v != 0 {
			t.Fatal("dst written on failure")
		}
	}
	wantErrno(t, c.NextBatch(nil), syscall.EINVAL)
	var us [][16]byte = make([][16]byte, 1<<l.SeqBits+1)
	wantErrno(t, c.NextUUID7Batch(us), syscall.EINVAL)
}

func TestUUID7(t *testing.T) {
	c := open(t)
	st, _ := c.Status()
	l, _ := c.Layout()
	var prev [16]byte
	us := make([][16]byte, 100)
	if err := c.NextUUID7Batch(us); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		var u [16]byte
		if i < len(us) {
			u = us[i]
		} else {
			var err error
			if u, err = c.NextUUID7(); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 && string(u[:]) <= string(prev[:]) {
			t.Fatalf("%s after %s", FormatUUID(u), FormatUUID(prev))
		}
		prev = u
		p, err := DecodeUUID7(l, u)
		if err != nil || p.Worker != st.Worker {
			t.Fatalf("%s: %+v %v", FormatUUID(u), p, err)
		}
	}
	// `snowid decode` reads it the same
	p, _ := DecodeUUID7(l, prev)
	out := snowidCmd(t, "decode", FormatUUID(prev))
	want := FormatUUID(prev) + "\ttime=" + p.Time().Format("2006-01-02T15:04:05.000Z") +
		"\tunix_ms=" + strconv.FormatUint(p.UnixMs, 10) + "\tworker=" +
		strconv.FormatUint(uint64(p.Worker), 10) + "\tsequence=" + strconv.FormatUint(uint64(p.Sequence), 10) + "\n"
	if out != want {
		t.Fatalf("snowid decode: %q, Go: %q", out, want)
	}
}

// The C library (through the snowid command) and this client take from one
// counter: interleaved, every ID is unique and each later call's IDs are
// higher; and Go decodes IDs as `snowid decode` does.
func TestAgreesWithC(t *testing.T) {
	c := open(t)
	l, _ := c.Layout()
	var seq []uint64
	for round := 0; round < 5; round++ {
		for i := 0; i < 50; i++ {
			id, err := c.Next()
			if err != nil {
				t.Fatal(err)
			}
			seq = append(seq, id)
		}
		for _, f := range strings.Fields(snowidCmd(t, "next", "-n", "100")) {
			id, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("snowid next printed %q", f)
			}
			seq = append(seq, id)
		}
	}
	if len(seq) != 5*150 {
		t.Fatalf("%d IDs", len(seq))
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] <= seq[i-1] {
			t.Fatalf("id %d (#%d) after %d", seq[i], i, seq[i-1])
		}
	}
	pick := []uint64{seq[0], seq[60], seq[149], seq[len(seq)-1]}
	args := []string{"decode"}
	for _, id := range pick {
		args = append(args, strconv.FormatUint(id, 10))
	}
	lines := strings.Split(strings.TrimSpace(snowidCmd(t, args...)), "\n")
	if len(lines) != len(pick) {
		t.Fatalf("snowid decode printed %q", lines)
	}
	for i, id := range pick {
		p, err := Decode(l, id)
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatUint(id, 10) + "\ttime=" + p.Time().Format("2006-01-02T15:04:05.000Z") +
			"\tunix_ms=" + strconv.FormatUint(p.UnixMs, 10) + "\tworker=" +
			strconv.FormatUint(uint64(p.Worker), 10) + "\tsequence=" + strconv.FormatUint(uint64(p.Sequence), 10)
		if lines[i] != want {
			t.Fatalf("snowid decode: %q\nGo:           %q", lines[i], want)
		}
	}
}

func TestHostStats(t *testing.T) {
	c := open(t)
	before, err := c.HostStats()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ {
		if _, err := c.Next(); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := c.HostStats()
	if after.Issued < before.Issued+5000 {
		t.Fatalf("issued %d then %d after 5000 IDs", before.Issued, after.Issued)
	}
}

func TestOpenErrors(t *testing.T) {
	needDaemon(t)
	// no daemon of that instance: ENOENT
	_, err := Open("no-such-instance")
	wantErrno(t, err, syscall.ENOENT)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatal("ENOENT is not os.ErrNotExist")
	}
	_, err = Open("bad/instance")
	wantErrno(t, err, syscall.EINVAL)
	_, err = Open(strings.Repeat("x", 65))
	wantErrno(t, err, syscall.EINVAL)

	// the daemon's socket seen through a directory anyone may write: EPERM
	real := filepath.Join(os.Getenv("SNOWID_RUNTIME_DIR"), os.Getenv("SNOWID_INSTANCE")+".sock")
	dir, err := os.MkdirTemp("", "snowid-go")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Symlink(real, filepath.Join(dir, "x.sock")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SNOWID_RUNTIME_DIR", dir)
	// a symlink is not the socket
	os.Chmod(dir, 0755)
	_, err = Open("x")
	wantErrno(t, err, syscall.EPERM)
	// the socket's directory writable by others
	os.Remove(filepath.Join(dir, "x.sock"))
	if err := os.Link(real, filepath.Join(dir, "x.sock")); err == nil {
		os.Chmod(dir, 0777)
		_, err = Open("x")
		wantErrno(t, err, syscall.EPERM)
		os.Chmod(dir, 0755)
		// the same socket in a safe directory is fine
		c, err := Open("x")
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	} else {
		t.Logf("no hard link to the socket (%v): the directory check is not tried", err)
	}
}

func TestClosed(t *testing.T) {
	c := open(t)
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	// goroutines taking while it closes: IDs or EINVAL, nothing else
	var wg, started sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1000 {
					started.Done()
				}
				if _, err := c.Next(); err != nil {
					if i < 1000 {
						t.Errorf("before Close: %v", err)
						started.Done()
					} else if !errors.Is(err, syscall.EINVAL) {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	started.Wait() // every goroutine is taking
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	runtime.GC() // the finalizers unmap now; nothing may touch the mappings after
	runtime.GC()
	_, err := c.Next()
	wantErrno(t, err, syscall.EINVAL)
	wantErrno(t, c.NextBatch(make([]uint64, 4)), syscall.EINVAL)
	_, err = c.NextUUID7()
	wantErrno(t, err, syscall.EINVAL)
	_, err = c.Status()
	wantErrno(t, err, syscall.EINVAL)
	_, err = c.Layout()
	wantErrno(t, err, syscall.EINVAL)
	_, err = c.HostStats()
	wantErrno(t, err, syscall.EINVAL)
	wantErrno(t, c.Close(), syscall.EINVAL)
}

// Last (Go runs a file's tests in order): the daemon stopped, its deadline
// passes; a budget of 0 gives EAGAIN at once, a budget of 300 ms after
// 300 ms (having tried the socket of the stopped daemon); once the daemon
// runs again, IDs come again.
func TestZDaemonStopped(t *testing.T) {
	c := open(t)
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	last, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	pid := int(st.DaemonPID)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			syscall.Kill(pid, syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	// wait for the deadline to pass: the status says when
	for {
		st, _ = c.Status()
		if st.HeadroomMs < 0 {
			break
		}
		time.Sleep(time.Duration(st.HeadroomMs+1) * time.Millisecond)
	}
	before, _ := c.HostStats()
	c.SetMaxWait(0)
	// each call gives up at once: at least one of them in less than the
	// default budget, however loaded the machine
	fastest := time.Hour
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		switch i {
		case 0:
			_, err = c.Next()
		case 1:
			err = c.NextBatch(make([]uint64, 8))
		case 2:
			_, err = c.NextUUID7()
		}
		if d := time.Since(t0); d < fastest {
			fastest = d
		}
		wantErrno(t, err, syscall.EAGAIN)
	}
	if fastest >= DefaultMaxWait*9/10 {
		t.Fatalf("a budget of 0 waited %v", fastest)
	}
	after, _ := c.HostStats()
	if after.EAGAIN < before.EAGAIN+3 || after.WaitsDeadline < before.WaitsDeadline+3 {
		t.Fatalf("host stats %+v then %+v", before, after)
	}
	c.SetMaxWait(300 * time.Millisecond)
	t0 := time.Now()
	_, err = c.Next()
	d := time.Since(t0)
	wantErrno(t, err, syscall.EAGAIN)
	if d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("a budget of 300 ms gave up after %v", d)
	}
	resume()
	c.SetMaxWait(20 * time.Second)
	id, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	if id <= last {
		t.Fatalf("id %d after %d", id, last)
	}
	st2, _ := c.Status()
	t.Logf("resumed: worker %d -> %d, generation %d -> %d, took %v", st.Worker, st2.Worker,
		st.Generation, st2.Generation, time.Since(t0))
}

func BenchmarkNext(b *testing.B) {
	needDaemon(&testing.T{})
	c, err := Open("")
	if err != nil {
		b.Skip(err)
	}
	defer c.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNanotime(b *testing.B) {
	for i := 0; i < b.N; i++ {
		nanotime()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		time.Now()
	}
}
