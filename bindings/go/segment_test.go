// SPDX-License-Identifier: MIT

package snowid

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// goLayout is the Go side of every offset and size that offsets.c prints
// (the names are the C ones).
func goLayout() map[string]uint64 {
	var ctl shmCtl
	var line shmLine
	var st shmStats
	var ctr shmCtr
	return map[string]uint64{
		"shm_ctl.sizeof":           uint64(unsafe.Sizeof(ctl)),
		"shm_ctl.magic":            uint64(unsafe.Offsetof(ctl.magic)),
		"shm_ctl.version":          uint64(unsafe.Offsetof(ctl.version)),
		"shm_ctl.size":             uint64(unsafe.Offsetof(ctl.size)),
		"shm_ctl.pid":              uint64(unsafe.Offsetof(ctl.pid)),
		"shm_ctl.state":            uint64(unsafe.Offsetof(ctl.state)),
		"shm_ctl.nonce":            uint64(unsafe.Offsetof(ctl.nonce)),
		"shm_ctl.gen":              uint64(unsafe.Offsetof(ctl.gen)),
		"shm_ctl.deadline":         uint64(unsafe.Offsetof(ctl.deadline)),
		"shm_ctl.offset_ns":        uint64(unsafe.Offsetof(ctl.offsetNs)),
		"shm_ctl.epoch_ms":         uint64(unsafe.Offsetof(ctl.epochMs)),
		"shm_ctl.worker":           uint64(unsafe.Offsetof(ctl.worker)),
		"shm_ctl.time_bits":        uint64(unsafe.Offsetof(ctl.timeBits)),
		"shm_ctl.worker_bits":      uint64(unsafe.Offsetof(ctl.workerBits)),
		"shm_ctl.seq_bits":         uint64(unsafe.Offsetof(ctl.seqBits)),
		"shm_ctl.lead_ms":          uint64(unsafe.Offsetof(ctl.leadMs)),
		"shm_ctl.heartbeat_ms":     uint64(unsafe.Offsetof(ctl.heartbeatMs)),
		"shm_ctl.range_from":       uint64(unsafe.Offsetof(ctl.rangeFrom)),
		"shm_ctl.range_end":        uint64(unsafe.Offsetof(ctl.rangeEnd)),
		"shm_ctl.tsc.span":         uint64(unsafe.Offsetof(ctl.tscSpan)),
		"shm_line.sizeof":          uint64(unsafe.Sizeof(line)),
		"shm_line.state":           uint64(unsafe.Offsetof(line.state)),
		"shm_stats.sizeof":         uint64(unsafe.Sizeof(st)),
		"shm_stats.waits_ceiling":  uint64(unsafe.Offsetof(st.waitsCeiling)),
		"shm_stats.waits_deadline": uint64(unsafe.Offsetof(st.waitsDeadline)),
		"shm_stats.waits_switch":   uint64(unsafe.Offsetof(st.waitsSwitch)),
		"shm_stats.eagain":         uint64(unsafe.Offsetof(st.eagain)),
		"shm_stats.dropped":        uint64(unsafe.Offsetof(st.dropped)),
		"shm_stats.issued":         uint64(unsafe.Offsetof(st.issued)),
		"shm_ctr.sizeof":           uint64(unsafe.Sizeof(ctr)),
		"shm_ctr.line":             uint64(unsafe.Offsetof(ctr.line)),
		"shm_ctr.stats":            uint64(unsafe.Offsetof(ctr.stats)),
		"shm_ctr.magic":            uint64(unsafe.Offsetof(ctr.magic)),
		"shm_ctr.version":          uint64(unsafe.Offsetof(ctr.version)),
		"shm_ctr.size":             uint64(unsafe.Offsetof(ctr.size)),
		"shm_ctr.nonce":            uint64(unsafe.Offsetof(ctr.nonce)),
		// the handshake's messages, as encoded in open.go
		"shm_hello.sizeof":       16,
		"shm_welcome.sizeof":     64,
		"shm_welcome.status":     8,
		"shm_welcome.version":    12,
		"shm_welcome.ctl_size":   16,
		"shm_welcome.ctr_size":   20,
		"shm_welcome.nonce":      24,
		"shm_welcome.mono_ns":    32,
		"shm_welcome.uid":        40,
		"SHM_MAGIC_CTL":          shmMagicCtl,
		"SHM_MAGIC_CTR":          shmMagicCtr,
		"SHM_VERSION":            shmVersion,
		"SHM_LINES":              shmLines,
		"SHM_HEARTBEAT_STALE_MS": shmHeartbeatStaleMs,
		"SHM_STATE_RETIRED":      shmStateRetired,
		"SHM_HS_TIMEOUT_MS":      hsTimeoutNs / 1000000,
		"SHM_SOCK_PATH_MAX":      sockPathMax,
		"SHM_INSTANCE_MAX":       instanceMax,
	}
}

// The values shm/segment.h asserts with _Static_assert, by hand: these hold
// even where no C compiler ran.
func TestLayoutAsserted(t *testing.T) {
	want := map[string]uint64{
		"shm_ctl.sizeof": 192, "shm_ctl.pid": 16, "shm_ctl.nonce": 24, "shm_ctl.gen": 64,
		"shm_ctl.deadline": 72, "shm_ctl.offset_ns": 80, "shm_ctl.epoch_ms": 88,
		"shm_ctl.worker": 96, "shm_ctl.lead_ms": 103, "shm_ctl.heartbeat_ms": 128,
		"shm_ctl.range_from": 136, "shm_ctl.range_end": 140, "shm_line.sizeof": 64,
		"shm_stats.sizeof": 64, "shm_ctr.stats": 64 * 64, "shm_ctr.magic": 65 * 64,
		"shm_ctr.sizeof": 66 * 64,
	}
	got := goLayout()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: Go has %d, segment.h asserts %d", k, got[k], v)
		}
	}
	if got["shm_ctl.sizeof"] != shmCtlSize || got["shm_ctr.sizeof"] != shmCtrSize {
		t.Errorf("shmCtlSize/shmCtrSize disagree with the structures")
	}
	// the four bytes read as one word sit in one aligned word
	if got["shm_ctl.time_bits"]%4 != 0 || got["shm_ctl.lead_ms"] != got["shm_ctl.time_bits"]+3 {
		t.Errorf("time_bits..lead_ms are not one aligned word")
	}
}

// Every offset against what the C compiler says: $SNOWID_GO_OFFSETS is the
// program offsets.c (meson builds it and sets the variable).
func TestLayoutMatchesC(t *testing.T) {
	prog := os.Getenv("SNOWID_GO_OFFSETS")
	if prog == "" {
		t.Skip("SNOWID_GO_OFFSETS not set (meson test sets it)")
	}
	out, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	got := goLayout()
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("bad line %q", sc.Text())
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		g, ok := got[f[0]]
		if !ok {
			t.Errorf("%s: C prints it, the Go table lacks it", f[0])
			continue
		}
		seen++
		if g != v {
			t.Errorf("%s: Go %d, C %d", f[0], g, v)
		}
	}
	if seen != len(got) {
		t.Errorf("C printed %d of the %d values the Go table has", seen, len(got))
	}
}

// nanotime() must be CLOCK_MONOTONIC: bracket a raw clock_gettime() between
// two readings of it.
func TestNanotimeIsMonotonic(t *testing.T) {
	for i := 0; i < 100; i++ {
		var ts syscall.Timespec
		a := nanotime()
		_, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
		b := nanotime()
		if e != 0 {
			t.Fatal(e)
		}
		if m := ts.Nano(); m < a || m > b {
			t.Fatalf("CLOCK_MONOTONIC %d not within nanotime() %d..%d", m, a, b)
		}
	}
}
