// SPDX-License-Identifier: MIT

package snowid

// The handshake's checks and following a retired segment, against a fake
// snowidd in this process: it makes sealed memfds as snowidd does and
// answers each hello as a test tells it.

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

const (
	mfdCloexec       = 0x1
	mfdAllowSealing  = 0x2
	fAddSeals        = 1024 + 9
	fakeWorker1      = 17
	fakeWorker2      = 42
	fakeNonce1       = 0x1111
	fakeNonce2       = 0x2222
	fakeDaemonPid    = 4242
	fakeDeadlineAhed = 60000
)

var memfdCreateNr = map[string]uintptr{"amd64": 319, "arm64": 279, "riscv64": 279, "386": 356}

type fakeSeg struct {
	ctlFd, ctlRO, ctrFd int
	ctl                 *shmCtl
	ctr                 *shmCtr
}

func memfd(t *testing.T, name string, size int, seal bool) int {
	nr, ok := memfdCreateNr[runtime.GOARCH]
	if !ok {
		t.Skip("memfd_create: no system call number for " + runtime.GOARCH)
	}
	p, _ := syscall.BytePtrFromString(name)
	fd, _, e := syscall.Syscall(nr, uintptr(unsafe.Pointer(p)), mfdCloexec|mfdAllowSealing, 0)
	if e != 0 {
		t.Fatal("memfd_create:", e)
	}
	if err := syscall.Ftruncate(int(fd), int64(size)); err != nil {
		t.Fatal(err)
	}
	if seal {
		_, _, e = syscall.Syscall(syscall.SYS_FCNTL, fd, fAddSeals, fSealShrnk|fSealGrow|fSealSeal)
		if e != 0 {
			t.Fatal("F_ADD_SEALS:", e)
		}
	}
	return int(fd)
}

// newFakeSeg makes a published segment (gen 2) of one worker, the way
// shm/publish.c lays it out, with ID time on the wall clock.
func newFakeSeg(t *testing.T, worker uint32, nonce uint64, seal bool) *fakeSeg {
	s := &fakeSeg{ctlFd: memfd(t, "ctl", shmCtlSize, seal), ctrFd: memfd(t, "ctr", shmCtrSize, seal)}
	ctl, err := syscall.Mmap(s.ctlFd, 0, shmCtlSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := syscall.Mmap(s.ctrFd, 0, shmCtrSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Munmap(ctl)
		syscall.Munmap(ctr)
		syscall.Close(s.ctlFd)
		syscall.Close(s.ctrFd)
		syscall.Close(s.ctlRO)
	})
	s.ctl = (*shmCtl)(unsafe.Pointer(&ctl[0]))
	s.ctr = (*shmCtr)(unsafe.Pointer(&ctr[0]))
	c := s.ctl
	c.magic, c.version, c.size, c.nonce = shmMagicCtl, shmVersion, shmCtlSize, nonce
	c.pid, c.state = fakeDaemonPid, uint32(StateLeased)
	c.epochMs = DefaultEpochMs
	c.offsetNs = time.Now().UnixNano() - DefaultEpochMs*1000000 - nanotime()
	c.worker, c.timeBits, c.workerBits, c.seqBits, c.leadMs = worker, 41, 10, 12, 1
	c.deadline = idTimeMs(c) + fakeDeadlineAhed
	c.heartbeatMs = uint64(nanotime()) / 1000000
	atomic.StoreUint64(&c.gen, 2)
	s.ctr.magic, s.ctr.version, s.ctr.size, s.ctr.nonce = shmMagicCtr, shmVersion, shmCtrSize, nonce
	s.ctlRO, err = syscall.Open("/proc/self/fd/"+strconv.Itoa(s.ctlFd), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// welcomeFor is a welcome of status 0 for s.
func welcomeFor(s *fakeSeg) []byte {
	w := make([]byte, 64)
	copy(w, hsWelcomeMagic)
	native.PutUint32(w[12:], shmVersion)
	native.PutUint32(w[16:], shmCtlSize)
	native.PutUint32(w[20:], shmCtrSize)
	native.PutUint64(w[24:], atomic.LoadUint64(&s.ctl.nonce))
	native.PutUint64(w[32:], uint64(nanotime()))
	return w
}

type fakeDaemon struct {
	lfd     int
	mu      sync.Mutex
	answer  func(conn int) // answers one connection whose hello was read
	served  atomic.Int32
	stopped sync.WaitGroup
}

// startFake listens on <tmp>/fake.sock and points $SNOWID_RUNTIME_DIR there.
func startFake(t *testing.T, answer func(conn int)) *fakeDaemon {
	dir := t.TempDir()
	os.Chmod(dir, 0755)
	path := filepath.Join(dir, "fake.sock")
	lfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(lfd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 16); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SNOWID_RUNTIME_DIR", dir)
	d := &fakeDaemon{lfd: lfd, answer: answer}
	d.stopped.Add(1)
	go func() {
		defer d.stopped.Done()
		for {
			conn, _, err := syscall.Accept4(lfd, syscall.SOCK_CLOEXEC)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return // shut down
			}
			var hello [16]byte
			n, _ := syscall.Read(conn, hello[:])
			if n == 16 && string(hello[:8]) == hsHelloMagic {
				d.served.Add(1)
				d.mu.Lock()
				a := d.answer
				d.mu.Unlock()
				a(conn)
			}
			syscall.Close(conn)
		}
	}()
	t.Cleanup(func() {
		syscall.Shutdown(lfd, syscall.SHUT_RDWR)
		d.stopped.Wait()
		syscall.Close(lfd)
	})
	return d
}

func (d *fakeDaemon) set(answer func(conn int)) {
	d.mu.Lock()
	d.answer = answer
	d.mu.Unlock()
}

func send(t *testing.T, conn int, w []byte, fds ...int) {
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if err := syscall.Sendmsg(conn, w, oob, nil, syscall.MSG_NOSIGNAL); err != nil {
		t.Error("fake daemon:", err)
	}
}

func TestFakeDaemonFollow(t *testing.T) {
	s1 := newFakeSeg(t, fakeWorker1, fakeNonce1, true)
	s2 := newFakeSeg(t, fakeWorker2, fakeNonce2, true)
	serve := func(s *fakeSeg) func(int) {
		return func(conn int) { send(t, conn, welcomeFor(s), s.ctlRO, s.ctrFd) }
	}
	d := startFake(t, serve(s1))
	c, err := Open("fake")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil || st.Worker != fakeWorker1 || st.DaemonPID != fakeDaemonPid || st.Generation != 2 ||
		st.HeadroomMs < fakeDeadlineAhed-5000 || st.TSCClock {
		t.Fatalf("status %+v %v", st, err)
	}
	// a TSC line published: Status says so (this client keeps Go's clock)
	atomic.StoreUint64(&s1.ctl.tscSpan, 1<<20)
	if st, err = c.Status(); err != nil || !st.TSCClock {
		t.Fatalf("status with a TSC line %+v %v", st, err)
	}
	atomic.StoreUint64(&s1.ctl.tscSpan, 0)
	var last uint64
	for i := 0; i < 10000; i++ {
		id, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("%d after %d", id, last)
		}
		last = id
	}
	if p, _ := Decode(DefaultLayout(), last); p.Worker != fakeWorker1 {
		t.Fatalf("worker %d", p.Worker)
	}

	// the daemon retires segment 1 (gen left odd) and hands out segment 2
	d.set(serve(s2))
	atomic.StoreUint32(&s1.ctl.state, shmStateRetired)
	atomic.StoreUint64(&s1.ctl.gen, 3)

	// a budget of 0 never asks the socket
	c.SetMaxWait(0)
	_, err = c.Next()
	wantErrno(t, err, syscall.EAGAIN)
	if n := d.served.Load(); n != 1 {
		t.Fatalf("%d handshakes with a budget of 0", n)
	}
	// with a budget it follows: IDs of worker 2, above those of segment 1
	c.SetMaxWait(time.Second)
	id, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Decode(DefaultLayout(), id)
	if p.Worker != fakeWorker2 || id <= last || d.served.Load() != 2 {
		t.Fatalf("after the switch: %+v (id %d, last %d), %d handshakes", p, id, last, d.served.Load())
	}
	lp, _ := Decode(DefaultLayout(), last)
	if p.TimeMs <= lp.TimeMs {
		t.Fatalf("the counter was not carried over: ms %d after %d", p.TimeMs, lp.TimeMs)
	}
	if st, _ := c.Status(); st.Worker != fakeWorker2 {
		t.Fatalf("status after the switch: %+v", st)
	}
	// many goroutines on the new segment
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := id
			for i := 0; i < 5000; i++ {
				v, err := c.Next()
				if err != nil || v <= prev {
					t.Errorf("%d after %d: %v", v, prev, err)
					return
				}
				prev = v
			}
		}()
	}
	wg.Wait()
	if d.served.Load() != 2 {
		t.Fatalf("%d handshakes", d.served.Load())
	}

	// a daemon gone (heartbeat stale) past its deadline: the socket again
	s3 := newFakeSeg(t, fakeWorker1+1, fakeNonce1+7, true)
	d.set(serve(s3))
	atomic.StoreUint64(&s2.ctl.heartbeatMs, uint64(nanotime())/1000000-5000)
	atomic.StoreUint64(&s2.ctl.deadline, idTimeMs(s2.ctl)-1)
	id, err = c.Next()
	if p, _ := Decode(DefaultLayout(), id); err != nil || p.Worker != fakeWorker1+1 {
		t.Fatalf("after the daemon went: %+v %v", p, err)
	}
}

func TestFakeDaemonRefusals(t *testing.T) {
	good := newFakeSeg(t, fakeWorker1, fakeNonce1, true)
	unsealed := newFakeSeg(t, fakeWorker1, fakeNonce1, false)
	status := func(st int32) func(int) {
		return func(conn int) {
			w := welcomeFor(good)
			native.PutUint32(w[8:], uint32(st))
			send(t, conn, w)
		}
	}
	edit := func(f func(w []byte)) func(int) {
		return func(conn int) {
			w := welcomeFor(good)
			f(w)
			send(t, conn, w, good.ctlRO, good.ctrFd)
		}
	}
	cases := []struct {
		name   string
		answer func(int)
		want   syscall.Errno
	}{
		{"refused", status(-int32(syscall.EACCES)), syscall.EACCES},
		{"bad hello", status(-int32(syscall.EPROTO)), syscall.EPROTO},
		{"odd status", status(-int32(syscall.ENOMEM)), syscall.EPROTO},
		{"closed", func(int) {}, syscall.ECONNRESET},
		{"half a welcome", func(conn int) { send(t, conn, welcomeFor(good)[:40]) }, syscall.ECONNRESET},
		{"bad magic", edit(func(w []byte) { w[0] = 'X' }), syscall.EPROTO},
		{"other version", edit(func(w []byte) { native.PutUint32(w[12:], 3) }), syscall.EPROTO},
		{"other size", edit(func(w []byte) { native.PutUint32(w[20:], 4096) }), syscall.EPROTO},
		{"other nonce", edit(func(w []byte) { native.PutUint64(w[24:], 99) }), syscall.EPROTO},
		{"other clock", edit(func(w []byte) { native.PutUint64(w[32:], 12345) }), syscall.EXDEV},
		{"one descriptor", func(conn int) { send(t, conn, welcomeFor(good), good.ctrFd) }, syscall.EPROTO},
		{"three descriptors", func(conn int) { send(t, conn, welcomeFor(good), good.ctlRO, good.ctrFd, good.ctrFd) }, syscall.EPROTO},
		{"control writable", func(conn int) { send(t, conn, welcomeFor(good), good.ctlFd, good.ctrFd) }, syscall.EPROTO},
		{"unsealed", func(conn int) {
			send(t, conn, welcomeFor(unsealed), unsealed.ctlRO, unsealed.ctrFd)
		}, syscall.EPROTO},
		{"not a memfd of that size", func(conn int) { send(t, conn, welcomeFor(good), good.ctlRO, good.ctlRO) }, syscall.EPROTO},
	}
	d := startFake(t, nil)
	for _, tc := range cases {
		d.set(tc.answer)
		c, err := Open("fake")
		if err == nil {
			c.Close()
			t.Fatalf("%s: opened", tc.name)
		}
		if !errorsIs(err, tc.want) {
			t.Fatalf("%s: %v, want %s", tc.name, err, ErrnoName(tc.want))
		}
	}
	// EAGAIN (too many answers unread) is retried
	var n atomic.Int32
	d.set(func(conn int) {
		if n.Add(1) <= 3 {
			status(-int32(syscall.EAGAIN))(conn)
			return
		}
		send(t, conn, welcomeFor(good), good.ctlRO, good.ctrFd)
	})
	c, err := Open("fake")
	if err != nil || n.Load() != 4 {
		t.Fatalf("after 3 EAGAIN: %v, %d handshakes", err, n.Load())
	}
	c.Close()
	// a connection closed unanswered is asked again, three times
	for _, resets := range []int32{3, 4} {
		n.Store(0)
		d.set(func(conn int) {
			if n.Add(1) <= resets {
				return // closed at once, the hello unread
			}
			send(t, conn, welcomeFor(good), good.ctlRO, good.ctrFd)
		})
		c, err = Open("fake")
		if resets == 3 && (err != nil || n.Load() != 4) {
			t.Fatalf("after 3 resets: %v, %d handshakes", err, n.Load())
		}
		if resets == 4 {
			wantErrno(t, err, syscall.ECONNRESET)
			if n.Load() != 4 {
				t.Fatalf("after 4 resets: %d handshakes, want 4", n.Load())
			}
		}
		c.Close()
	}
	// a daemon that never answers: ETIMEDOUT after a second
	release := make(chan struct{})
	d.set(func(conn int) { <-release })
	t0 := time.Now()
	_, err = Open("fake")
	close(release)
	wantErrno(t, err, syscall.ETIMEDOUT)
	if el := time.Since(t0); el < 900*time.Millisecond || el > 5*time.Second {
		t.Fatalf("timed out after %v", el)
	}
}

func errorsIs(err error, e syscall.Errno) bool {
	se, ok := err.(*Error)
	return ok && se.Errno == e
}
