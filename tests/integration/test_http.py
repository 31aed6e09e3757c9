# SPDX-License-Identifier: MIT
"""snowidd's HTTP API: every endpoint and error code, malformed requests over
raw sockets, and a JavaScript client."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from harness import (CLI, EPOCH_MS, Daemon, Etcd, check_unique_and_increasing, cli, decode,
                     free_port, log, run, wait_for)
from monitoring import deprecated_families, names_used, sample_names


def request(base, method, path, body=None, headers=None):
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def raw(port, data, timeout=3):
    """Sends bytes as they are; returns the status code of the answer."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass  # the server answered and closed with our input unread
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/") else None


def error_of(body):
    e = json.loads(body)["error"]
    assert isinstance(e, str) and e, body
    return e


def test_endpoints(h):
    etcd = Etcd(h)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    d = Daemon(h, etcd, args=["--http", f"127.0.0.1:{port}", "--http-max-count", "5000"]).start()
    wait_for(lambda: request(base, "GET", "/healthz")[0] == 200, 5, "healthz 200")

    st, hd, body = request(base, "POST", "/v1/ids")
    ids = json.loads(body)["ids"]
    assert st == 200 and len(ids) == 1 and isinstance(ids[0], str), body
    st, hd, body = request(base, "POST", "/v1/ids?count=1000")
    many = [int(x) for x in json.loads(body)["ids"]]
    assert st == 200 and len(many) == 1000
    st, hd, body = request(base, "POST", "/v1/ids", json.dumps({"count": 7}).encode(),
                           {"Content-Type": "application/json"})
    assert st == 200 and len(json.loads(body)["ids"]) == 7
    st, hd, body = request(base, "POST", "/v1/ids?count=5", headers={"Accept": "text/plain"})
    text = [int(x) for x in body.decode().split()]
    assert st == 200 and hd["Content-Type"].startswith("text/plain") and len(text) == 5
    st, hd, body = request(base, "POST", "/v1/ids?count=4",
                           headers={"Accept": "application/octet-stream"})
    binary = list(struct.unpack(">4Q", body))
    assert st == 200 and hd["Content-Type"] == "application/octet-stream"
    check_unique_and_increasing([[int(ids[0])] + many + text + binary])
    worker = decode(many[0])[1]

    st, hd, body = request(base, "GET", f"/v1/ids/{many[0]}")
    dec = json.loads(body)
    t, w, s = decode(many[0])
    assert st == 200 and dec["id"] == str(many[0]) and dec["worker"] == w == worker
    assert dec["sequence"] == s and dec["unix_ms"] == t + 1735689600000
    assert dec["time"].endswith("Z") and "T" in dec["time"], dec

    st, hd, body = request(base, "GET", "/v1/status")
    status = json.loads(body)
    assert st == 200 and status["worker"] == worker and status["lease"] == "held", status
    for k in ("cluster", "instance", "layout", "generation", "headroom_ms", "etcd_reachable",
              "uptime_s", "store_reachable", "store_full", "store_error", "store_error_message",
              "etcd_error", "etcd_error_message", "segment_state", "halt_reason"):
        assert k in status, k
    # the store's names (docs/http.md) and the etcd_* ones kept for older
    # clients: the same values
    assert status["segment_state"] == status["state"] == "leased", status
    assert status["halt_reason"] is None and status["halted"] == "no", status
    assert status["store_reachable"] is True and status["etcd_reachable"] is True, status
    assert status["store_full"] is False, status
    assert status["store_error"] is None and status["etcd_error"] is None, status
    assert status["store_error_message"] is None and status["etcd_error_message"] is None, status
    assert status["layout"]["seq_bits"] == 12 and status["headroom_ms"] > 1000

    st, hd, body = request(base, "GET", "/metrics")
    m = body.decode()
    assert st == 200 and hd["Content-Type"].startswith("text/plain")
    for name in ("snowid_http_ids_total", 'snowid_http_requests_total{code="200"}',
                 "snowid_lease_renewals_total", "snowid_store_request_duration_seconds_bucket",
                 "snowid_store_reachable 1", "snowid_store_full 0",
                 'snowid_cluster_halted{reason="store-restored"} 0',
                 "snowid_worker_switches_total", "snowid_clock_steps_total",
                 "snowid_clock_offset_seconds", "snowid_headroom_seconds",
                 "snowid_host_ids_issued_total", 'snowid_host_waits_total{reason="ceiling"}'):
        assert name in m, name
    # the store's metrics under their names from before PostgreSQL, until the
    # next release: each sample the same as its replacement's, each HELP
    # saying so (docs/operators.md, "Renamed: the store's metrics and states")
    samples = dict(l.rsplit(" ", 1) for l in m.splitlines() if l and not l.startswith("#"))
    for old, new in deprecated_families().items():
        twins = [(k, k.replace(new, old, 1)) for k in samples
                 if re.match(new + r"(_bucket|_sum|_count)?($|\{)", k)]
        assert twins, new
        for k, alias in twins:
            assert samples.get(alias) == samples[k], (alias, samples.get(alias), k, samples[k])
        assert f"# HELP {old} Deprecated: the same as {new}," in m, old
    assert samples['snowid_cluster_halted{reason="etcd-restored"}'] == \
        samples['snowid_cluster_halted{reason="store-restored"}'], samples
    served = int(next(l for l in m.splitlines() if l.startswith("snowid_http_ids_total")).split()[1])
    assert served == 1 + 1000 + 7 + 5 + 4, served
    # well-formed for Prometheus: promtool parses it and its lint finds nothing
    # (HELP and TYPE for every family, counters named _total, no type in a name)
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (Debian package prometheus)"
    r = subprocess.run([promtool, "check", "metrics"], input=m, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), \
        f"promtool check metrics: {r.returncode}\n{r.stdout}{r.stderr}"
    # every name in contrib/'s alerting rules, their tests and the dashboard
    printed = sample_names(m)
    for path, used in names_used().items():
        missing = used - printed - {n.rsplit("_", 1)[0] for n in printed if n.endswith("_bucket")}
        assert not missing, f"{os.path.basename(path)} uses {sorted(missing)}, not in /metrics"
    log(f"/metrics: {len(printed)} names, promtool check metrics clean, "
        f"every name in contrib/ among them")

    # errors, each a JSON {"error": ...} with the right code
    cases = [
        ("POST", "/v1/ids?count=0", None, {}, 400),
        ("POST", "/v1/ids?count=-3", None, {}, 400),
        ("POST", "/v1/ids?count=abc", None, {}, 400),
        ("POST", "/v1/ids?count=1.5", None, {}, 400),
        ("POST", "/v1/ids?count=5001", None, {}, 400),
        ("POST", "/v1/ids?count=99999999999999999999999", None, {}, 400),
        ("POST", "/v1/ids", b'{"count": 3', {"Content-Type": "application/json"}, 400),
        ("POST", "/v1/ids", b'{"count": "3"}', {"Content-Type": "application/json"}, 400),
        ("POST", "/v1/ids", b'{"count": -1}', {"Content-Type": "application/json"}, 400),
        ("POST", "/v1/ids", b'[1,2]', {"Content-Type": "application/json"}, 400),
        ("POST", "/v1/ids", b'count=3', {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ("POST", "/v1/ids", b'{"count": 3}', {"Content-Type": "text/plain"}, 415),
        ("POST", "/v1/ids", b'{"count":1,"pad":"' + b"x" * 5000 + b'"}',
         {"Content-Type": "application/json"}, 413),
        ("POST", "/v1/ids", None, {"Accept": "image/png"}, 406),
        ("GET", "/v1/ids/abc", None, {}, 400),
        ("GET", "/v1/ids/" + str(2 ** 63), None, {}, 400),
        ("GET", "/v1/ids/" + "9" * 25, None, {}, 400),
        ("GET", "/nope", None, {}, 404),
        ("GET", "/v1/ids", None, {}, 405),
        ("DELETE", "/v1/ids", None, {}, 405),
        ("POST", "/v1/status", None, {}, 405),
        ("PUT", "/healthz", None, {}, 405),
        ("POST", "/metrics", None, {}, 405),
    ]
    for method, path, body, headers, code in cases:
        st, hd, out = request(base, method, path, body, headers)
        assert st == code, f"{method} {path[:60]}: {st}, wanted {code}: {out[:200]}"
        error_of(out)
        if code == 405:
            assert hd.get("Allow"), f"405 without Allow: {method} {path}"
    log(f"{len(cases)} error cases answered as they should")
    d.stop()


def test_malformed_requests(h):
    etcd = Etcd(h)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    d = Daemon(h, etcd, args=["--http", f"127.0.0.1:{port}"]).start()
    ok = b"POST /v1/ids?count=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    cases = [
        (b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         b"Content-Length: 12\r\n\r\n{\"count\": 3", None),  # truncated body: the client hung up
        (b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         b"Content-Length: 11\r\n\r\n{\"count\": 3", 400),
        # past the 64 KiB per connection, the answer may be lost to the reset
        # that closing on unread input sends; the daemon must serve on
        (b"GET /v1/ids/" + b"1" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", (414, None)),
        (b"BREW /v1/ids HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
         (431, None)),
        (b"\x00\x01\x02 garbage\r\n\r\n", (400, None)),
        (b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400),
        (b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n2000\r\n" + b"x" * 8192 + b"\r\n0\r\n\r\n", 413),
    ]
    for data, code in cases:
        got = raw(port, data)
        if isinstance(code, tuple):
            assert got in code, f"{data[:50]!r}: {got}, wanted one of {code}"
        elif code is not None:
            assert got == code, f"{data[:50]!r}: {got}, wanted {code}"
        assert raw(port, ok) == 200, f"the daemon did not serve the next request after {data[:50]!r}"
    assert d.proc.poll() is None
    log(f"{len(cases)} malformed requests, the daemon served each next one")

    # a JavaScript client: 10,000 IDs as strings, unique, increasing
    node = shutil.which("node") or shutil.which("nodejs")
    assert node, "node is not installed"
    r = subprocess.run([node, os.path.join(os.path.dirname(__file__), "js_client.mjs"), base],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    log(r.stdout.strip())

    # the command, through the HTTP API
    r = subprocess.run([CLI, "next", "--url", base, "-n", "3"], capture_output=True, text=True)
    assert r.returncode == 0 and len(r.stdout.split()) == 3, r.stderr
    d.stop()


def test_token_and_unavailable(h):
    etcd = Etcd(h)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tok = h.path("token")
    with open(tok, "w") as f:
        f.write("s3cret-token\n")
    d = Daemon(h, etcd, args=["--http", f"127.0.0.1:{port}", "--http-token-file", tok]).start()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"},
                    {"Authorization": "Bearer s3cret-token2"}):
        st, hd, body = request(base, "POST", "/v1/ids", headers=headers)
        assert st == 401, (headers, st)
        error_of(body)
    st, _, body = request(base, "POST", "/v1/ids", headers={"Authorization": "Bearer s3cret-token"})
    assert st == 200, body
    assert request(base, "GET", "/healthz")[0] == 200  # probes need no token
    r = subprocess.run([CLI, "next", "--url", base, "--token-file", tok], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    d.stop()

    # a daemon that cannot reach etcd publishes nothing: 503 with Retry-After
    port2 = free_port()
    dead = f"http://127.0.0.1:{free_port()}"
    base2 = f"http://127.0.0.1:{port2}"
    u = Daemon(h, dead, instance=h.instance + "-u", name="u",
               args=["--http", f"127.0.0.1:{port2}"]).start(wait_ready=False)
    wait_for(lambda: _up(base2), 10, "the HTTP API of the daemon without etcd")
    st, hd, body = request(base2, "POST", "/v1/ids")
    assert st == 503 and hd.get("Retry-After"), (st, hd)
    error_of(body)
    st, hd, body = request(base2, "GET", "/healthz")
    assert st == 503 and "switch" in error_of(body), body
    u.stop()


def uuid7_fields(text):
    """(unix ms, worker, sequence) of a snowid UUIDv7 of the default layout,
    read from its bits as docs/uuid7.md lays them out; asserts version and
    variant, and that the text is the canonical lowercase form."""
    u = uuid.UUID(text)
    assert str(u) == text and u.version == 7 and u.variant == uuid.RFC_4122, text
    b = u.bytes
    rand_b = int.from_bytes(b[8:], "big") & ((1 << 62) - 1)
    return (int.from_bytes(b[:6], "big"), rand_b >> 52, int.from_bytes(b[6:8], "big") & 0xfff)


def test_uuid7(h):
    etcd = Etcd(h)
    etcd.made_long_ago()   # ID time on the wall clock, which the UUIDs' time is checked against
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    d = Daemon(h, etcd, args=["--http", f"127.0.0.1:{port}"]).start()
    wait_for(lambda: request(base, "GET", "/healthz")[0] == 200, 5, "healthz 200")
    worker = json.loads(request(base, "GET", "/v1/status")[2])["worker"]
    now = time.time() * 1000

    st, hd, body = request(base, "POST", "/v1/ids?format=uuid7&count=5000")
    us = json.loads(body)["ids"]
    assert st == 200 and hd["Content-Type"] == "application/json" and len(us) == 5000, body[:200]
    fields = [uuid7_fields(x) for x in us]
    assert all(f[1] == worker for f in fields)
    assert abs(fields[0][0] - now) < 5000, (fields[0], now)
    raw_bytes = [uuid.UUID(x).bytes for x in us]
    assert all(a < b for a, b in zip(raw_bytes, raw_bytes[1:])), "UUIDs not increasing"
    assert len({f[0] for f in fields}) >= 2, "5,000 UUIDs within one ms"

    # the Accept forms: a format parameter on the media type
    st, hd, body = request(base, "POST", "/v1/ids?count=3",
                           headers={"Accept": "application/json; format=uuid7"})
    assert st == 200 and [uuid7_fields(x) for x in json.loads(body)["ids"]], body
    st, hd, body = request(base, "POST", "/v1/ids?count=4",
                           headers={"Accept": "text/plain; format=uuid7"})
    lines = body.decode().split()
    assert st == 200 and hd["Content-Type"].startswith("text/plain") and len(lines) == 4, body
    [uuid7_fields(x) for x in lines]
    st, hd, body = request(base, "POST", "/v1/ids?count=6",
                           headers={"Accept": "application/octet-stream; format=uuid7"})
    assert st == 200 and hd["Content-Type"] == "application/octet-stream" and len(body) == 96
    binary = [str(uuid.UUID(bytes=body[i:i + 16])) for i in range(0, 96, 16)]
    [uuid7_fields(x) for x in binary]
    # ?format= wins over Accept; int64 is the default's name
    st, hd, body = request(base, "POST", "/v1/ids?count=2&format=int64",
                           headers={"Accept": "text/plain; format=uuid7"})
    assert st == 200 and all(x.isdigit() for x in body.decode().split()), body

    # the two forms drawn in turn share no counter value: (ms, sequence)
    # strictly increases across them, as both come from one counter
    values = []
    for i in range(200):
        fmt = "uuid7" if i % 2 else "int64"
        st, _, body = request(base, "POST", f"/v1/ids?count=3&format={fmt}")
        assert st == 200, body
        for x in json.loads(body)["ids"]:
            if fmt == "uuid7":
                ms, w, seq = uuid7_fields(x)
                values.append((ms - EPOCH_MS, seq))
            else:
                t, w, seq = decode(int(x))
                values.append((t, seq))
            assert w == worker
    assert all(a < b for a, b in zip(values, values[1:])), "a counter value repeated"

    # decoding a UUID, in either case
    for text in (us[1234], us[1234].upper()):
        st, hd, body = request(base, "GET", f"/v1/ids/{text}")
        dec = json.loads(body)
        ms, w, seq = fields[1234]
        assert st == 200 and dec["id"] == us[1234], body
        assert dec["unix_ms"] == ms and dec["worker"] == w == worker and dec["sequence"] == seq
        assert dec["time"].endswith("Z"), dec
    for method, path, code in [
            ("POST", "/v1/ids?format=uuid8", 400),
            ("POST", "/v1/ids?format=", 400),
            ("GET", f"/v1/ids/{uuid.uuid4()}", 400),                   # version 4
            ("GET", "/v1/ids/0190a4e2-1c9b-7c3e-8f00-00000000000", 400),  # short
            ("GET", "/v1/ids/0190a4e2-1c9b-7c3e-8f00-00000000000z", 400),
            ("GET", "/v1/ids/0000a4e2-1c9b-7c3e-8f00-000000000000", 400),  # before the epoch
    ]:
        st, _, out = request(base, method, path)
        assert st == code, f"{method} {path}: {st}, wanted {code}: {out[:200]}"
        error_of(out)

    # the command: snowid next --uuid7 from the host's daemon, decoded back
    r = cli("next", "--uuid7", "-n", "5000", "--instance", h.instance)
    assert r.returncode == 0, r.stderr
    got = r.stdout.split()
    assert len(got) == 5000 and all(uuid7_fields(x)[1] == worker for x in got)
    ordered = [uuid.UUID(x).bytes for x in got]
    assert all(a < b for a, b in zip(ordered, ordered[1:]))
    assert ordered[0] > raw_bytes[-1]
    r = cli("next", "--uuid7", "-n", "2", "--format", "json", "--instance", h.instance)
    assert r.returncode == 0 and len(json.loads(r.stdout)["ids"]) == 2, r.stdout + r.stderr
    r = cli("next", "--uuid7", "--format", "hex", "--instance", h.instance)
    assert r.returncode == 2, r.stdout
    r = cli("decode", "--instance", h.instance, "--json", got[7], str(1 << 22 | 5))
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    ms, w, seq = uuid7_fields(got[7])
    assert r.returncode == 0 and lines[0]["id"] == got[7] and lines[0]["worker"] == w, r.stdout
    assert lines[0]["unix_ms"] == ms and lines[0]["sequence"] == seq
    assert lines[1]["id"] == str(1 << 22 | 5) and lines[1]["unix_ms"] == EPOCH_MS + 1
    # leading zeros (the store pads IDs with them) are decimal, 0x is hex
    same = [str(1 << 22 | 5), "000" + str(1 << 22 | 5), hex(1 << 22 | 5)]
    r = cli("decode", "--instance", h.instance, "--json", *same)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["sequence"] for x in r.stdout.splitlines()] == [5, 5, 5], r.stdout
    for bad in ("0x", "0x-5", "12a", "+1", "0b101"):
        r = cli("decode", "--instance", h.instance, bad)
        assert r.returncode == 1 and r.stdout == "", (bad, r.stdout, r.stderr)
    r = cli("decode", "--instance", h.instance, str(uuid.uuid4()))
    assert r.returncode == 1 and "UUIDv7" in r.stderr, r.stderr
    r = cli("next", "--url", base, "--uuid7", "-n", "3")
    assert r.returncode == 0 and len([uuid7_fields(x) for x in r.stdout.split()]) == 3, r.stderr
    log("UUIDv7 over HTTP and from the command: bits, order, decode, no value shared")
    d.stop()


def _up(base):
    try:
        return request(base, "GET", "/metrics")[0] == 200
    except OSError:
        return False


if __name__ == "__main__":
    run([test_endpoints, test_malformed_requests, test_token_and_unavailable, test_uuid7])
