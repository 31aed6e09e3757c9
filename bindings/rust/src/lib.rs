// SPDX-License-Identifier: MIT
//! Unique, roughly time-ordered 64-bit IDs from the host's snowidd.
//!
//! A [`Snowid`] is a handle on the segment snowidd publishes: [`Snowid::open`]
//! fetches it once over the daemon's socket (`$SNOWID_RUNTIME_DIR`, default
//! `/run/snowid`), then every [`Snowid::next`] is one atomic operation on the
//! shared counter and a clock read, with no system call. The handle follows a
//! newer segment by itself (a daemon restarted, a worker number switched).
//!
//! The crate is a safe wrapper over libsnowid, the C library every program on
//! the host shares: the same fast path, the same waits and the same checks
//! as C. Errors are [`std::io::Error`]s carrying libsnowid's errno
//! (`raw_os_error()`): `EAGAIN` when no ID could be issued within the wait
//! budget, `EACCES` when snowidd does not let this process take IDs, and the
//! others of `snowid_open(3)`.
//!
//! ```no_run
//! let ids = snowid::Snowid::open()?;
//! let id = ids.next()?;
//! let parts = ids.decode(id)?;
//! println!("{} worker {} at {} ms", id, parts.worker, parts.unix_ms);
//! # Ok::<(), std::io::Error>(())
//! ```
use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::raw::{c_char, c_int, c_uint};
use std::ptr::{self, NonNull};
use std::time::Duration;

/// How an ID is cut: `time_bits + worker_bits + seq_bits == 63`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Unix ms of ID time 0.
    pub epoch_ms: u64,
    pub time_bits: c_uint,
    pub worker_bits: c_uint,
    pub seq_bits: c_uint,
}

impl Default for Layout {
    /// snowid's default: epoch 2025-01-01Z, 41 time, 10 worker, 12 sequence bits.
    fn default() -> Self {
        let mut l = Layout { epoch_ms: 0, time_bits: 0, worker_bits: 0, seq_bits: 0 };
        // SAFETY: l is a valid, writable snowid_layout.
        unsafe { ffi::snowid_layout_default(&mut l) };
        l
    }
}

/// What an ID says: its time, worker number and sequence.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// ms since the layout's epoch.
    pub time_ms: u64,
    /// Unix ms: the epoch plus `time_ms`.
    pub unix_ms: u64,
    pub worker: u32,
    pub sequence: u32,
}

/// The daemon's state, as its segment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Starting,
    Leased,
    NoLease,
    /// The store was restored: nothing is extended until a fence.
    Restored,
    /// The cluster's layout or fence is gone.
    LayoutLost,
    /// Replaced by a newer segment, which the handle follows.
    Retired,
    /// The store is full: nothing is extended.
    StoreFull,
    /// A state this crate does not know yet.
    Other(i32),
}

/// The segment's state: [`Snowid::status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub worker: u32,
    pub state: State,
    /// Odd while snowidd is switching.
    pub generation: u64,
    /// The last ID time (ms since the epoch) that may be used.
    pub deadline_ms: u64,
    pub deadline_unix_ms: u64,
    /// The deadline minus ID time now; negative once passed.
    pub headroom_ms: i64,
    /// ID time minus `CLOCK_MONOTONIC`, in ns.
    pub offset_ns: i64,
    pub daemon_pid: i32,
    /// snowidd publishes the TSC clock, which clients may read.
    pub tsc_clock: bool,
}

mod ffi {
    use super::{Layout, Parts};
    use std::os::raw::{c_char, c_int};

    pub enum Handle {}

    /// snowid_status, as snowid.h has it (SNOWID_1.2).
    #[repr(C)]
    pub struct RawStatus {
        pub size: usize,
        pub worker: u32,
        pub state: c_int,
        pub generation: u64,
        pub deadline_ms: u64,
        pub deadline_unix_ms: u64,
        pub headroom_ms: i64,
        pub offset_ns: i64,
        pub daemon_pid: i32,
        pub tsc_clock: i32,
    }

    extern "C" {
        pub fn snowid_open(instance: *const c_char, ret: *mut *mut Handle) -> c_int;
        pub fn snowid_close(s: *mut Handle) -> *mut Handle;
        pub fn snowid_next(s: *mut Handle, ret_id: *mut u64) -> c_int;
        pub fn snowid_next_batch(s: *mut Handle, ret_ids: *mut u64, n: usize) -> c_int;
        pub fn snowid_set_max_wait(s: *mut Handle, usec: u64) -> c_int;
        pub fn snowid_get_layout(s: *mut Handle, ret: *mut Layout) -> c_int;
        pub fn snowid_get_status(s: *mut Handle, ret: *mut RawStatus) -> c_int;
        pub fn snowid_layout_default(ret: *mut Layout) -> c_int;
        pub fn snowid_decode(l: *const Layout, id: u64, ret: *mut Parts) -> c_int;
        pub fn snowid_next_uuid7(s: *mut Handle, ret_uuid: *mut [u8; 16]) -> c_int;
        pub fn snowid_next_uuid7_batch(s: *mut Handle, ret: *mut [u8; 16], n: usize) -> c_int;
        pub fn snowid_decode_uuid7(l: *const Layout, uuid: *const [u8; 16], ret: *mut Parts)
            -> c_int;
    }
}

#[inline]
fn check(r: c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::from_raw_os_error(-r))
    } else {
        Ok(())
    }
}

/// A handle on the host's segment. One handle serves every thread of a
/// process (it is `Send` and `Sync`); opening one per thread only costs a
/// handshake each. Opening reads `SNOWID_RUNTIME_DIR` and `SNOWID_INSTANCE`
/// through libc: do not change the environment from another thread meanwhile.
pub struct Snowid {
    raw: NonNull<ffi::Handle>,
}

// SAFETY: libsnowid's handles are used from many threads at once (the
// taking calls, status, layout and set_max_wait are safe to call
// concurrently); only snowid_close() needs the handle alone, and Drop has it.
unsafe impl Send for Snowid {}
unsafe impl Sync for Snowid {}

impl Snowid {
    /// The segment of `$SNOWID_INSTANCE`, or instance "default".
    pub fn open() -> io::Result<Snowid> {
        Snowid::open_instance(None)
    }

    /// The segment of the named instance (`None`: as [`Snowid::open`]).
    pub fn open_instance(instance: Option<&str>) -> io::Result<Snowid> {
        let name = match instance {
            Some(s) => Some(CString::new(s).map_err(|_| io::Error::from_raw_os_error(22))?),
            None => None,
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the name is NUL-terminated and outlives the call; raw is writable.
        check(unsafe {
            ffi::snowid_open(name.as_ref().map_or(ptr::null(), |c| c.as_ptr() as *const c_char),
                             &mut raw)
        })?;
        NonNull::new(raw).map(|raw| Snowid { raw }).ok_or_else(|| io::Error::from_raw_os_error(5))
    }

    /// One ID. `EAGAIN` when none could be issued within the wait budget
    /// (no lease, or the deadline passed).
    #[inline]
    pub fn next(&self) -> io::Result<u64> {
        let mut id = 0u64;
        // SAFETY: the handle is open; id is writable.
        check(unsafe { ffi::snowid_next(self.raw.as_ptr(), &mut id) })?;
        Ok(id)
    }

    /// Fills `ids` (at most 2^seq_bits of them, 4,096 by default) from one
    /// atomic operation: increasing, consecutive within a millisecond. An
    /// empty slice takes nothing.
    pub fn next_batch(&self, ids: &mut [u64]) -> io::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // SAFETY: ids has ids.len() writable u64s.
        check(unsafe { ffi::snowid_next_batch(self.raw.as_ptr(), ids.as_mut_ptr(), ids.len()) })
    }

    /// A UUIDv7 (RFC 9562) from the same counter, in its 16 bytes.
    pub fn next_uuid7(&self) -> io::Result<[u8; 16]> {
        let mut u = [0u8; 16];
        // SAFETY: u is 16 writable bytes.
        check(unsafe { ffi::snowid_next_uuid7(self.raw.as_ptr(), &mut u) })?;
        Ok(u)
    }

    /// Fills `uuids` from one atomic operation, increasing.
    pub fn next_uuid7_batch(&self, uuids: &mut [[u8; 16]]) -> io::Result<()> {
        if uuids.is_empty() {
            return Ok(());
        }
        // SAFETY: uuids has uuids.len() writable 16-byte arrays.
        check(unsafe {
            ffi::snowid_next_uuid7_batch(self.raw.as_ptr(), uuids.as_mut_ptr(), uuids.len())
        })
    }

    /// How long a call may wait for a lease, the clock or a switch before
    /// `EAGAIN` (default 100 ms), for every thread of this handle.
    pub fn set_max_wait(&self, wait: Duration) -> io::Result<()> {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        // SAFETY: the handle is open.
        check(unsafe { ffi::snowid_set_max_wait(self.raw.as_ptr(), us) })
    }

    /// The cluster's layout, as the segment says.
    pub fn layout(&self) -> io::Result<Layout> {
        let mut l = Layout { epoch_ms: 0, time_bits: 0, worker_bits: 0, seq_bits: 0 };
        // SAFETY: the handle is open; l is writable.
        check(unsafe { ffi::snowid_get_layout(self.raw.as_ptr(), &mut l) })?;
        Ok(l)
    }

    /// An ID of this cluster taken apart.
    pub fn decode(&self, id: u64) -> io::Result<Parts> {
        decode(&self.layout()?, id)
    }

    /// The segment's state now.
    pub fn status(&self) -> io::Result<Status> {
        let mut st = ffi::RawStatus {
            size: size_of::<ffi::RawStatus>(),
            worker: 0,
            state: 0,
            generation: 0,
            deadline_ms: 0,
            deadline_unix_ms: 0,
            headroom_ms: 0,
            offset_ns: 0,
            daemon_pid: 0,
            tsc_clock: 0,
        };
        // SAFETY: the handle is open; st is writable and its size is said.
        check(unsafe { ffi::snowid_get_status(self.raw.as_ptr(), &mut st) })?;
        Ok(Status {
            worker: st.worker,
            state: match st.state {
                0 => State::Starting,
                1 => State::Leased,
                2 => State::NoLease,
                3 => State::Restored,
                4 => State::LayoutLost,
                5 => State::Retired,
                6 => State::StoreFull,
                n => State::Other(n),
            },
            generation: st.generation,
            deadline_ms: st.deadline_ms,
            deadline_unix_ms: st.deadline_unix_ms,
            headroom_ms: st.headroom_ms,
            offset_ns: st.offset_ns,
            daemon_pid: st.daemon_pid,
            // a library older than the field leaves it out of size
            tsc_clock: st.size >= size_of::<ffi::RawStatus>() && st.tsc_clock != 0,
        })
    }
}

impl Drop for Snowid {
    fn drop(&mut self) {
        // SAFETY: the handle is open, and no other reference to it is left.
        unsafe { ffi::snowid_close(self.raw.as_ptr()) };
    }
}

/// An ID taken apart under a layout. `EINVAL`: a layout that does not add
/// up; `ERANGE`: an ID that does not fit it.
pub fn decode(layout: &Layout, id: u64) -> io::Result<Parts> {
    let mut p = Parts::default();
    // SAFETY: both point to valid structs.
    check(unsafe { ffi::snowid_decode(layout, id, &mut p) })?;
    Ok(p)
}

/// A UUIDv7 from [`Snowid::next_uuid7`] taken apart. `EINVAL`: not a UUIDv7.
pub fn decode_uuid7(layout: &Layout, uuid: &[u8; 16]) -> io::Result<Parts> {
    let mut p = Parts::default();
    // SAFETY: all three point to valid memory of their types.
    check(unsafe { ffi::snowid_decode_uuid7(layout, uuid, &mut p) })?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_snowids() {
        let l = Layout::default();
        assert_eq!(l, Layout { epoch_ms: 1735689600000, time_bits: 41, worker_bits: 10, seq_bits: 12 });
    }

    #[test]
    fn decode_takes_an_id_apart() {
        let l = Layout::default();
        let id = (123_456u64 << 22) | (789 << 12) | 42;
        let p = decode(&l, id).unwrap();
        assert_eq!(p, Parts { time_ms: 123_456, unix_ms: 1735689600000 + 123_456, worker: 789, sequence: 42 });
        // bit 63 is not an ID's
        assert_eq!(decode(&l, 1 << 63).unwrap_err().raw_os_error(), Some(34));
        let bad = Layout { time_bits: 40, ..l };
        assert_eq!(decode(&bad, 1).unwrap_err().raw_os_error(), Some(22));
    }

    #[test]
    fn decode_uuid7_refuses_other_uuids() {
        let l = Layout::default();
        assert_eq!(decode_uuid7(&l, &[0u8; 16]).unwrap_err().raw_os_error(), Some(22));
    }

    #[test]
    fn open_without_a_daemon_says_why() {
        let saved = std::env::var_os("SNOWID_RUNTIME_DIR");
        std::env::set_var("SNOWID_RUNTIME_DIR", "/nonexistent-snowid-dir");
        let r = Snowid::open_instance(Some("nothing-here"));
        match saved {
            Some(v) => std::env::set_var("SNOWID_RUNTIME_DIR", v),
            None => std::env::remove_var("SNOWID_RUNTIME_DIR"),
        }
        let e = r.err().expect("opened");
        assert!(matches!(e.raw_os_error(), Some(2) | Some(111)), "{:?}", e);
        let e = Snowid::open_instance(Some("a\0b")).err().expect("opened");
        assert_eq!(e.raw_os_error(), Some(22));
    }
}
