// SPDX-License-Identifier: MIT
//! Against a real snowidd: bindings/with_daemon.py runs this beside one
//! (SNOWID_RUNTIME_DIR and SNOWID_INSTANCE name it). Without a daemon the
//! tests pass vacuously, unless SNOWID_RUST_REQUIRE_DAEMON is set.
use snowid::{decode_uuid7, Snowid, State};
use std::collections::HashSet;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn open() -> Option<Snowid> {
    match Snowid::open() {
        Ok(s) => Some(s),
        Err(e) if std::env::var_os("SNOWID_RUST_REQUIRE_DAEMON").is_none() => {
            eprintln!("no snowidd ({}): skipped", e);
            None
        }
        Err(e) => panic!("Snowid::open: {}", e),
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn next_is_increasing_and_from_the_daemons_worker() {
    let s = match open() { Some(s) => s, None => return };
    let st = s.status().unwrap();
    assert_eq!(st.state, State::Leased);
    assert!(st.headroom_ms > 0 && st.daemon_pid > 0, "{:?}", st);
    let mut last = 0;
    for _ in 0..100_000 {
        let id = s.next().unwrap();
        assert!(id > last, "{} after {}", id, last);
        last = id;
    }
    let p = s.decode(last).unwrap();
    assert_eq!(p.worker, s.status().unwrap().worker);
    // ID time is the wall clock's, within the lead and a slew
    let now = unix_ms();
    assert!(p.unix_ms + 5_000 > now && p.unix_ms < now + 5_000, "{} vs {}", p.unix_ms, now);
}

#[test]
fn a_batch_is_consecutive_within_a_millisecond() {
    let s = match open() { Some(s) => s, None => return };
    let mut ids = vec![0u64; 4096];
    s.next_batch(&mut ids).unwrap();
    for w in ids.windows(2) {
        assert!(w[1] > w[0]);
        let (a, b) = (s.decode(w[0]).unwrap(), s.decode(w[1]).unwrap());
        if a.time_ms == b.time_ms {
            assert_eq!(b.sequence, a.sequence + 1);
        }
    }
    s.next_batch(&mut []).unwrap();
    // more than a millisecond holds: refused, nothing taken
    let mut too_many = vec![0u64; 4097];
    assert_eq!(s.next_batch(&mut too_many).unwrap_err().raw_os_error(), Some(22));
}

#[test]
fn uuid7s_carry_the_ids_time_and_worker() {
    let s = match open() { Some(s) => s, None => return };
    let l = s.layout().unwrap();
    let id = s.next().unwrap();
    let u = s.next_uuid7().unwrap();
    assert_eq!(u[6] >> 4, 7, "version 7");
    assert_eq!(u[8] >> 6, 2, "variant");
    let (pi, pu) = (s.decode(id).unwrap(), decode_uuid7(&l, &u).unwrap());
    assert_eq!(pu.worker, pi.worker);
    assert!(pu.unix_ms >= pi.unix_ms && pu.unix_ms < pi.unix_ms + 1000);
    let mut us = [[0u8; 16]; 64];
    s.next_uuid7_batch(&mut us).unwrap();
    for w in us.windows(2) {
        assert!(w[1] > w[0], "increasing as bytes");
    }
}

#[test]
fn threads_share_a_handle_without_duplicates() {
    let s = match open() { Some(s) => Arc::new(s), None => return };
    s.set_max_wait(Duration::from_secs(2)).unwrap();
    let takers: Vec<_> = (0..4)
        .map(|_| {
            let s = Arc::clone(&s);
            thread::spawn(move || (0..50_000).map(|_| s.next().unwrap()).collect::<Vec<u64>>())
        })
        .collect();
    let mut all = HashSet::new();
    for t in takers {
        let ids = t.join().unwrap();
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "increasing per thread");
        for id in ids {
            assert!(all.insert(id), "{} twice", id);
        }
    }
    assert_eq!(all.len(), 200_000);
}

/// Last (libtest runs tests by name, and meson's binding-rust one at a
/// time): the daemon stopped, its deadline passed, every call gives EAGAIN,
/// and a new handle finds no daemon.
#[test]
fn when_the_daemon_is_gone_calls_give_eagain() {
    let s = match open() {
        Some(s) => s,
        None => return,
    };
    let st = s.status().unwrap();
    s.set_max_wait(Duration::ZERO).unwrap();
    s.next().unwrap();
    // SIGTERM to snowidd (with_daemon.py waits for it, and finds it gone)
    let killed = std::process::Command::new("kill").arg(st.daemon_pid.to_string()).status().unwrap();
    assert!(killed.success(), "kill {}", st.daemon_pid);
    let limit = std::time::Instant::now() + Duration::from_millis(st.headroom_ms.max(0) as u64 + 10_000);
    while s.status().unwrap().headroom_ms >= 0 {
        assert!(std::time::Instant::now() < limit, "the deadline never passed");
        thread::sleep(Duration::from_millis(10));
    }
    let eagain = |e: std::io::Error| assert_eq!(e.raw_os_error(), Some(11), "{}", e);
    eagain(s.next().unwrap_err());
    eagain(s.next_batch(&mut [0u64; 2]).unwrap_err());
    eagain(s.next_uuid7().unwrap_err());
    let e = Snowid::open().err().expect("a handle with no daemon");
    assert!(matches!(e.raw_os_error(), Some(2) | Some(111)), "{}", e); // ENOENT, ECONNREFUSED
}
