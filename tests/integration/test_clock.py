# SPDX-License-Identifier: MIT
"""Clock steps on snowidd's CLOCK_REALTIME, made with libfaketime."""
import glob
import time

import os

import json
import signal

from harness import (BUILD, EPOCH_MS, Daemon, Etcd, HoldingProxy, Taker,
                     check_unique_and_increasing, cli,
                     cli_status, decode, free_port, http_get, log, metric, run, take, wait_for)


def faketime_lib():
    libs = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert libs, "libfaketime is not installed"
    return libs[0]


def id_unix_ms(i):
    return decode(i)[0] + EPOCH_MS


def test_clock_steps(h):
    etcd = Etcd(h)
    etcd.made_long_ago()   # ID time starts on the wall clock
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


def test_move_keeps_the_lease(h):
    """A number given up keeps its lease until the store confirms its mark
    (rule 4), kept alive meanwhile: a move to a fresh number (the wall clock
    an hour back) whose old mark the store is slow to confirm (a proxy in
    front of etcd holds every request that reads or raises it) keeps the old lease
    past three TTLs, so no other daemon can claim the number first; once the
    store answers, the mark is confirmed and the lease revoked."""
    etcd = Etcd(h)
    etcd.made_long_ago()
    proxy = HoldingProxy(h, etcd.urls[0])
    ft = h.path("faketime")
    with open(ft, "w") as f:
        f.write("+3600\n")
    shim = os.path.join(BUILD, "tests", "libtimerfd-shim.so")
    env = {"LD_PRELOAD": f"{shim} {faketime_lib()}", "FAKETIME_TIMESTAMP_FILE": ft,
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    ttl = 3
    d = Daemon(h, proxy, env=env, args=["--lease-ttl", str(ttl), "--renew-interval", "300",
                                        "--etcd-timeout", "500"]).start()
    w0 = decode(take(h.instance, 1)[0])[1]
    workers0 = f"/snowid/default/workers/{w0}"
    lease0 = int(etcd.get(workers0)[1]["lease"])
    # the old mark's reads and raises (a claim, which also reads it, names
    # the number it claims)
    proxy.hold(lambda keys: f"/snowid/default/hwm/{w0}" in keys and
               not any("/workers/" in k for k in keys))
    with open(ft, "w") as f:
        f.write("+0\n")
    wait_for(lambda: decode(take(h.instance, 1)[0])[1] != w0, 20, "a move to a fresh number")
    wait_for(lambda: proxy.held > 0, 10, "the old mark's confirmation to be held")
    held_at = time.monotonic()
    # three TTLs: a lease left alone would have run out by then
    wait_for(lambda: time.monotonic() - held_at > 3 * ttl, 4 * ttl, "three TTLs")
    ttl_left = int(etcd.call("/v3/lease/timetolive", {"ID": lease0}).get("TTL", -1))
    assert ttl_left > 0, f"worker {w0}'s lease ran out while its mark was unconfirmed"
    assert etcd.get(workers0)[0] is not None, f"workers/{w0} is gone"
    assert "ran out before its mark was confirmed" not in d.log_text()
    log(f"worker {w0}: its lease lives {ttl_left} s more after {3 * ttl} s unconfirmed "
        f"({proxy.held} requests held)")
    proxy.release()
    wait_for(lambda: etcd.get(workers0)[0] is None, 10, "the old lease to be revoked")
    assert int(etcd.call("/v3/lease/timetolive", {"ID": lease0}).get("TTL", -1)) <= 0
    assert d.stop() == 0


def tsc_status(port):
    st, body = http_get(port, "/v1/status")
    return json.loads(body)["tsc_clock"] if st == 200 else None


def auto_expected():
    """What --tsc-clock auto should choose here: an invariant TSC (the kernel
    shows it as nonstop_tsc) that is the kernel's clocksource, on x86-64."""
    if os.uname().machine != "x86_64":
        return False
    with open("/proc/cpuinfo") as f:
        flags = next((line for line in f if line.startswith("flags")), "").split()
    with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
        src = f.read().strip()
    return "nonstop_tsc" in flags and src == "tsc"


def test_tsc_clock(h):
    """The TSC clock in the real daemon: forced on (whatever this machine's
    clocksource), IDs on the wall clock while it recalibrates every 100 ms
    and while the daemon is stopped (clients go back to the vDSO when the
    line runs out); off; auto as the machine says."""
    if os.uname().machine != "x86_64":
        log("tsc clock: not on this architecture")
        return
    etcd = Etcd(h)
    etcd.made_long_ago()   # ID time on the wall clock
    port = free_port()
    d = Daemon(h, etcd, args=["--tsc-clock", "on", "--http", f"127.0.0.1:{port}"]).start()
    wait_for(lambda: (tsc_status(port) or {}).get("on"), 10, "the TSC clock to go on")
    assert metric(port, "snowid_tsc_clock_on") == 1.0
    assert "The TSC clock is on" in d.log_text()
    assert cli_status(h.instance)["clock"] == "TSC (published by snowidd)"
    assert json.loads(cli("status", "--json", "--instance", h.instance).stdout)["tsc_clock"] is True

    # a wait of up to 1 s before EAGAIN: a thread descheduled for 100 ms on
    # a loaded machine (the default budget) says nothing about the clock;
    # a stall of the clock itself still shows in max_gap_ms below
    c = Taker(h, name="tsc", threads=2, wait_us=1000000)
    wait_for(lambda: c.last_id(0) is not None and c.last_id(1) is not None, 10, "IDs")
    skew = []
    def read_against_wall():
        """An ID's ms against the wall clock read just before and just after
        the command took it: 0 inside that bracket, else how far outside (a
        slow start of the command, as under a sanitizer, widens the bracket
        and does not count)"""
        before = time.time() * 1000
        ms = id_unix_ms(take(h.instance, 1)[0])
        after = time.time() * 1000
        skew.append(ms - before if ms < before else ms - after if ms > after else 0.0)
    def near_wall():
        read_against_wall()
        return len(skew) >= 20
    wait_for(near_wall, 20, "20 IDs read against the wall clock")
    # the daemon stopped: the line runs out after 3 ticks and the taker's
    # handles read the vDSO; the deadline (window 10 s) covers the stop
    # (a new handle would need the stopped daemon's handshake: none here)
    d.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    wait_for(lambda: time.monotonic() - stopped > 1.0, 3, "1 s with the daemon stopped")
    d.signal(signal.SIGCONT)
    # its first tick finds the line run out, and starts a new one at once
    wait_for(lambda: "ran out before it was recalibrated" in d.log_text(), 10,
             "the daemon to see its line ran out")
    wait_for(lambda: (tsc_status(port) or {}).get("on"), 10, "the TSC clock on again")
    r = c.stop()
    log(f"tsc clock on: {r}; ID time outside the wall clock's bracket by "
        f"{min(skew):.1f}..{max(skew):.1f} ms; "
        f"status {tsc_status(port)}")
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    assert r["max_gap_ms"] < 250, f"a client stalled {r['max_gap_ms']} ms"
    check_unique_and_increasing(c.ids())
    read_against_wall()
    # an ID's ms is the clock's: inside the bracket, but for the ms it is
    # rounded down to, the lead the counter may run ahead, and the daemon's
    # offset from a wall clock that NTP may slew
    assert all(-20 < s < 20 for s in skew), skew
    st = tsc_status(port)
    # a trip is the clock working as it should on a busy machine; without
    # one, every check of the line was within the bound
    if st["trips"] == 0:
        assert abs(st["max_error_us"]) <= 200, st
    else:
        assert "off CLOCK_MONOTONIC" in d.log_text()
    d.stop()

    d = Daemon(h, etcd, args=["--tsc-clock", "off", "--http", f"127.0.0.1:{port}"],
               name="off").start()
    wait_for(lambda: tsc_status(port) is not None, 10, "a status")
    st = tsc_status(port)
    assert not st["on"] and st["why_off"] == "tsc-clock = off", st
    assert metric(port, "snowid_tsc_clock_on") == 0.0
    assert cli_status(h.instance)["clock"] == "vDSO"
    take(h.instance, 10)
    d.stop()

    d = Daemon(h, etcd, args=["--http", f"127.0.0.1:{port}"], name="auto").start()
    want = auto_expected()
    if want:
        wait_for(lambda: (tsc_status(port) or {}).get("on"), 10, "auto to turn the TSC clock on")
    else:
        wait_for(lambda: tsc_status(port) is not None, 10, "a status")
        # the decision is made at the first tick; give it a second tick
        wait_for(lambda: "The TSC clock is off" in d.log_text(), 10, "auto's reason in the log")
    st = tsc_status(port)
    log(f"tsc clock auto here: {st}")
    assert st["mode"] == "auto" and st["on"] == want, (st, want)
    if not want:
        assert "clocksource" in st["why_off"] or "invariant" in st["why_off"], st
    d.stop()


if __name__ == "__main__":
    run([test_clock_steps, test_move_keeps_the_lease, test_tsc_clock])
