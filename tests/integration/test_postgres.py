# SPDX-License-Identifier: MIT
"""snowidd with PostgreSQL as its store, where it differs from etcd: its
settings (a password never on the command line), a server that refuses the
user, a server restarted in the middle of a claim, what the daemon checks of
the server (synchronous_commit), and the schema made once by many daemons
starting at once.  The tests shared with etcd run with SNOWID_STORE=postgres
(pg-daemon, pg-failover)."""
import json
import os
import re
import subprocess
import time

import harness
from harness import (SNOWIDD, Daemon, PgStore, check_unique_and_increasing, decode, free_port,
                     http_get, log, run, take, wait_for)


# a line the daemon logs (daemon/log.c): timestamped, or an error's level
# under the journal
LOG_LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{3} snowidd: |<3>")


def run_d(h, *args, timeout=30):
    """snowidd run to its end."""
    return subprocess.run([SNOWIDD, "--config", "/dev/null", "--runtime-dir", h.rundir,
                           "--instance", h.instance + "-x", *args],
                          capture_output=True, text=True, timeout=timeout)


def one_line(r, *words):
    """A run that ended 78 with one line naming what is wrong."""
    assert r.returncode == 78, f"exit {r.returncode}, not 78:\n{r.stderr}"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and LOG_LINE.match(lines[0]), r.stderr
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    log(lines[0])


def test_settings(h):
    # the store is named; postgres needs its connection string
    one_line(run_d(h, "--store", "mongo"), "store")
    one_line(run_d(h, "--store", "postgres"), "postgres")
    # a password in the connection string is refused, in either form
    one_line(run_d(h, "--store", "postgres", "--postgres",
                   "host=127.0.0.1 user=snowid password=hunter2"), "password", "passfile")
    one_line(run_d(h, "--store", "postgres", "--postgres",
                   "postgresql://snowid:hunter2@127.0.0.1/snowid"), "password", "passfile")
    one_line(run_d(h, "--store", "postgres", "--postgres", "host='unclosed"), "postgres")
    passfile = h.path("pgpass")
    with open(passfile, "w") as f:
        f.write("*:*:*:snowid:hunter2\n")
    os.chmod(passfile, 0o600)
    r = run_d(h, "--check-config", "--store", "postgres", "--postgres",
              f"host=127.0.0.1 user=snowid passfile={passfile} sslmode=verify-full")
    assert r.returncode == 0, r.stderr
    # the files it names are read at start
    one_line(run_d(h, "--check-config", "--store", "postgres", "--postgres",
                   f"host=127.0.0.1 passfile={h.path('missing')}"), "passfile", "missing")


def test_refused_and_unreachable(h):
    pg = PgStore(h)
    # a role the server does not know: refused, said once, exit 78 before READY
    r = run_d(h, "--store", "postgres", "--postgres", pg.conninfo + " user=nobody_here")
    assert r.returncode == 78, f"exit {r.returncode}:\n{r.stderr}"
    assert "nobody_here" in r.stderr, r.stderr
    said = [line for line in r.stderr.splitlines() if "refuses snowidd" in line]
    log(said[0][:200] if said else r.stderr[-400:])
    # said in PostgreSQL's terms: its name, its class, its own setting to check
    assert len(said) == 1, r.stderr
    assert "PostgreSQL at " in said[0] and "(postgres-auth)" in said[0], said[0]
    assert "the postgres setting" in said[0] and "etcd" not in said[0], said[0]
    # a server that is not there: the daemon waits, says so, and is not READY
    pg.stop_members()
    d = Daemon(h, pg, name="early").start(wait_ready=False)
    wait_for(lambda: "postgres unreachable" in d.status() or "unreachable" in d.log_text(), 15,
             "the daemon to say PostgreSQL is unreachable")
    assert d.proc.poll() is None and not d.has_message("READY=1")
    # the server comes: the daemon makes the schema and claims a number
    pg.start()
    d.wait_message("READY=1", 30)
    ids = take(h.instance, 10)
    assert len(set(ids)) == 10
    assert d.stop() == 0


def test_restart_during_claim(h):
    """The server is killed (-9) while a claim's transaction is open: the
    daemon gets no answer, reads back, finds the claim not applied, and
    claims again once the server is back; nothing is held twice."""
    pg = PgStore(h)
    # make the schema, and one holder, first
    a = Daemon(h, pg, instance=h.instance + "-a", name="a").start()
    # every new holder key now waits inside its transaction
    pg.pg.psql("""
        CREATE FUNCTION public.stall() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN IF convert_from(NEW.key, 'UTF8') LIKE '%/workers/%' THEN
               PERFORM pg_sleep(60); END IF; RETURN NEW; END $$;
        CREATE TRIGGER stall BEFORE INSERT ON snowid.kv
          FOR EACH ROW EXECUTE FUNCTION public.stall();""")
    b = Daemon(h, pg, instance=h.instance + "-b", name="b",
               args=["--etcd-timeout", "8000"]).start(wait_ready=False)

    def stalled():
        out = pg.pg.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
        return int(out.strip() or 0) > 0
    wait_for(stalled, 30, "B's claim to be inside its transaction")
    log("B's claim is open on the server: kill -9")
    pg.kill()
    pg.start()
    pg.pg.psql("DROP TRIGGER stall ON snowid.kv; DROP FUNCTION public.stall();")
    b.wait_message("READY=1", 60)
    text = b.log_text()
    assert "got no answer" in text and "reading back" in text, text[-3000:]
    held = {}
    for k, (v, _) in pg.prefix("/snowid/default/workers/").items():
        pid = int(v.split('"pid":')[1].split(",")[0])
        held.setdefault(pid, []).append(k)
    assert sorted(held) == sorted([a.proc.pid, b.proc.pid]), held
    assert all(len(keys) == 1 for keys in held.values()), held
    ia, ib = take(a.instance, 100), take(b.instance, 100)
    assert {decode(i)[1] for i in ia}.isdisjoint({decode(i)[1] for i in ib})
    check_unique_and_increasing([ia, ib])
    for d in (a, b):
        assert d.stop() == 0


def test_server_checks(h):
    """What the daemon checks of the server and says once: an acknowledged
    mark must survive a crash (synchronous_commit)."""
    pg = PgStore(h)
    pg.pg.psql("ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();", single=False)
    wait_for(lambda: pg.pg.psql("SHOW synchronous_commit").strip() == "off", 10,
             "the setting to take effect")
    port = free_port()
    d = Daemon(h, pg, args=["--http", f"127.0.0.1:{port}"]).start()
    st, body = http_get(port, "/v1/status")
    status = json.loads(body)
    assert st == 200 and status["store"] == "postgres" and status["etcd_reachable"], body
    assert status["store_reachable"] is True and status["store_full"] is False, body
    wait_for(lambda: "synchronous_commit" in d.log_text(), 10, "the warning")
    line = [x for x in d.log_text().splitlines() if "synchronous_commit" in x]
    log(line[0][:200])
    assert len(line) == 1, line
    assert d.stop() == 0


def test_schema_made_once(h):
    """Twenty daemons on an empty database at the same moment: one schema,
    twenty numbers, and clients on all of them unique."""
    pg = PgStore(h, schema=False)
    ds = [Daemon(h, pg, instance=f"{h.instance}-{i}", name=f"d{i}") for i in range(20)]
    start = time.monotonic()
    for d in ds:
        d.start(wait_ready=False)
    for d in ds:
        d.wait_message("READY=1", 60)
    took = time.monotonic() - start
    held = pg.prefix("/snowid/default/workers/")
    assert len(held) == 20, f"{len(held)} numbers held by 20 daemons"
    log(f"20 daemons on an empty database held 20 numbers {took:.2f} s after starting together")
    ids = [take(d.instance, 50) for d in ds]
    check_unique_and_increasing(ids)
    assert len({decode(i[0])[1] for i in ids}) == 20
    for d in ds:
        assert d.stop() == 0


if __name__ == "__main__":
    import sys
    harness.STORE = "postgres"
    tests = [test_settings, test_refused_and_unreachable, test_restart_during_claim,
             test_server_checks, test_schema_made_once]
    run([t for t in tests if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]])
