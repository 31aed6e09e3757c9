#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The fleet at the layout's full size, with many hosts' holders in one
process (bench/hosts.c, `snowid-hosts`): for each store and each N, on a
store of its own:

  floor      one lease grant and one claim of a number per host, all at once,
             through the same store client and verbs: what a storm cannot
             avoid
  storm new  N holders started together on a cluster that does not exist
  rest       requests and revisions per second per host, the store's growth,
             its members' CPU
  fence      `snowid fence` with N holders live: time until every host has
             published again, and the longest EAGAIN any host's clients saw
  wave       10% freed without a stop (as kill -9) and started again
  full       (N = 2^worker-bits) one host more: it waits; one holder retires;
             time until the extra host holds the number
  storm old  every holder stopped, then N started again on the existing cluster,
             each over its own lock file (a restart, not a reboot)

For each storm, the store calls per host it took (the floor takes 2): all
of them, and those of the acquisitions alone.

Writes bench/results/hosts.md, hosts.tsv and hosts.json (one row per store and N),
and hosts.png when gnuplot is installed.

    bench/hosts.py [--stores etcd,postgres] [--hosts 64,256,1024] [--rest 60]
                   [--members 3] [--out bench/results] [--merge] [--phases ...]
                   [--busy N]

--busy N keeps N cores busy with other processes for the whole run: the
storms under load, against a floor measured under the same load.
"""
import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("SNOWID_BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SNOWID_BUILD", BUILD)

import scale  # noqa: E402  (the 3-member etcd, /proc readers)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Hosts:
    """One snowid-hosts process; its JSON lines read on a thread."""

    def __init__(self, n, flags, work, name, floor=False, serve=False, rundir=None):
        cmd = [os.path.join(BUILD, "bench", "snowid-hosts"), "--hosts", str(n)]
        cmd += ["--floor"] if floor else []
        cmd += ["--serve"] if serve else []
        cmd += ["--rundir", rundir] if rundir else []
        self.n = n
        self.errlog = open(os.path.join(work, f"{name}.log"), "ab")
        self.proc = subprocess.Popen(cmd + ["--"] + flags, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errlog, text=True,
                                     bufsize=1)
        self.events = queue.Queue()
        self.ready = {}
        self.reports = queue.Queue()
        self.t_start = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "ready":
                self.ready[e["host"]] = e
            if e.get("event") == "report":
                self.reports.put(e)
            else:
                self.events.put(e)
        self.events.put({"event": "exit"})

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def report(self, timeout=120):
        self.send("report")
        return self.reports.get(timeout=timeout)

    def wait(self, cond, timeout, what):
        end = time.monotonic() + timeout
        while not cond():
            if self.proc.poll() is not None:
                raise RuntimeError(f"snowid-hosts exited ({self.proc.returncode}) waiting for {what}")
            if time.monotonic() > end:
                raise TimeoutError(f"{what}: not within {timeout} s")
            time.sleep(0.05)

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.errlog.close()

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.send("stop")
        self.wait_exit(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait_exit(5)


class EtcdStore:
    name = "etcd"

    def __init__(self, work, members):
        a = argparse.Namespace(work=work, compaction_mode="periodic",
                               compaction_retention="1h", quota_bytes=8 << 30)
        self.pidfile = open(os.path.join(work, "pids"), "a")
        self.etcd = scale.Etcd(a, self.pidfile) if members == 3 else None
        self.flags = ["--etcd", ",".join(self.etcd.urls)]

    def revision(self):
        return self.etcd.revision()

    def size(self):
        """bytes in use by the backend, summed over members / members"""
        sizes = []
        for i in range(self.etcd.n):
            st = self.etcd.call("/v3/maintenance/status", {}, member=i)
            sizes.append(int(st.get("dbSizeInUse", st.get("dbSize", 0))))
        return sum(sizes) / len(sizes)

    def cpu(self):
        return self.etcd.cpu()

    def compacted_size(self):
        """bytes in use once every revision before the current one is
        compacted away (what a cluster with auto-compaction holds)"""
        self.etcd.call("/v3/kv/compaction", {"revision": self.revision(), "physical": True})
        return self.size()

    def leader(self):
        return self.etcd.leader()

    def stop(self):
        self.etcd.stop()


class PgStore:
    name = "postgres"

    def __init__(self, work):
        import pgserver
        # a connection per host, and fsync on, as a production server has it
        self.pg = pgserver.Postgres(None, settings=["max_connections=1200", "fsync=on"])
        self.flags = ["--store", "postgres", "--postgres", self.pg.conninfo()]

    def revision(self):
        return int(self.pg.psql("SELECT last_value FROM snowid.revision").strip())

    def size(self):
        out = self.pg.psql("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace "
                           "WHERE n.nspname = 'snowid' AND c.relkind = 'r'")
        return float(out.strip() or 0)

    def compacted_size(self):
        """autovacuum runs throughout: the size measured is already the
        compacted one"""
        return None

    def cpu(self):
        """the server's CPU seconds: the postmaster and every backend"""
        pid = self.pg.postmaster_pid()
        pids = [pid] + self.pg._children(pid) if pid else []
        return [sum(scale.cpu_seconds(p) or 0.0 for p in pids)]

    def leader(self):
        return 0

    def stop(self):
        self.pg.cleanup()


def run_one(store, n, args, work, wbits):
    row = {"store": store.name, "hosts": n, "timeout": args.timeout}
    cluster = f"c{n}"
    flags = store.flags + ["--cluster", cluster, "--worker-bits", str(wbits)]

    # the floor
    f = Hosts(n, store.flags + ["--cluster", f"floor{n}"], work, f"floor-{n}", floor=True)
    f.wait_exit(120)
    rep = f.reports.get(timeout=5)
    if rep["floor_failed"]:  # a floor of refused calls would be cheaper than the real one
        raise RuntimeError(f"{store.name} N={n}: {rep['floor_failed']} of the floor's hosts "
                           f"did not get a lease and a number (see {f.errlog.name})")
    row["floor_s"] = rep["last_s"]
    row["floor_resent"] = rep["floor_resent"]
    log(f"{store.name} N={n}: floor {row['floor_s']:.2f} s ({rep['floor_resent']} calls with no "
        "answer sent again)")

    if store.name == "postgres":
        table_phase(store, n, work, row)

    # the storm on a new cluster; its hosts' segments and lock files are
    # kept for the storm on the existing cluster (a restart, not a reboot)
    rundir = os.path.join(work, "run")
    os.makedirs(rundir, mode=0o755, exist_ok=True)
    h = Hosts(n, flags, work, f"hosts-{n}", rundir=rundir)
    try:
        h.wait(lambda: len(h.ready) == n, args.timeout, f"{n} holders READY")
    except TimeoutError:
        log(f"{store.name} N={n}: only {len(h.ready)} READY within {args.timeout:.0f} s")
    rep = h.report()
    row["storm_new_s"] = rep["last_s"]
    row["storm_new_ready"] = rep["ready"]
    row["first_new_s"] = rep["first_s"]
    row["storm_new_phases"] = rep["phases"]
    row["dup_storm"] = rep["dup_ticks"]
    log(f"{store.name} N={n}: storm on a new cluster {rep['last_s']:.2f} s "
        f"(first {rep['first_s']:.2f} s)")

    if "rest" in args.phases:
        rest_phase(store, n, args, h, row)
    if "fence" in args.phases:
        fence_phase(store, n, args, h, row, cluster)
    if "wave" in args.phases:
        wave_phase(store, n, args, h, row)
    if "full" in args.phases:
        full_phase(store, n, args, h, row, flags, work, wbits)
    if "old" in args.phases:
        old_phase(store, n, args, h, row, flags, work)
    else:
        h.stop(120)
    return row


TABLE_SQL = """
DROP SCHEMA IF EXISTS design CASCADE;
CREATE SCHEMA design;
CREATE TABLE design.worker_ids (id int PRIMARY KEY, holder text,
                                lease_until timestamptz NOT NULL DEFAULT '-infinity');
INSERT INTO design.worker_ids (id) SELECT generate_series(0, 1023);
"""
TABLE_CLAIM = """UPDATE design.worker_ids SET holder = :client_id::text, lease_until = now() + interval '10 s'
WHERE id = (SELECT id FROM design.worker_ids WHERE lease_until < now() ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED) RETURNING id;
"""
TABLE_RENEW = """\\set id random(0, 1023)
UPDATE design.worker_ids SET lease_until = now() + interval '10 s'
WHERE id = :id AND holder IS NOT NULL AND lease_until > now();
"""


def pgbench_cmd(store, work, name, script, clients, extra):
    """pgbench running script (written as name.sql) from clients connections"""
    path = os.path.join(work, name + ".sql")
    with open(path, "w") as f:
        f.write(script)
    import pgserver
    return [os.path.join(pgserver.PGBIN, "pgbench"), "-n", "-f", path, "-c", str(clients),
            "-j", str(min(clients, 8))] + extra + [store.pg.conninfo()]


def pgbench(store, work, name, script, clients, extra):
    cmd = pgbench_cmd(store, work, name, script, clients, extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"pgbench: {r.stderr.strip()[-500:]}")
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", r.stdout)
    return float(m.group(1))


def table_phase(store, n, work, row):
    """The first design document's table (worker_ids, claimed by UPDATE ...
    FOR UPDATE SKIP LOCKED, renewed by a guarded UPDATE), on the same
    server: n clients claiming at once, and renewals per second from 64."""
    store.pg.psql(TABLE_SQL)
    tps = pgbench(store, work, "claim", TABLE_CLAIM, n, ["-t", "1"])
    held = int(store.pg.psql("SELECT count(DISTINCT holder) FROM design.worker_ids "
                             "WHERE holder IS NOT NULL").strip())
    row["table_claim_s"] = n / tps
    row["table_claimed"] = held
    row["table_renew_per_s"] = pgbench(store, work, "renew", TABLE_RENEW, 64, ["-T", "10"])
    log(f"postgres N={n}: the design's table: {held} distinct numbers for {n} clients in "
        f"{row['table_claim_s']:.2f} s after connecting; {row['table_renew_per_s']:.0f} renewals "
        f"per s from 64 clients")
    # what the server spends at the rate a fleet at rest asks for, from one
    # connection per host: the table's renewals, and a statement that does
    # nothing (what any design with a connection per host pays at least)
    for key, name, script in (("table_rest_cpu", "renew", TABLE_RENEW),
                              ("empty_rest_cpu", "empty", "SELECT 1;\n")):
        row[key] = paced_cpu(store, work, name, script, n, TABLE_REST_RATE)
    store.pg.psql("DROP SCHEMA design CASCADE")
    log(f"postgres N={n}: at {TABLE_REST_RATE} calls per s per client from {n} connections, "
        f"server CPU {100 * row['table_rest_cpu']:.1f}% for the table's renewals, "
        f"{100 * row['empty_rest_cpu']:.1f}% for SELECT 1")


# snowid's fleet at rest asks about this many calls per s per host (the
# rest phase measures it in the same run)
TABLE_REST_RATE = 0.42


def paced_cpu(store, work, name, script, clients, per_client):
    """The server's CPU, as a share of one core, while pgbench sends script
    at per_client calls per s from each of clients connections: measured
    once every connection is made, over 15 s."""
    cmd = pgbench_cmd(store, work, name + "-paced", script, clients,
                      ["-R", f"{per_client * clients:.1f}", "-T", "30"])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # connected: as many backends as clients (and the server's own)
        end = time.monotonic() + 20
        while len(store.pg._children(store.pg.postmaster_pid())) < clients:
            if time.monotonic() > end or p.poll() is not None:
                raise RuntimeError(f"pgbench: {clients} connections not made in 20 s")
            time.sleep(0.1)
        time.sleep(2)
        c0, t0 = store.cpu()[0], time.monotonic()
        time.sleep(15)
        c1, t1 = store.cpu()[0], time.monotonic()
    finally:
        out, err = p.communicate(timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"pgbench: {err.strip()[-500:]}")
    return (c1 - c0) / (t1 - t0)


def rest_phase(store, n, args, h, row):
    time.sleep(args.settle)
    h.send("reset")
    h.report()
    rev0, size0, cpu0, t0 = store.revision(), store.size(), store.cpu(), time.monotonic()
    time.sleep(args.rest)
    rep = h.report()
    rev1, size1, cpu1, t1 = store.revision(), store.size(), store.cpu(), time.monotonic()
    dt = t1 - t0
    row["rest_req_per_host_s"] = rep["calls_per_s_per_host"]
    row["rest_ready"] = rep["ready"]  # holding a number at the rest's end
    row["rest_rev_per_host_s"] = (rev1 - rev0) / dt / n
    row["growth_per_host_day"] = (size1 - size0) / dt * 86400 / n
    leader = store.leader() or 0
    row["leader_cpu"] = (cpu1[leader] - cpu0[leader]) / dt
    compacted = store.compacted_size()
    row["compacted_per_host"] = None if compacted is None else compacted / n
    log(f"{store.name} N={n}: at rest {rep['ready']} of {n} holding; "
        f"{row['rest_req_per_host_s']:.3f} requests and "
        f"{row['rest_rev_per_host_s']:.3f} revisions per s per host, leader CPU "
        f"{100 * row['leader_cpu']:.1f}%; growth {row['growth_per_host_day'] / 1024:.0f} KiB per "
        f"host per day without compaction, "
        + ("-" if compacted is None else f"{compacted / n / 1024:.1f} KiB per host in use once "
           "compacted"))


def fence_phase(store, n, args, h, row, cluster):
    """a fence with every holder live"""
    h.send("reset")
    h.send("mark")
    fence = subprocess.run([os.path.join(BUILD, "cli", "snowid"), "fence"] + store.flags +
                           ["--cluster", cluster], capture_output=True, text=True, timeout=120)
    if fence.returncode:
        # recorded, not fatal: a store too loaded to answer the fence
        row["fence_error"] = fence.stderr.strip().splitlines()[-1:] or ["exit %d" % fence.returncode]
        log(f"{store.name} N={n}: snowid fence failed: {row['fence_error'][0]}")
        return
    end = time.monotonic() + args.timeout
    while True:
        rep = h.report()
        if rep["switched_since_mark"] >= n or time.monotonic() > end:
            break
        time.sleep(0.25)
    row["fence_s"] = rep["last_switch_after_mark_s"]
    row["fence_switched"] = rep["switched_since_mark"]
    row["fence_eagain_ms"] = rep["eagain_max_ms"]
    row["dup_fence"] = rep["dup_ticks"]
    log(f"{store.name} N={n}: fence: {rep['switched_since_mark']}/{n} published again within "
        f"{row['fence_s']:.2f} s; longest EAGAIN {rep['eagain_max_ms']:.0f} ms")


def wave_phase(store, n, args, h, row):
    """a wave: 10% freed without a stop, started again"""
    k = max(1, n // 10)
    for i in range(k):
        h.ready.pop(i, None)
    t = time.monotonic()
    h.send(f"kill 0 {k - 1}")
    try:
        h.wait(lambda: all(i in h.ready for i in range(k)), args.timeout, "the wave READY")
        row["wave_s"] = time.monotonic() - t
        log(f"{store.name} N={n}: wave of {k}: READY again in {row['wave_s']:.2f} s")
    except TimeoutError:
        row["wave_s"] = None
        row["wave_ready"] = sum(1 for i in range(k) if i in h.ready)
        log(f"{store.name} N={n}: wave of {k}: only {row['wave_ready']} READY again within "
            f"{args.timeout:.0f} s")


def full_phase(store, n, args, h, row, flags, work, wbits):
    """the full space: one host more waits, then takes the number one retires"""
    row["full_s"] = None
    held = h.report()["ready"]
    if n == 1 << wbits and held < n:
        log(f"{store.name} N={n}: the space is not full ({held} held): no full-space test")
    if n == 1 << wbits and held == n:
        extra = Hosts(1, flags, work, f"extra-{n}")
        time.sleep(args.full_wait)
        if extra.ready:
            raise RuntimeError("a host beyond the worker space holds a number")
        t = time.monotonic()
        h.send(f"retire {n - 1}")
        try:
            extra.wait(lambda: 0 in extra.ready, 120, "the extra host to hold the number given up")
            row["full_s"] = time.monotonic() - t
        except TimeoutError:
            log(f"{store.name} N={n}: the extra host held no number within 120 s")
        said = open(os.path.join(work, f"extra-{n}.log"), errors="replace").read()
        row["full_said"] = said.count("worker numbers are taken")
        if row["full_said"] != 1:
            raise RuntimeError(f"the extra host said the space is full {row['full_said']} times")
        extra.stop()
        if row["full_s"] is not None:
            log(f"{store.name} N={n}: full space: the extra host held a number "
                f"{row['full_s']:.2f} s after one was given up")


def old_phase(store, n, args, h, row, flags, work):
    """the storm on the existing cluster"""
    h.stop(120)
    h2 = Hosts(n, flags, work, f"hosts2-{n}", rundir=os.path.join(work, "run"))
    try:
        h2.wait(lambda: len(h2.ready) == n, args.timeout, f"{n} holders READY again")
    except TimeoutError:
        log(f"{store.name} N={n}: only {len(h2.ready)} READY again within {args.timeout:.0f} s")
    rep = h2.report()
    row["storm_old_s"] = rep["last_s"]
    row["first_old_s"] = rep["first_s"]
    row["storm_old_phases"] = rep["phases"]
    # hosts that got back the number they held before the restart (as
    # each first published it in the storm on the new cluster)
    row["storm_old_same"] = sum(1 for i, e in h2.ready.items()
                                if i in h.ready and h.ready[i].get("worker") == e.get("worker"))
    h2.stop(120)
    log(f"{store.name} N={n}: storm on the existing cluster {rep['last_s']:.2f} s; "
        f"{row['storm_old_same']} of {n} hosts got their number back")


def write(rows, out, busy=0):
    os.makedirs(out, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["store"] != "etcd", r["store"], r["hosts"]))
    with open(os.path.join(out, "hosts.json"), "w") as f:
        json.dump(rows, f, indent=1)
    cols = ["store", "hosts", "floor_s", "storm_new_s", "first_new_s", "storm_old_s", "first_old_s",
            "fence_s", "fence_eagain_ms", "wave_s", "full_s", "rest_req_per_host_s",
            "rest_rev_per_host_s", "growth_per_host_day", "compacted_per_host", "leader_cpu"]
    with open(os.path.join(out, "hosts.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join("" if r.get(c) is None else
                              (f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]))
                              for c in cols) + "\n")

    def x(a, b):
        return f"{a / b:.1f}x" if a and b else "-"

    md = ["# The fleet at full size: many hosts' holders in one process",
          "",
          "`bench/hosts.py` (one `snowid-hosts` process holds every host's holder on one",
          f"loop). Machine: {os.cpu_count()} cores; etcd as 3 members on loopback.",
          *([f"During the whole run, {busy} other process{'es' if busy > 1 else ''} kept "
             f"{'as many cores' if busy > 1 else 'one core'} busy (`--busy {busy}`: a loop "
             "that never sleeps), the floor's included."] if busy else []),
          "Ratios are to the floor measured in the same run (one lease grant and one",
          "claim of a number per host, all at once, through the same client and verbs;",
          "every claim's mark below its start, so none is refused, and a call that got",
          "no answer sent again, eight times at most, until every host holds a number).",
          "Growth: etcd's database in use over the rest (its history; compacted, what",
          "is left per host is in brackets); PostgreSQL's snowid tables over the rest,",
          "autovacuum on (dead rows not yet reclaimed). Leader CPU: etcd's leader, or",
          "the PostgreSQL server (every backend), as a share of one core.",
          "",
          "| store | N | floor | storm, new cluster | storm, existing | first READY (new / existing) "
          "| fence: all published again | longest EAGAIN in the fence | wave of 10% | full space: "
          "extra host claims | at rest: requests /s/host | revisions /s/host | growth /host/day "
          "without compaction "
          "| leader CPU |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def f(r, key, fmt="%.2f s"):
        return "-" if r.get(key) is None else fmt % r[key]

    for r in rows:
        n = r["hosts"]
        new = f(r, "storm_new_s") + f" ({x(r.get('storm_new_s'), r['floor_s'])}"
        if r.get("storm_new_ready", n) != n:
            new += f", {r['storm_new_ready']} READY"
        fence = "-" if "fence_switched" not in r else \
            f"{r['fence_s']:.2f} s ({r['fence_switched']}/{n})"
        wave = f(r, "wave_s")
        if "wave_ready" in r:
            wave = f"not all ({r['wave_ready']}) in {r.get('timeout', 0):.0f} s"
        growth = "-" if r.get("growth_per_host_day") is None else \
            f"{r['growth_per_host_day'] / 1024:.1f} KiB"
        if r.get("compacted_per_host") is not None:
            growth += f" ({r['compacted_per_host'] / 1024:.1f} KiB in use once compacted)"
        cpu = "-" if r.get("leader_cpu") is None else f"{100 * r['leader_cpu']:.1f}%"
        md.append(
            f"| {r['store']} | {n} | {r['floor_s']:.2f} s | {new}) | {f(r, 'storm_old_s')} "
            f"({x(r.get('storm_old_s'), r['floor_s'])}) | {f(r, 'first_new_s', '%.2f')} / "
            f"{f(r, 'first_old_s')} | {fence} | {f(r, 'fence_eagain_ms', '%.0f ms')} | {wave} | "
            f"{f(r, 'full_s')} | {f(r, 'rest_req_per_host_s', '%.3f')} | "
            f"{f(r, 'rest_rev_per_host_s', '%.3f')} | {growth} | {cpu} |")
    table = [r for r in rows if r.get("table_claim_s") is not None]
    if table:
        md += ["", "The first design document's table on the same server, in the same run "
               "(`worker_ids`: a claim is an `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP "
               "LOCKED)`, a renewal a guarded `UPDATE`; pgbench), beside snowid's own on "
               "PostgreSQL: N clients arriving at once, and renewals per second from 64 "
               "clients:", "",
               "| N | the table: N claims at once | distinct numbers | renewals /s | server "
               f"CPU at {TABLE_REST_RATE} renewals /s from each of N clients | the same rate of "
               "`SELECT 1` | snowid: floor | snowid: storm, new cluster | snowid at rest: "
               "server CPU |", "|---|---|---|---|---|---|---|---|---|"]
        for r in table:
            def pct(key):
                return "-" if r.get(key) is None else f"{100 * r[key]:.1f}%"
            md.append(f"| {r['hosts']} | {r['table_claim_s']:.2f} s | {r['table_claimed']} | "
                      f"{r['table_renew_per_s']:.0f} | {pct('table_rest_cpu')} | "
                      f"{pct('empty_rest_cpu')} | {r['floor_s']:.2f} s | "
                      f"{f(r, 'storm_new_s')} | {pct('leader_cpu')} |")
    md += ["", "Where a storm's time goes (each step's store calls: count, median and 99th "
           "percentile, ms), and the store calls per host it took: all of them (the floor "
           "takes 2), and those of the acquisitions alone (the renewals of the hosts "
           "already published left out), and on the existing cluster how many hosts "
           "claimed the number they held before:", "",
           "| store | N | storm | layout | grant | scan | claim | settle | renew "
           "| requests /host (acquiring) | same number |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for which in ("new", "old"):
            ph = r.get(f"storm_{which}_phases")
            if ph is None:
                continue
            cells = []
            for k in ("layout", "grant", "scan", "claim", "settle", "renew"):
                p = ph.get(k)
                lost = f" ({p['lost']} lost)" if p and p.get("lost") else ""
                cells.append(f"{p['n']}{lost}: {p['median_ms']:.0f} / {p['p99_ms']:.0f}"
                             if p else "-")
            total = sum(p["n"] for p in ph.values())
            acquiring = total - ph.get("renew", {}).get("n", 0)
            cells.append(f"{total / r['hosts']:.1f} ({acquiring / r['hosts']:.1f})")
            same = r.get("storm_old_same") if which == "old" else None
            cells.append("-" if same is None else f"{same} of {r['hosts']}")
            md.append(f"| {r['store']} | {r['hosts']} | {which} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "hosts.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    plot(rows, out)


def plot(rows, out):
    """hosts.png: seconds for each step of the run, per store and N (gnuplot,
    when installed)"""
    if not shutil.which("gnuplot"):
        log("gnuplot is not installed: no hosts.png")
        return
    keys = [("floor_s", "floor"), ("storm_new_s", "storm, new cluster"),
            ("storm_old_s", "storm, existing"), ("fence_s", "fence: all published again"),
            ("wave_s", "wave of 10%")]
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        for r in rows:
            f.write(f'"{r["store"]} {r["hosts"]}" ' +
                    " ".join("%.3f" % r[k] if r.get(k) else "NaN" for k, _ in keys) + "\n")
        dat = f.name
    cols = ", ".join(f"'' using {i + 2} title \"{t}\"" for i, (_, t) in enumerate(keys))
    script = f"""set terminal pngcairo size 900,480
set output "{os.path.join(out, 'hosts.png')}"
set title "seconds (log scale), N hosts' holders in one process, by store and N"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "seconds"
set key top left
set grid ytics
plot "{dat}" using 2:xtic(1) title "{keys[0][1]}", {cols.split(", ", 1)[1]}
"""
    try:
        g = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, timeout=60)
        if g.returncode:
            log(f"gnuplot failed: no hosts.png ({g.stderr.strip()[-200:]})")
    finally:
        os.unlink(dat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="etcd,postgres")
    ap.add_argument("--hosts", default="64,256,1024")
    ap.add_argument("--rest", type=float, default=60)
    ap.add_argument("--settle", type=float, default=10)
    ap.add_argument("--full-wait", type=float, default=5)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of other stores and N already in OUT/hosts.json")
    ap.add_argument("--phases", default="rest,fence,wave,full,old",
                    help="which phases follow the floor and the storm on a new cluster")
    ap.add_argument("--busy", type=int, default=0,
                    help="processes that each keep one core busy for the whole run "
                         "(a loop that never sleeps), the floor included")
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        run_all(args)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def run_all(args):
    rows = []
    if args.merge and os.path.exists(os.path.join(args.out, "hosts.json")):
        # rows of other stores and N from an earlier run stay; this run's replace theirs
        with open(os.path.join(args.out, "hosts.json")) as f:
            rows = json.load(f)
    for sname in args.stores.split(","):
        for n in [int(x) for x in args.hosts.split(",")]:
            work = tempfile.mkdtemp(prefix=f"snowid-hosts-{sname}-{n}-")
            store = EtcdStore(work, args.members) if sname == "etcd" else PgStore(work)
            wbits = 10  # the default layout's: the space is full at 1,024
            try:
                row = run_one(store, n, args, work, wbits)
                rows = [r for r in rows if (r["store"], r["hosts"]) != (sname, n)] + [row]
            finally:
                store.stop()
                if not args.keep:
                    shutil.rmtree(work, ignore_errors=True)
            write(rows, args.out, args.busy)
    print(open(os.path.join(args.out, "hosts.md")).read())


if __name__ == "__main__":
    main()
