# SPDX-License-Identifier: MIT
"""The PostgreSQL store's transport (daemon/store/pg.c) against a real PostgreSQL
15, in a real sd-event loop (tests/pg-driver.c): calls answered in order,
server errors classed, a stopped server, a killed backend and a statement
that outlives its deadline each fail the calls on the connection as
unanswered, and the next call goes through on a new connection.

Usage: SNOWID_BUILD=$PWD/build python3 tests/integration/test_pg_transport.py [test ...]
"""
import json
import os
import pwd
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("SNOWID_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
DRIVER = os.path.join(BUILD, "tests", "snowid-pg-driver")
PGBIN = os.environ.get("SNOWID_PGBIN", "/usr/lib/postgresql/15/bin")

from harness import free_port, log, wait_for  # noqa: E402 (after the paths it reads)


class ScratchPostgres:
    """A throwaway PostgreSQL 15 on 127.0.0.1 and a socket in its own
    directory, run as the postgres user (initdb and pg_ctl refuse root).
    Local connections are trusted (the test's own psql); TCP ones need a
    password (scram), which the transport reads from a passfile."""

    USER, PASSWORD = "snowid", "s3cret pw"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="snowid-pgt-")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o755)
        self._pg(os.path.join(PGBIN, "initdb"), "-D", self.data, "-U", "postgres",
                 "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                 "--no-sync")
        self.start()
        self.psql(f"CREATE ROLE {self.USER} LOGIN PASSWORD '{self.PASSWORD}'")
        self.psql(f"GRANT CREATE ON DATABASE postgres TO {self.USER}")
        # said by the transport once per process, however often it reconnects
        self.psql(f"ALTER ROLE {self.USER} SET synchronous_commit = off")
        self.passfile = os.path.join(self.dir, "pgpass")
        with open(self.passfile, "w") as f:
            f.write(f"127.0.0.1:*:postgres:{self.USER}:"
                    + self.PASSWORD.replace("\\", "\\\\").replace(":", "\\:") + "\n")
        os.chmod(self.passfile, 0o600)

    def _pg(self, *cmd, check=True, timeout=60):
        if self.as_root:
            cmd = ("runuser", "-u", "postgres", "--") + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def conninfo(self, passfile=True):
        s = f"host=127.0.0.1 port={self.port} dbname=postgres user={self.USER}"
        return s + (f" passfile={self.passfile}" if passfile else " passfile=/nonexistent")

    def start(self):
        self._pg(os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-l",
                 os.path.join(self.dir, "server.log"), "-w", "-t", "60", "-o",
                 f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off",
                 "start")

    def stop(self, mode="fast"):
        self._pg(os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop",
                 check=False)

    def psql(self, sql):
        r = self._pg(os.path.join(PGBIN, "psql"), "-X", "-h", self.dir, "-p", str(self.port),
                     "-d", "postgres", "-U", "postgres", "-Atqc", sql)
        return r.stdout.strip()

    def wait_ready(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r = self._pg(os.path.join(PGBIN, "pg_isready"), "-h", "127.0.0.1", "-p",
                         str(self.port), check=False)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError("PostgreSQL did not come back")

    def close(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


class Driver:
    """tests/pg-driver.c: pg.c in an sd-event loop, fed calls on stdin."""

    def __init__(self, conninfo, timeout_ms, name):
        self.stderr_path = os.path.join(tempfile.gettempdir(), f"snowid-pgt-{name}-{os.getpid()}.log")
        self.errf = open(self.stderr_path, "w+")
        self.p = subprocess.Popen([DRIVER, conninfo, str(timeout_ms)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.errf, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.replies, self.problems, self.order = {}, [], []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def _pump(self, timeout):
        try:
            m = self.lines.get(timeout=timeout)
        except queue.Empty:
            return
        assert m is not None, "the driver exited:\n" + self.log()
        assert "bad" not in m and "call_failed" not in m, m
        if m.get("kind") == "problem":
            self.problems.append(m)
        elif "stats" in m:
            self.replies["stats"] = m["stats"]
        else:
            assert not m["inside_call"], f"a callback ran inside pg_call(): {m}"
            assert m["tag"] not in self.replies, f"two answers for {m['tag']}"
            self.replies[m["tag"]] = m
            self.order.append(m["tag"])

    def call(self, tag, path="/v3/kv/range", body=None):
        self.p.stdin.write(f"call {tag} {path} {json.dumps(body or {})}\n")
        self.p.stdin.flush()

    def reply(self, tag, timeout=15):
        end = time.monotonic() + timeout
        while tag not in self.replies:
            left = end - time.monotonic()
            assert left > 0, f"no answer for call {tag} within {timeout} s\n" + self.log()
            self._pump(min(left, 0.2))
        return self.replies[tag]

    def stats(self):
        self.replies.pop("stats", None)
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        return self.reply("stats")

    def call_until_ok(self, first_tag, timeout=20, body=None):
        """Calls one at a time until one is answered: how a holder retries."""
        end, tag = time.monotonic() + timeout, first_tag
        while time.monotonic() < end:
            self.call(tag, body=body)
            r = self.reply(tag)
            if r["ok"]:
                return r, tag
            tag += 1
            time.sleep(0.05)
        raise AssertionError(f"no call went through within {timeout} s\n" + self.log())

    def log(self):
        self.errf.flush()
        with open(self.stderr_path) as f:
            return f.read()[-4000:]

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(timeout=10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        assert self.p.returncode == 0, f"driver exit {self.p.returncode}\n" + self.log()
        self.errf.close()
        os.unlink(self.stderr_path)


def answer(r):
    """What the test's snowid.call() answered, from the row's body column
    (the envelope {"status": 200, "body": ...} it returns, as text)."""
    assert r["ok"] and isinstance(r.get("body"), dict), r
    assert r["body"]["status"] == 200, r
    return r["body"]["body"]


def unanswered(r, within_ms=None, at_least_ms=None):
    assert not r["answered"] and not r["ok"] and r["error"], r
    assert r["err"] is None, r
    ms = r["usec"] / 1000
    if within_ms is not None:
        assert ms < within_ms, f"failed after {ms:.0f} ms, not within {within_ms}: {r}"
    if at_least_ms is not None:
        assert ms >= at_least_ms, f"failed after {ms:.0f} ms, before {at_least_ms}: {r}"


def backend_pids(pg):
    out = pg.psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'snowidd'")
    return [int(x) for x in out.split()]


def test_order(pg):
    d = Driver(pg.conninfo(), 5000, "order")
    try:
        for tag in range(1, 21):
            d.call(tag, "/v3/kv/txn" if tag % 2 else "/v3/lease/keepalive", {"n": tag})
        revs = []
        for tag in range(1, 21):
            r = d.reply(tag)
            assert r["ok"] and r["http"] == 200, r
            a = answer(r)
            assert a["echo"] == {"n": tag}, r
            assert a["path"] == ("/v3/kv/txn" if tag % 2 else "/v3/lease/keepalive")
            assert r["kv"] == bool(tag % 2)
            # the row's rev column is the answer's revision, whatever the call
            assert r["revision"] > 0, r
            assert r["revision"] == int(a["header"]["revision"]), r
            revs.append(r["revision"])
        assert d.order == list(range(1, 21)), d.order
        assert revs == sorted(revs), revs
        s = d.stats()
        assert s["requests"] == 20 and s["failures"] == 0 and s["in_flight"] == 0, s
        assert s["le"][7] == 20, s
        assert s["endpoint"] == f"127.0.0.1:{pg.port}", s
        assert "password" not in json.dumps(s) and pg.PASSWORD not in d.log()
        # the settings each connection makes
        apps = pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'snowidd'")
        assert apps == "1", apps
        # synchronous_commit = off (the role's) is said, once
        assert d.log().count("synchronous_commit = off") == 1, d.log()
    finally:
        d.close()


def test_large(pg):
    """A call larger than the socket's buffers is sent as the socket drains
    (PQflush() until it is out), and the one behind it waits its turn."""
    d = Driver(pg.conninfo(), 30000, "large")
    try:
        big = "x" * (12 << 20)
        d.call(1, "/v3/kv/put", {"value": big})
        d.call(2)
        r = d.reply(1, timeout=40)
        assert r["ok"] and answer(r)["echo"]["value"] == big, r["error"]
        assert d.reply(2, timeout=40)["ok"]
        assert d.order == [1, 2], d.order
    finally:
        d.close()


def test_sql_errors(pg):
    d = Driver(pg.conninfo(), 5000, "errors")
    try:
        d.call(1, body={"raise": "22012"})
        r = d.reply(1)
        assert r["answered"] and r["http"] == 500 and r["err"] is None, r
        assert "raised 22012" in r["error"], r
        d.call(2, body={"raise": "53100"})
        r = d.reply(2)
        assert r["answered"] and r["nospace"] and not r["ok"] and r["err"] is None, r
        # a row is an answer, whatever it holds: the transport reads only its
        # cid and rev columns, and hands the row on; an envelope's "status"
        # is the verb's data, not an HTTP status
        lost = {"status": 404, "body": {
            "error": "etcdserver: requested lease not found", "code": 5,
            "message": "etcdserver: requested lease not found"}}
        d.call(3, body={"answer": lost})
        r = d.reply(3)
        assert r["answered"] and r["http"] == 200 and r["ok"] and r["error"] is None, r
        assert r["body"] == lost and r["revision"] == 0 and r["err"] is None, r
        # a row whose cid and rev are NULL: an answer at no revision
        d.call(4, body={"answer": ["not", "an", "envelope"]})
        r = d.reply(4)
        assert r["answered"] and r["http"] == 200 and r["ok"], r
        assert r["body"] == ["not", "an", "envelope"] and r["revision"] == 0, r
        d.call(5, body={"answer": {"status": 200, "body": {"x": 1}}})
        r = d.reply(5)
        assert r["ok"] and answer(r) == {"x": 1} and r["revision"] == 0, r
        # the same connection served all of them: SQL errors do not close it
        assert len(backend_pids(pg)) == 1
        # a permission refusal is a problem, said before the call's answer; kv
        # calls wait out its hold, lease calls do not
        d.call(6, "/v3/kv/txn", {"raise": "42501"})
        r = d.reply(6)
        assert r["answered"] and r["http"] == 403 and r["err"] == "postgres-permission", r
        assert [p["problem"] for p in d.problems] == ["postgres-permission"], d.problems
        assert d.problems[0]["hold_ms"] == 1000 and d.problems[0]["in_row"] == 1
        assert d.problems[0]["endpoint"] == f"127.0.0.1:{pg.port}"
        start = time.monotonic()
        d.call(7, "/v3/lease/grant", {})
        assert d.reply(7)["ok"]
        assert time.monotonic() - start < 0.9  # not held
        d.call(8, "/v3/kv/range", {})
        r = d.reply(8)
        assert r["ok"], r
        assert r["usec"] >= 700_000, r  # held until the hold was over
        assert [p["problem"] for p in d.problems] == ["postgres-permission", "cleared"], d.problems
        assert len(backend_pids(pg)) == 1
    finally:
        d.close()


def test_outage(pg):
    d = Driver(pg.conninfo(), 1000, "outage")
    try:
        d.call_until_ok(1)
        pg.stop()
        log("server stopped")
        for tag in (2, 3):
            d.call(tag)
            # waits for a connection until its deadline, then fails unanswered
            unanswered(d.reply(tag), at_least_ms=900, within_ms=2500)
        pg.start()
        log("server started")
        r, tag = d.call_until_ok(10)
        log(f"answered again after {tag - 9} call(s)")
        d.call(100)
        assert d.reply(100)["ok"]
        assert d.log().count("synchronous_commit = off") == 1, d.log()
        assert "NOTICE" not in d.log() and "FATAL" not in d.log(), d.log()
        assert not d.problems, d.problems
        s = d.stats()
        assert s["failures"] >= 2 and s["in_flight"] == 0, s
    finally:
        d.close()


def test_backend_killed(pg):
    d = Driver(pg.conninfo(), 30000, "killed")
    try:
        d.call_until_ok(1)
        for how in ("terminate", "kill -9"):
            pid = backend_pids(pg)[0]
            base = 10 if how == "terminate" else 20
            d.call(base, body={"sleep_ms": 20000})
            d.call(base + 1)  # queued behind it
            wait_for(lambda: pg.psql(f"SELECT state FROM pg_stat_activity WHERE pid = {pid}") == "active",
                     10, "the long call to run on the backend")
            if how == "terminate":
                assert pg.psql(f"SELECT pg_terminate_backend({pid})") == "t"
            else:
                os.kill(pid, signal.SIGKILL)  # the postmaster restarts every backend
            log(f"backend {pid}: {how}")
            for tag in (base, base + 1):
                r = d.reply(tag)
                unanswered(r, within_ms=15000)
                assert "within" not in r["error"], r  # not at a deadline
            if how == "kill -9":
                pg.wait_ready()
            r, _ = d.call_until_ok(base + 2)
            assert answer(r)["pid"] != pid, r
    finally:
        d.close()


def test_deadline(pg):
    """A call past its deadline fails there; its statement is cancelled and
    the connection kept: the next call goes on the same connection.  A
    server that does not end it (its backend stopped) loses the connection
    a store-timeout after that."""
    d = Driver(pg.conninfo(), 1000, "deadline")
    try:
        r, _ = d.call_until_ok(1)
        pid = answer(r)["pid"]
        d.call(100, body={"sleep_ms": 20000})
        d.call(101)  # queued behind it: fails at its own deadline
        unanswered(d.reply(100), at_least_ms=900, within_ms=3000)
        unanswered(d.reply(101), within_ms=3000)
        r, _ = d.call_until_ok(102)
        assert answer(r)["pid"] == pid, "a new connection for a late query"
        # the 20 s sleep is over: cancelled, not left to run
        assert pg.psql(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} "
                       "AND wait_event = 'PgSleep'") == "0"

        # the backend stopped: the statement never ends, the connection goes
        os.kill(pid, signal.SIGSTOP)
        try:
            d.call(200)
            unanswered(d.reply(200), at_least_ms=900, within_ms=3000)
            r, _ = d.call_until_ok(201, timeout=30)
            assert answer(r)["pid"] != pid, r
            assert "did not end a cancelled statement within 1000 ms" in d.log(), d.log()
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        d.close()


def test_cancelled_sent_again(pg):
    """A statement cancelled before its deadline (an operator's
    pg_cancel_backend, or the cancel of a call given up on that lands on
    the next one) was rolled back: it is sent again, once."""
    d = Driver(pg.conninfo(), 30000, "cancelled")
    try:
        r, _ = d.call_until_ok(1)
        pid = answer(r)["pid"]

        def started():
            """when the sleep running on the backend started, or None"""
            out = pg.psql(f"SELECT query_start FROM pg_stat_activity WHERE pid = {pid} "
                          "AND wait_event = 'PgSleep'")
            return out or None

        def cancel(after=None):
            wait_for(lambda: started() not in (None, after), 10, "the call to run")
            at = started()
            assert pg.psql(f"SELECT pg_cancel_backend({pid})") == "t"
            return at
        d.call(10, body={"sleep_ms": 3000})
        cancel()
        r = d.reply(10)
        assert r["ok"] and answer(r)["pid"] == pid, r  # sent again, answered
        assert r["usec"] > 3_000_000, r
        # cancelled again: not sent a third time
        d.call(11, body={"sleep_ms": 3000})
        cancel(cancel())
        r = d.reply(11)
        assert not r["ok"] and not r["answered"], r
        assert r["usec"] < 3_000_000, r
    finally:
        d.close()


def test_auth_refused(pg):
    d = Driver(pg.conninfo(passfile=False), 2000, "auth")
    try:
        d.call(1)
        r = d.reply(1)
        # refused, not an outage: at once, not at the deadline
        assert not r["answered"] and r["err"] == "postgres-auth", r
        assert r["usec"] < 1000_000, r
        assert [p["problem"] for p in d.problems] == ["postgres-auth"], d.problems
        assert "password" in d.problems[0]["message"], d.problems
        # no new attempt before the hold is over: the next calls wait it out,
        # and fail with the refusal (at the attempt after the hold, or at
        # their deadline)
        for tag in (2, 3, 4):
            d.call(tag)
            r = d.reply(tag)
            assert not r["answered"] and r["err"] == "postgres-auth", r
        assert [p["problem"] for p in d.problems] == ["postgres-auth"] * len(d.problems)
        holds = [p["hold_ms"] for p in d.problems]
        assert holds == [1000 * 2 ** i for i in range(len(holds))], holds
        assert "cannot connect" in d.log()
    finally:
        d.close()


def test_settings(pg):
    """--store and --postgres, from flags and from the config file."""
    snowidd = os.path.join(BUILD, "daemon", "snowidd")

    def check(*args, config=""):
        path = os.path.join(pg.dir, "snowidd.conf")
        with open(path, "w") as f:
            f.write(config)
        return subprocess.run([snowidd, "--config", path, "--check-config", *args],
                              capture_output=True, text=True, timeout=20)

    def refused(r, *words):
        assert r.returncode == 78, f"exit {r.returncode}:\n{r.stdout}{r.stderr}"
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        for w in words:
            assert w in lines[0], f"{w!r} not in {lines[0]!r}"
        assert "hunter2" not in r.stderr
        return lines[0]

    ok = check("--store", "postgres", "--postgres", pg.conninfo())
    assert ok.returncode == 0 and "valid" in ok.stdout, ok.stderr
    ok = check(config=f"store = postgres\npostgres = {pg.conninfo()}\n")
    assert ok.returncode == 0, ok.stderr
    assert check("--store", "etcd").returncode == 0
    log(refused(check("--store", "postgres"), "postgres = CONNINFO"))
    refused(check("--store", "mysql"), "etcd or postgres")
    for bad in (pg.conninfo() + " password=hunter2",
                f"postgresql://snowid:hunter2@127.0.0.1:{pg.port}/postgres"):
        log(refused(check("--store", "postgres", "--postgres", bad), "passfile", "PGPASSFILE"))
        refused(check(config=f"store = postgres\npostgres = {bad}\n"), "passfile")
    refused(check("--postgres", "hots=x"), "not a libpq connection string", "hots")
    # the files it names are read at start
    log(refused(check("--store", "postgres", "--postgres", pg.conninfo(passfile=False)),
                "Cannot read postgres passfile /nonexistent"))
    refused(check("--store", "postgres", "--postgres",
                  pg.conninfo() + f" sslrootcert={pg.dir}"), "postgres sslrootcert",
            "Is a directory")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=d)


def make_cert(d, ca, name, cn, san=None):
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    ext = os.path.join(d, f"{name}.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext, cwd=d)


def test_tls(pg):
    """TLS is libpq's own settings: a server certificate that fails
    verification is postgres-tls, a client certificate the server wants and
    does not get is postgres-cert; both at once, not at the deadline."""
    if shutil.which("openssl") is None:
        log("openssl is not installed: skipping")
        return
    d = os.path.join(pg.dir, "tls")
    os.mkdir(d)
    make_ca(d, "ca")
    make_ca(d, "other")
    make_cert(d, "ca", "server", "127.0.0.1", "IP:127.0.0.1")
    make_cert(d, "ca", "client", "certuser")
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o600 if f.endswith(".key") else 0o644)
    if pg.as_root:
        pw = pwd.getpwnam("postgres")
        for f in ("server.key", "server.pem", "ca.pem"):
            os.chown(os.path.join(d, f), pw.pw_uid, pw.pw_gid)
    hba = os.path.join(pg.data, "pg_hba.conf")
    with open(hba) as f:
        rules = f.read()
    with open(hba, "w") as f:
        f.write("hostssl postgres certuser 127.0.0.1/32 cert\n" + rules)
    pg.psql("CREATE ROLE certuser LOGIN")
    pg.psql(f"ALTER SYSTEM SET ssl_cert_file = '{d}/server.pem'")
    pg.psql(f"ALTER SYSTEM SET ssl_key_file = '{d}/server.key'")
    pg.psql(f"ALTER SYSTEM SET ssl_ca_file = '{d}/ca.pem'")
    pg.psql("ALTER SYSTEM SET ssl = on")
    pg.psql("SELECT pg_reload_conf()")
    # a new session takes the postmaster's settings: on once it has reloaded
    wait_for(lambda: pg.psql("SHOW ssl") == "on", 10, "the reload to turn ssl on")

    def one(conninfo, name):
        """The first call's answer, or the first refusal if none went through
        (a loaded machine may take longer than a deadline to connect)."""
        drv = Driver(conninfo, 5000, name)
        try:
            for tag in range(1, 4):
                drv.call(tag)
                r = drv.reply(tag)
                if r["ok"] or r["err"]:
                    break
            return r, list(drv.problems)
        finally:
            drv.close()

    r, probs = one(pg.conninfo() + f" sslmode=verify-full sslrootcert={d}/ca.pem", "tls-ok")
    assert r["ok"], r
    assert pg.psql("SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
                   "WHERE application_name = 'snowidd'") in ("", "t")
    r, probs = one(pg.conninfo() + f" sslmode=verify-full sslrootcert={d}/other.pem", "tls-ca")
    assert not r["answered"] and r["err"] == "postgres-tls" and r["usec"] < 4000_000, r
    assert [p["problem"] for p in probs] == ["postgres-tls"], probs
    log(f"wrong CA: {r['error']}")
    base = f"host=127.0.0.1 port={pg.port} dbname=postgres user=certuser sslmode=verify-full " \
           f"sslrootcert={d}/ca.pem"
    r, probs = one(base + " sslcert=/nonexistent/c.pem sslkey=/nonexistent/c.key", "tls-nocert")
    assert not r["answered"] and r["err"] == "postgres-cert" and r["usec"] < 4000_000, r
    log(f"no client certificate: {r['error']}")
    # in, but not allowed to create the schema: a refusal (the setup's SQL
    # runs on every connection, before any call)
    r, probs = one(base + f" sslcert={d}/client.pem sslkey={d}/client.key", "tls-cert")
    assert not r["answered"] and r["err"] == "postgres-permission", r
    assert [p["problem"] for p in probs] == ["postgres-permission"], probs
    pg.psql(f"GRANT {pg.USER} TO certuser")
    r, probs = one(base + f" sslcert={d}/client.pem sslkey={d}/client.key", "tls-cert")
    assert r["ok"], r
    pg.psql("ALTER SYSTEM SET ssl = off")
    pg.psql("SELECT pg_reload_conf()")


def test_standby(pg):
    """A standby is not the store: said once, and calls fail unanswered
    while it is tried again.  A primary streaming to a standby that is not
    synchronous is said once too."""
    sdir = os.path.join(pg.dir, "standby")
    port = free_port()
    pg._pg(os.path.join(PGBIN, "pg_basebackup"), "-D", sdir, "-R", "-X", "stream", "-h", pg.dir,
           "-p", str(pg.port), "-U", "postgres", "--no-sync")
    pg._pg(os.path.join(PGBIN, "pg_ctl"), "-D", sdir, "-l", os.path.join(pg.dir, "standby.log"),
           "-w", "-t", "60", "-o",
           f"-p {port} -k {pg.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        end = time.monotonic() + 30
        while pg.psql("SELECT count(*) FROM pg_stat_replication") != "1":
            assert time.monotonic() < end, "the standby does not stream"
            time.sleep(0.2)
        d = Driver(pg.conninfo().replace(f"port={pg.port}", f"port={port}"), 1000, "standby")
        try:
            for tag in range(1, 31):
                d.call(tag)
                unanswered(d.reply(tag), at_least_ms=900)
                if tag >= 3 and "is a standby (in recovery)" in d.log():
                    break
            time.sleep(1)
            assert d.log().count("is a standby (in recovery)") == 1, d.log()
            assert not d.problems, d.problems
        finally:
            d.close()
        d = Driver(pg.conninfo(), 2000, "async")
        try:
            d.call_until_ok(1)
            pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'snowidd'")
            d.call_until_ok(10)
            line = [l for l in d.log().splitlines() if "synchronous_standby_names" in l]
            assert len(line) == 1 and "1 standby" in line[0], d.log()
            log(line[0])
        finally:
            d.close()
    finally:
        pg._pg(os.path.join(PGBIN, "pg_ctl"), "-D", sdir, "-m", "immediate", "-w", "stop",
               check=False)


TESTS = [test_settings, test_order, test_large, test_sql_errors, test_outage, test_backend_killed, test_deadline,
         test_cancelled_sent_again,
         test_auth_refused, test_tls, test_standby]


def main():
    if not os.path.exists(os.path.join(PGBIN, "initdb")):
        print(f"PostgreSQL 15 is not installed ({PGBIN}): skipping")
        sys.exit(77)
    names = sys.argv[1:]
    tests = [t for t in TESTS if not names or t.__name__ in names or
             t.__name__.replace("test_", "") in names]
    pg = ScratchPostgres()
    failed = 0
    try:
        for t in tests:
            start = time.monotonic()
            try:
                pg.wait_ready()
                t(pg)
                log(f"ok {t.__name__} ({time.monotonic() - start:.1f} s)")
            except Exception:
                import traceback
                traceback.print_exc()
                failed += 1
                log(f"FAILED {t.__name__}")
                try:
                    print(open(os.path.join(pg.dir, "server.log")).read()[-3000:])
                except OSError:
                    pass
                pg.start() if pg._pg(os.path.join(PGBIN, "pg_ctl"), "-D", pg.data, "status",
                                     check=False).returncode else None
    finally:
        pg.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
