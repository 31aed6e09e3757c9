# SPDX-License-Identifier: MIT
"""The chaos test: a 3-member etcd cluster and several hosts, each host a
network namespace of its own running snowidd and clients, while faults are
injected at random moments drawn from a seed.  At the end every ID taken is
checked: none twice, each client thread's IDs increasing, and each ID made
by a worker number its host held for that ID's time, by etcd's own history
(the history of every era: a restore from a snapshot loses what came after
the snapshot, so each era's history is read just before it ends).

With --store postgres one PostgreSQL 15 server takes etcd's place, and the
history is the one an audit trigger on snowid.numbers keeps (pg_history()).

    chaos.py [--store etcd|postgres] [--duration SEC] [--seed N] [--hosts N]
             [--build DIR] [--keep]

Needs root (ip netns).  Everything it makes (namespaces, processes,
segments) is removed however it ends; a failing run keeps its files and
prints the seed, with which the same faults are drawn again.
"""
import argparse
import base64
import json
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import (Client, Daemon, Etcd, Harness, Taker, b64, kill_quietly, log,  # noqa: E402
                     unb64, wait_for)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SUBNET = "10.231.0"
NS_PREFIX = "snowid-chaos-"
CLUSTER = "chaos"
LEASE_TTL_S = 4
WINDOW_S = 3
TIME_SHIFT = 22  # worker bits + sequence bits of the default layout
WORKER_MASK = 1023
PGBIN = os.environ.get("SNOWID_PGBIN", "/usr/lib/postgresql/15/bin")
PG_PORT = 5432
SCHEMA_SQL = os.path.join(HERE, "..", "..", "daemon", "store", "postgres.sql")


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


class Net:
    """A bridge in a namespace of its own (where the etcd members, or the
    PostgreSQL server, listen: one address each) and one namespace per host,
    joined to it by a veth pair."""

    def __init__(self, hosts, servers=3):
        self.tag = f"{NS_PREFIX}{os.getpid()}"
        self.core = f"{self.tag}-core"
        self.hosts = [f"{self.tag}-h{i}" for i in range(hosts)]
        self.servers = [f"{SUBNET}.{m + 1}" for m in range(servers)]
        self.made = []

    @staticmethod
    def remove_stale():
        """Namespaces left by a run that was killed outright."""
        for line in ip("netns", "list").stdout.splitlines():
            name = line.split()[0] if line.strip() else ""
            if not name.startswith(NS_PREFIX):
                continue
            pid = name[len(NS_PREFIX):].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                Net.remove(name)

    @staticmethod
    def remove(ns):
        pids = ip("netns", "pids", ns, check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGCONT)
                os.kill(int(p), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        ip("netns", "del", ns, check=False)

    def up(self):
        ip("netns", "add", self.core)
        self.made.append(self.core)
        ip("-n", self.core, "link", "set", "lo", "up")
        ip("-n", self.core, "link", "add", "br0", "type", "bridge")
        ip("-n", self.core, "link", "set", "br0", "up")
        for addr in self.servers:
            ip("-n", self.core, "addr", "add", f"{addr}/24", "dev", "br0")
        for i, ns in enumerate(self.hosts):
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", self.core, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            ip("-n", self.core, "link", "set", f"h{i}", "master", "br0")
            ip("-n", self.core, "link", "set", f"h{i}", "up")
            ip("-n", ns, "addr", "add", f"{SUBNET}.{11 + i}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")

    def down(self):
        for ns in reversed(self.made):
            self.remove(ns)
        self.made = []

    def wrap(self, ns):
        return ["ip", "netns", "exec", ns]

    # the two ways a host is cut off from its store
    def link(self, i, up):
        ip("-n", self.hosts[i], "link", "set", "eth0", "up" if up else "down")

    def blackhole(self, i, on):
        """Packets to the store's servers go to a MAC nobody has: silently lost."""
        for addr in self.servers:
            if on:
                ip("-n", self.hosts[i], "neigh", "replace", addr, "lladdr",
                   "02:00:00:00:de:ad", "nud", "permanent", "dev", "eth0")
            else:
                ip("-n", self.hosts[i], "neigh", "del", addr, "dev", "eth0", check=False)


def as_postgres(cmd):
    """cmd run as the postgres user (initdb and postgres refuse root); setpriv
    execs, so a process started this way is the server itself."""
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + cmd


def sql_literal(s):
    return "'" + s.replace("'", "''") + "'"


def process_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] == "Z"
    except (OSError, IndexError):
        return True


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(") ", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out


# Every write of a number's row (snowid.numbers: its mark and its holder),
# copied by a trigger into a table of the test's own in the writing
# transaction: what a rolled-back call wrote is not there, and what a
# committed one wrote is, as in etcd's MVCC history.  seq orders the rows of
# one number as their writes committed (each write holds the number's row
# from its trigger to its commit); a claim is a write that puts a lease and
# holder on the row other than those it had.  The trigger fires always (in
# the test's own writes too, made with session_replication_role = replica).
AUDIT_SQL = """
CREATE SCHEMA chaos;
CREATE TABLE chaos.audit (
        seq bigserial PRIMARY KEY,
        op text NOT NULL,
        cluster text NOT NULL,
        n int NOT NULL,
        mark bigint,
        mark_rev bigint,
        lease bigint,
        holder text,
        claim boolean NOT NULL
);
CREATE FUNCTION chaos.audit_numbers() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
        IF TG_OP = 'DELETE' THEN
                INSERT INTO chaos.audit (op, cluster, n, mark, mark_rev, lease, holder, claim)
                VALUES ('DELETE', OLD.cluster, OLD.n, OLD.mark, OLD.mark_rev, OLD.lease,
                        OLD.holder, false);
                RETURN OLD;
        END IF;
        INSERT INTO chaos.audit (op, cluster, n, mark, mark_rev, lease, holder, claim)
        VALUES (TG_OP, NEW.cluster, NEW.n, NEW.mark, NEW.mark_rev, NEW.lease, NEW.holder,
                NEW.lease IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.lease IS DISTINCT FROM OLD.lease
                                           OR NEW.holder IS DISTINCT FROM OLD.holder));
        RETURN NEW;
END $f$;
CREATE TRIGGER chaos_audit AFTER INSERT OR UPDATE OR DELETE ON snowid.numbers
        FOR EACH ROW EXECUTE FUNCTION chaos.audit_numbers();
ALTER TABLE snowid.numbers ENABLE ALWAYS TRIGGER chaos_audit;
"""


class _Psql:
    """What harness.PgStore's key methods run their SQL through, over the
    server's Unix socket."""

    def __init__(self, server):
        self.server = server

    def psql(self, sql, timeout=30, check=True, single=True):
        return self.server.psql(sql, timeout, single=single)

    def query_json(self, sql, timeout=30):
        return json.loads(self.server.psql(f"SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q",
                                           timeout))


class PgServer(harness.PgStore):
    """One PostgreSQL 15 server as the store, in the bridge's namespace on
    the first server address, port 5432: the hosts reach it over their veth
    as they would etcd's members (trust for the test network, no password).
    The test's own reads and writes (harness.PgStore's keys over the native
    tables) go through the server's Unix socket, which no host fault
    touches.  Its data dir outlives a kill -9 (crash recovery at the next
    start) and a stop."""

    n = 1

    def __init__(self, h, net):
        self.h = h
        self.pg = _Psql(self)
        self.dir = tempfile.mkdtemp(prefix="snowid-chaos-pg-")
        h.cleanup(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        pw = pwd.getpwnam("postgres")
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o755)
        data = os.path.join(self.dir, "data")
        r = subprocess.run(as_postgres([os.path.join(PGBIN, "initdb"), "-D", data, "-U",
                                        "postgres", "--auth=trust", "-E", "UTF8", "--locale=C",
                                        "--no-sync"]), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"initdb: exit {r.returncode}: {r.stderr.strip()}")
        with open(os.path.join(data, "pg_hba.conf"), "a") as f:
            f.write(f"host all postgres {SUBNET}.0/24 trust\n")
        addr = net.servers[0]
        self.conninfo = f"host={addr} port={PG_PORT} user=postgres dbname=postgres"
        self.pidfile = os.path.join(data, "postmaster.pid")
        # it stands for a machine of its own: here it shares two cores with
        # every host's daemon and clients, ahead of them
        self.cmd = net.wrap(net.core) + ["nice", "-n", "-10"] + as_postgres([
            os.path.join(PGBIN, "postgres"), "-D", data, "-h", addr, "-p", str(PG_PORT),
            "-k", self.dir,
            # a kill -9 of the server loses nothing the kernel was given; the
            # machine itself never crashes here
            "-c", "fsync=off",
            # a client gone with its link is dropped within about 15 s, as
            # etcd drops a stream nobody reads
            "-c", "tcp_keepalives_idle=10", "-c", "tcp_keepalives_interval=2",
            "-c", "tcp_keepalives_count=3",
            # what a restore or a fence waits for, in its log
            "-c", "log_lock_waits=on"])
        self.procs = [None]
        self.stopping = None  # (the server shutting down, when it is killed instead)
        self.starting = False  # start() waits for that shutdown to end
        self.start()
        self.wait_healthy()

    def daemon_args(self):
        return ["--store", "postgres", "--postgres", self.conninfo]

    def start(self, i=0):
        """Starts the server, at once or, while a fast shutdown is still under
        way, from step() once it has ended; it takes connections after its
        recovery."""
        self.starting = True
        self.step()

    def step(self):
        """A start waiting for a shutdown: made once the old server is gone.
        A shutdown not done STOP_S after it was asked for is cut short by
        kill -9, as an operator would."""
        if not self.starting:
            return
        if self.stopping is not None:
            p, at = self.stopping
            if p.poll() is None:
                if time.monotonic() < at + self.STOP_S:
                    return
                left = [self.cmdline(k) for k in children(p.pid)]
                log(f"PostgreSQL: fast shutdown not done in {self.STOP_S} s: killed; left: "
                    + ("; ".join(left) or "the postmaster alone"))
                self._kill(p)
            self.stopping = None
        self.starting = False
        logf = open(self.h.path("postgres.log"), "ab")
        p = subprocess.Popen(self.cmd, stdout=logf, stderr=logf)
        logf.close()
        self.procs[0] = p
        self.h.cleanup(lambda: self._kill(p))

    def _kill(self, p):
        if p.poll() is not None:
            return
        # stopped first, so that it starts no process while the others are listed
        p.send_signal(signal.SIGSTOP)
        kids = children(p.pid)
        for pid in [p.pid] + kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        wait_for(lambda: all(process_gone(k) for k in kids), 30,
                 "the killed PostgreSQL processes to go")
        # every process of the server is gone: a pid it names may be another's by now
        if os.path.exists(self.pidfile):
            os.unlink(self.pidfile)

    def kill(self, i=0, sig=signal.SIGKILL):
        """kill -9 of the server: the postmaster and every process it started
        at once; returns once all are gone."""
        assert sig == signal.SIGKILL
        p, self.procs[0] = self.procs[0], None
        if p is not None:
            self._kill(p)

    STOP_S = 15

    def stop(self):
        """A fast shutdown (clients told, open transactions rolled back, a
        checkpoint); start() waits for its end."""
        p, self.procs[0] = self.procs[0], None
        if p is not None:
            p.send_signal(signal.SIGINT)
            self.stopping = (p, time.monotonic())

    @staticmethod
    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                return f.read().replace("\0", " ").strip()
        except OSError:
            return f"{pid} (gone)"

    def healthy(self, i=0):
        return subprocess.run([os.path.join(PGBIN, "pg_isready"), "-q", "-h", self.dir, "-p",
                               str(PG_PORT), "-t", "1"], capture_output=True).returncode == 0

    def wait_healthy(self, timeout=30):
        wait_for(lambda: self.step() or self.healthy(), timeout,
                 "PostgreSQL to take connections", 0.1)

    def psql(self, sql, timeout=30, single=True):
        """sql as one query (psql -c), or split into statements (psql -f -)."""
        r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h",
                            self.dir, "-p", str(PG_PORT), "-U", "postgres", "-d", "postgres"]
                           + (["-c", sql] if single else ["-f", "-"]),
                           input=None if single else sql, capture_output=True, text=True,
                           timeout=timeout, env=dict(os.environ, PGCONNECT_TIMEOUT="5"))
        if r.returncode != 0:
            raise OSError(f"psql: exit {r.returncode}: {r.stderr.strip()[:500]}")
        return r.stdout

    def restore(self, path):
        """A backup (pg_dump) restored over the live schemas in one
        transaction: no daemon sees the schema half made, or absent (and
        makes it anew)."""
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
                            "-h", self.dir, "-p", str(PG_PORT), "-U", "postgres", "-d",
                            "postgres", "-c", "DROP SCHEMA snowid CASCADE", "-c",
                            "DROP SCHEMA chaos CASCADE", "-f", path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"restoring {path}: {r.stderr.strip()[:500]}")

    def put_back(self, copy):
        """An old copy of the data directory put back (a base backup): the
        server killed, its data directory replaced by the copy, started
        again; it recovers to the copy's end, on the same system identifier
        and timeline."""
        self.kill()
        data = os.path.join(self.dir, "data")
        shutil.rmtree(data)
        subprocess.run(["cp", "-a", copy, data], check=True)
        self.start()
        self.wait_healthy(60)

    def install_audit(self):
        """The schema, made as the daemons make it (daemon/store/postgres.sql, the
        file they embed), and the audit trigger on it before any daemon writes."""
        with open(SCHEMA_SQL) as f:
            self.psql(f.read(), timeout=60)
        self.psql(AUDIT_SQL)


class Host:
    def __init__(self, h, net, etcd, i, faketime_lib, log_level="info"):
        self.i = i
        self.name = f"h{i}"
        self.ns = net.hosts[i]
        self.instance = f"it-chaos{i}-{os.getpid()}"
        self.clock_file = h.path(f"faketime-h{i}")
        self.offset_s = 0.0
        self.set_clock(0.0)
        shim = os.path.join(harness.BUILD, "tests", "libtimerfd-shim.so")
        env = {"LD_PRELOAD": f"{shim} {faketime_lib}", "FAKETIME_TIMESTAMP_FILE": self.clock_file,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0",
               # every decision of the rules, replayed on them at the end
               "SNOWID_TRACE": h.path(f"trace-h{i}.txt")}
        self.daemon = Daemon(h, etcd, instance=self.instance, env=env, name=f"snowidd-h{i}",
                             wrap=net.wrap(self.ns),
                             args=["--cluster", CLUSTER, "--lease-ttl", str(LEASE_TTL_S),
                                   "--mark-step", "5",
                                   "--window", str(WINDOW_S), "--http", "127.0.0.1:7723",
                                   "--log-level", log_level])
        self.h = h
        self.net = net
        self.taker = None
        self.http = None
        self.busy_until = 0.0

    def set_clock(self, offset_s):
        self.offset_s = offset_s
        with open(self.clock_file + ".tmp", "w") as f:
            f.write(f"{offset_s:+.3f}\n")
        os.rename(self.clock_file + ".tmp", self.clock_file)

    def start_clients(self, rate):
        self.taker = Taker(self.h, instance=self.instance, threads=2, wait_us=100000,
                           name=f"h{self.i}-lib", wrap=self.net.wrap(self.ns),
                           extra=["-r", str(rate), "-g", "5"])
        out = self.h.path(f"ids-h{self.i}-http")
        self.http = Client(self.h, self.net.wrap(self.ns) + [
            sys.executable, os.path.join(HERE, "http_client.py"), "--port", "7723", "--out", out,
            "--gap-ms", "50"], f"http client h{self.i}")

    def stop_clients(self):
        return self.taker.stop(), self.http.stop()

    def id_files(self):
        return ([(f"h{self.i}-lib.{t}", f"{self.taker.prefix}.{t}") for t in range(2)]
                + [(f"h{self.i}-http", self.h.path(f"ids-h{self.i}-http.0"))])


def mono_ms():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000


def flag_value(cmd, name):
    return cmd[cmd.index(name) + 1]


class Chaos:
    KINDS = ["daemon-kill9", "daemon-sigstop", "link-down-short", "link-down-long",
             "drop-short", "drop-long", "etcd-kill", "etcd-kill-leader", "clock-step",
             "etcd-restore", "mark-delete", "layout-delete"]
    ETCD_MEMBER = ("etcd-kill", "etcd-kill-leader")  # one member down at a time
    CLUSTER_WIDE = ("clock-step", "etcd-restore", "pg-restore", "pg-olddir", "mark-delete",
                    "layout-delete")
    # with PostgreSQL: its one server killed or stopped in place of etcd's
    # members (no leader); a backup (pg_dump) restored in place of a
    # snapshot, or an old copy of the data directory (pg_basebackup) put back
    PG_KINDS = ["daemon-kill9", "daemon-sigstop", "link-down-short", "link-down-long",
                "drop-short", "drop-long", "pg-kill9", "pg-stop-short", "pg-stop-long",
                "clock-step", "pg-restore", "pg-olddir", "mark-delete", "layout-delete"]
    RESTORES = ("etcd-restore", "pg-restore", "pg-olddir")
    PG_SERVER = ("pg-kill9", "pg-stop-short", "pg-stop-long")
    STORE_CONTENTS = ("mark-delete", "layout-delete")

    @classmethod
    def kinds_of(cls, store):
        return cls.PG_KINDS if store == "postgres" else cls.KINDS
    SNAPSHOT_EVERY = (20, 40)  # seconds between etcdctl snapshot saves
    SNAPSHOT_MIN_AGE = 5  # a restore uses a snapshot at least this old

    def __init__(self, h, net, etcd, hosts, rng, kinds=None, seed=0):
        self.h, self.net, self.etcd, self.hosts, self.rng = h, net, etcd, hosts, rng
        self.pg = isinstance(etcd, PgServer)
        self.all_kinds = self.kinds_of("postgres" if self.pg else "etcd")
        self.kinds = kinds or self.all_kinds
        self.heals = []  # (at, what, fn, host index or None, kind)
        self.healed = []  # (host index, kind, CLOCK_MONOTONIC ms): a host fault ended
        self.began = []  # (host index, CLOCK_MONOTONIC ms): a fault that stops a host began
        self.counts = {k: 0 for k in self.all_kinds}
        self.failed = {}  # kind: faults that could not be made (a request etcd refused)
        self.answers_lost = 0  # layout-deletes whose answer was lost (fenced as if made)
        self.etcd_busy = False  # a member, or the PostgreSQL server, is down
        self.fence_pending = False  # the layout is deleted; snowid fence is yet to run
        self.holding_starts = False  # a restore is under way: daemons are started after it
        # etcd's history, one entry per era that a restore ended: (base, events),
        # base the revision of the snapshot the era was restored from (0: none)
        self.eras = []
        self.base = 0
        self.restores = []  # (seconds kill to healthy, seconds kill to fenced)
        self.fence_leads = []  # (when, the lead it printed, ms): every fence that succeeded
        self.fences = []  # snowid fence's output lines
        # snapshots: a second generator, so that taking them draws nothing from rng
        self.snap_rng = random.Random(seed ^ 0x5eed)
        self.snaps = []  # (monotonic time taken, path, revision), newest last
        # PostgreSQL: copies of the data directory (pg_basebackup), made
        # after each backup: (monotonic time taken, path, None), newest last
        self.dirs = []
        self.snap_proc = None
        self.snap_seq = 0
        self.next_snap = (time.monotonic() + self.snap_rng.uniform(1, 10)
                          if set(self.RESTORES) & set(self.kinds) else float("inf"))
        self.mismatches = []  # what pg_history() found wrong in the audit rows of an era
        self.start = time.monotonic()
        self.start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def note(self, msg):
        log(f"+{time.monotonic() - self.start:7.1f} s  {msg}")

    def later(self, delay, what, fn, host=None, kind=None):
        self.heals.append((time.monotonic() + delay, what, fn, host, kind))

    def heal_due(self, everything=False):
        now = time.monotonic()
        keep = []
        for heal in self.heals:
            at, what, fn, host, kind = heal
            if kind == "daemon-kill9" and self.holding_starts:
                # the restore procedure: no daemon starts between the restore
                # and the fence (a daemon that starts then sees nothing odd)
                keep.append(heal)
            elif everything or at <= now:
                self.note(f"heal: {what}")
                fn()
                if host is not None:
                    self.healed.append((host, kind, time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                                        // 1000000))
            else:
                keep.append(heal)
        self.heals = keep

    def inject(self):
        """One fault, of a kind drawn among those that can be made now (one
        etcd member down at a time, one fault at a time on a host)."""
        rng = self.rng
        now = time.monotonic()
        free = [h for h in self.hosts if h.busy_until <= now]

        def can(k):
            if k in self.ETCD_MEMBER:
                return not self.etcd_busy
            if k in self.PG_SERVER:  # not while a fence waits: it needs the server
                return not self.etcd_busy and not self.fence_pending and not self.etcd.starting
            if k in ("pg-restore", "pg-olddir"):  # the server up, the layout there, a backup
                return (not self.etcd_busy and not self.etcd.starting and not self.fence_pending
                        and self.snapshot(k) is not None)
            if self.pg and k in self.STORE_CONTENTS and self.etcd_busy:
                return False
            if k == "etcd-restore":  # every member up, the layout there, a snapshot old enough
                return (not self.etcd_busy and not self.fence_pending
                        and self.snapshot(k) is not None)
            if k == "layout-delete":
                return not self.fence_pending
            return k in self.CLUSTER_WIDE or bool(free)
        kinds = [k for k in self.kinds if can(k)]
        if not kinds:
            return
        kind = rng.choice(kinds)
        host = rng.choice(self.hosts if kind in self.CLUSTER_WIDE else free or self.hosts)
        if kind in self.RESTORES:
            if not self.restore(kind):
                return
        elif kind == "mark-delete":
            if not self.mark_delete(kind, rng.random(), rng.random()):
                return
        elif kind == "layout-delete":
            if not self.layout_delete(kind, rng.uniform(1, 5)):
                return
        elif kind in self.ETCD_MEMBER:
            if kind == "etcd-kill-leader":
                lead = self.etcd.leader()
                if not lead:
                    return
                m = lead - 1
            else:
                m = rng.randrange(3)
            down = rng.uniform(0.5, 4)
            self.note(f"{kind}: member m{m}, restarted after {down:.1f} s")
            self.etcd.kill(m)
            self.etcd_busy = True

            def restart(m=m):
                self.etcd.start(m)
                self.etcd_busy = False
            self.later(down, f"etcd member m{m} restarted", restart)
        elif kind in self.PG_SERVER:
            self.server_fault(kind)
        elif kind == "clock-step":
            scale = rng.choice(["ms", "s", "h"])
            mag = {"ms": rng.uniform(0.001, 0.999), "s": rng.uniform(1, 60),
                   "h": rng.uniform(1, 3) * 3600}[scale]
            step = mag if rng.random() < 0.5 else -mag
            if abs(host.offset_s + step) > 4 * 3600:
                step = -step
            self.note(f"{kind}: {host.name} clock {step:+.3f} s (now {host.offset_s + step:+.3f})")
            host.set_clock(host.offset_s + step)
        else:
            self.began.append((host.i, time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000))
            d = host.daemon
            if kind == "daemon-kill9":
                down = rng.uniform(0.1, 3)
                self.note(f"{kind}: {host.name}, restarted after {down:.1f} s")
                d.kill9()
                self.later(down, f"{host.name} daemon restarted",
                           lambda: d.start(wait_ready=False), host.i, kind)
            elif kind == "daemon-sigstop":
                down = LEASE_TTL_S + rng.uniform(1, 4)
                self.note(f"{kind}: {host.name} for {down:.1f} s (lease {LEASE_TTL_S} s)")
                d.signal(signal.SIGSTOP)
                self.later(down, f"{host.name} daemon continued",
                           lambda: d.signal(signal.SIGCONT), host.i, kind)
            else:
                short = kind.endswith("short")
                down = rng.uniform(0.2, WINDOW_S - 0.5) if short else WINDOW_S + rng.uniform(1, 6)
                cut = self.net.link if kind.startswith("link") else (
                    lambda i, up: self.net.blackhole(i, not up))
                self.note(f"{kind}: {host.name} cut off from its store for {down:.1f} s "
                          f"(window {WINDOW_S} s)")
                cut(host.i, False)
                self.later(down, f"{host.name} reconnected", lambda: cut(host.i, True), host.i,
                           kind)
            host.busy_until = now + down + 0.5
        self.counts[kind] += 1

    def run(self, duration, mean_interval):
        end = time.monotonic() + duration
        next_at = time.monotonic() + self.rng.expovariate(1 / mean_interval)
        while time.monotonic() < end:
            self.heal_due()
            self.snapshot_step()
            if self.pg:
                self.etcd.step()
            if time.monotonic() >= next_at:
                self.inject()
                next_at = time.monotonic() + self.rng.expovariate(1 / mean_interval)
            time.sleep(0.02)
        self.heal_due(everything=True)
        self.snapshot_stop()

    def server_fault(self, kind):
        """The one PostgreSQL server killed (-9) or stopped (a fast shutdown),
        started again later: shorter than the window, or longer (the leases
        run out on the server's clock meanwhile).  Every host loses its store."""
        rng = self.rng
        if kind == "pg-kill9":
            down = rng.uniform(0.5, 4)
        elif kind == "pg-stop-short":
            down = rng.uniform(0.2, WINDOW_S - 1.5)
        else:
            down = WINDOW_S + rng.uniform(1, 6)
        how = "killed (-9)" if kind == "pg-kill9" else "stopped (fast shutdown)"
        self.note(f"{kind}: PostgreSQL {how}, started again after {down:.1f} s "
                  f"(window {WINDOW_S} s, lease {LEASE_TTL_S} s)")
        self.all_hosts_stop()
        if kind == "pg-kill9":
            self.etcd.kill()
        else:
            self.etcd.stop()
        self.etcd_busy = True

        def restart():
            self.etcd.start()
            self.etcd_busy = False
            self.all_hosts_healed(kind)
        self.later(down, "PostgreSQL started", restart)

    # ---- the faults of etcd's contents

    def fail(self, kind, why):
        self.note(f"{kind}: not made: {why}")
        self.failed[kind] = self.failed.get(kind, 0) + 1
        return False

    def all_hosts_stop(self):
        t = mono_ms()
        self.began += [(host.i, t) for host in self.hosts]

    def all_hosts_healed(self, kind):
        t = mono_ms()
        self.healed += [(host.i, kind, t) for host in self.hosts]

    def mark_delete(self, kind, r1, r2):
        """Deletes one hwm/<n>: half the time one whose number is held now."""
        p = f"/snowid/{CLUSTER}/"
        try:
            keys = self.etcd.prefix(p)
        except Exception as e:
            return self.fail(kind, f"cannot read the keys: {e}")
        marks = sorted(k for k in keys if k.startswith(p + "hwm/"))
        held = [k for k in marks if p + "workers/" + k[len(p + "hwm/"):] in keys]
        pool = held if held and r1 < 0.5 else marks
        if not pool:
            return self.fail(kind, "no mark yet")
        key = pool[int(r2 * len(pool))]
        if self.pg:
            # the number's row: its mark, and its holder with it
            try:
                prev = self.etcd.delete(key)
            except Exception as e:
                return self.fail(kind, f"{key}: {e}")
            self.note(f"{kind}: {key[len(p):]} ({'held' if key in held else 'free'}, "
                      f"was {prev or 'already gone'}; its row deleted, the holder with it)")
            return True
        try:
            r = self.etcd.call("/v3/kv/deleterange", {"key": b64(key), "prev_kv": True})
        except Exception as e:
            return self.fail(kind, f"{key}: {e}")
        prev = [unb64(kv.get("value", "")) for kv in r.get("prev_kvs", [])]
        self.note(f"{kind}: {key[len(p):]} ({'held' if key in held else 'free'}, "
                  f"was {prev[0] if prev else 'already gone'}; revision {r['header']['revision']})")
        return True

    def fence(self, why, tries=5, since=None):
        """snowid fence, in the namespace of the etcd members, run again (as
        an operator would) while it fails.  True if it succeeded.  since:
        when the snapshot restored was taken (monotonic): the fences made
        after it are lost, and the lead the last of them printed (which
        carries those before it) is passed as --lost-lead, as the
        procedure tells an operator to."""
        lost = max((lead for t, lead in self.fence_leads if since is not None and t > since),
                   default=0)
        for _ in range(tries):
            if self.fence_once(why, lost):
                return True
            time.sleep(1)  # not wait_healing(): a fence may run from heal_due()
        self.note(f"snowid fence ({why}): failed {tries} times; the daemons wait for a fence")
        return False

    def fence_once(self, why, lost_ms=0):
        cmd = self.net.wrap(self.net.core) + [
            harness.CLI, "fence", "--config", "/dev/null", *harness.store_args(self.etcd),
            "--cluster", CLUSTER, "--window", str(WINDOW_S), "--lost-lead", str(lost_ms)]
        t = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                               env=dict(os.environ, SNOWID_TRACE=self.h.path("trace-fence.txt")))
        except subprocess.TimeoutExpired:
            self.note(f"snowid fence ({why}): no answer in 30 s")
            self.fences.append(f"{why}: timed out")
            return False
        out = " | ".join(x for x in (r.stdout.strip() + "\n" + r.stderr.strip()).splitlines() if x)
        self.note(f"snowid fence ({why}): exit {r.returncode} in {time.monotonic() - t:.2f} s: "
                  f"{out}")
        self.fences.append(f"{why}: exit {r.returncode}: {out}")
        if r.returncode != 0:
            self.failed["fence"] = self.failed.get("fence", 0) + 1
        else:
            lead = harness.fence_lead_ms(r.stdout)
            self.fence_leads.append((time.monotonic(), lead + 1000 if lead is not None else 0))
        return r.returncode == 0

    def layout_delete(self, kind, after):
        key = f"/snowid/{CLUSTER}/layout"
        try:
            if self.pg:
                # the layout's columns of the cluster's row
                r = {"deleted": int(self.etcd.delete(key) is not None),
                     "header": {"revision": self.etcd.revision()}}
            else:
                r = self.etcd.call("/v3/kv/deleterange", {"key": b64(key)})
        except Exception as e:
            # the answer is lost, not the delete: it may have committed (a
            # store stopped or killed just after it).  An operator who cannot
            # tell fences, which is harmless if the layout is still there
            self.answers_lost += 1
            self.note(f"{kind}: no answer ({e}); perhaps deleted: snowid fence after "
                      f"{after:.1f} s")
            r = None
        if r is not None:
            self.note(f"{kind}: deleted ({r.get('deleted', 0)} key, revision "
                      f"{r['header']['revision']}); snowid fence after {after:.1f} s")
        self.all_hosts_stop()
        self.fence_pending = True

        def fence():
            self.fence("layout deleted")
            self.fence_pending = False
            self.all_hosts_healed(kind)
        self.later(after, "snowid fence (layout deleted)", fence)
        return True

    # snapshots: one every SNAPSHOT_EVERY seconds, the newest two kept

    def snapshot_step(self):
        """etcdctl snapshot save, or with PostgreSQL a backup: pg_dump of the
        schemas snowid and chaos (the audit table with them, so that the
        restored history repeats the past the backup holds, as a restored
        etcd's does)."""
        now = time.monotonic()
        what, tool = ("PostgreSQL backup", "pg_dump") if self.pg else ("etcd snapshot", "etcdctl")
        if self.snap_proc is not None:
            if self.pg and self.snap_path.endswith(".dir"):
                what, tool = "PostgreSQL data directory copy", "pg_basebackup"
            if self.snap_proc.poll() is None:
                if now - self.snap_started > 20:
                    self.snapshot_stop()
                    self.note(f"{what}: no answer in 20 s")
                return
            p, path, self.snap_proc = self.snap_proc, self.snap_path, None
            if p.returncode != 0:
                self.note(f"{what}: {tool} exit {p.returncode}")
                if path.endswith(".dir"):
                    shutil.rmtree(path, ignore_errors=True)
                return
            if self.pg and path.endswith(".dir"):
                self.dirs.append((self.snap_started, path, None))
                for _, old, _ in self.dirs[:-2]:
                    shutil.rmtree(old, ignore_errors=True)
                self.dirs = self.dirs[-2:]
                self.note(f"data directory copied ({time.monotonic() - self.snap_started:.2f} s)")
                return
            if self.pg:
                rev, err = backup_audit_seq(path), ""
            else:
                st = subprocess.run(["etcdctl", "snapshot", "status", path, "-w", "json"],
                                    capture_output=True, text=True)
                try:
                    rev = int(json.loads(st.stdout)["revision"])
                except (ValueError, KeyError):
                    rev, err = None, st.stderr.strip()
            if rev is None:
                self.note(f"{what}: cannot read {path}: {err}")
                return
            self.snaps.append((self.snap_started, path, rev))
            for _, old, _ in self.snaps[:-2]:
                os.unlink(old)
            self.snaps = self.snaps[-2:]
            self.note(f"{what} at {'audit row' if self.pg else 'revision'} {rev} "
                      f"({time.monotonic() - self.snap_started:.2f} s)")
            if self.pg and "pg-olddir" in self.kinds:
                # a copy of the data directory, right after the backup
                self.snap_started = time.monotonic()
                # (beside the server's own, the postgres user's to write)
                self.snap_path = os.path.join(self.etcd.dir, f"copy-{self.snap_seq}.dir")
                self.snap_proc = subprocess.Popen(
                    as_postgres(["pg_basebackup", "-h", self.etcd.dir, "-p", str(PG_PORT),
                                 "-U", "postgres", "-D", self.snap_path, "-X", "fetch", "-c",
                                 "fast", "--no-sync"]),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    env=dict(os.environ, PGCONNECT_TIMEOUT="5"))
                return
        if now < self.next_snap:
            return
        self.next_snap = now + self.snap_rng.uniform(*self.SNAPSHOT_EVERY)
        up = [m for m in range(self.etcd.n) if self.etcd.procs[m]]
        if not up:
            return
        self.snap_seq += 1
        self.snap_started = now
        if self.pg:
            self.snap_path = self.h.path(f"pg-backup-{self.snap_seq}.sql")
            self.snap_proc = subprocess.Popen(
                ["pg_dump", "-h", self.etcd.dir, "-p", str(PG_PORT), "-U", "postgres", "-d",
                 "postgres", "-n", "snowid", "-n", "chaos", "-f", self.snap_path],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(os.environ, PGCONNECT_TIMEOUT="5"))
            return
        self.snap_path = self.h.path(f"etcd-snapshot-{self.snap_seq}.db")
        self.snap_proc = subprocess.Popen(
            self.net.wrap(self.net.core) + ["etcdctl", "--endpoints", self.etcd.urls[up[0]],
                                            "--command-timeout", "15s", "snapshot", "save",
                                            self.snap_path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def snapshot_stop(self):
        if self.snap_proc is not None:
            kill_quietly(self.snap_proc)
            self.snap_proc = None
            if self.snap_path.endswith(".dir"):  # a copy cut short
                shutil.rmtree(self.snap_path, ignore_errors=True)

    def snapshot(self, kind):
        """The newest snapshot for a restore of that kind at least
        SNAPSHOT_MIN_AGE old: (taken, path, revision; None for a copy of
        PostgreSQL's data directory)."""
        now = time.monotonic()
        old = [s for s in (self.dirs if kind == "pg-olddir" else self.snaps)
               if now - s[0] >= self.SNAPSHOT_MIN_AGE]
        return old[-1] if old else None

    def cut_all(self, cut):
        """Every host's veth, at the bridge's end: no packet either way."""
        for i in range(len(self.hosts)):
            ip("-n", self.net.core, "link", "set", f"h{i}", "down" if cut else "up")

    def wait_healing(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.heal_due()
            time.sleep(0.02)

    def restore(self, kind):
        """etcd restored from a snapshot on every member, then fenced; or
        PostgreSQL's schema from a backup, over the live one in one
        transaction, then fenced."""
        taken, path, rev = self.snapshot(kind)
        self.restore_taken = taken
        age = time.monotonic() - taken
        delay = self.rng.uniform(0, 3)
        if kind == "pg-olddir":
            self.note(f"{kind}: the data directory copied {age:.1f} s ago put back; "
                      f"snowid fence {delay:.1f} s after it")
        elif self.pg:
            self.note(f"{kind}: from the backup at audit row {rev} ({age:.1f} s old); "
                      f"snowid fence {delay:.1f} s after it")
        else:
            self.note(f"{kind}: from the snapshot at revision {rev} ({age:.1f} s old); "
                      f"snowid fence {delay:.1f} s after etcd is back")
        self.snapshot_stop()
        # The history of the era that ends: every write any daemon saw
        # acknowledged must be in it.  Cut the hosts off, let what etcd
        # already has be applied, read the history, and kill the members
        # only if no revision came after it.
        self.holding_starts = True
        self.all_hosts_stop()
        self.cut_all(True)
        try:
            time.sleep(0.3)
            events = None
            for attempt in range(5):
                try:
                    if self.pg:
                        # the history's order is the audit rows' (seq)
                        events, _, bad, read = pg_history(self.etcd)
                        head = pg_audit_head(self.etcd)
                    else:
                        events, _ = etcd_history(self.etcd, self.net)
                        read = max((e[0] for e in events), default=0)
                        head = int(self.etcd.call("/v3/kv/range", {"key": b64("\0"), "limit": 1},
                                                  timeout=30)["header"]["revision"])
                except (OSError, subprocess.TimeoutExpired) as e:
                    # the store busy or still starting: the test's own read
                    # is tried again, the run goes on
                    self.note(f"{kind}: reading the history failed ({str(e)[:120]}); again")
                    time.sleep(1)
                    continue
                if head <= read:
                    break
                self.note(f"{kind}: {'audit row' if self.pg else 'revision'} {head} came after "
                          f"the history was read; again")
            else:
                if events is None:
                    raise OSError(f"{kind}: the history could not be read in 5 tries")
                self.note(f"{kind}: etcd's revision kept moving with every host cut off; "
                          f"a write acknowledged after the history was read may be missed")
            t0 = time.monotonic()
            if kind == "pg-olddir":
                # while every host is still cut off: the history the copy
                # holds ends at its newest audit row
                self.etcd.put_back(path)
                rev = pg_audit_head(self.etcd)
                self.mismatches += bad
            elif self.pg:
                # while every host is still cut off: no write after the
                # history was read
                self.etcd.restore(path)
                self.mismatches += bad
            else:
                self.etcd.stop_all()
        finally:
            self.cut_all(False)
        self.eras.append((self.base, events))
        self.base = rev
        if self.pg:
            return self.restored(kind, events, t0, delay)
        self.note(f"{kind}: era {len(self.eras)} ended at revision "
                  f"{max((e[0] for e in events), default=0)} ({len(events)} events); "
                  f"members killed; restoring")
        # the procedure (docs/fences.md): a new cluster token, so a new
        # cluster ID, which no daemon acts on until the fence names it
        token = f"{flag_value(self.etcd.cmds[0], '--initial-cluster-token').split('-r')[0]}" \
                f"-r{len(self.eras)}"
        for m in range(self.etcd.n):
            cmd = self.etcd.cmds[m]
            cmd[cmd.index("--initial-cluster-token") + 1] = token
            data = flag_value(cmd, "--data-dir")
            subprocess.run(["rm", "-rf", data], check=True)
            r = subprocess.run(
                ["etcdctl", "snapshot", "restore", path, "--name", flag_value(cmd, "--name"),
                 "--data-dir", data,
                 "--initial-cluster", flag_value(cmd, "--initial-cluster"),
                 "--initial-cluster-token", token,
                 "--initial-advertise-peer-urls", flag_value(cmd, "--initial-advertise-peer-urls")],
                capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"etcdctl snapshot restore m{m}: {r.stderr.strip()}")
        for m in range(self.etcd.n):
            self.etcd.start(m)
        self.etcd.wait_healthy(60)
        healthy = time.monotonic() - t0
        self.note(f"{kind}: etcd healthy again {healthy:.1f} s after the kill")
        return self.restored(kind, events, t0, delay, healthy)

    def restored(self, kind, events, t0, delay, healthy=None):
        if healthy is None:
            healthy = time.monotonic() - t0
            self.note(f"{kind}: era {len(self.eras)} ended at audit row "
                      f"{max((e[0] for e in events), default=0)} ({len(events)} events); "
                      f"restored in {healthy:.1f} s")
        self.snaps = []  # the next restore: from a snapshot of this era
        for _, old, _ in self.dirs:
            shutil.rmtree(old, ignore_errors=True)
        self.dirs = []
        self.next_snap = time.monotonic() + self.snap_rng.uniform(*self.SNAPSHOT_EVERY)
        self.wait_healing(delay)
        self.fence("PostgreSQL restored" if self.pg else "etcd restored",
                   since=self.restore_taken)
        self.restores.append((healthy, time.monotonic() - t0))
        self.holding_starts = False
        self.all_hosts_healed(kind)
        return True


def etcd_history(etcd, net):
    """Every event under the cluster's prefix since revision 1, from etcd's
    watch: a list of (revision, type, key, value)."""
    prefix = f"/snowid/{CLUSTER}/"
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    now = etcd.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end), "limit": 1})
    head = int(now["header"]["revision"])
    body = json.dumps({"create_request": {"key": b64(prefix), "range_end": b64(end),
                                          "start_revision": 1}})
    p = subprocess.Popen(net.wrap(net.core) + ["curl", "-sN", "--max-time", "120",
                                               etcd.urls[0] + "/v3/watch", "-d", body],
                         stdout=subprocess.PIPE, text=True)
    events = []
    last = 0
    try:
        # one JSON answer a line; the answer that creates the watch carries the
        # current revision in its header, so only the events' own revisions
        # tell how far it has come (curl's --max-time bounds the wait)
        for line in p.stdout:
            for ev in json.loads(line).get("result", {}).get("events", []) if line.strip() else []:
                kv = ev["kv"]
                rev = int(kv.get("mod_revision", 0))
                events.append((rev, ev.get("type", "PUT"), unb64(kv["key"]),
                               unb64(kv["value"]) if kv.get("value") else ""))
                last = max(last, rev)
            if last >= head:
                break
    finally:
        kill_quietly(p)
    assert last >= head, f"etcd's history stopped at revision {last} of {head}"
    return events, prefix


def text(b64s):
    return base64.b64decode(b64s).decode(errors="replace")


def audit_events(rows, prefix):
    """The audit table's rows (AUDIT_SQL), [seq, op, cluster, n, mark,
    mark_rev, lease, holder, claim] in the order they were written, as
    etcd_history()'s events under prefix, each with the row's seq for its
    revision: a claim puts workers/<n> (its holder) and hwm/<n> at one seq,
    any other write of the mark puts hwm/<n>, a deleted row deletes hwm/<n>;
    a write that changes neither the mark's revision nor the holder is no
    event.  And [mismatches]: a number whose mark's revision does not go up
    with every write of it (postgres.sql: a write of a row takes its
    revision once it holds the row, so later writes of it take higher ones)."""
    bad = []
    cluster = prefix.split("/")[2]
    events, rev_of = [], {}
    for seq, op, c, n, mark, mark_rev, lease, holder, claim in rows:
        if c != cluster:
            continue
        key = f"{prefix}hwm/{n}"
        if op == "DELETE":
            events.append((seq, "DELETE", key, ""))
            continue
        last = rev_of.get(n)
        if last is not None and mark_rev < last:
            bad.append(f"number {n}: mark revision {mark_rev} written after {last} "
                       f"(audit row {seq})")
        rev_of[n] = max(mark_rev, last or 0)
        if claim:
            events.append((seq, "PUT", f"{prefix}workers/{n}", holder))
        if claim or last is None or mark_rev != last:
            events.append((seq, "PUT", key, "%020d" % mark))
    return events, bad


def backup_audit_seq(path):
    """The highest audit row a pg_dump holds (its COPY chaos.audit block):
    the era the backup starts goes on from there (0: the table empty); None
    if the file holds no such block or cannot be read."""
    try:
        with open(path) as f:
            cols, top = None, 0
            for line in f:
                if cols is None:
                    if line.startswith("COPY chaos.audit "):
                        cols = [c.strip() for c in
                                line[line.index("(") + 1:line.index(")")].split(",")]
                    continue
                if line.startswith("\\."):
                    return top
                top = max(top, int(line.rstrip("\n").split("\t")[cols.index("seq")]))
    except (OSError, ValueError):
        return None
    return None


def pg_audit_head(pg):
    """The newest audit row's seq."""
    return int(pg.psql("SELECT coalesce(max(seq), 0) FROM chaos.audit").strip())


def pg_history(pg):
    """etcd_history() for PostgreSQL: every write under the cluster's prefix
    since the schema was made, from the audit trigger's table (AUDIT_SQL):
    (events, prefix, [mismatches], the newest audit row read)."""
    prefix = f"/snowid/{CLUSTER}/"
    rows = json.loads(pg.psql(
        "SELECT coalesce(json_agg(json_build_array(seq, op, cluster, n, mark, mark_rev, lease, "
        "holder, claim) ORDER BY seq), '[]') FROM chaos.audit", timeout=120))
    events, bad = audit_events(rows, prefix)
    return events, prefix, bad, max((r[0] for r in rows), default=0)


def timeline(eras, repeats_some=False):
    """etcd's history across restores, in the order things happened.  eras:
    [(base, events)], one per era in order, events as etcd_history() gives
    them; base is the revision of the snapshot the era was restored from (0
    for the first).  An era's history repeats, up to its base, the history
    of the era the snapshot was taken in, and goes on with revisions of its
    own; what the era before it had after that revision was acknowledged and
    then lost, and came before.  Returns (the eras' own events, each list in
    revision order with claims first within a revision, [mismatches]): a
    mismatch is an era whose repeated part differs from the era before's.
    repeats_some: PostgreSQL's, ordered by audit row, whose backup holds the
    rows committed before the dump began, not every row below the highest
    it holds (one written earlier may commit later): the repeated part must
    be of the era before's, not all of it."""
    out, bad = [], []
    for k, (base, events) in enumerate(eras):
        # the claim writes workers/n and the mark in one transaction (one
        # revision): the claim first, whatever order the transaction puts them in
        order = sorted(events, key=lambda e: (e[0], 0 if "/workers/" in e[2] else 1))
        if k > 0:
            before = [e for e in eras[k - 1][1] if e[0] <= base]
            again = [e for e in events if e[0] <= base]
            if (repeats_some and any(e not in set(before) for e in again)) or \
                    (not repeats_some and before != again):
                bad.append(f"era {k}: its history up to the snapshot's revision {base} "
                           f"({len(again)} events) differs from era {k - 1}'s ({len(before)})")
        out.append([e for e in order if e[0] > base])
    return out, bad


def holdings(eras, prefix, instances):
    """For each host, its holdings as (worker, low, high): IDs of that worker
    whose time t has low < t <= high.  eras: [(base, events)] (see timeline()),
    or one era's events.

    A claim writes workers/n and the mark in one transaction, guarded on the
    mark not having moved since it was read; renewals are guarded on the
    claim's lease, so every mark written between two claims belongs to the
    first of them.  A holding runs from the highest mark n ever had before
    its claim (a mark deleted, or lost in a restore, still fences n: its
    holder may have used IDs up to it) to the highest mark written for n
    before the next claim of n, in any era: the marks a holder wrote after
    the snapshot were acknowledged, and its clients used them, even though
    the restored etcd forgot them.  Any write of the mark fences n up to its
    value, whoever made it, so each raises the open holding's high; a write
    that is no claim and no renewal (a daemon raising a deleted or lost mark
    again) writes a value it had acknowledged, so it raises nothing beyond a
    mark already seen.  DELETEs, and the keys that are neither workers/ nor
    hwm/ (layout, fence, floor), change no holding."""
    if eras and not isinstance(eras[0][1], list):
        eras = [(0, eras)]
    host_of = {inst: i for i, inst in enumerate(instances)}
    mark = {}  # n: the highest mark ever written
    open_ = {}
    out = {i: [] for i in range(len(instances))}
    for events in timeline(eras)[0]:
        for rev, typ, key, value in events:
            rest = key[len(prefix):]
            if typ != "PUT":
                continue
            if rest.startswith("workers/"):
                n = int(rest.split("/")[1])
                owner = json.loads(value)["instance"]
                if n in open_:
                    out.setdefault(open_[n][0], []).append(tuple(open_[n][1:]))
                open_[n] = [host_of.get(owner, -1), n, mark.get(n, 0), mark.get(n, 0)]
            elif rest.startswith("hwm/"):
                n = int(rest.split("/")[1])
                mark[n] = max(mark.get(n, 0), int(value))
                if n in open_:
                    open_[n][3] = max(open_[n][3], int(value))
    for n, (host, w, lo, hi) in open_.items():
        out.setdefault(host, []).append((w, lo, hi))
    return out


def check_ids(hosts, held, fresh_switches):
    """Reads every ID file; returns (total, duplicates, out_of_order, outside)."""
    all_ids = []
    out_of_order = outside = total = 0
    for host in hosts:
        iv = sorted(held.get(host.i, []))
        starts = np.array([(w << 41) | (lo + 1) for w, lo, hi in iv], dtype=np.uint64)
        ends = np.array([(w << 41) | hi for w, lo, hi in iv], dtype=np.uint64)
        for label, path in host.id_files():
            a = np.fromfile(path, dtype=np.uint64)
            total += len(a)
            if len(a) == 0:
                continue
            # within one thread: increasing, except where the daemon moved to
            # a fresh number because its clock went back (ID time goes back too)
            worker = (a >> np.uint64(12)) & np.uint64(WORKER_MASK)
            down = np.nonzero(a[1:] <= a[:-1])[0]
            bad = [k for k in down if worker[k] == worker[k + 1] or a[k + 1] == a[k]]
            if bad or len(down) > fresh_switches[host.i]:
                k = (bad or list(down))[0]
                log(f"{label}: ID {int(a[k + 1])} follows {int(a[k])} (at {k + 1}; {len(down)} "
                    f"decreases, {fresh_switches[host.i]} fresh-number switches)")
                out_of_order += max(len(bad), len(down) - fresh_switches[host.i])
            # each ID inside a holding of its host: key = worker << 41 | time
            key = (worker << np.uint64(41)) | (a >> np.uint64(TIME_SHIFT))
            idx = np.searchsorted(starts, key, side="right").astype(np.int64) - 1
            ok = idx >= 0
            ok[ok] = key[ok] <= ends[idx[ok]]
            miss = np.count_nonzero(~ok)
            if miss:
                k = int(np.nonzero(~ok)[0][0])
                log(f"{label}: {miss} IDs outside every holding of {host.name}, first "
                    f"{int(a[k])} (worker {int(worker[k])}, time {int(key[k]) & ((1 << 41) - 1)})")
                outside += int(miss)
            all_ids.append(a)
    flat = np.concatenate(all_ids) if all_ids else np.zeros(0, dtype=np.uint64)
    flat.sort(kind="stable")
    dups = int(np.count_nonzero(flat[1:] == flat[:-1]))
    if dups:
        k = int(np.nonzero(flat[1:] == flat[:-1])[0][0])
        log(f"duplicate ID {int(flat[k])} ({dups} in all)")
    return total, dups, out_of_order, outside


def read_gaps(path):
    gaps, first, last = [], None, None
    with open(path) as f:
        for line in f:
            a, b = line.split()
            if a == "first":
                first = int(b)
            elif a == "last":
                last = int(b)
            elif a != "end":
                gaps.append((int(a), int(b)))
    return first, last, gaps


def stretches(clients, t0, t1):
    """The times in [t0, t1] during which every one of clients (each a list
    of gaps) was in a gap, no ID taken by any of them: [(start, end)]."""
    ev = []
    for gaps in clients:
        for a, b in gaps:
            a, b = max(a, t0), min(b, t1)
            if a < b:
                ev += [(a, 1), (b, -1)]
    ev.sort(key=lambda e: (e[0], e[1]))
    depth, since, out = 0, None, []
    for t, d in ev:
        depth += d
        if depth == len(clients) and d == 1:
            since = t
        elif since is not None and depth < len(clients):
            out.append((since, t))
            since = None
    return out


def longest_stretch(clients, t0, t1):
    """(length, start) of the longest of stretches()."""
    return max(((b - a, a) for a, b in stretches(clients, t0, t1)), default=(0, t0))


def recoveries(healed, began, per_host, t0, t1):
    """After each host fault ended: how long until that host took IDs again,
    when that came before the host's next fault.  Returns ([(ms, kind, host,
    heal time)], how many were cut short by a next fault)."""
    out, cut = [], 0
    for i, kind, at in healed:
        name = f"h{i}"
        nxt = min((b for j, b in began if j == i and b > at), default=t1)
        back = 0
        for a, b in stretches(per_host[name], t0, t1):
            if a <= at < b:
                back = b - at if b <= nxt else None
        if back is None:
            cut += 1
        else:
            out.append((back, kind, name, at))
    return out, cut


def replay_traces(h):
    """Replays each trace (hosts' and the fences') on the rules
    (build/tests/snowid-replay): (decisions and steps replayed, [the first
    decision or step each trace that is refused took, or why it could not
    be read])."""
    replay = os.path.join(harness.BUILD, "tests", "snowid-replay")
    total, untrue = [0, 0], []
    for name in sorted(f for f in os.listdir(h.dir) if f.startswith("trace-")):
        r = subprocess.run([replay, h.path(name)], capture_output=True, text=True, timeout=300)
        out = (r.stdout + r.stderr).strip()
        m = re.match(r"([0-9]+) decisions, each the same", out)
        steps = re.search(r"; ([0-9]+) steps of the holder", out)
        if r.returncode == 0 and m:
            total[0] += int(m.group(1))
            total[1] += int(steps.group(1)) if steps else 0
        else:
            untrue.append(f"{name}: {out}")
            log(f"trace {name} differs from the rules: {out}")
    if not total[0] or not total[1]:
        untrue.append("no decision or no step traced")
    for name in sorted(f for f in os.listdir(h.dir) if f.startswith("snowidd-") and f.endswith(".log")):
        with open(h.path(name), errors="replace") as f:
            if "Cannot write the trace" in f.read():
                untrue.append(f"{name}: its trace could not be written whole")
    return total, untrue


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=["etcd", "postgres"], default="etcd",
                    help="a 3-member etcd, or one PostgreSQL 15 server")
    ap.add_argument("--duration", type=float, default=120, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", type=int, default=10000, help="IDs/s per library client thread")
    ap.add_argument("--mean-interval", type=float, default=3.0,
                    help="mean seconds between faults")
    ap.add_argument("--faults", default=None,
                    help="the kinds of fault to draw from, comma-separated (default: every "
                         "kind the store has: " + ", ".join(Chaos.KINDS) + "; with postgres "
                         + ", ".join(Chaos.PG_KINDS) + ")")
    ap.add_argument("--build", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the files of a passing run")
    ap.add_argument("--daemon-log-level", default="info", help="snowidd's --log-level")
    a = ap.parse_args()
    known = Chaos.kinds_of(a.store)
    kinds = [k for k in (a.faults or ",".join(known)).split(",") if k]
    unknown = set(kinds) - set(known)
    if unknown:
        ap.error(f"unknown faults {', '.join(sorted(unknown))}; known with {a.store}: "
                 f"{', '.join(known)}")
    pg = a.store == "postgres"
    if a.build:
        harness.BUILD = os.path.abspath(a.build)
        harness.SNOWIDD = os.path.join(harness.BUILD, "daemon", "snowidd")
        harness.TAKER = os.path.join(harness.BUILD, "tests", "snowid-taker")
        harness.CLI = os.path.join(harness.BUILD, "cli", "snowid")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    log(f"chaos: seed {seed}, {a.duration:.0f} s, {a.hosts} hosts"
        + (", PostgreSQL" if pg else ""))
    if os.geteuid() != 0:
        print("chaos: needs root for network namespaces: skipping")
        return 77
    if pg and not os.path.exists(os.path.join(PGBIN, "postgres")):
        print(f"chaos: PostgreSQL 15 is not installed ({PGBIN}): skipping")
        return 77
    libs = [p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1")
            if os.path.exists(p)]
    assert libs, "libfaketime is not installed"

    def on_signal(sig, _):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    rng = random.Random(seed)
    h = Harness("chaos")
    net = Net(a.hosts, servers=1 if pg else 3)
    ok = False
    try:
        Net.remove_stale()
        h.cleanup(net.down)  # runs last
        net.up()
        if pg:
            etcd = PgServer(h, net)
            etcd.install_audit()
        else:
            etcd = Etcd(h, 3, addrs=net.servers, wrap=net.wrap(net.core))
        hosts = [Host(h, net, etcd, i, libs[0], a.daemon_log_level) for i in range(a.hosts)]
        for host in hosts:
            host.daemon.start()
        for host in hosts:
            host.start_clients(a.rate)
        log(f"{a.hosts} hosts taking IDs; faults begin")
        chaos = Chaos(h, net, etcd, hosts, rng, kinds, seed)
        chaos.run(a.duration, a.mean_interval)
        healed = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000
        log("all faults healed; waiting for every host to take IDs again")
        etcd.wait_healthy(60)

        sizes = {p: os.path.getsize(p) for host in hosts for _, p in host.id_files()}
        # PostgreSQL runs every request one at a time on one server: on a
        # loaded machine its daemons take longer to claim again
        wait_for(lambda: all(os.path.getsize(p) > n for p, n in sizes.items()), 180 if pg else 60, "every client to take IDs after the last fault", 0.1)
        results = {}
        for host in hosts:
            results[host.name] = host.stop_clients()
        for host in hosts:
            host.daemon.stop(timeout=20)

        if pg:
            events, prefix, mismatched, _ = pg_history(etcd)
            mismatched += chaos.mismatches
            what = "PostgreSQL history (audit trigger)"
        else:
            events, prefix = etcd_history(etcd, net)
            mismatched, what = [], "etcd history"
        eras = chaos.eras + [(chaos.base, events)]
        with open(h.path(("pg" if pg else "etcd") + "-history.json"), "w") as f:
            json.dump([{"base": base, "events": evs} for base, evs in eras], f)
        mismatched += timeline(eras, repeats_some=pg)[1]
        for m in mismatched:
            log(f"{what}: {m}")
        held = holdings(eras, prefix, [host.instance for host in hosts])
        fresh = {host.i: host.daemon.log_text().count("fresh worker number") for host in hosts}
        log(f"{what}: {len(eras)} era(s), "
            f"{' + '.join(str(len(e)) for _, e in eras)} events, "
            f"{sum(len(v) for v in held.values())} holdings")
        total, dups, disorder, outside = check_ids(hosts, held, fresh)
        traced, untrue = replay_traces(h)

        errors = {}
        for name, (lib, web) in results.items():
            for k, v in lib.get("errors", {}).items():
                errors[f"lib {k}"] = errors.get(f"lib {k}", 0) + v
            for k, v in web.get("errors", {}).items():
                errors[f"http {k}"] = errors.get(f"http {k}", 0) + v
        # stretches with no ID: from when every client had its first ID to the end
        per_host, clients = {}, []
        t0, t1 = 0, healed
        for host in hosts:
            mine = []
            for _, path in host.id_files():
                first, last, gaps = read_gaps(path + ".gaps")
                t0 = max(t0, first)
                assert last >= healed, f"{host.name}: no ID after the faults were healed"
                mine.append(gaps)
            per_host[host.name] = mine
            clients += mine
        start_ms = chaos.start_ns // 1000000
        any_host = longest_stretch(clients, t0, t1)
        worst = max(longest_stretch(c, t0, t1) + (n,) for n, c in per_host.items())
        back, cut = recoveries(chaos.healed, chaos.began, per_host, t0, t1)
        slow = max(back, default=(0, "none", "", t0))
        stopped = sorted(b[0] for b in back if b[0] > 0)  # faults that stopped IDs
        median = stopped[len(stopped) // 2] if stopped else 0
        faults = ", ".join(f"{k} {v}" for k, v in chaos.counts.items())
        if chaos.answers_lost:
            faults += f" (layout-delete with its answer lost, then fenced: {chaos.answers_lost})"
        if chaos.failed:
            faults += " (not made: " + ", ".join(f"{k} {v}" for k, v in
                                                 sorted(chaos.failed.items())) + ")"
        errs = ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"
        restores = ""
        if chaos.restores:
            back, since = ("restored", "the restore's start") if pg else ("etcd back",
                                                                            "the kill")
            restores = (f"; restores: {back} after {max(r[0] for r in chaos.restores):.1f} s "
                        f"at most, fenced after {max(r[1] for r in chaos.restores):.1f} s at most"
                        f" (from {since})")
        ok = dups == 0 and disorder == 0 and outside == 0 and not mismatched and not untrue
        print(f"chaos: seed {seed}, {a.duration:.0f} s, {a.hosts} hosts: {total:,} IDs checked, "
              f"{dups} duplicates, {disorder} out of order, {outside} outside their host's "
              f"holdings; faults: {faults} ({sum(chaos.counts.values())} in all); client errors: "
              f"{errs}; longest stretch with no ID on any host: {any_host[0]} ms at "
              f"+{(any_host[1] - start_ms) / 1000:.1f} s (one host alone: {worst[0]} ms, "
              f"{worst[2]} at +{(worst[1] - start_ms) / 1000:.1f} s); slowest return of IDs "
              f"after a fault ended: {slow[0]} ms ({slow[1]} on {slow[2]} at "
              f"+{(slow[3] - start_ms) / 1000:.1f} s; median {median} ms over the {len(stopped)} "
              f"that had stopped IDs; "
              f"{cut} cut short by the next fault){restores}; traces: {traced[0]:,} decisions "
              f"and {traced[1]:,} steps replayed on the rules, {len(untrue)} refused",
              flush=True)
    except KeyboardInterrupt as e:
        log(f"chaos: interrupted ({e})")
    except Exception:
        import traceback
        traceback.print_exc()
    finally:
        if not ok or a.keep:
            h.failed = True
        if not ok:
            log(f"chaos: FAILED; replay with --seed {seed}")
        h.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
