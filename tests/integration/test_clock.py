# SPDX-License-Identifier: MIT
"""Clock steps on snowidd's CLOCK_REALTIME, made with libfaketime."""
import glob
import time

import os

from harness import (BUILD, EPOCH_MS, Daemon, Etcd, Taker, check_unique_and_increasing, decode, log, run,
                     take, wait_for)


def faketime_lib():
    libs = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert libs, "libfaketime is not installed"
    return libs[0]


def id_unix_ms(i):
    return decode(i)[0] + EPOCH_MS


def test_clock_steps(h):
    etcd = Etcd(h)
    ft = h.path("faketime")

    def set_offset(spec):
        with open(ft, "w") as f:
            f.write(spec + "\n")
    set_offset("+0")
    shim = os.path.join(BUILD, "tests", "libtimerfd-shim.so")
    env = {"LD_PRELOAD": f"{shim} {faketime_lib()}", "FAKETIME_TIMESTAMP_FILE": ft,
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
           # under AddressSanitizer, the preloads come before its runtime
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    d = Daemon(h, etcd, env=env).start()
    w0 = decode(take(h.instance, 1)[0])[1]
    all_ids = []

    # forward 1 hour: ID time follows at once
    c = Taker(h, name="fwd", threads=2)
    set_offset("+3600")
    wait_for(lambda: id_unix_ms(take(h.instance, 1)[0]) > time.time() * 1000 + 3590000, 5,
             "ID time to jump an hour ahead")
    r = c.stop()
    all_ids += c.ids()
    check_unique_and_increasing(c.ids())
    log(f"forward 1 h: {r}")
    assert decode(take(h.instance, 1)[0])[1] == w0, "a forward step keeps the number"

    # back 500 ms (under step-back, 1 s): ID time slows; no client waits for
    # the clock to catch up, which would stall it about 500 ms (the bound
    # leaves room for a busy machine's scheduling, not for that wait)
    c = Taker(h, name="back500", threads=2)
    set_offset("+3599.5")
    wait_for(lambda: "headroom" in d.status(), 5, "a status")
    deadline = time.monotonic() + 1.5
    wait_for(lambda: time.monotonic() > deadline, 3, "1.5 s of IDs after the step")
    r = c.stop()
    log(f"back 500 ms: {r}")
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    assert r["max_gap_ms"] < 250, f"a client stalled {r['max_gap_ms']} ms"
    check_unique_and_increasing(c.ids())
    all_ids += c.ids()
    assert decode(take(h.instance, 1)[0])[1] == w0, "a small step back keeps the number"
    assert "fresh worker number" not in d.log_text()

    # back 1 hour: a fresh number, ID time back on the wall clock
    c = Taker(h, name="back1h", threads=2)
    set_offset("+0")
    wait_for(lambda: abs(id_unix_ms(take(h.instance, 1)[0]) - time.time() * 1000) < 5000, 10,
             "ID time back on the wall clock")
    r = c.stop()
    log(f"back 1 h: {r}")
    w1 = decode(take(h.instance, 1)[0])[1]
    assert w1 != w0, "a large step back moves to a fresh number"
    assert "moving to a fresh worker number" in d.log_text()
    all_ids += c.ids()
    # across the step back IDs go back in time (a new number), but never repeat
    flat = sorted(sum(all_ids, []))
    assert len(flat) == len(set(flat)), "duplicate IDs across the clock steps"
    log(f"clock steps: {len(flat)} IDs unique, worker {w0} then {w1}")
    d.stop()


if __name__ == "__main__":
    run([test_clock_steps])
