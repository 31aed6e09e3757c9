// SPDX-License-Identifier: MIT
//! snowid-bench-rust: ns per ID of the Rust client (next, next_batch of 64)
//! beside a textbook lock-free Snowflake generator in the same process and
//! run, on 1 and 2 threads; each row's median of 3 runs, the rows taking
//! turns in slices so that load from elsewhere falls on all alike. Prints
//! "rust ROW THREADS NS IDS_PER_S", tab-separated, as bench/bindings.sh
//! reads it. Runs beside a snowidd (bindings/with_daemon.py).
use snowid::{Layout, Snowid};
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static SINK: AtomicU64 = AtomicU64::new(0);

/// The textbook generator: one word of (ms << seq_bits | seq), advanced by
/// compare-and-swap, its ms from the wall clock.
struct Textbook {
    state: AtomicU64,
    epoch_ms: u64,
    worker: u64,
    wb: u32,
    sb: u32,
}

impl Textbook {
    fn next(&self) -> u64 {
        let mask = (1u64 << self.sb) - 1;
        loop {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
                - self.epoch_ms;
            let old = self.state.load(Ordering::Relaxed);
            let (ms, seq) = (old >> self.sb, old & mask);
            let new = if now > ms {
                now << self.sb
            } else if seq < mask {
                old + 1
            } else {
                continue; // this ms is spent: wait for the next
            };
            if self.state.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                return (new >> self.sb) << (self.wb + self.sb) | self.worker << self.sb | (new & mask);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Row {
    Snowid,
    Batch64,
    Textbook,
}

fn work(row: Row, s: &Snowid, t: &Textbook, stop: &AtomicBool) -> u64 {
    let (mut n, mut x) = (0u64, 0u64);
    let mut buf = [0u64; 64];
    while !stop.load(Ordering::Relaxed) {
        match row {
            Row::Snowid => {
                for _ in 0..64 {
                    x ^= s.next().unwrap_or_else(|e| {
                        eprintln!("snowid-bench-rust: next: {}", e);
                        exit(1)
                    });
                }
            }
            Row::Batch64 => {
                s.next_batch(&mut buf).unwrap_or_else(|e| {
                    eprintln!("snowid-bench-rust: next_batch: {}", e);
                    exit(1)
                });
                x ^= buf[63];
            }
            Row::Textbook => {
                for _ in 0..64 {
                    x ^= t.next();
                }
            }
        }
        n += 64;
    }
    // kept: the IDs are used (std::hint::black_box is Rust 1.66)
    SINK.fetch_xor(x, Ordering::Relaxed);
    n
}

/// threads workers for d: (wall time, IDs taken).
fn measure(row: Row, s: &Arc<Snowid>, t: &Arc<Textbook>, threads: usize, d: Duration) -> (Duration, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (s, t, stop, ready) = (Arc::clone(s), Arc::clone(t), Arc::clone(&stop), Arc::clone(&ready));
            thread::spawn(move || {
                ready.wait();
                work(row, &s, &t, &stop)
            })
        })
        .collect();
    ready.wait();
    let t0 = Instant::now();
    thread::sleep(d);
    stop.store(true, Ordering::Relaxed);
    let n = handles.into_iter().map(|h| h.join().unwrap()).sum();
    (t0.elapsed(), n)
}

fn main() {
    let mut seconds = 2.0f64;
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--seconds" {
        seconds = args[2].parse().unwrap_or_else(|_| exit(2));
    } else if args.len() != 1 {
        eprintln!("usage: snowid-bench-rust [--seconds S]");
        exit(2);
    }
    let s = Snowid::open().unwrap_or_else(|e| {
        eprintln!("snowid-bench-rust: {}", e);
        exit(1)
    });
    s.set_max_wait(Duration::from_secs(1)).unwrap();
    let l: Layout = s.layout().unwrap();
    eprintln!("snowid-bench-rust: layout {}/{}/{} bits: at most {} IDs per ms, no uuid or http row",
              l.time_bits, l.worker_bits, l.seq_bits, 1u64 << l.seq_bits);
    let (s, t) = (Arc::new(s), Arc::new(Textbook { state: AtomicU64::new(0), epoch_ms: l.epoch_ms,
                                                   worker: 1, wb: l.worker_bits, sb: l.seq_bits }));
    let rows = [("snowid", Row::Snowid), ("snowid-batch64", Row::Batch64), ("textbook", Row::Textbook)];
    let threads = [1usize, 2];
    let d = Duration::from_secs_f64(seconds / 5.0);
    let mut res = vec![vec![Vec::new(); threads.len()]; rows.len()];
    for _ in 0..3 {
        let mut el = vec![vec![(Duration::ZERO, 0u64); threads.len()]; rows.len()];
        for _ in 0..5 {
            for (i, (_, row)) in rows.iter().enumerate() {
                for (j, &n) in threads.iter().enumerate() {
                    let (e, k) = measure(*row, &s, &t, n, d);
                    el[i][j].0 += e;
                    el[i][j].1 += k;
                }
            }
        }
        for i in 0..rows.len() {
            for j in 0..threads.len() {
                res[i][j].push(el[i][j].0.as_nanos() as f64 / el[i][j].1 as f64);
            }
        }
    }
    for (i, (name, _)) in rows.iter().enumerate() {
        for (j, n) in threads.iter().enumerate() {
            let v = &mut res[i][j];
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let ns = v[v.len() / 2];
            println!("rust\t{}\t{}\t{:.1}\t{:.0}", name, n, ns, 1e9 / ns);
        }
    }
}
