#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""taker.py: the Python client's taker, with the options of tests/taker.c.

-i INSTANCE -o PREFIX -t THREADS -n COUNT_PER_THREAD -w WAIT_US -b BATCH
-r RATE_PER_THREAD_PER_S.  One handle shared by THREADS Python threads (real
OS threads; the GIL lets one run Python at a time).  Threads with an odd
index take batches of BATCH (when BATCH > 1), even ones one ID at a time.
Each thread appends every ID it took, 8 bytes native order, to
PREFIX.<thread>.  Prints {"started":true} once open, and at COUNT per thread
or SIGTERM one JSON line: {"ids","eagain","other_errors","last_error"}.
"""
import array
import errno
import getopt
import json
import signal
import sys
import threading
import time

import snowid

FLUSH = 8192  # IDs buffered per thread before a write


class Result:
    def __init__(self):
        self.ids = self.eagain = self.other = 0
        self.last_error = 0


def main(argv):
    try:
        opts, _ = getopt.getopt(argv, "i:o:t:n:w:b:r:g:")
    except getopt.GetoptError as e:
        print(f"taker.py: {e}", file=sys.stderr)
        return 2
    o = dict(opts)
    instance = o.get("-i")
    prefix = o.get("-o", "ids")
    threads = int(o.get("-t", 1))
    per_thread = int(o["-n"]) if "-n" in o else None
    wait_us = int(o.get("-w", 100000))
    batch = int(o.get("-b", 1))
    rate = int(o.get("-r", 0))
    if threads < 1 or threads > 16 or batch < 1:
        return 2

    stop = threading.Event()

    def on_term(sig, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        s = snowid.SnowId(instance)
    except OSError as e:
        print(f"taker.py: open: {e}", file=sys.stderr)
        return 1
    s.set_max_wait(wait_us / 1e6)

    per_ms = rate // 1000 + (rate % 1000 != 0)
    results = [Result() for _ in range(threads)]

    def take(index):
        res = results[index]
        n = batch if index % 2 and batch > 1 else 1
        buf = array.array("Q")
        tick = int(time.monotonic() * 1000)
        in_tick = 0
        with open(f"{prefix}.{index}", "wb") as f:
            while not stop.is_set() and (per_thread is None or res.ids < per_thread):
                if rate and in_tick >= per_ms:
                    # the next millisecond's share
                    time.sleep(max(0.0, (tick + 1) / 1000 - time.monotonic()))
                    tick = int(time.monotonic() * 1000)
                    in_tick = 0
                try:
                    if n == 1:
                        buf.append(s.next())
                    else:
                        buf.extend(s.next_batch(n, as_array=True))
                except OSError as e:
                    if e.errno == errno.EAGAIN:
                        res.eagain += 1
                    else:
                        res.other += 1
                    res.last_error = e.errno
                    continue
                in_tick += n
                res.ids += n
                if len(buf) >= FLUSH:
                    buf.tofile(f)
                    del buf[:]
            buf.tofile(f)

    ts = [threading.Thread(target=take, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    print(json.dumps({"started": True}, separators=(",", ":")), flush=True)
    for t in ts:
        # a timeout lets the signal handler run while the threads take
        while t.is_alive():
            t.join(0.1)
    last = 0
    for r in results:
        if r.last_error:
            last = r.last_error
    print(json.dumps({
        "ids": sum(r.ids for r in results),
        "eagain": sum(r.eagain for r in results),
        "other_errors": sum(r.other for r in results),
        "last_error": errno.errorcode.get(last, str(last)) if last else "",
    }, separators=(",", ":")), flush=True)
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
