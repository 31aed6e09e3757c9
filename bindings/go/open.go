// SPDX-License-Identifier: MIT

package snowid

import (
	"math"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The handshake of shm/handshake.h, and what libclient/snowid.c does around
// it: finding the socket, checking who made it, checking what came back,
// mapping the segment, following a newer one.

const (
	hsHelloMagic   = "SNOWIDh1"
	hsWelcomeMagic = "SNOWIDw1"
	hsTimeoutNs    = 1000 * 1000000 // SHM_HS_TIMEOUT_MS
	runtimeDirDef  = "/run/snowid"  // SHM_RUNTIME_DIR_DEFAULT
	sockPathMax    = 108            // SHM_SOCK_PATH_MAX: a sun_path
	instanceMax    = 64             // SHM_INSTANCE_MAX
	followEveryNs  = 20000000       // FOLLOW_EVERY_NS of snowid.c
	openResets     = 3              // SNOWID_OPEN_RESETS of snowid.c

	// <linux/fcntl.h>: not in package syscall
	fGetSeals  = 1024 + 10
	fSealSeal  = 0x1
	fSealShrnk = 0x2
	fSealGrow  = 0x4

	// DefaultMaxWait is the wait budget of a new Client
	// (SNOWID_MAX_WAIT_DEFAULT_USEC).
	DefaultMaxWait = 100 * time.Millisecond
)

// Client is a handle on the host's snowidd (struct snowid).  It is safe for
// concurrent use by any number of goroutines, and follows a newer segment
// by itself.
type Client struct {
	seg          atomic.Pointer[seg] // the newest; nil once closed
	maxWaitNs    atomic.Int64
	nextFollowNs atomic.Int64 // no new handshake before this (rate limit)
	follower     atomic.Int32 // pid of the process whose goroutine follows, or 0
	uuidKey      uint64       // of UUIDs' random bits (uuid7.go); set once at open
	path         string
}

// validInstance is shm_instance_valid().
func validInstance(s string) bool {
	if len(s) < 1 || len(s) > instanceMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// getenv is secure_getenv(): nothing from the environment in a set-user-ID
// or set-group-ID program, whose environment its invoker chose
func getenv(name string) string {
	if os.Getuid() != os.Geteuid() || os.Getgid() != os.Getegid() {
		return ""
	}
	return os.Getenv(name)
}

// socketPath is shm_instance_pick() and shm_socket_path(): instance ("":
// $SNOWID_INSTANCE or "default") under $SNOWID_RUNTIME_DIR or /run/snowid.
func socketPath(instance string) (string, syscall.Errno) {
	if instance == "" {
		instance = getenv("SNOWID_INSTANCE")
		if instance == "" {
			instance = "default"
		}
	}
	if !validInstance(instance) {
		return "", syscall.EINVAL
	}
	dir := getenv("SNOWID_RUNTIME_DIR")
	if dir == "" {
		dir = runtimeDirDef
	} else if dir[0] != '/' {
		return "", syscall.EINVAL // before anything is asked of it, as in C
	}
	p := dir + "/" + instance + ".sock"
	if len(p) >= sockPathMax {
		return "", syscall.ENAMETOOLONG
	}
	return p, 0
}

// Open is snowid_open(): gets the segment of instance ("": $SNOWID_INSTANCE,
// or "default") from snowidd over <dir>/<instance>.sock, dir being
// $SNOWID_RUNTIME_DIR or /run/snowid.  Its errors, as syscall.Errno values
// inside an *Error:
//
//	ENOENT or ECONNREFUSED: no snowidd listening;
//	EACCES: snowidd does not let this process take IDs;
//	EPERM: the socket is not safe (its directory writable by others, or it
//	       or its directory owned by a user other than the daemon's or root);
//	EXDEV: this process does not share snowidd's CLOCK_MONOTONIC;
//	EPROTO: not a snowidd of this version, or a damaged answer;
//	ECONNRESET: snowidd closed the connection without an answer, four
//	            times running (asked again 10 ms after each);
//	ETIMEDOUT: snowidd did not answer within a second;
//	EAGAIN: this user held too many answers unread for a second;
//	EINVAL: a bad instance name, or $SNOWID_RUNTIME_DIR not absolute;
//	ENAMETOOLONG: the socket path is too long.
//
// Other errors of connect() pass through.
func Open(instance string) (*Client, error) {
	path, e := socketPath(instance)
	if e != 0 {
		return nil, fail("open", e)
	}
	c := &Client{path: path, uuidKey: uuidKeyNew()}
	c.maxWaitNs.Store(int64(DefaultMaxWait))
	// EAGAIN: snowidd holds many answers this user has not closed yet (a
	// burst of clients starting at once): they go within moments.
	// ECONNRESET: closed unanswered (a snowidd killed mid-handshake, or
	// evicting under a flood): the socket outlives a restart, and the next
	// snowidd answers from its backlog
	var g *seg
	for attempt, resets := 0, 0; ; attempt++ {
		g, e = handshake(path, hsTimeoutNs)
		if e == syscall.ECONNRESET {
			if resets++; resets > openResets {
				break
			}
		} else if e != syscall.EAGAIN || attempt == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e != 0 {
		return nil, fail("open", e)
	}
	c.seg.Store(g)
	return c, nil
}

// Close is snowid_close(): the Client takes no more IDs (every later call
// fails with EINVAL, as the C functions do on the NULL that snowid_close()
// returns).  The segment's two small mappings are unmapped once no call
// still in flight uses them.  Closing twice gives EINVAL.
func (c *Client) Close() error {
	if c == nil || c.seg.Swap(nil) == nil {
		return fail("close", syscall.EINVAL)
	}
	return nil
}

// SetMaxWait is snowid_set_max_wait(): how long a call may wait (for the
// clock, the deadline, a switch); 0 never waits, a negative d counts as 0.
// The default is DefaultMaxWait; time.Duration(math.MaxInt64) waits as long
// as it takes.
func (c *Client) SetMaxWait(d time.Duration) {
	if c == nil {
		return
	}
	if d < 0 {
		d = 0
	}
	c.maxWaitNs.Store(int64(d)) // WRITE_ONCE(s->max_wait_ns)
}

// MaxWait is the wait budget SetMaxWait set.
func (c *Client) MaxWait() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.maxWaitNs.Load())
}

// memfdSealed is memfd_sealed(): a regular file of exactly size bytes that
// nobody can shrink, grow or seal further (no other process can make us
// take SIGBUS).
func memfdSealed(fd int, size int64) bool {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
		st.Size != size {
		return false
	}
	const seals = fSealShrnk | fSealGrow | fSealSeal
	got, _, err := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetSeals, 0)
	return err == 0 && got&seals == seals
}

// segMap is seg_map(): maps the two descriptors (not closed here) as one
// segment.  Only the control object's identity is checked: the counter
// object is writable by every client, so its identity line proves nothing.
func segMap(ctlFd, ctrFd int) (*seg, syscall.Errno) {
	if !memfdSealed(ctlFd, shmCtlSize) || !memfdSealed(ctrFd, shmCtrSize) {
		return nil, syscall.EPROTO
	}
	ctl, err := syscall.Mmap(ctlFd, 0, shmCtlSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, errnoOf(err)
	}
	ctr, err := syscall.Mmap(ctrFd, 0, shmCtrSize, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_SHARED)
	if err != nil {
		syscall.Munmap(ctl)
		return nil, errnoOf(err)
	}
	g := &seg{ctlMem: ctl, ctrMem: ctr, ctl: (*shmCtl)(unsafe.Pointer(&ctl[0])),
		ctr: (*shmCtr)(unsafe.Pointer(&ctr[0]))}
	runtime.SetFinalizer(g, (*seg).unmap)
	// shm_ctl_check(): written once before any client could see it (the
	// loads are atomic only so that no tool calls them races)
	if atomic.LoadUint64(&g.ctl.magic) != shmMagicCtl ||
		atomic.LoadUint32(&g.ctl.version) != shmVersion ||
		atomic.LoadUint32(&g.ctl.size) != shmCtlSize {
		g.free()
		return nil, syscall.EPROTO
	}
	return g, 0
}

// dirTrusted is dir_trusted(): owned by root or the peer; the last
// directory writable by its owner alone, the others too or sticky.
func dirTrusted(d string, peer uint32, final bool) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Lstat(d, &st); err != nil {
		return errnoOf(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || (st.Uid != 0 && st.Uid != peer) {
		return syscall.EPERM
	}
	if st.Mode&0022 != 0 && (final || st.Mode&syscall.S_ISVTX == 0) {
		return syscall.EPERM
	}
	return 0
}

// socketTrusted is socket_trusted(): the socket may only have been made by
// the daemon or root.  Every directory from / down is checked, then the
// socket itself.
func socketTrusted(path string, peer uint32) syscall.Errno {
	if path == "" || path[0] != '/' {
		return syscall.EINVAL
	}
	end := strings.LastIndexByte(path, '/') // the socket's directory ends here
	for k := 0; k <= end; k++ {
		if path[k] != '/' {
			continue
		}
		var e syscall.Errno
		if k == 0 {
			e = dirTrusted("/", peer, end == 0)
		} else {
			e = dirTrusted(path[:k], peer, k == end)
		}
		if e != 0 {
			return e
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return errnoOf(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || (st.Uid != 0 && st.Uid != peer) {
		return syscall.EPERM
	}
	return 0
}

// welcome is struct shm_welcome, decoded.
type welcome struct {
	status  int32
	version uint32
	ctlSize uint32
	ctrSize uint32
	nonce   uint64
	monoNs  int64
}

// readWelcome is read_welcome(): the 64-byte welcome and the descriptors
// that come with it (at most two kept; the caller closes them).
func readWelcome(fd int) (w welcome, fds []int, e syscall.Errno) {
	var buf [64]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	got := 0
	for got < len(buf) {
		n, oobn, flags, _, err := syscall.Recvmsg(fd, buf[got:], oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		bad := err != nil || flags&syscall.MSG_CTRUNC != 0
		if err == nil && oobn > 0 {
			msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				bad = true
			}
			for i := range msgs {
				m := &msgs[i]
				if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_RIGHTS {
					continue
				}
				rights, rerr := syscall.ParseUnixRights(m)
				if rerr != nil {
					bad = true
				}
				for _, f := range rights {
					if len(fds) < 2 {
						fds = append(fds, f)
					} else {
						syscall.Close(f)
						bad = true
					}
				}
			}
		}
		if err != nil {
			e = errnoOf(err)
			if e == syscall.EAGAIN {
				e = syscall.ETIMEDOUT
			}
			return w, fds, e
		}
		if bad {
			return w, fds, syscall.EPROTO // more than it should send
		}
		if n == 0 {
			return w, fds, syscall.ECONNRESET // closed without (all of) an answer
		}
		got += n
	}
	if string(buf[0:8]) != hsWelcomeMagic {
		return w, fds, syscall.EPROTO
	}
	w = welcome{
		status:  int32(native.Uint32(buf[8:])),
		version: native.Uint32(buf[12:]),
		ctlSize: native.Uint32(buf[16:]),
		ctrSize: native.Uint32(buf[20:]),
		nonce:   native.Uint64(buf[24:]),
		monoNs:  int64(native.Uint64(buf[32:])),
	}
	return w, fds, 0
}

// handshake is handshake() of snowid.c: one connection to the daemon at
// path, the hello, the welcome, and every check of handshake.h.
func handshake(path string, timeoutNs int64) (*seg, syscall.Errno) {
	if len(path) >= sockPathMax {
		return nil, syscall.ENAMETOOLONG
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(timeoutNs)
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	name := path
	if name[0] == '@' {
		name = "./" + name // a path, as in C, never Go's abstract-socket spelling
	}
	for {
		// a signal (the Go runtime sends some) interrupts a connect that
		// waits for room in the backlog; a Unix socket's connect leaves
		// nothing half done, so it is simply made again
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: name})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		e := errnoOf(err)
		if e == syscall.EAGAIN || e == syscall.EINPROGRESS {
			e = syscall.ETIMEDOUT
		}
		return nil, e
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return nil, errnoOf(err)
	}
	if e := socketTrusted(path, cred.Uid); e != 0 {
		return nil, e
	}

	// shm_hello_make(): the one version this client maps
	var hello [16]byte
	copy(hello[:], hsHelloMagic)
	native.PutUint32(hello[8:], shmVersion)
	native.PutUint32(hello[12:], shmVersion)
	t0 := nanotime()
	var n int
	for {
		n, err = syscall.SendmsgN(fd, hello[:], nil, nil, syscall.MSG_NOSIGNAL)
		if err != syscall.EINTR {
			break
		}
	}
	sent := err == nil && n == len(hello)
	if !sent && err != syscall.EPIPE {
		if err == syscall.EAGAIN {
			return nil, syscall.ETIMEDOUT
		}
		return nil, syscall.EPROTO
	}
	// EPIPE: closed before the hello, which a refusal at accept does
	// after its welcome: that may be waiting still
	w, fds, e := readWelcome(fd)
	t1 := nanotime()
	defer func() {
		for _, f := range fds {
			syscall.Close(f)
		}
	}()
	if !sent && (e != 0 || w.status == 0) {
		return nil, syscall.ECONNRESET
	}
	if e != 0 {
		return nil, e
	}
	if w.status != 0 {
		if s := syscall.Errno(-w.status); s == syscall.EACCES || s == syscall.EAGAIN {
			return nil, s
		}
		return nil, syscall.EPROTO
	}
	if len(fds) != 2 || w.version != shmVersion || w.ctlSize != shmCtlSize ||
		w.ctrSize != shmCtrSize {
		return nil, syscall.EPROTO
	}
	// the daemon read its clock between our two readings, unless its
	// CLOCK_MONOTONIC is not ours (another time namespace) -- or unless
	// nanotime() were not CLOCK_MONOTONIC: the clock the fast path reads
	// is the one checked here
	if w.monoNs < t0 || w.monoNs > t1 {
		return nil, syscall.EXDEV
	}
	fl, _, ferr := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[0]), syscall.F_GETFL, 0)
	if ferr != 0 || fl&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, syscall.EPROTO // the control data must come read-only
	}
	g, e := segMap(fds[0], fds[1])
	if e != 0 {
		return nil, e
	}
	if atomic.LoadUint64(&g.ctl.nonce) != w.nonce {
		g.free()
		return nil, syscall.EPROTO
	}
	return g, 0
}

// carryOver is carry_over() of snowid.c: moving from old to n, a newer
// segment, keeps each goroutine's IDs increasing, since n's live counter is
// raised past the ms old's live counter reached.  false while n is not
// published yet (the caller waits on old, and asks again).
func carryOver(old, n *seg) bool {
	oc, nc := old.ctl, n.ctl
	// load_acquire(nc->gen), pairing with store_release(gen) in
	// shm_pub_switch(): n's layout and line are those of this generation
	ng := atomic.LoadUint64(&nc.gen)
	og := atomic.LoadUint64(&oc.gen)
	if ng&1 != 0 {
		return false
	}
	if og <= 1 || atomic.LoadUint64(&oc.epochMs) != atomic.LoadUint64(&nc.epochMs) {
		return true
	}
	_, _, osb, _ := oc.bits()
	_, _, nsb, _ := nc.bits()
	osb, nsb = osb&31, nsb&31
	// an odd gen's line is the one live before it went odd
	want := atomic.LoadUint64(&old.ctr.line[shmLineIndex(og)].state)>>osb + 1
	if want > atomic.LoadUint64(&nc.deadline) || want > idTimeMs(nc)+1000 || want>>(63-nsb) != 0 {
		return true
	}
	// smp_rmb() in C, pairing with smp_wmb() in shm_pub_switch(): here the
	// loads above and the one below are all sequentially consistent, so
	// the load of gen below is not done before them
	if atomic.LoadUint64(&nc.gen) != ng {
		return true
	}
	// relaxed CAS in C: uniqueness comes from the RMW itself
	line := &n.ctr.line[shmLineIndex(ng)].state
	for cur := atomic.LoadUint64(line); cur < want<<nsb; cur = atomic.LoadUint64(line) {
		if atomic.CompareAndSwapUint64(line, cur, want<<nsb) {
			break
		}
	}
	runtime.KeepAlive(old)
	runtime.KeepAlive(n)
	return true
}

// follow is snowid_follow(): asks the socket for the segment, if g (the
// caller's) is retired or its daemon gone; true if the Client has moved to
// a newer segment.  Rate-limited; waits at most budgetNs (nothing below a
// millisecond); one goroutine at a time.
func (c *Client) follow(g *seg, budgetNs int64) bool {
	ctl := g.ctl
	now := nanotime()
	nowMs := uint64(now) / 1000000
	beat := atomic.LoadUint64(&ctl.heartbeatMs) // READ_ONCE
	// a live daemon's segment that is not retired: nothing newer exists
	if atomic.LoadUint32(&ctl.state) != shmStateRetired && beat <= nowMs &&
		nowMs-beat <= shmHeartbeatStaleMs {
		return false
	}
	cur := c.seg.Load() // load_acquire(s->seg), pairing with the store below
	if cur == nil {
		return false // closed
	}
	if cur != g {
		// another goroutine moved the Client: carry what this one may
		// have taken from g over, too
		carryOver(g, cur)
		return true
	}
	if now < c.nextFollowNs.Load() || c.path == "" || budgetNs < 1000000 {
		return false
	}
	// one goroutine at a time (the CAS is an acquire in C); a flag left by
	// another process's thread is taken over, as in C
	me := int32(syscall.Getpid())
	owner := c.follower.Load()
	if owner == me || !c.follower.CompareAndSwap(owner, me) {
		return false
	}
	moved := false
	if cur = c.seg.Load(); cur != g {
		// another goroutine moved the handle meanwhile: carry over what
		// this one may have taken from g, as on the check above
		if cur != nil {
			carryOver(g, cur)
			moved = true
		}
	} else {
		c.nextFollowNs.Store(now + followEveryNs)
		timeout := budgetNs
		if timeout > hsTimeoutNs {
			timeout = hsTimeoutNs
		}
		if n, e := handshake(c.path, timeout); e == 0 {
			if atomic.LoadUint64(&n.ctl.nonce) == atomic.LoadUint64(&g.ctl.nonce) ||
				!carryOver(cur, n) {
				n.free() // the same one, or not published yet
			} else if c.seg.CompareAndSwap(cur, n) {
				// store_release(s->seg) in C, pairing with the load in
				// take(): a goroutine that sees n sees it mapped
				moved = true
			} else {
				n.free() // closed meanwhile
			}
		}
	}
	c.follower.Store(0) // a release in C, pairing with the next follower's CAS
	return moved
}

// readLayout is read_layout(): the layout as one consistent snapshot (the
// seqlock of next.go).
func readLayout(ctl *shmCtl) (Layout, syscall.Errno) {
	for attempt := 0; attempt < 1000; attempt++ {
		// load_acquire(gen): pairs with store_release(gen) in shm_pub_switch()
		gen := atomic.LoadUint64(&ctl.gen)
		if gen&1 != 0 {
			runtime.Gosched() // cpu_relax()
			continue
		}
		epoch := atomic.LoadUint64(&ctl.epochMs)
		tb, wb, sb, _ := ctl.bits()
		// smp_rmb() in C: sequentially consistent loads need no fence
		if atomic.LoadUint64(&ctl.gen) == gen {
			l := Layout{EpochMs: epoch, TimeBits: uint(tb), WorkerBits: uint(wb), SeqBits: uint(sb)}
			if l.check() != 0 {
				return l, syscall.EPROTO
			}
			return l, 0
		}
	}
	return Layout{}, syscall.EAGAIN
}

// Layout is snowid_get_layout(): the layout of this instance's IDs.
func (c *Client) Layout() (Layout, error) {
	if c == nil {
		return Layout{}, fail("layout", syscall.EINVAL)
	}
	g := c.seg.Load() // load_acquire(s->seg): pairs with follow()
	if g == nil {
		return Layout{}, fail("layout", syscall.EINVAL)
	}
	l, e := readLayout(g.ctl)
	// gen odd for good: a retired segment, or its daemon gone mid-switch
	if e == syscall.EAGAIN && c.follow(g, c.maxWaitNs.Load()) {
		if g = c.seg.Load(); g != nil {
			l, e = readLayout(g.ctl)
		}
	}
	runtime.KeepAlive(g)
	if e != 0 {
		return Layout{}, fail("layout", e)
	}
	return l, nil
}

// HostStats are host-wide counts, kept by every client on its slow paths
// (snowid_host_stats).
type HostStats struct {
	Issued        uint64 // counter values taken (IDs, and the few dropped at a switch)
	WaitsCeiling  uint64 // calls that waited for the clock
	WaitsDeadline uint64 // calls that waited for the deadline
	WaitsSwitch   uint64 // calls that waited for a switch to finish
	EAGAIN        uint64 // calls that gave up
	Dropped       uint64 // values dropped because the generation changed
}

// HostStats is snowid_get_host_stats().
func (c *Client) HostStats() (HostStats, error) {
	if c == nil {
		return HostStats{}, fail("host stats", syscall.EINVAL)
	}
	g := c.seg.Load() // pairs with follow()
	if g == nil {
		return HostStats{}, fail("host stats", syscall.EINVAL)
	}
	st := &g.ctr.stats
	gen := atomic.LoadUint64(&g.ctl.gen) // pairs with shm_pub_switch()
	_, _, sb, _ := g.ctl.bits()
	sb &= 31
	// the live counter's current ms has not closed yet: count it too
	open := atomic.LoadUint64(&g.ctr.line[shmLineIndex(gen)].state) & (1<<sb - 1)
	if gen&1 != 0 {
		open = 0
	}
	h := HostStats{
		Issued:        atomic.LoadUint64(&st.issued) + open,
		WaitsCeiling:  atomic.LoadUint64(&st.waitsCeiling),
		WaitsDeadline: atomic.LoadUint64(&st.waitsDeadline),
		WaitsSwitch:   atomic.LoadUint64(&st.waitsSwitch),
		EAGAIN:        atomic.LoadUint64(&st.eagain),
		Dropped:       atomic.LoadUint64(&st.dropped),
	}
	runtime.KeepAlive(g)
	return h, nil
}

// State is the daemon's state (enum snowid_state).
type State int

const (
	StateStarting   State = 0
	StateLeased     State = 1
	StateNoLease    State = 2
	StateRestored   State = 3 // the store was restored: nothing extended until fenced
	StateLayoutLost State = 4 // the cluster's layout or fence is gone
	StateRetired    State = 5 // replaced by a newer segment (clients follow)
	StateStoreFull  State = 6 // the store is full: nothing extended

	// StateEtcdFull is StateStoreFull by its name from when etcd was the
	// only store.
	//
	// Deprecated: use StateStoreFull; StateEtcdFull goes in the next release.
	StateEtcdFull = StateStoreFull
)

var stateNames = [...]string{"starting", "leased", "no-lease", "store-restored", "layout-lost",
	"retired", "store-full"}

// String is the name `snowid status` prints.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Status is snowid_status.
type Status struct {
	Worker         uint32
	State          State
	Generation     uint64 // odd while snowidd is switching
	DeadlineMs     uint64 // last ID time (ms since epoch) that may be used
	DeadlineUnixMs uint64
	HeadroomMs     int64 // deadline minus ID time now; negative once passed
	OffsetNs       int64 // ID time minus CLOCK_MONOTONIC
	DaemonPID      int32
	TSCClock       bool // snowidd publishes the TSC clock (libsnowid's clients may read it)
}

// Status is snowid_get_status().
func (c *Client) Status() (Status, error) {
	if c == nil {
		return Status{}, fail("status", syscall.EINVAL)
	}
	g := c.seg.Load() // pairs with follow()
	if g == nil {
		return Status{}, fail("status", syscall.EINVAL)
	}
	ctl := g.ctl
	st := Status{
		Worker:     atomic.LoadUint32(&ctl.worker),
		State:      State(atomic.LoadUint32(&ctl.state)),
		Generation: atomic.LoadUint64(&ctl.gen), // pairs with shm_pub_switch()
		DeadlineMs: atomic.LoadUint64(&ctl.deadline),
		OffsetNs:   atomic.LoadInt64(&ctl.offsetNs),
		DaemonPID:  atomic.LoadInt32(&ctl.pid),
		TSCClock:   atomic.LoadUint64(&ctl.tscSpan) != 0,
	}
	st.DeadlineUnixMs = atomic.LoadUint64(&ctl.epochMs) + st.DeadlineMs
	// saturating: a damaged deadline is far from now either way
	now, d := idTimeMs(ctl), st.DeadlineMs
	if d >= now {
		st.HeadroomMs = satInt64(d - now)
	} else {
		st.HeadroomMs = -satInt64(now - d)
	}
	if st.Generation&1 != 0 {
		st.HeadroomMs = 0
	}
	runtime.KeepAlive(g)
	return st, nil
}

func satInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
