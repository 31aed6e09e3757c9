# SPDX-License-Identifier: MIT
"""A real etcd, real snowidd processes and real clients, for the daemon tests.

Everything binds to 127.0.0.1 on free ports; everything started is stopped
and every segment made is removed when the test ends, however it ends.
"""
import base64
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

BUILD = os.environ.get("SNOWID_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
SNOWIDD = os.path.join(BUILD, "daemon", "snowidd")
TAKER = os.path.join(BUILD, "tests", "snowid-taker")
CLI = os.path.join(BUILD, "cli", "snowid")
EPOCH_MS = 1735689600000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    """A port nothing is bound to, below the kernel's ephemeral range: a
    port bind() picks itself comes from that range, where an outgoing
    connection (a client of another test's server) can take it as its own
    local port before the server meant for it binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(1000):
        port = rng.randint(10000, max(low - 1, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout, what, interval=0.02):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def unb64(s):
    return base64.b64decode(s).decode()


class KV:
    """Keys and leases through call(path, body): etcd's v3 JSON requests.
    PgStore gives the same methods over PostgreSQL's tables."""

    def get(self, key):
        r = self.call("/v3/kv/range", {"key": b64(key)})
        kvs = r.get("kvs", [])
        return (unb64(kvs[0].get("value", "")), kvs[0]) if kvs else (None, None)

    def prefix(self, p):
        end = p[:-1] + chr(ord(p[-1]) + 1)
        r = self.call("/v3/kv/range", {"key": b64(p), "range_end": b64(end)})
        return {unb64(kv["key"]): (unb64(kv.get("value", "")), kv) for kv in r.get("kvs", [])}

    def put(self, key, value, lease=None):
        body = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return self.call("/v3/kv/put", body)

    def delete(self, key):
        """Deletes one key; its value before, or None if it was absent."""
        r = self.call("/v3/kv/deleterange", {"key": b64(key), "prev_kv": True})
        prev = r.get("prev_kvs", [])
        return unb64(prev[0].get("value", "")) if prev else None

    def header(self):
        """The header of an answer (cluster_id, member_id, revision, raft_term)."""
        return self.call("/v3/kv/range", {"key": b64("/"), "count_only": True})["header"]

    def revision(self):
        return int(self.header()["revision"])

    def grant(self, ttl):
        return self.call("/v3/lease/grant", {"TTL": ttl})["ID"]

    def revoke(self, lease):
        self.call("/v3/lease/revoke", {"ID": str(lease)})

    def made_long_ago(self, cluster="default", time_bits=41, worker_bits=10, seq_bits=12):
        """Makes the cluster, before any daemon starts, as it is long after a
        daemon made it: a daemon makes a cluster above the clock bound a
        fence claims above (docs/fences.md), a lead the slew takes a day to
        bring back, and tests of the clock and of a host's own counters
        start on the clock instead.  Every mark 0, the floor 0, a fence
        that claims above 0 on the cluster ID the store answers as."""
        p = f"/snowid/{cluster}/"
        cid = self.header()["cluster_id"]
        layout = {"epoch_ms": EPOCH_MS, "time_bits": time_bits, "worker_bits": worker_bits,
                  "seq_bits": seq_bits}
        fence = {"token": os.urandom(16).hex(), "era": int(time.time() * 1000),
                 "claims_above": 0, "cluster_id": str(cid)}
        puts = [(p + "hwm/" + str(n), "0" * 20) for n in range(1 << worker_bits)]
        puts += [(p + "floor", "0" * 20), (p + "fence", json.dumps(fence, separators=(",", ":"))),
                 (p + "layout", json.dumps(layout, separators=(",", ":")))]
        for i in range(0, len(puts), 100):
            self.call("/v3/kv/txn", {"success": [
                {"request_put": {"key": b64(k), "value": b64(v)}} for k, v in puts[i:i + 100]]})


class Etcd(KV):
    """1 or 3 etcd members on loopback."""

    # what a snowid cluster runs with (docs/etcd.md): history compacted
    # hourly, and room to grow; a test may add flags (the last one wins)
    SETTINGS = ["--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h",
                "--quota-backend-bytes", str(8 << 30)]

    def __init__(self, h, members=1, addrs=None, wrap=(), extra=()):
        """addrs: one address per member, each then on ports 2379/2380 (the
        members are in a network namespace of their own); wrap: a command
        prefix (ip netns exec NS) for the members and for requests to them."""
        self.h = h
        self.n = members
        self.wrap = list(wrap)
        self.extra = list(extra)
        if addrs:
            hosts, self.client, self.peer = addrs, [2379] * members, [2380] * members
        else:
            hosts = ["127.0.0.1"] * members
            self.client = [free_port() for _ in range(members)]
            self.peer = [free_port() for _ in range(members)]
        self.procs = [None] * members
        self.urls = [f"http://{hosts[i]}:{self.client[i]}" for i in range(members)]
        self.peers = [f"http://{hosts[i]}:{self.peer[i]}" for i in range(members)]
        self.initial_cluster = ",".join(f"m{i}={self.peers[i]}" for i in range(members))
        self.token = f"t{os.getpid()}"
        self.restores = 0
        self.cmds = [self._cmd(i, h.path(f"etcd-m{i}")) for i in range(members)]
        for i in range(members):
            self.start(i)
        self.wait_healthy()

    def _cmd(self, i, data_dir, url=None):
        url = url or self.urls[i]
        return self.wrap + [
            "etcd", "--name", f"m{i}", "--data-dir", data_dir,
            "--listen-client-urls", url,
            "--advertise-client-urls", url,
            "--listen-peer-urls", self.peers[i],
            "--initial-advertise-peer-urls", self.peers[i],
            "--initial-cluster", self.initial_cluster, "--initial-cluster-token",
            self.token, "--initial-cluster-state", "new",
            "--log-level", "error"] + self.SETTINGS + self.extra

    def _post(self, url, body, timeout):
        if not self.wrap:
            req = urllib.request.Request(url, data=body, method="POST" if body else "GET")
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}")
        cmd = self.wrap + ["curl", "-sf", "--max-time", str(timeout), url]
        if body:
            cmd += ["--data-binary", "@-"]
        r = subprocess.run(cmd, input=body or b"", capture_output=True, timeout=timeout + 5)
        if r.returncode != 0:
            raise OSError(f"curl {url}: exit {r.returncode}")
        return json.loads(r.stdout or b"{}")

    def start(self, i):
        logf = open(self.h.path(f"etcd-m{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(self.cmds[i], stdout=logf, stderr=logf)
        self.h.cleanup(lambda p=self.procs[i]: kill_quietly(p))

    def healthy(self, i):
        try:
            return self._post(self.urls[i] + "/health", None, 1).get("health") == "true"
        except Exception:
            return False

    def wait_healthy(self, timeout=30):
        wait_for(lambda: all(self.healthy(i) for i in range(self.n) if self.procs[i]), timeout,
                 "etcd to be healthy")

    def kill(self, i, sig=signal.SIGKILL):
        self.procs[i].send_signal(sig)
        if sig == signal.SIGKILL:
            self.procs[i].wait()
            self.procs[i] = None

    def stop_all(self):
        for i in range(self.n):
            if self.procs[i]:
                self.kill(i)

    def call(self, path, body, member=None, timeout=5):
        urls = self.urls if member is None else [self.urls[member]]
        last = None
        for u in urls:
            try:
                return self._post(u + path, json.dumps(body).encode(), timeout)
            except Exception as e:  # try the next member
                last = e
        raise last

    def etcdctl(self, *args, timeout=60):
        r = subprocess.run(self.wrap + ["etcdctl", *args], capture_output=True, text=True,
                           timeout=timeout, env=dict(os.environ, ETCDCTL_API="3"))
        if r.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    def snapshot_save(self, path, member=0):
        """etcdctl snapshot save from one member; the snapshot's revision."""
        self.etcdctl("--endpoints", self.urls[member], "snapshot", "save", path)
        st = json.loads(self.etcdctl("snapshot", "status", path, "-w", "json"))
        log(f"etcd snapshot saved at revision {st['revision']}")
        return int(st["revision"])

    def stop_members(self):
        """Stops every member (SIGTERM, then waits), leaving its data."""
        for i in range(self.n):
            p = self.procs[i]
            if p:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                self.procs[i] = None

    def restore(self, path, start=True, new_token=False, refill_to=0):
        """etcd's restore procedure: every member stopped, every member
        restored from the same snapshot into a new data dir (same name and
        peer URLs), then started again.  The cluster token stays the same
        (the cluster ID with it) unless new_token, as docs/fences.md's
        procedure says.  refill_to: before any daemon can reach it, the
        restored cluster is started on other client URLs and written to
        until its revision is at least refill_to (as other clients' writes
        would refill the revisions the restore took back)."""
        self.stop_members()
        self.restores += 1
        if new_token:
            self.token = f"t{os.getpid()}r{self.restores}"
        for i in range(self.n):
            data = self.h.path(f"etcd-m{i}.restore{self.restores}")
            self.etcdctl("snapshot", "restore", path, "--name", f"m{i}", "--data-dir", data,
                         "--initial-cluster", self.initial_cluster,
                         "--initial-cluster-token", self.token,
                         "--initial-advertise-peer-urls", self.peers[i])
            self.cmds[i] = self._cmd(i, data)
        log(f"etcd restored from {os.path.basename(path)}"
            f"{' with a new cluster token' if new_token else ''}")
        if refill_to:
            self._refill(refill_to)
        if start:
            for i in range(self.n):
                self.start(i)
            self.wait_healthy()

    def _refill(self, revision):
        """The restored members on client URLs of their own, written to until
        the revision reaches `revision`, then stopped."""
        hidden = [f"http://127.0.0.1:{free_port()}" for _ in range(self.n)]
        procs = []
        for i in range(self.n):
            logf = open(self.h.path(f"etcd-m{i}.log"), "ab")
            cmd = self._cmd(i, self.cmds[i][self.cmds[i].index("--data-dir") + 1], hidden[i])
            procs.append(subprocess.Popen(cmd, stdout=logf, stderr=logf))
            self.h.cleanup(lambda p=procs[i]: kill_quietly(p))
        urls, self.urls = self.urls, hidden
        try:
            wait_for(lambda: all(self.healthy(i) for i in range(self.n)), 30,
                     "the restored etcd to be healthy")
            k = 0
            while int(self.put("/test/refill", str(k))["header"]["revision"]) < revision:
                k += 1
            log(f"restored etcd refilled to revision {revision} ({k + 1} writes)")
        finally:
            self.urls = urls
            for p in procs:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)

    def leader(self):
        """The leader's index + 1, or None."""
        for i in range(self.n):
            if not self.procs[i]:
                continue
            try:
                st = self.call("/v3/maintenance/status", {}, member=i, timeout=2)
                if st.get("leader") and st["leader"] == st["header"]["member_id"]:
                    return i + 1  # 1-based, so that member 0 is true
            except Exception:
                pass
        return None


STORE = os.environ.get("SNOWID_STORE", "etcd")


class PgStore(KV):
    """A PostgreSQL 15 server of its own (tests/integration/pgserver.py) as
    snowid's store.  The store holds tables that say what they hold
    (daemon/store/postgres.sql), not keys: the test's reads and writes of
    etcd's keys are mapped onto them, with plain SQL through psql:

      /snowid/<c>/layout      clusters' epoch_ms, time_bits, worker_bits, seq_bits
                              as etcd's JSON value; create and mod revision layout_rev
      /snowid/<c>/fence       clusters.fence; mod revision fence_rev
      /snowid/<c>/floor       clusters.floor, 20 digits (it has no revision)
      /snowid/<c>/creating    clusters.creating; mod revision creating_rev
      /snowid/<c>/hwm/<n>     numbers.mark, 20 digits; mod revision mark_rev
      /snowid/<c>/workers/<n> numbers.holder under numbers.lease, while that
                              lease lives (snowid._live); no revision of its own
      /snowid/<c>/witness/<t> witnesses.value; mod revision rev
      /snowid/<c>/ranges/<r>  ranges.value; mod revision rev

    A number's mark and holder share its row: deleting hwm/<n> deletes the
    row, its holder with it, and workers/<n> can be put only beside a mark.
    workers/<n> put with no lease (held for good, as an etcd key with no
    lease is) is held under a lease of its own that never runs out.

    Keys outside /snowid/ (a test's own, such as test_fences.snapshot()'s
    sentinel) are kept in a table of the test's, snowid.test_keys: inside
    schema snowid, so that a backup (pg_dump -n snowid) holds them and a
    restore takes them back with the store's own tables; no daemon reads
    it, and postgres.sql leaves a table it does not know alone.

    Every write takes its revision from the sequence snowid.revision once
    it holds the row it writes, as the verbs do, and runs with
    session_replication_role = replica: a test may put a mark lower than
    the stored one (a store that lost writes), which snowid._mark_up
    refuses to anyone else."""

    n = 1
    TEST_KEYS = "snowid.test_keys"

    def __init__(self, h, schema=True):
        """schema: made at once (as the first daemon would), so that the
        test can read and write keys before any daemon ran; else the
        database is empty."""
        import pgserver
        self.h = h
        self.pg = pgserver.Postgres(h)
        self.conninfo = self.pg.conninfo()
        self.procs = [True]
        if schema:
            self.pg.load_schema()

    def daemon_args(self):
        return ["--store", "postgres", "--postgres", self.conninfo]

    def call(self, path, body, member=None, timeout=5):
        raise AssertionError(f"PostgreSQL's store takes no etcd request ({path}): "
                             "use the KV methods, or its verbs (self.pg.verb)")

    # ---- keys ----

    @staticmethod
    def _lit(v):
        import pgserver
        return pgserver.sql_value(v)

    @staticmethod
    def _split(key):
        """(cluster, what, name) of a key under /snowid/: ("c", "hwm", "3"),
        ("c", "layout", None); None outside /snowid/."""
        m = re.fullmatch(r"/snowid/([^/]+)/(layout|fence|floor|creating)", key)
        if m:
            return m.group(1), m.group(2), None
        m = re.fullmatch(r"/snowid/([^/]+)/(hwm|workers|witness|ranges)/(.+)", key)
        if m:
            if m.group(2) in ("hwm", "workers") and not re.fullmatch(r"[0-9]{1,9}", m.group(3)):
                raise AssertionError(f"{key}: not a number's key")
            return m.group(1), m.group(2), m.group(3)
        if key.startswith("/snowid/"):
            raise AssertionError(f"{key}: no table of the store holds it")
        return None

    def _keys_sql(self, cluster):
        """Every key of the store (or of one cluster) as a row (key, value,
        create_revision, mod_revision, lease), NULL where not stored."""
        cw = f"WHERE name = {self._lit(cluster)}" if cluster else "WHERE true"
        nw = f"WHERE cluster = {self._lit(cluster)}" if cluster else "WHERE true"
        return f"""
            SELECT '/snowid/' || name || '/layout' AS key,
                   format('{{"epoch_ms":%s,"time_bits":%s,"worker_bits":%s,"seq_bits":%s}}',
                          epoch_ms, time_bits, worker_bits, seq_bits) AS value,
                   layout_rev AS create_revision, layout_rev AS mod_revision,
                   NULL::bigint AS lease
            FROM snowid.clusters {cw} AND layout_rev IS NOT NULL
            UNION ALL
            SELECT '/snowid/' || name || '/fence', fence, NULL, fence_rev, NULL
            FROM snowid.clusters {cw} AND fence IS NOT NULL
            UNION ALL
            SELECT '/snowid/' || name || '/floor', lpad(floor::text, 20, '0'), NULL, NULL, NULL
            FROM snowid.clusters {cw} AND floor IS NOT NULL
            UNION ALL
            SELECT '/snowid/' || name || '/creating', creating, NULL, creating_rev, NULL
            FROM snowid.clusters {cw} AND creating IS NOT NULL
            UNION ALL
            SELECT '/snowid/' || cluster || '/hwm/' || n, lpad(mark::text, 20, '0'), NULL,
                   mark_rev, NULL
            FROM snowid.numbers {nw}
            UNION ALL
            SELECT '/snowid/' || cluster || '/workers/' || n, holder, NULL, NULL, lease
            FROM snowid.numbers {nw} AND snowid._live(lease)
            UNION ALL
            SELECT '/snowid/' || cluster || '/witness/' || token, value, NULL, rev, NULL
            FROM snowid.witnesses {nw}
            UNION ALL
            SELECT '/snowid/' || cluster || '/ranges/' || region, value, NULL, rev, NULL
            FROM snowid.ranges {nw}"""

    def _test_keys_exist(self):
        return self.pg.psql(f"SELECT to_regclass('{self.TEST_KEYS}') IS NOT NULL").strip() == "t"

    def _select(self, where, cluster, store_side, test_side):
        parts = []
        if store_side:
            parts.append(self._keys_sql(cluster))
        if test_side and self._test_keys_exist():
            parts.append(f"SELECT key, value, create_revision, mod_revision, NULL::bigint AS lease "
                         f"FROM {self.TEST_KEYS}")
        if not parts:
            return []
        rows = self.pg.query_json(f"SELECT * FROM ({' UNION ALL '.join(parts)}) k WHERE {where} "
                                  f'ORDER BY key COLLATE "C"')
        out = []
        for r in rows:
            kv = {"key": b64(r["key"]), "value": b64(r["value"])}
            for f in ("create_revision", "mod_revision", "lease"):
                if r[f] is not None:
                    kv[f] = str(r[f])
            out.append((r["key"], r["value"], kv))
        return out

    def get(self, key):
        where = f"key = {self._lit(key)}"
        sp = self._split(key)
        rows = self._select(where, sp and sp[0], sp is not None, sp is None)
        return (rows[0][1], rows[0][2]) if rows else (None, None)

    def prefix(self, p):
        m = re.match(r"/snowid/([^/]+)/", p)
        where = f"starts_with(key, {self._lit(p)})"
        rows = self._select(where, m and m.group(1),
                            p.startswith("/snowid/") or "/snowid/".startswith(p),
                            not p.startswith("/snowid/"))
        return {k: (v, kv) for k, v, kv in rows}

    def _write(self, sql, triggers=False):
        """sql in one transaction, as a test's own write (no trigger, unless
        triggers: a mark deleted keeps the floor, as in etcd); the JSON
        objects its queries print, merged."""
        role = "" if triggers else "SET LOCAL session_replication_role = replica;\n"
        out = self.pg.psql("BEGIN;\n" + role + sql + ";\nCOMMIT;\n", single=False)
        got = {}
        for line in out.splitlines():
            if line.strip():
                got.update(json.loads(line))
        return got

    def put(self, key, value, lease=None):
        """The key's row written (made if need be) at a new revision; an
        answer with that revision in its header, as etcd's."""
        sp = self._split(key)
        v = self._lit(value)
        rev = "nextval('snowid.revision')"
        if sp is None:
            sql = f"""
                CREATE TABLE IF NOT EXISTS {self.TEST_KEYS} (key text PRIMARY KEY, value text NOT NULL,
                    create_revision bigint NOT NULL, mod_revision bigint NOT NULL);
                INSERT INTO {self.TEST_KEYS} AS t
                VALUES ({self._lit(key)}, {v}, {rev}, currval('snowid.revision'))
                ON CONFLICT (key) DO UPDATE SET value = excluded.value, mod_revision = {rev}
                RETURNING json_build_object('rev', t.mod_revision)"""
            got = self._write(sql)
            return {"header": {"revision": str(got["rev"])}}
        c, what, name = sp
        cl = self._lit(c)
        lock_c = (f"INSERT INTO snowid.clusters (name) VALUES ({cl}) ON CONFLICT DO NOTHING;\n"
                  f"SELECT FROM snowid.clusters WHERE name = {cl} FOR UPDATE;\n")
        if what == "layout":
            lay = json.loads(value)
            cols = [int(lay[f]) for f in ("epoch_ms", "time_bits", "worker_bits", "seq_bits")]
            # a put of a key that is there keeps its create revision
            sql = lock_c + f"""
                UPDATE snowid.clusters SET epoch_ms = {cols[0]}, time_bits = {cols[1]},
                    worker_bits = {cols[2]}, seq_bits = {cols[3]},
                    layout_rev = coalesce(layout_rev, {rev})
                WHERE name = {cl} RETURNING json_build_object('rev', layout_rev)"""
        elif what in ("fence", "creating"):
            sql = lock_c + f"""
                UPDATE snowid.clusters SET {what} = {v}, {what}_rev = {rev}
                WHERE name = {cl} RETURNING json_build_object('rev', {what}_rev)"""
        elif what == "floor":
            assert re.fullmatch(r"[0-9]{1,20}", value) and int(value) < 1 << 63, \
                f"{key}: {value!r} is not a floor"
            sql = lock_c + f"""
                UPDATE snowid.clusters SET floor = {int(value)}
                WHERE name = {cl} RETURNING json_build_object('rev', {rev})"""
        elif what == "hwm":
            assert re.fullmatch(r"[0-9]{1,20}", value) and int(value) < 1 << 63, \
                f"{key}: {value!r} is not a mark"
            sql = f"""
                SELECT FROM snowid.numbers WHERE cluster = {cl} AND n = {name} FOR UPDATE;
                INSERT INTO snowid.numbers AS x (cluster, n, mark, mark_rev)
                VALUES ({cl}, {name}, {int(value)}, {rev})
                ON CONFLICT (cluster, n) DO UPDATE SET mark = excluded.mark, mark_rev = {rev}
                RETURNING json_build_object('rev', x.mark_rev)"""
        elif what == "workers":
            if lease:
                held = f"{int(lease)}"
            else:
                # held for good: a lease that never runs out
                held = str(int.from_bytes(os.urandom(8), "big") & ((1 << 63) - 1) or 1)
            sql = f"""
                SELECT FROM snowid.numbers WHERE cluster = {cl} AND n = {name} FOR UPDATE;
                INSERT INTO snowid.leases (id, ttl, expires_at)
                SELECT {held}, 3153600000, 'infinity' WHERE {'false' if lease else 'true'}
                    AND EXISTS (SELECT FROM snowid.numbers WHERE cluster = {cl} AND n = {name});
                UPDATE snowid.numbers SET lease = {held}, holder = {v}
                WHERE cluster = {cl} AND n = {name} RETURNING json_build_object('rev', {rev})"""
        else:
            table, col = ("witnesses", "token") if what == "witness" else ("ranges", "region")
            sql = f"""
                INSERT INTO snowid.{table} AS t (cluster, {col}, value, rev)
                VALUES ({cl}, {self._lit(name)}, {v}, {rev})
                ON CONFLICT (cluster, {col}) DO UPDATE SET value = excluded.value, rev = {rev}
                RETURNING json_build_object('rev', t.rev)"""
        got = self._write(sql)
        if "rev" not in got:
            raise AssertionError(f"{key}: not written (a holder needs its number's mark row "
                                 "in the native schema)")
        return {"header": {"revision": str(got["rev"])}}

    def delete(self, key):
        """Deletes one key; its value before, or None if it was absent."""
        sp = self._split(key)
        rev = "nextval('snowid.revision')"
        if sp is None:
            if not self._test_keys_exist():
                return None
            sql = f"""DELETE FROM {self.TEST_KEYS} WHERE key = {self._lit(key)}
                      RETURNING json_build_object('old', value, 'rev', {rev})"""
            return self._write(sql).get("old")
        c, what, name = sp
        cl = self._lit(c)
        old = self.get(key)[0]
        if what == "layout":
            sql = f"""
                UPDATE snowid.clusters SET epoch_ms = NULL, time_bits = NULL, worker_bits = NULL,
                    seq_bits = NULL, layout_rev = NULL
                WHERE name = {cl} AND layout_rev IS NOT NULL
                RETURNING json_build_object('rev', {rev})"""
        elif what in ("fence", "creating", "floor"):
            extra = "" if what == "floor" else f", {what}_rev = NULL"
            sql = f"""
                UPDATE snowid.clusters SET {what} = NULL{extra}
                WHERE name = {cl} AND {what} IS NOT NULL
                RETURNING json_build_object('rev', {rev})"""
        elif what == "hwm":
            # the row goes, the holder with it
            sql = f"""
                DELETE FROM snowid.numbers WHERE cluster = {cl} AND n = {name}
                RETURNING json_build_object('old', lpad(mark::text, 20, '0'), 'rev', {rev})"""
        elif what == "workers":
            sql = f"""
                UPDATE snowid.numbers SET lease = NULL, holder = NULL
                WHERE cluster = {cl} AND n = {name} AND snowid._live(lease)
                RETURNING json_build_object('rev', {rev})"""
        else:
            table, col = ("witnesses", "token") if what == "witness" else ("ranges", "region")
            sql = f"""
                DELETE FROM snowid.{table} WHERE cluster = {cl} AND {col} = {self._lit(name)}
                RETURNING json_build_object('old', value, 'rev', {rev})"""
        got = self._write(sql, triggers=what == "hwm")
        if "rev" not in got:
            return None
        return got.get("old", old)

    def header(self):
        """The store's identity and revision, as an etcd header gives them:
        snowid.meta.cluster_id, and the sequence's last value."""
        r = self.pg.query_json("SELECT cluster_id, (SELECT last_value FROM snowid.revision) AS rev "
                               "FROM snowid.meta")[0]
        return {"cluster_id": str(r["cluster_id"]), "revision": str(r["rev"])}

    def revision(self):
        return int(self.pg.psql("SELECT last_value FROM snowid.revision").strip())

    def grant(self, ttl):
        return str(self.pg.verb("lease_grant", int(ttl))["id"])

    def revoke(self, lease):
        self.pg.verb("lease_revoke", int(lease))

    def made_long_ago(self, cluster="default", time_bits=41, worker_bits=10, seq_bits=12):
        """KV.made_long_ago in the tables: every mark 0, the floor 0, a fence
        that claims above 0 on the store's cluster ID, then the layout."""
        cid = self.header()["cluster_id"]
        fence = {"token": os.urandom(16).hex(), "era": int(time.time() * 1000),
                 "claims_above": 0, "cluster_id": str(cid)}
        cl = self._lit(cluster)
        rev = "nextval('snowid.revision')"
        self._write(f"""
            INSERT INTO snowid.numbers (cluster, n, mark, mark_rev)
            SELECT {cl}, g, 0, {rev} FROM generate_series(0, {(1 << worker_bits) - 1}) g
            ON CONFLICT (cluster, n) DO UPDATE SET mark = 0, mark_rev = {rev};
            INSERT INTO snowid.clusters (name) VALUES ({cl}) ON CONFLICT DO NOTHING;
            UPDATE snowid.clusters SET floor = 0,
                fence = {self._lit(json.dumps(fence, separators=(",", ":")))}, fence_rev = {rev}
            WHERE name = {cl};
            UPDATE snowid.clusters SET epoch_ms = {EPOCH_MS}, time_bits = {time_bits},
                worker_bits = {worker_bits}, seq_bits = {seq_bits}, layout_rev = {rev}
            WHERE name = {cl}""")

    restores = 0

    def snapshot_save(self, path, member=0):
        """A backup of the store (pg_dump of schema snowid); its revision."""
        self.pg._as_owner(["pg_dump", "-d", self.conninfo, "-n", "snowid", "-f", path])
        rev = self.revision()
        log(f"PostgreSQL backup saved at revision {rev}")
        return rev

    def restore(self, path, start=True, refill_to=0):
        """The backup restored over the live schema in one transaction, so no
        daemon ever sees it half made (or absent, and makes it anew);
        refill_to: the revision moved on to at least that in the same
        transaction (as other clients' writes would)."""
        self.restores += 1
        refill = ["-c", f"SELECT setval('snowid.revision', greatest(last_value, {int(refill_to)})) "
                        "FROM snowid.revision"]
        self.pg._as_owner(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
                           "-d", self.conninfo, "-c", "DROP SCHEMA snowid CASCADE",
                           "-f", path] + (refill if refill_to else []))
        log(f"PostgreSQL restored from {os.path.basename(path)}")

    def start(self, i=0):
        self.pg.start()
        self.procs[0] = True

    def healthy(self, i=0):
        return self.pg.ready()

    def wait_healthy(self, timeout=30):
        wait_for(self.pg.ready, timeout, "PostgreSQL to take connections")

    def kill(self, i=0, sig=signal.SIGKILL):
        """kill -9 of the server (the postmaster and every backend)."""
        assert sig == signal.SIGKILL
        self.pg.kill9()
        self.procs[0] = None

    def stop_members(self):
        self.pg.stop("fast")
        self.procs[0] = None

    stop_all = stop_members


class HoldingProxy:
    """An HTTP proxy in front of one etcd member, for a store slow to answer
    some requests: every request passes through, except that from hold(pred)
    until release() each request for which pred(keys) is true waits, and its
    connection with it; keys: the set of keys (decoded) the request's JSON
    body names.  Responses pass through untouched."""

    def __init__(self, h, upstream_url):
        host, port = upstream_url.rsplit("/", 1)[1].rsplit(":", 1)
        self.up = (host, int(port))
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.urls = [f"http://127.0.0.1:{self.lsock.getsockname()[1]}"]
        self.cond = threading.Condition()
        self.pred = None
        self.waiting = 0
        self.held = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()
        h.cleanup(self.close)

    def hold(self, pred):
        with self.cond:
            self.pred = pred

    def release(self):
        with self.cond:
            self.pred = None
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            self.pred = None
            self.cond.notify_all()
        self.lsock.close()

    @staticmethod
    def keys(body):
        """The keys a request body names (etcd's JSON: base64 "key" fields)."""
        found = set()

        def walk(x):
            if isinstance(x, dict):
                for k, v in x.items():
                    if k == "key" and isinstance(v, str):
                        with contextlib.suppress(ValueError):
                            found.add(base64.b64decode(v).decode(errors="replace"))
                    else:
                        walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        with contextlib.suppress(ValueError):
            walk(json.loads(body or b"{}"))
        return found

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                dst.sendall(d)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def _serve(self, c):
        try:
            u = socket.create_connection(self.up)
        except OSError:
            c.close()
            return
        threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        raise OSError("closed")
                    buf += d
                head, rest = buf.split(b"\r\n\r\n", 1)
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                n = int(m.group(1)) if m else 0
                while len(rest) < n:
                    d = c.recv(65536)
                    if not d:
                        raise OSError("closed")
                    rest += d
                body, buf = rest[:n], rest[n:]
                with self.cond:
                    if self.pred and self.pred(self.keys(body)):
                        self.held += 1
                        self.waiting += 1
                        self.cond.notify_all()
                        self.cond.wait_for(lambda: not self.pred or self.closed)
                        self.waiting -= 1
                    if self.closed:
                        raise OSError("closed")
                u.sendall(head + b"\r\n\r\n" + body)
        except OSError:
            for s in (c, u):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def Store(h, **kw):
    """The store the tests run against: etcd, or PostgreSQL when
    SNOWID_STORE=postgres (the pg-* tests)."""
    return PgStore(h) if STORE == "postgres" else Etcd(h, **kw)


def store_args(store):
    """The daemon's (and snowid fence's) flags to reach a store, or etcd URLs."""
    if hasattr(store, "daemon_args"):
        return store.daemon_args()
    return ["--etcd", ",".join(store.urls) if hasattr(store, "urls") else store]


def kill_quietly(p):
    if p and p.poll() is None:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait(timeout=10)
        except Exception:
            pass


class Daemon:
    def __init__(self, h, etcd, instance=None, args=(), env=None, name="d", wrap=(), binary=None):
        self.h = h
        self.binary = binary or SNOWIDD
        self.wrap = list(wrap)
        self.name = name
        self.instance = instance or h.instance
        self.etcd = etcd
        self.args = list(args)
        self.env = env or {}
        self.proc = None
        self.messages = []

    def start(self, wait_ready=True, timeout=20):
        sock_path = self.h.path(f"notify-{self.name}-{time.monotonic_ns()}")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(sock_path)
        self.messages = []
        threading.Thread(target=self._drain, args=(self.sock, self.messages),
                         daemon=True).start()
        self.h.cleanup(self.sock.close)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path, **self.env)
        self.logf = self.h.path(f"{self.name}.log")
        cmd = self.wrap + [self.binary, "--config", "/dev/null", *store_args(self.etcd),
               "--instance", self.instance,
               "--runtime-dir", self.h.rundir, "--log-level", "debug",
               # the tests time outages against the window: a mark written
               # just window ahead (test_marks.py and the chaos test run the
               # default schedule)
               "--mark-step", "0"] + self.args
        with open(self.logf, "ab") as lf:
            self.proc = subprocess.Popen(cmd, env=env, stdout=lf, stderr=lf)
        self.h.cleanup(lambda p=self.proc: kill_quietly(p))
        # libfaketime's objects, left behind when the daemon is killed with -9
        for name in (f"faketime_shm_{self.proc.pid}", f"sem.faketime_sem_{self.proc.pid}"):
            self.h.cleanup(lambda f=os.path.join("/dev/shm", name):
                           os.path.exists(f) and os.unlink(f))
        if wait_ready:
            self.wait_message("READY=1", timeout)
        return self

    def _drain(self, sock, messages):
        # read all the time, as systemd does: a full socket would block sd_notify()
        while True:
            try:
                messages.append(sock.recv(4096).decode())
            except OSError:
                return

    def poll_messages(self):
        return self.messages

    def has_message(self, text):
        return any(text in m for m in self.poll_messages())

    def wait_message(self, text, timeout):
        def check():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                     + self.log_text())
            return self.has_message(text)
        wait_for(check, timeout, f"{self.name} to send {text}")

    def status(self):
        s = [m for m in self.poll_messages() if "STATUS=" in m]
        return s[-1] if s else ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout=10):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def log_text(self):
        with open(self.logf, errors="replace") as f:
            return f.read()


class Client:
    """A client process that prints {"started": true} once it takes IDs and,
    on SIGTERM, one JSON line of results."""

    def __init__(self, h, cmd, name):
        self.name = name
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        h.cleanup(lambda p=self.proc: kill_quietly(p))
        line = self.proc.stdout.readline()
        assert "started" in line, f"{name} did not start: {line!r}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}"
        self.result = json.loads(out.strip().splitlines()[-1])
        return self.result


class Taker(Client):
    def __init__(self, h, instance=None, threads=1, wait_us=100000, batch=1, name="c",
                 wrap=(), extra=()):
        self.prefix = h.path(f"ids-{name}")
        self.threads = threads
        cmd = list(wrap) + [TAKER, *extra, "-i", instance or h.instance, "-o", self.prefix,
                            "-t", str(threads), "-w", str(wait_us), "-b", str(batch)]
        super().__init__(h, cmd, f"taker {name}")

    def last_id(self, thread=0):
        """The newest ID thread wrote so far (its output is buffered), or None."""
        path = f"{self.prefix}.{thread}"
        size = os.path.getsize(path) // 8 * 8 if os.path.exists(path) else 0
        if size == 0:
            return None
        with open(path, "rb") as f:
            f.seek(size - 8)
            return struct.unpack("=Q", f.read(8))[0]

    def ids(self):
        out = []
        for t in range(self.threads):
            with open(f"{self.prefix}.{t}", "rb") as f:
                data = f.read()
            out.append(list(struct.unpack(f"={len(data) // 8}Q", data)))
        return out


def stage_for_others(h, build=BUILD):
    """The snowid command of build, and the libsnowid it loads, copied where
    any user can reach them, for a test that runs it as another user: the
    build tree may be out of their reach (a clone in root's 0700 home).
    (the command's path, the environment to run it with); removed at the
    end of the test."""
    d = tempfile.mkdtemp(prefix="snowid-for-others-", dir="/tmp")
    h.cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    os.chmod(d, 0o755)
    cmd = os.path.join(d, "snowid")
    shutil.copy(os.path.join(build, "cli", "snowid"), cmd)
    # the file the soname names (a symlink in the build: its target)
    shutil.copy(os.path.join(build, "libclient", "libsnowid.so.1"), d)
    # searched before the command's RUNPATH ($ORIGIN/../libclient)
    return cmd, dict(os.environ, LD_LIBRARY_PATH=d)


def take(instance, n=1, wait_ms=1000):
    r = subprocess.run([CLI, "next", "-n", str(n), "--instance", instance, "--wait",
                        str(wait_ms)], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"snowid next failed: {r.stderr}")
    return [int(x) for x in r.stdout.split()]


def try_take(instance, n=1, wait_ms=1000):
    """IDs, or None if snowid next failed (EAGAIN past the deadline...)."""
    r = subprocess.run([CLI, "next", "-n", str(n), "--instance", instance, "--wait",
                        str(wait_ms)], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()] if r.returncode == 0 else None


def cli(*args, timeout=30):
    """Runs build/cli/snowid; the CompletedProcess (text)."""
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)


def fence_lead_ms(line):
    """The lead a fence printed ("(+75.0 s from this host's clock"), in ms;
    None if the line has none."""
    m = re.search(r"\(([-+][0-9.]+) s from this host's clock", line)
    return int(float(m.group(1)) * 1000) if m else None


def fence(etcd, cluster, *args):
    """snowid fence on the cluster; asserts success; its one line.  Unless
    args say otherwise, --lost-lead 0: the test made no fence that the
    store lost."""
    if not any(a.startswith("--lost-lead") for a in args):
        args = args + ("--lost-lead", "0")
    r = cli("fence", *store_args(etcd), "--cluster", cluster, *args)
    assert r.returncode == 0, f"snowid fence: exit {r.returncode}: {r.stdout} {r.stderr}"
    line = r.stdout.strip()
    assert line.startswith("snowid fence:"), f"snowid fence printed {r.stdout!r}"
    log(line)
    return line


def cli_status(instance):
    """snowid status --instance: {field: value} of its 'field: value' lines."""
    r = cli("status", "--instance", instance)
    if r.returncode != 0:
        return {}
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def http_get(port, path, timeout=5):
    """(status, body text) of GET http://127.0.0.1:port/path; (None, error) if unreachable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return None, str(e)


def metric(port, name):
    """The value of one sample of /metrics (name with its labels, exactly), or None."""
    st, body = http_get(port, "/metrics")
    if st != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def mark(ms):
    """A mark as stored: 20-digit zero-padded decimal ms of ID time."""
    return f"{ms:020d}"


def id_time_now():
    """The wall clock in ID time (ms since EPOCH_MS)."""
    return int(time.time() * 1000) - EPOCH_MS


def lead_of(instance, worker_bits=10):
    """How far the instance's ID time runs ahead of the wall clock, in ms
    (the clock is read after the ID is taken: at most the true lead)."""
    return decode(take(instance)[0], worker_bits)[0] - id_time_now()


def past_deadline(lead, stored_mark):
    """Whether the clients of a daemon that was killed or stopped, whose ID
    time ran `lead` ms ahead of the wall clock, have passed its last deadline,
    given its mark read once it could write no more: a deadline is published
    only once the store has confirmed a mark at least as high, so that mark
    bounds every deadline the daemon published.  Half a second more for the
    clients' wait (100 ms) to run out."""
    return id_time_now() + lead > stored_mark + 500


def decode(i, worker_bits=10, seq_bits=12):
    return (i >> (worker_bits + seq_bits), (i >> seq_bits) & ((1 << worker_bits) - 1),
            i & ((1 << seq_bits) - 1))


def check_unique_and_increasing(lists):
    """Every ID once; each list (one client thread) strictly increasing."""
    seen = set()
    total = 0
    for n, ids in enumerate(lists):
        for a, b in zip(ids, ids[1:]):
            assert b > a, f"list {n}: {b} follows {a}"
        total += len(ids)
        seen.update(ids)
    assert len(seen) == total, f"{total - len(seen)} duplicate IDs among {total}"
    return total


class Harness:
    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"snowid-{name}-")
        self.instance = f"it-{name}-{os.getpid()}"
        # the daemons' sockets: a short path (a socket path fits 108 bytes),
        # writable by its owner only, as clients insist
        self.rundir = tempfile.mkdtemp(prefix="sr-")
        os.chmod(self.rundir, 0o755)
        os.environ["SNOWID_RUNTIME_DIR"] = self.rundir
        self._cleanups = []
        self.failed = False

    def path(self, p):
        return os.path.join(self.dir, p)

    def cleanup(self, fn):
        self._cleanups.append(fn)

    def close(self):
        for fn in reversed(self._cleanups):
            with contextlib.suppress(Exception):
                fn()
        shutil.rmtree(self.rundir, ignore_errors=True)
        if self.failed:
            log(f"files kept in {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True) if not os.environ.get("SNOWID_KEEP") else None


def run(tests, etcd=True):
    """Runs test functions, each with a harness of its own; TAP-like lines.
    etcd: the tests need etcd (all but the SQL-only test_pg_engine.py)."""
    if STORE == "postgres" and not os.path.exists("/usr/lib/postgresql/15/bin/postgres"):
        print("PostgreSQL 15 is not installed: skipping")
        sys.exit(77)
    if etcd and shutil.which("etcd") is None:
        print("etcd is not installed: skipping")
        sys.exit(77)
    failed = 0
    for fn in tests:
        h = Harness(fn.__name__.replace("test_", "").replace("_", "-")[:30])
        start = time.monotonic()
        try:
            fn(h)
            log(f"ok {fn.__name__} ({time.monotonic() - start:.1f} s)")
        except Exception as e:
            h.failed = True
            failed += 1
            import traceback
            traceback.print_exc()
            log(f"FAILED {fn.__name__}: {e}")
            for f in sorted(os.listdir(h.dir)):
                if f.endswith(".log") and not f.startswith("etcd"):
                    print(f"---- {f}\n" + open(h.path(f), errors="replace").read()[-4000:])
        finally:
            h.close()
    sys.exit(1 if failed else 0)
