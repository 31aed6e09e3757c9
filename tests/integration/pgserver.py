# SPDX-License-Identifier: MIT
"""A real PostgreSQL 15 server for the store's tests: its own data dir in a
temporary dir, on a free 127.0.0.1 port, superuser `postgres` reachable
without a password, stopped and removed at the end.

initdb and pg_ctl refuse to run as root: they run as the `postgres` user
(runuser) when the tests run as root.
"""
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from harness import free_port, log, wait_for

PGBIN = os.environ.get("SNOWID_PGBIN", "/usr/lib/postgresql/15/bin")
SQL = os.environ.get("SNOWID_PG_SQL", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "../../daemon/store/postgres.sql"))


def available():
    return os.path.exists(os.path.join(PGBIN, "postgres")) and shutil.which("psql") is not None


def sql_literal(s):
    """A string constant (standard_conforming_strings is on in 15)."""
    return "'" + s.replace("'", "''") + "'"


def sql_value(v):
    """A Python value as an SQL constant: None, bool, int, str, a list of
    ints (an int[] argument: scan's sample)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "ARRAY[" + ",".join(str(int(x)) for x in v) + "]::int[]"
    return sql_literal(str(v))


def verb_sql(name, args):
    """The query of one of postgres.sql's verbs (snowid.claim, ...) with
    constant arguments; its one row."""
    return f"SELECT * FROM snowid.{name}({', '.join(sql_value(a) for a in args)})"


class Postgres:
    def __init__(self, h=None, port=None, settings=()):
        """h: a Harness (cleanup registered, logs kept in its dir) or None."""
        self.h = h
        self.dir = tempfile.mkdtemp(prefix="snowid-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = port or free_port()
        self.log = os.path.join(h.dir if h else self.dir, f"postgres-{self.port}.log")
        self.proc = None
        self.settings = list(settings)
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            if h:  # the server writes its log there
                os.chmod(h.dir, 0o777)
        os.chmod(self.dir, 0o755)
        self._as_owner([os.path.join(PGBIN, "initdb"), "-D", self.data, "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], timeout=120)
        if h:
            h.cleanup(self.cleanup)
        self.start()

    def _as_owner(self, cmd, timeout=60, check=True):
        if self.user:
            cmd = ["runuser", "-u", self.user, "--"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}{r.stdout}")
        return r

    def conninfo(self):
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def uri(self):
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ready(self):
        r = subprocess.run([os.path.join(PGBIN, "pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d", "postgres", "-t", "1"],
                           capture_output=True)
        return r.returncode == 0

    def start(self, timeout=60):
        """Starts the server on its data dir and port; returns once it takes
        connections."""
        cmd = [os.path.join(PGBIN, "postgres"), "-D", self.data, "-h", "127.0.0.1",
               "-p", str(self.port), "-k", self.dir, "-c", "fsync=off",
               "-c", "max_connections=100"]
        for setting in self.settings:
            cmd += ["-c", setting]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--"] + cmd
        logf = open(self.log, "ab")
        # a child of this process, so that it is reaped as soon as it dies
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"PostgreSQL exited ({self.proc.returncode}); see {self.log}")
            return self.ready()
        wait_for(up, timeout, f"PostgreSQL on port {self.port}")
        return self

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def _children(self, pid):
        kids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                    kids.append(int(d))
            except (OSError, ValueError):
                pass
        return kids

    def kill9(self, timeout=30):
        """SIGKILL to the postmaster and every backend at once (a crash of the
        server's host as far as its clients see); returns once all are gone."""
        pid = self.postmaster_pid()
        if not pid:
            return
        pids = [pid] + self._children(pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

        if self.proc:
            self.proc.wait(timeout=timeout)
            self.proc = None

        def gone():
            for p in pids:
                try:
                    with open(f"/proc/{p}/stat") as f:
                        if f.read().split(") ")[1][0] != "Z":
                            return False
                except OSError:
                    pass
            return True
        wait_for(gone, timeout, "the killed PostgreSQL processes to go")

    def stop(self, mode="fast", timeout=60):
        """pg_ctl stop -m fast|immediate|smart, waiting until it is down."""
        if self.postmaster_pid() is None:
            return
        self._as_owner([os.path.join(PGBIN, "pg_ctl"), "stop", "-D", self.data, "-m", mode,
                        "-w", "-t", str(timeout)], timeout=timeout + 10, check=False)
        if self.proc:
            self.proc.wait(timeout=timeout)
            self.proc = None

    def psql(self, sql, timeout=60, check=True, single=True):
        """Runs sql; stdout (unaligned, tuples only).  single: the whole
        string as one simple-protocol query (psql -c), as PQsendQuery sends
        it; else psql splits it into statements."""
        cmd = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.conninfo()]
        if single:
            r = subprocess.run(cmd + ["-c", sql], capture_output=True, text=True,
                               timeout=timeout)
        else:
            r = subprocess.run(cmd + ["-f", "-"], input=sql, capture_output=True, text=True,
                               timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"psql: exit {r.returncode}: {r.stderr[:1500]}")
        return r.stdout if check else (r.returncode, r.stdout, r.stderr)

    def load_schema(self, path=SQL):
        with open(path) as f:
            return self.psql(f.read())

    def query_json(self, sql, timeout=60):
        """The rows of one query, as a list of dicts (json_agg: the values
        as JSON gives them, bigints as numbers)."""
        out = self.psql(f"SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q", timeout=timeout)
        return json.loads(out)

    def verb(self, name, *args, timeout=60):
        """SELECT * FROM snowid.<name>(args): the verb's one row, as a dict."""
        return self.query_json(verb_sql(name, args), timeout=timeout)[0]

    def session(self):
        """A connection of its own (one psql process) for many calls."""
        return Session(self)

    def cleanup(self):
        try:
            self.stop("immediate")
        except Exception:
            pass
        pid = self.postmaster_pid()
        if pid:
            try:
                self.kill9()
            except Exception:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Session:
    """One psql process, one connection: queries one after another."""

    END = "__snowid_session_end__"

    def __init__(self, pg):
        self.p = subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-d", pg.conninfo()],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1)

    def query(self, sql):
        self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + self.END + "\n")
        self.p.stdin.flush()
        lines = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise AssertionError(f"psql ended: {''.join(lines)}")
            if line.rstrip("\n") == self.END:
                break
            lines.append(line)
        out = "".join(lines)
        if any(ln.startswith(("ERROR:", "FATAL:", "psql:")) for ln in lines):
            raise AssertionError(f"psql: {out[:1500]}")
        return out

    def query_json(self, sql):
        return json.loads(self.query(f"SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q"))

    def verb(self, name, *args):
        """snowid.<name>(args) on this connection: its one row, as a dict."""
        return self.query_json(verb_sql(name, args))[0]

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)


if __name__ == "__main__":
    pg = Postgres()
    try:
        log(f"PostgreSQL up: {pg.conninfo()}")
        print(pg.psql("select version()"))
    finally:
        pg.cleanup()
