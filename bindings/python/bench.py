#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py [--seconds S]: the Python client against what a Python program
would use otherwise.  Runs under bindings/with_daemon.py --http (it needs
SNOWID_HTTP) and prints one TSV line a row and thread count on stdout:

    python <row> <threads> <ns_per_id> <ids_per_s>

Rows: snowid (SnowId.next), snowid-batch64 (next_batch(64), per ID),
textbook (a Snowflake in Python: threading.Lock and time.time_ns() each ID),
uuid (uuid.uuid4()), http (POST /v1/ids?count=1 on one keep-alive
connection a thread, JSON parsed).  Each for 1 and 2 threads (Python
threads: the GIL runs one at a time, so 2 threads show what sharing costs,
not more throughput).  Rows take turns, three rounds; the median is printed.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse
import uuid

import snowid

CHUNK = 1000  # calls between two looks at the clock


class Textbook:
    """The usual Python Snowflake: ms, worker and sequence, cut as the
    daemon's IDs are (41/10/12 by default, so both meet the same ceiling),
    one lock, the wall clock read for every ID."""

    EPOCH_MS = 1735689600000

    def __init__(self, worker, worker_bits=10, seq_bits=12):
        self.shift_ms = worker_bits + seq_bits
        self.shift_w = seq_bits
        self.mask = (1 << seq_bits) - 1
        self.lock = threading.Lock()
        self.worker = worker
        self.last_ms = -1
        self.seq = 0

    def next(self):
        with self.lock:
            now = time.time_ns() // 1_000_000 - self.EPOCH_MS
            if now < self.last_ms:
                now = self.last_ms  # the clock went back: stay on the last ms
            if now == self.last_ms:
                self.seq = (self.seq + 1) & self.mask
                if self.seq == 0:
                    # the sequence ran out this ms: wait for the next one
                    while now <= self.last_ms:
                        now = time.time_ns() // 1_000_000 - self.EPOCH_MS
            else:
                self.seq = 0
            self.last_ms = now
            return (now << self.shift_ms) | (self.worker << self.shift_w) | self.seq


def loop_single(f, until):
    n = 0
    clock = time.perf_counter
    while clock() < until:
        for _ in range(CHUNK):
            f()
        n += CHUNK
    return n


def loop_batch(f, until):
    n = 0
    clock = time.perf_counter
    while clock() < until:
        for _ in range(CHUNK // 64 + 1):
            f(64)
        n += (CHUNK // 64 + 1) * 64
    return n


def http_taker(base):
    u = urllib.parse.urlsplit(base)

    def make():
        conn = http.client.HTTPConnection(u.hostname, u.port)

        def one():
            conn.request("POST", "/v1/ids?count=1")
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {body[:200]!r}")
            return int(json.loads(body)["ids"][0])
        return one, conn.close
    return make


def run(make, loop, threads, seconds):
    """IDs a second over `seconds` with `threads` threads, each with the
    callable make() gives it (a (call, cleanup) pair)."""
    funcs = [make() for _ in range(threads)]
    counts = [0] * threads
    start_line = threading.Barrier(threads + 1)
    box = {}

    def work(i):
        start_line.wait()
        counts[i] = loop(funcs[i][0], box["until"])

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    box["until"] = t0 + seconds
    start_line.wait()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    for _, cleanup in funcs:
        cleanup()
    return sum(counts) / wall


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="per row and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="snowid,snowid-batch64,textbook,uuid,http")
    a = ap.parse_args(argv)

    s = snowid.SnowId()
    s.set_max_wait(1.0)
    tb = Textbook(worker=1, worker_bits=s.layout.worker_bits, seq_bits=s.layout.seq_bits)
    nothing = lambda: None  # noqa: E731
    makers = {
        "snowid": (lambda: (s.next, nothing), loop_single),
        "snowid-batch64": (lambda: (s.next_batch, nothing), loop_batch),
        "textbook": (lambda: (tb.next, nothing), loop_single),
        "uuid": (lambda: (uuid.uuid4, nothing), loop_single),
    }
    if os.environ.get("SNOWID_HTTP"):
        makers["http"] = (http_taker(os.environ["SNOWID_HTTP"]), loop_single)
    else:
        print("bench.py: no SNOWID_HTTP (run under with_daemon.py --http): no http row",
              file=sys.stderr)
    rows = [r for r in a.rows.split(",") if r in makers]
    rates = {(r, t): [] for r in rows for t in (1, 2)}
    for _ in range(a.rounds):
        for r in rows:
            for t in (1, 2):
                # http is slow and steady: a shorter run says as much
                secs = a.seconds / 2 if r == "http" else a.seconds
                rates[(r, t)].append(run(makers[r][0], makers[r][1], t, secs))
    for r in rows:
        for t in (1, 2):
            rate = statistics.median(rates[(r, t)])
            print(f"python\t{r}\t{t}\t{1e9 / rate:.1f}\t{rate:.0f}", flush=True)
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
