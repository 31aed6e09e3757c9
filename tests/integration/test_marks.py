# SPDX-License-Identifier: MIT
"""etcd at rest and etcd full: the mark schedule (one revision per mark-step
per host, outages shorter than the window still invisible) and the NOSPACE
alarm (detected, said, reported, recovered from by itself)."""
import base64
import json
import os
import random
import time
import urllib.error
import urllib.request

from harness import (Daemon, Etcd, Taker, check_unique_and_increasing, cli, cli_status,
                     free_port, http_get, log, metric, run, take, wait_for)

SCHEDULE = ["--mark-step", "5"]  # the default; the harness sets 0 for the other tests


def etcd_metric(etcd, name, member=0):
    """A sample's value from one member's /metrics (name with labels), or None."""
    with urllib.request.urlopen(etcd.urls[member] + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return None


def requests_total(etcd, member=0):
    """Unary gRPC calls handled plus keepalive messages: what clients asked."""
    n = 0.0
    with urllib.request.urlopen(etcd.urls[member] + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("grpc_server_handled_total") and 'grpc_type="unary"' in line:
                n += float(line.split()[-1])
            if (line.startswith("grpc_server_msg_received_total")
                    and 'grpc_method="LeaseKeepAlive"' in line):
                n += float(line.split()[-1])
    return n


def test_revisions_at_rest(h):
    """Four hosts at rest: at most 0.2 revisions per second each, counted by
    etcd itself (its current revision), against 1 per second before."""
    etcd = Etcd(h)
    ds = [Daemon(h, etcd, instance=f"{h.instance}-{i}", name=f"d{i}", args=SCHEDULE).start()
          for i in range(4)]
    for d in ds:
        take(d.instance, 1)
    rev = "etcd_debugging_mvcc_current_revision"
    r0, q0, t0 = etcd_metric(etcd, rev), requests_total(etcd), time.monotonic()
    time.sleep(20)  # a measurement over an interval, not a wait for a condition
    r1, q1, t1 = etcd_metric(etcd, rev), requests_total(etcd), time.monotonic()
    per_host = (r1 - r0) / (t1 - t0) / len(ds)
    reqs = (q1 - q0) / (t1 - t0) / len(ds)
    log(f"at rest: {per_host:.3f} revisions/s and {reqs:.2f} etcd requests/s per host "
        f"(mark-step 5 s, renew-interval 1 s)")
    assert per_host <= 0.25, f"{per_host:.3f} revisions per second per host"
    assert per_host >= 0.1, "no marks written at all?"
    for d in ds:
        d.stop()


def test_outages_shorter_than_window(h):
    """etcd gone for less than the window, at any moment of the schedule:
    clients see nothing."""
    etcd = Etcd(h)
    d = Daemon(h, etcd, args=SCHEDULE + ["--window", "6", "--renew-interval", "500"]).start()
    c = Taker(h, threads=2, extra=["-r", "100000"])
    wait_for(lambda: c.last_id() is not None, 5, "the client's first IDs")
    rng = random.Random(os.getpid())
    for k in range(3):
        # a random moment within the 5 s between two mark writes
        time.sleep(rng.uniform(0, 5))
        etcd.kill(0)
        log(f"etcd stopped ({k + 1}/3)")
        time.sleep(2.5)  # the outage itself: its length is the point
        etcd.start(0)
        etcd.wait_healthy()
        # the outage may fall between two requests, unseen by the daemon:
        # wait for its next mark write instead (one per mark-step)
        rev = etcd.revision()
        wait_for(lambda: etcd.revision() > rev, 15, "the daemon's next mark write")
    r = c.stop()
    total = check_unique_and_increasing(c.ids())
    log(f"3 outages of 2.5 s (window 6 s, mark-step 5 s): {total} IDs, "
        f"eagain {r['eagain']}, longest gap {r['max_gap_ms']} ms")
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    d.stop()


def fill(etcd, prefix="/junk/"):
    """Writes 256 KiB values until etcd refuses: (keys written, the error)."""
    value = base64.b64encode(os.urandom(256 << 10)).decode()
    for i in range(10000):
        body = json.dumps({"key": base64.b64encode(f"{prefix}{i}".encode()).decode(),
                           "value": value}).encode()
        req = urllib.request.Request(etcd.urls[0] + "/v3/kv/put", data=body, method="POST")
        try:
            urllib.request.urlopen(req, timeout=10).read()
        except urllib.error.HTTPError as e:
            return i, e.code, e.read().decode()
    raise AssertionError("etcd never filled up")


def test_etcd_full(h):
    """etcd's store full (NOSPACE): the daemon says what to do, reports it,
    issues until its deadline, and goes on by itself once the alarm is
    disarmed."""
    etcd = Etcd(h, extra=["--quota-backend-bytes", str(16 << 20)])
    port = free_port()
    d = Daemon(h, etcd, args=["--window", "30", "--http", f"127.0.0.1:{port}"]).start()
    c = Taker(h, threads=1)
    wait_for(lambda: c.last_id() is not None, 5, "the client's first IDs")
    n, code, err = fill(etcd)
    log(f"etcd full after {n} values of 256 KiB: {code} {err.strip()}")
    assert code == 429 and "space exceeded" in err
    wait_for(lambda: metric(port, "snowid_store_full") == 1, 10, "the daemon to see it")
    # the deprecated name, served beside it until the next release
    assert metric(port, "snowid_etcd_full") == 1
    st, body = http_get(port, "/healthz")
    assert st == 503 and "store-full: etcd is full" in body, (st, body)
    st, body = http_get(port, "/v1/status")
    status = json.loads(body)
    assert st == 200 and status["store_full"] is True, body
    assert status["segment_state"] == "store-full" and status["state"] == "etcd-full", body
    assert cli_status(h.instance).get("state") == "store-full", cli_status(h.instance)
    r = cli("status", "--instance", h.instance, "--json")
    status = json.loads(r.stdout)
    assert status["segment_state"] == "store-full" and status["state"] == "etcd-full", r.stdout
    logline = [ln for ln in d.log_text().splitlines() if "etcd is full" in ln]
    assert len(logline) == 1 and "etcdctl alarm disarm" in logline[0], logline
    # IDs go on meanwhile (the deadline is 30 s ahead)
    size = os.path.getsize(c.prefix + ".0")
    wait_for(lambda: os.path.getsize(c.prefix + ".0") > size + 8000, 5, "IDs while full")
    # what the operator does: delete, compact, defragment, disarm
    etcd.call("/v3/kv/deleterange", {"key": base64.b64encode(b"/junk/").decode(),
                                      "range_end": base64.b64encode(b"/junk0").decode()})
    rev = etcd.call("/v3/kv/range", {"key": base64.b64encode(b"x").decode()})["header"]["revision"]
    etcd.call("/v3/kv/compaction", {"revision": rev, "physical": True})
    etcd.call("/v3/maintenance/defragment", {}, timeout=30)
    alarms = etcd.call("/v3/maintenance/alarm", {"action": "GET"}).get("alarms", [])
    for a in alarms:
        etcd.call("/v3/maintenance/alarm", {"action": "DEACTIVATE", "memberID": a["memberID"],
                                            "alarm": "NOSPACE"})
    wait_for(lambda: metric(port, "snowid_store_full") == 0, 10, "the daemon to go on")
    wait_for(lambda: http_get(port, "/healthz")[0] == 200, 10, "/healthz 200")
    assert json.loads(http_get(port, "/v1/status")[1])["store_full"] is False
    assert cli_status(h.instance).get("state") == "leased"
    assert metric(port, "snowid_store_full_total") == 1
    assert metric(port, "snowid_etcd_full_total") == 1
    assert "etcd takes writes again" in d.log_text()
    r = c.stop()
    check_unique_and_increasing(c.ids())
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    log(f"etcd full and recovered: clients saw nothing; longest gap {r['max_gap_ms']} ms")
    d.stop()


if __name__ == "__main__":
    run([test_revisions_at_rest, test_outages_shorter_than_window, test_etcd_full])
