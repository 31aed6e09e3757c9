// SPDX-License-Identifier: MIT

package snowid

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func wantErrno(t *testing.T, err error, e syscall.Errno) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", ErrnoName(e))
	}
	if !errors.Is(err, e) {
		t.Fatalf("error %v, want %s", err, ErrnoName(e))
	}
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), ErrnoName(e)) {
		t.Fatalf("error %q is not a *snowid.Error naming %s", err, ErrnoName(e))
	}
}

func TestDefaultLayout(t *testing.T) {
	l := DefaultLayout()
	if l != (Layout{EpochMs: 1735689600000, TimeBits: 41, WorkerBits: 10, SeqBits: 12}) {
		t.Fatalf("default layout %+v", l)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestLayoutCheck(t *testing.T) {
	bad := []Layout{
		{TimeBits: 31, WorkerBits: 16, SeqBits: 16},
		{TimeBits: 41, WorkerBits: 10, SeqBits: 11},
		{TimeBits: 41, WorkerBits: 10, SeqBits: 13},
		{TimeBits: 32, WorkerBits: 32, SeqBits: 0},
		{TimeBits: 32, WorkerBits: 0, SeqBits: 32 - 1 + 1},
		{EpochMs: 1 << 42, TimeBits: 41, WorkerBits: 10, SeqBits: 12},
		{TimeBits: 64},
	}
	for _, l := range bad {
		wantErrno(t, l.Check(), syscall.EINVAL)
		_, err := Decode(l, 1)
		wantErrno(t, err, syscall.EINVAL)
		_, err = Encode(l, Parts{})
		wantErrno(t, err, syscall.EINVAL)
	}
	good := []Layout{
		{TimeBits: 63}, {TimeBits: 32, WorkerBits: 31}, {TimeBits: 32, SeqBits: 31},
		{EpochMs: 1<<42 - 1, TimeBits: 41, WorkerBits: 10, SeqBits: 12},
	}
	for _, l := range good {
		if err := l.Check(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

func TestDecode(t *testing.T) {
	l := DefaultLayout()
	p, err := Decode(l, 1)
	if err != nil || p != (Parts{TimeMs: 0, UnixMs: 1735689600000, Worker: 0, Sequence: 1}) {
		t.Fatalf("decode 1: %+v %v", p, err)
	}
	// 2026-12-01T06:19:19.257Z... as `snowid decode` cuts it: time, worker 332, seq 2
	id := uint64(60416505257)<<22 | 332<<12 | 2
	p, err = Decode(l, id)
	if err != nil || p.TimeMs != 60416505257 || p.UnixMs != 1735689600000+60416505257 ||
		p.Worker != 332 || p.Sequence != 2 {
		t.Fatalf("decode: %+v %v", p, err)
	}
	if got := p.Time().UnixMilli(); got != int64(p.UnixMs) {
		t.Fatalf("Time() %d", got)
	}
	back, err := Encode(l, p)
	if err != nil || back != id {
		t.Fatalf("encode: %d %v", back, err)
	}
	_, err = Decode(l, 1<<63)
	wantErrno(t, err, syscall.ERANGE)
	_, err = Encode(l, Parts{Worker: 1024})
	wantErrno(t, err, syscall.ERANGE)
	_, err = Encode(l, Parts{Sequence: 4096})
	wantErrno(t, err, syscall.ERANGE)
	_, err = Encode(l, Parts{TimeMs: 1 << 41})
	wantErrno(t, err, syscall.ERANGE)

	// other layouts: every field comes back
	for _, l := range []Layout{{TimeBits: 63}, {TimeBits: 32, WorkerBits: 31},
		{TimeBits: 32, SeqBits: 31}, {EpochMs: 5, TimeBits: 40, WorkerBits: 8, SeqBits: 15}} {
		p := Parts{TimeMs: 1<<l.TimeBits - 3, Worker: uint32(1<<l.WorkerBits - 1),
			Sequence: uint32(1<<l.SeqBits) / 3}
		id, err := Encode(l, p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Decode(l, id)
		p.UnixMs = l.EpochMs + p.TimeMs
		if err != nil || q != p {
			t.Fatalf("%+v: %+v -> %d -> %+v %v", l, p, id, q, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	err := fail("next", syscall.EAGAIN)
	if err.Error() != "snowid: next: EAGAIN (resource temporarily unavailable)" {
		t.Fatalf("%q", err.Error())
	}
	if !errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINVAL) {
		t.Fatal("errors.Is")
	}
	if !errors.Is(fail("open", syscall.ENOENT), os.ErrNotExist) {
		t.Fatal("ENOENT is not os.ErrNotExist")
	}
	if ErrnoName(syscall.Errno(4000)) != "errno 4000" {
		t.Fatal(ErrnoName(syscall.Errno(4000)))
	}
}

// The names are those `snowid status` prints; StateEtcdFull is the old
// name of StateStoreFull.
func TestStateNames(t *testing.T) {
	want := []string{"starting", "leased", "no-lease", "store-restored", "layout-lost",
		"retired", "store-full", "unknown"}
	for i, w := range want {
		if s := State(i).String(); s != w {
			t.Errorf("State(%d) = %q, want %q", i, s, w)
		}
	}
	if State(-1).String() != "unknown" {
		t.Error(State(-1).String())
	}
	if StateEtcdFull != StateStoreFull || StateStoreFull != 6 || StateRestored != 3 {
		t.Fatal(StateEtcdFull, StateStoreFull, StateRestored)
	}
}

func TestSocketPath(t *testing.T) {
	t.Setenv("SNOWID_RUNTIME_DIR", "")
	t.Setenv("SNOWID_INSTANCE", "")
	if p, e := socketPath(""); p != "/run/snowid/default.sock" || e != 0 {
		t.Fatal(p, e)
	}
	t.Setenv("SNOWID_INSTANCE", "other_1-x")
	t.Setenv("SNOWID_RUNTIME_DIR", "/tmp/d")
	if p, e := socketPath(""); p != "/tmp/d/other_1-x.sock" || e != 0 {
		t.Fatal(p, e)
	}
	if p, e := socketPath("mine"); p != "/tmp/d/mine.sock" || e != 0 {
		t.Fatal(p, e)
	}
	for _, bad := range []string{"a/b", "a.b", "ä", strings.Repeat("x", 65), " "} {
		if _, e := socketPath(bad); e != syscall.EINVAL {
			t.Fatalf("%q: %v", bad, e)
		}
	}
	t.Setenv("SNOWID_INSTANCE", "a.b")
	if _, e := socketPath(""); e != syscall.EINVAL {
		t.Fatal(e)
	}
	// 108 bytes do not fit a sun_path with its NUL; 107 do
	t.Setenv("SNOWID_RUNTIME_DIR", "/"+strings.Repeat("d", 107-len("/x.sock")-1))
	if p, e := socketPath("x"); e != 0 || len(p) != 107 {
		t.Fatal(len(p), e)
	}
	t.Setenv("SNOWID_RUNTIME_DIR", "/"+strings.Repeat("d", 108-len("/x.sock")-1))
	if _, e := socketPath("x"); e != syscall.ENAMETOOLONG {
		t.Fatal(e)
	}
	_, err := Open("x")
	wantErrno(t, err, syscall.ENAMETOOLONG)
	_, err = Open("a/b")
	wantErrno(t, err, syscall.EINVAL)
}

func TestUUID7Format(t *testing.T) {
	for _, l := range []Layout{DefaultLayout(), {EpochMs: 7, TimeBits: 32, WorkerBits: 8, SeqBits: 23},
		{EpochMs: 7, TimeBits: 60, WorkerBits: 0, SeqBits: 3}} {
		sn := snap{epoch: l.EpochMs, worker: uint32(1<<l.WorkerBits - 1),
			workerBits: uint32(l.WorkerBits), seqBits: uint32(l.SeqBits)}
		var prev [16]byte
		for i, x := range []uint64{5 << l.SeqBits, 5<<l.SeqBits | 1, 6<<l.SeqBits - 1, 6 << l.SeqBits} {
			var u [16]byte
			format(&sn, 0x1234, x, &u)
			if u[6]>>4 != 7 || u[8]>>6 != 2 {
				t.Fatalf("not a v7 UUID: %s", FormatUUID(u))
			}
			if i > 0 && string(u[:]) <= string(prev[:]) {
				t.Fatalf("not increasing: %s after %s", FormatUUID(u), FormatUUID(prev))
			}
			prev = u
			p, err := DecodeUUID7(l, u)
			if err != nil || p.TimeMs != x>>l.SeqBits || p.Worker != sn.worker ||
				uint64(p.Sequence) != x&(1<<l.SeqBits-1) || p.UnixMs != l.EpochMs+p.TimeMs {
				t.Fatalf("%+v: %s -> %+v %v", l, FormatUUID(u), p, err)
			}
		}
	}
	var u [16]byte
	_, err := DecodeUUID7(DefaultLayout(), u)
	wantErrno(t, err, syscall.EINVAL)
	if s := FormatUUID([16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 0xff}); s != "01234567-89ab-cdef-0001-0203040506ff" {
		t.Fatal(s)
	}
}

func TestClosedNil(t *testing.T) {
	var c *Client
	_, err := c.Next()
	wantErrno(t, err, syscall.EINVAL)
	wantErrno(t, c.NextBatch(make([]uint64, 1)), syscall.EINVAL)
	wantErrno(t, c.Close(), syscall.EINVAL)
	_, err = c.Status()
	wantErrno(t, err, syscall.EINVAL)
}

// A relative $SNOWID_RUNTIME_DIR is refused before any connect, as
// shm_socket_path() refuses it.
func TestRelativeRuntimeDir(t *testing.T) {
	t.Setenv("SNOWID_RUNTIME_DIR", "run/snowid")
	if _, err := Open("default"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Open with a relative runtime directory: %v, want EINVAL", err)
	}
}
