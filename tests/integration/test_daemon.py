# SPDX-License-Identifier: MIT
"""snowidd against a real store (etcd, or PostgreSQL with SNOWID_STORE=postgres):
claiming, READY, the guarded mark, bad input."""
import os
import re
import signal
import subprocess
import time

from harness import (STORE, Daemon, Etcd, SNOWIDD, Store, Taker, b64, check_unique_and_increasing, decode,
                     log, run, take, wait_for)


# a line the daemon logs (daemon/log.c): timestamped, or an error's level
# under the journal
LOG_LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{3} snowidd: |<3>")


def mark_txn(etcd, n, lease, value, mark, cluster="default"):
    """The guarded renewal, as snowidd sends it; True if it succeeded:
    written only if the number is held under lease with value and its mark
    is below mark.  On PostgreSQL the verb snowid.extend() under the
    cluster's fence and layout as stored (any mark revision)."""
    if STORE == "postgres":
        import pgserver
        r = etcd.pg.query_json(
            "SELECT e.ok FROM snowid.clusters c, snowid.extend(c.name, c.fence, c.layout_rev, "
            f"{int(n)}, {int(lease)}, {pgserver.sql_literal(value)}, {int(mark)}, 0) e "
            f"WHERE c.name = {pgserver.sql_literal(cluster)}")
        return bool(r and r[0]["ok"])
    w, m = f"/snowid/{cluster}/workers/{n}", f"/snowid/{cluster}/hwm/{n}"
    r = etcd.call("/v3/kv/txn", {
        "compare": [{"key": b64(w), "target": "LEASE", "result": "EQUAL", "lease": str(lease)},
                    {"key": b64(w), "target": "VALUE", "result": "EQUAL", "value": b64(value)},
                    {"key": b64(m), "target": "VALUE", "result": "LESS",
                     "value": b64(f"{mark:020d}")}],
        "success": [{"request_put": {"key": b64(m), "value": b64(f"{mark:020d}")}}]})
    return bool(r.get("succeeded"))


def held_numbers(etcd, cluster="default"):
    return {int(k.rsplit("/", 1)[1]): v for k, v in
            etcd.prefix(f"/snowid/{cluster}/workers/").items()}


def test_claims_and_serves(h):
    etcd = Store(h)
    d = Daemon(h, etcd).start()
    held = held_numbers(etcd)
    assert len(held) == 1, held
    (n, (value, kv)), = held.items()
    assert f'"instance":"{h.instance}"' in value and f'"pid":{d.proc.pid}' in value, value
    ids = take(h.instance, 1000)
    assert len(set(ids)) == 1000
    for i in ids:
        assert decode(i)[1] == n, f"ID {i} decodes to worker {decode(i)[1]}, not {n}"
    mark = int(etcd.get(f"/snowid/default/hwm/{n}")[0])
    assert all(decode(i)[0] <= mark for i in ids), "an ID past the mark"
    wait_for(lambda: f"worker {n}," in d.status(), 5, "STATUS with the worker")
    # the mark keeps moving ahead while the daemon holds the number
    wait_for(lambda: int(etcd.get(f"/snowid/default/hwm/{n}")[0]) > mark, 5, "a renewal")
    # SIGHUP (a reload some scripts send): logged, and nothing else changes
    d.signal(signal.SIGHUP)
    wait_for(lambda: "Got SIGHUP" in d.log_text(), 5, "the SIGHUP logged")
    assert d.proc.poll() is None, "snowidd exited on SIGHUP"
    assert held_numbers(etcd).keys() == {n}
    assert set(take(h.instance, 1000)).isdisjoint(ids)
    # SIGTERM: the lease is revoked, the mark stays, the segment keeps
    # serving the clients that hold it
    c = Taker(h)
    wait_for(lambda: c.last_id() is not None, 5, "the client's first IDs")
    assert d.stop() == 0
    assert held_numbers(etcd) == {}, "workers/<n> should be gone with the lease"
    assert etcd.get(f"/snowid/default/hwm/{n}")[0] is not None
    size = os.path.getsize(c.prefix + ".0")
    wait_for(lambda: os.path.getsize(c.prefix + ".0") > size + 8000, 5,
             "the client going on after the daemon stopped")
    r = c.stop()
    after = c.ids()[0]
    assert r["eagain"] == 0 and r["other_errors"] == 0, r
    assert min(after) > max(ids) and {decode(i)[1] for i in after} == {n}


def test_twenty_daemons(h):
    etcd = Store(h)
    ds = [Daemon(h, etcd, instance=f"{h.instance}-{i}", name=f"d{i}") for i in range(20)]
    start = time.monotonic()
    for d in ds:
        d.start(wait_ready=False)
    for d in ds:
        d.wait_message("READY=1", 30)
    took = time.monotonic() - start
    held = held_numbers(etcd)
    assert len(held) == 20, f"{len(held)} numbers held by 20 daemons"
    pids = sorted(int(v.split('"pid":')[1].split(",")[0]) for v, _ in held.values())
    assert pids == sorted(d.proc.pid for d in ds)
    log(f"20 daemons held 20 numbers {took:.2f} s after starting together")
    # guarded writes on one number
    n, (value, kv) = next(iter(held.items()))
    lease = int(kv["lease"])
    mark = int(etcd.get(f"/snowid/default/hwm/{n}")[0])
    assert mark_txn(etcd, n, lease, value, mark + 60000), "the holder's renewal must succeed"
    other_n, (other_value, other_kv) = list(held.items())[1]
    assert not mark_txn(etcd, n, int(other_kv["lease"]), other_value, mark + 120000), \
        "another holder's write must fail"
    assert not mark_txn(etcd, n, lease, value, mark + 1000), "a lower mark must not be written"
    assert int(etcd.get(f"/snowid/default/hwm/{n}")[0]) >= mark + 60000
    for d in ds:
        assert d.stop() == 0


def test_bad_input(h):
    def run_d(*args, **kw):
        return subprocess.run([SNOWIDD, "--config", "/dev/null", "--runtime-dir", h.rundir, *args],
                              capture_output=True, text=True, timeout=20, **kw)
    for args in (["--lease-ttl", "1"], ["--window", "zero"], ["--etcd", "ftp://x"],
                 ["--instance", "a/b"], ["--time-bits", "40"], ["--bogus"],
                 ["--renew-interval", "9000"], ["--log-level", "loud"], ["--allow-groups", "nogroup-x"],
                 ["--allow-users", "nouser-x"], ["--runtime-dir", "relative"],
                 ["--runtime-dir", "/" + "d" * 60, "--instance", "i" * 50],
                 ["--etcd-user", "u"], ["extra"], ["--check-config", "--slew", "5001"],
                 ["--tsc-clock", "yes"], ["--tsc-max-error", "0"],
                 ["--check-config", "--tsc-max-error", "501"],
                 ["--check-config", "--time-bits", "33", "--worker-bits", "10", "--seq-bits", "20"]):
        r = run_d(*args)
        assert r.returncode == 78, f"{args}: exit {r.returncode}"
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and LOG_LINE.match(lines[0]), f"{args}: {r.stderr!r}"
    conf = h.path("bad.conf")
    with open(conf, "w") as f:
        f.write("# comment\nlease-ttl = 10\nwindow = ten\n")
    r = subprocess.run([SNOWIDD, "--config", conf], capture_output=True, text=True)
    assert r.returncode == 78 and "bad.conf:3" in r.stderr, r.stderr
    r = run_d("--check-config", "--lease-ttl", "20", "--renew-interval", "500")
    assert r.returncode == 0, r.stderr
    assert run_d("--check-config", "--slew", "5000").returncode == 0  # half of lead 1 ms
    # the older name of store-timeout
    assert run_d("--check-config", "--etcd-timeout", "3000").returncode == 0

    etcd = Etcd(h)
    # a different layout from the stored one
    d = Daemon(h, etcd).start()
    r = run_d("--etcd", etcd.urls[0], "--instance", h.instance + "-2", "--time-bits", "42",
              "--worker-bits", "9")
    assert r.returncode == 78 and "differs" in r.stderr, r.stderr
    # a second daemon on one instance
    r = run_d("--etcd", etcd.urls[0], "--instance", h.instance)
    assert r.returncode == 1 and "Another snowidd" in r.stderr, r.stderr
    before = take(h.instance, 5)
    # garbage stored as the layout of another cluster
    etcd.call("/v3/kv/put", {"key": b64("/snowid/junk/layout"), "value": b64("{not json")})
    r = run_d("--etcd", etcd.urls[0], "--cluster", "junk", "--instance", h.instance + "-3")
    assert r.returncode == 78 and "not valid" in r.stderr, r.stderr
    # a layout whose time bits ran out (33 bits of ms from 2025 ended in April
    # 2025): refused before anything reaches the store, the cluster unmade
    r = run_d("--etcd", etcd.urls[0], "--cluster", "short", "--instance", h.instance + "-4",
              "--time-bits", "33", "--worker-bits", "10", "--seq-bits", "20")
    assert r.returncode == 78 and "33 time bits" in r.stderr, r.stderr
    assert etcd.prefix("/snowid/short/") == {}
    # an "etcd" that answers garbage: the daemon waits, says why, and is not READY
    import http.server
    import threading

    class Garbage(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b'{"header":{}, "kvs": "nope"' if "txn" in self.path else b"\x00garbage"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    h.cleanup(srv.shutdown)
    g = Daemon(h, f"http://127.0.0.1:{srv.server_address[1]}", instance=h.instance + "-4",
               name="garbage").start(wait_ready=False)
    wait_for(lambda: "layout" in g.log_text() and "not a JSON object" in g.log_text(), 10,
             "the daemon to say the answer is malformed")
    assert g.proc.poll() is None and not g.has_message("READY=1")
    assert g.stop() == 0
    # a full worker space: 1 worker bit, two numbers, both held
    a = Daemon(h, etcd, instance=h.instance + "-5", name="full-a",
               args=["--cluster", "tiny", "--time-bits", "50", "--worker-bits", "1",
                     "--seq-bits", "12"]).start()
    b = Daemon(h, etcd, instance=h.instance + "-6", name="full-b",
               args=["--cluster", "tiny"]).start()
    c = Daemon(h, etcd, instance=h.instance + "-7", name="full-c",
               args=["--cluster", "tiny"]).start(wait_ready=False)
    wait_for(lambda: "All 2 worker numbers are taken" in c.log_text(), 10, "the full message")
    assert not c.has_message("READY=1")
    # one frees a number: the third gets it
    assert a.stop() == 0
    c.wait_message("READY=1", 40)
    # nothing was lost on the first instance
    after = take(h.instance, 5)
    assert min(after) > max(before)
    for x in (b, c, d):
        assert x.stop() == 0


if __name__ == "__main__":
    tests = [test_claims_and_serves, test_twenty_daemons]
    # etcd's own bad answers and flags; PostgreSQL's are in test_postgres.py
    run(tests + ([test_bad_input] if STORE == "etcd" else []))
