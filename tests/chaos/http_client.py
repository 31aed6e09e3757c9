# SPDX-License-Identifier: MIT
"""An HTTP client of snowidd for the chaos test: takes IDs in binary over one
keep-alive connection, at a steady pace, until SIGTERM.

Writes every ID (8 bytes, native order, like snowid-taker) to OUT.0, every
stretch of at least GAP_MS without IDs to OUT.0.gaps (CLOCK_MONOTONIC ms),
and prints one JSON line at the end: IDs taken and errors by kind.
"""
import argparse
import http.client
import json
import signal
import socket
import struct
import sys
import time


def now_ms():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=100, help="IDs per request")
    ap.add_argument("--rate", type=int, default=100, help="requests per second")
    ap.add_argument("--gap-ms", type=int, default=5)
    a = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    errors = {}
    ids_total = 0
    out = open(a.out + ".0", "wb")
    gaps = open(a.out + ".0.gaps", "w")
    conn = None
    first = None
    last_ok = now_ms()
    period = 1.0 / a.rate
    next_at = time.monotonic()
    print(json.dumps({"started": True}), flush=True)
    while not stop:
        next_at += period
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(a.host, a.port, timeout=2)
            conn.request("POST", f"/v1/ids?count={a.count}",
                         headers={"Accept": "application/octet-stream"})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                kind = f"{r.status}"
                errors[kind] = errors.get(kind, 0) + 1
                continue
            if len(body) != 8 * a.count:
                raise ValueError(f"{len(body)} bytes for {a.count} IDs")
        except (ConnectionError, socket.timeout, http.client.HTTPException, OSError,
                ValueError) as e:
            kind = type(e).__name__
            errors[kind] = errors.get(kind, 0) + 1
            if conn is not None:
                conn.close()
            conn = None
            continue
        ids = struct.unpack(f">{a.count}Q", body)
        out.write(struct.pack(f"={a.count}Q", *ids))
        ids_total += a.count
        t = now_ms()
        if first is None:
            first = t
            gaps.write(f"first {t}\n")
        elif t - last_ok >= a.gap_ms:
            gaps.write(f"{last_ok} {t}\n")
        last_ok = t
    gaps.write(f"last {last_ok}\nend {now_ms()}\n")
    gaps.close()
    out.close()
    print(json.dumps({"ids": ids_total, "errors": errors}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
