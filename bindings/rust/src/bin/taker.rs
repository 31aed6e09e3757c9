// SPDX-License-Identifier: MIT
//! snowid-taker-rust: the Rust client's taker for the conformance test, with
//! the options of tests/taker.c. Takes IDs in a loop, one thread per -t,
//! until SIGTERM or -n per thread; each thread appends every ID it took as
//! 8 bytes, native order, to PREFIX.<thread>. Threads with an odd index take
//! batches of -b (when it is above 1), even ones one ID at a time. With -r a
//! thread takes at most RATE IDs a second, a share every millisecond. After
//! opening it prints {"started":true}; at the end one JSON line of counts.
use snowid::Snowid;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::raw::c_int;
use std::process::exit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_sig: c_int) {
    STOP.store(true, Ordering::Relaxed);
}

extern "C" {
    fn signal(sig: c_int, handler: extern "C" fn(c_int)) -> usize;
}

const SIGINT: c_int = 2;
const SIGTERM: c_int = 15;

#[derive(Default)]
struct Result {
    ids: u64,
    eagain: u64,
    other: u64,
    last_error: i32,
    max_gap_ms: u64,
    by_errno: BTreeMap<i32, u64>,
}

extern "C" {
    // glibc 2.32 and later: "EAGAIN" for 11, NULL for a number it does not know
    fn strerrorname_np(errnum: std::os::raw::c_int) -> *const std::os::raw::c_char;
}

/// The errno's name, as the other takers print it ("E<n>" if glibc has none).
fn errno_name(e: i32) -> String {
    // safe: strerrorname_np takes any int and returns a static string or NULL
    let p = unsafe { strerrorname_np(e) };
    if p.is_null() {
        return format!("E{}", e);
    }
    // safe: a NUL-terminated string that lives as long as the program
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

struct Opts {
    instance: Option<String>,
    prefix: String,
    threads: usize,
    per_thread: u64,
    wait_us: u64,
    batch: usize,
    rate: u64,
}

fn usage() -> ! {
    eprintln!("usage: snowid-taker-rust [-i INSTANCE] [-o PREFIX] [-t THREADS] [-n PER_THREAD] \
               [-w WAIT_US] [-b BATCH] [-r RATE]");
    exit(2)
}

fn parse() -> Opts {
    let mut o = Opts { instance: None, prefix: "ids".into(), threads: 1, per_thread: u64::MAX,
                       wait_us: 100_000, batch: 1, rate: 0 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| usage());
        let num = || v.parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "-i" => o.instance = Some(v.clone()),
            "-o" => o.prefix = v.clone(),
            "-t" => o.threads = num() as usize,
            "-n" => o.per_thread = num(),
            "-w" => o.wait_us = num(),
            "-b" => o.batch = num() as usize,
            "-r" => o.rate = num(),
            _ => usage(),
        }
    }
    if o.threads < 1 || o.threads > 16 || o.batch < 1 || o.batch > 4096 {
        usage();
    }
    o
}

fn take(s: &Snowid, index: usize, o: &Opts, start: Instant) -> Result {
    let path = format!("{}.{}", o.prefix, index);
    let f = File::create(&path).unwrap_or_else(|e| {
        eprintln!("{}: {}", path, e);
        exit(3)
    });
    let mut w = BufWriter::with_capacity(1 << 16, f);
    let n = if index % 2 == 1 && o.batch > 1 { o.batch } else { 1 };
    let mut ids = vec![0u64; n];
    let mut res = Result::default();
    let now_ms = || start.elapsed().as_millis() as u64;
    let mut last_ok = now_ms();
    // with a rate: at most per_ms IDs each millisecond (rate / 1000, rounded up)
    let per_ms = (o.rate + 999) / 1000;
    let (mut tick, mut in_tick) = (now_ms(), 0u64);
    while !STOP.load(Ordering::Relaxed) && res.ids < o.per_thread {
        if o.rate != 0 && in_tick >= per_ms {
            let next = Duration::from_millis(tick + 1);
            if let Some(d) = next.checked_sub(start.elapsed()) {
                thread::sleep(d);
            }
            tick = now_ms();
            in_tick = 0;
        }
        let r = if n == 1 { s.next().map(|id| ids[0] = id) } else { s.next_batch(&mut ids) };
        let now = now_ms();
        if let Err(e) = r {
            let errno = e.raw_os_error().unwrap_or(5);
            if errno == 11 {
                res.eagain += 1;
            } else {
                res.other += 1;
            }
            res.last_error = errno;
            *res.by_errno.entry(errno).or_insert(0) += 1;
            continue;
        }
        res.max_gap_ms = res.max_gap_ms.max(now - last_ok);
        last_ok = now;
        in_tick += n as u64;
        for id in &ids {
            w.write_all(&id.to_ne_bytes()).unwrap_or_else(|_| exit(3));
        }
        res.ids += n as u64;
    }
    w.flush().unwrap_or_else(|_| exit(3));
    res
}

fn main() {
    let o = Arc::new(parse());
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        signal(SIGTERM, on_term);
        signal(SIGINT, on_term);
    }
    let s = Snowid::open_instance(o.instance.as_deref()).unwrap_or_else(|e| {
        eprintln!("snowid-taker-rust: {}", e);
        exit(1)
    });
    s.set_max_wait(Duration::from_micros(o.wait_us)).unwrap();
    let s = Arc::new(s);
    let start = Instant::now();
    let threads: Vec<_> = (0..o.threads)
        .map(|i| {
            let (s, o) = (Arc::clone(&s), Arc::clone(&o));
            thread::spawn(move || take(&s, i, &o, start))
        })
        .collect();
    // tell the test we are taking
    println!("{{\"started\":true}}");
    let mut total = Result::default();
    for t in threads {
        let r = t.join().unwrap();
        total.ids += r.ids;
        total.eagain += r.eagain;
        total.other += r.other;
        total.max_gap_ms = total.max_gap_ms.max(r.max_gap_ms);
        if r.last_error != 0 {
            total.last_error = r.last_error;
        }
        for (e, k) in r.by_errno {
            *total.by_errno.entry(e).or_insert(0) += k;
        }
    }
    let errors: Vec<String> =
        total.by_errno.iter().map(|(e, k)| format!("\"{}\":{}", errno_name(*e), k)).collect();
    println!(
        "{{\"ids\":{},\"eagain\":{},\"other_errors\":{},\"last_error\":\"{}\",\"max_gap_ms\":{},\"errors\":{{{}}}}}",
        total.ids,
        total.eagain,
        total.other,
        if total.last_error != 0 { errno_name(total.last_error) } else { String::new() },
        total.max_gap_ms,
        errors.join(",")
    );
}
