# SPDX-License-Identifier: MIT
"""snowidd with PostgreSQL as its store, where it differs from etcd: its
settings (a password never on the command line), a server that refuses the
user, the store named as PostgreSQL wherever a user reads about it, a server
restarted in the middle of a claim, what the daemon checks of the server
(synchronous_commit), and the schema made once by many daemons starting at
once.  The tests shared with etcd run with SNOWID_STORE=postgres
(pg-daemon, pg-failover)."""
import copy
import json
import os
import re
import subprocess
import time

import harness
from harness import (SNOWIDD, Daemon, PgStore, check_unique_and_increasing, cli, decode,
                     free_port, http_get, log, run, take, wait_for)


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


# The names that still say etcd whichever store answers, served beside their
# store-neutral replacements until the next release (docs/operators.md,
# "Renamed: the store's metrics and states"): the only places where a text
# shown under PostgreSQL may name etcd, besides a sentence that compares the
# two stores (one that names PostgreSQL too).
DEPRECATED_METRICS = {
    "snowid_etcd_reachable": "snowid_store_reachable",
    "snowid_etcd_full": "snowid_store_full",
    "snowid_etcd_full_total": "snowid_store_full_total",
    "snowid_etcd_restores_seen_total": "snowid_store_restores_seen_total",
    "snowid_etcd_request_duration_seconds": "snowid_store_request_duration_seconds",
}
# snowid_cluster_halted's reason label
DEPRECATED_REASONS = {"etcd-restored": "store-restored"}
# keys of `snowid status --json` (until the next release) and GET /v1/status
# (kept for older clients)
DEPRECATED_KEYS = {"etcd_reachable": "store_reachable", "etcd_error": "store_error",
                   "etcd_error_message": "store_error_message"}
# values of "state" (and "halted") beside "segment_state" (and "halt_reason")
DEPRECATED_STATES = {"store-restored": "etcd-restored", "store-full": "etcd-full"}


def says_etcd(text):
    """The sentences of text that name etcd and not PostgreSQL: a sentence
    that names both compares the two stores."""
    return [s for s in re.split(r"(?<=[.;!?])\s+|\n", text)
            if re.search(r"etcd", s, re.I) and "PostgreSQL" not in s]


def metrics_saying_etcd(body):
    """Lines of a /metrics body that name etcd other than by a deprecated
    name, and deprecated series that are not what they say: each one's HELP
    says it is deprecated and names its replacement, and its samples equal
    the replacement's."""
    bad = []
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = value

    def family(name):
        """The deprecated family a sample's name is of (a histogram's too), or None."""
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        return next((n for n in (name, base) if n in DEPRECATED_METRICS), None)

    for old, new in DEPRECATED_METRICS.items():
        help_line = next((x for x in body.splitlines() if x.startswith(f"# HELP {old} ")), "")
        if not help_line.startswith(f"# HELP {old} Deprecated") or new not in help_line:
            bad.append(f"{old}: its HELP does not say it is deprecated for {new}: {help_line!r}")
    for name, value in samples.items():
        old = family(re.split(r"[{ ]", name, 1)[0])
        if old:
            twin = name.replace(old, DEPRECATED_METRICS[old], 1)
            if samples.get(twin) != value:
                bad.append(f"{name} {value} but {twin} {samples.get(twin)}")
        for old_r, new_r in DEPRECATED_REASONS.items():
            if f'reason="{old_r}"' in name:
                twin = name.replace(f'reason="{old_r}"', f'reason="{new_r}"')
                if samples.get(twin) != value:
                    bad.append(f"{name} {value} but {twin} {samples.get(twin)}")
    for line in body.splitlines():
        rest = line
        for old in sorted(DEPRECATED_METRICS, key=len, reverse=True):
            rest = rest.replace(old, "")
        for old_r in DEPRECATED_REASONS:
            rest = rest.replace(f'"{old_r}"', "")
        if says_etcd(rest):
            bad.append(f"/metrics: {line}")
    return bad


def json_saying_etcd(where, j):
    """Keys and values of a status object that name etcd other than as a
    deprecated key holding what its replacement holds, or a deprecated
    state beside its replacement."""
    bad = []
    j = dict(j)
    for old, new in DEPRECATED_KEYS.items():
        if old in j:
            if new not in j or j[new] != j[old]:
                bad.append(f"{where}: {old} {j[old]!r} but {new} {j.get(new, 'absent')!r}")
            del j[old]
    for old, new in (("state", "segment_state"), ("halted", "halt_reason")):
        if old in j and new in j:
            want = DEPRECATED_STATES.get(j[new], j[new])
            if old == "halted" and j[new] is None:
                want = "no"
            if j[old] != want:
                bad.append(f"{where}: {old} {j[old]!r} beside {new} {j[new]!r}")
            del j[old]
    text = json.dumps(j)
    if re.search(r"etcd", text, re.I):
        bad.append(f"{where}: {text}")
    return bad


def test_store_named(h):
    """No text shown under PostgreSQL says etcd: `snowid status` (text and
    JSON), GET /v1/status, /healthz, /metrics, and the daemon's log through
    a refusal (a role that loses its rights on snowid's keys) and its end,
    except for the deprecated names, each beside its replacement."""
    pg = PgStore(h)
    pg.pg.psql("CREATE ROLE snowid_worker LOGIN; "
               "GRANT USAGE ON SCHEMA snowid TO snowid_worker; "
               "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA snowid "
               "TO snowid_worker; "
               "GRANT USAGE ON ALL SEQUENCES IN SCHEMA snowid TO snowid_worker", single=False)
    worker = copy.copy(pg)
    worker.conninfo = pg.conninfo.replace("user=postgres", "user=snowid_worker")
    assert "user=snowid_worker" in worker.conninfo, worker.conninfo
    port = free_port()
    d = Daemon(h, worker, args=["--http", f"127.0.0.1:{port}"]).start()
    before = take(h.instance, 3)
    problems = []

    def look(when):
        """Everything a user reads now; the status as `snowid status` shows it."""
        r = cli("status", "--instance", h.instance)
        assert r.returncode == 0, r.stderr
        # for people: no deprecated name here
        problems.extend(f"snowid status ({when}): {x!r}" for x in r.stdout.splitlines()
                        if re.search("etcd", x, re.I))
        rj = cli("status", "--instance", h.instance, "--json")
        assert rj.returncode == 0, rj.stderr
        j = json.loads(rj.stdout)
        problems.extend(json_saying_etcd(f"snowid status --json ({when})", j))
        code, body = http_get(port, "/v1/status")
        assert code == 200, body
        status = json.loads(body)
        assert status["store"] == "postgres", body
        problems.extend(json_saying_etcd(f"/v1/status ({when})", status))
        code, health = http_get(port, "/healthz")
        problems.extend(f"/healthz ({when}): {s!r}" for s in says_etcd(health))
        code, metrics = http_get(port, "/metrics")
        assert code == 200, metrics
        problems.extend(f"({when}) {p}" for p in metrics_saying_etcd(metrics))
        return r.stdout, j, health

    look("at rest")

    # the role loses its rights on the numbers' table: mark extensions
    # (snowid.extend, which locks and writes the number's row) are refused
    pg.pg.psql("REVOKE ALL ON snowid.numbers FROM snowid_worker")
    wait_for(lambda: "postgres-permission" in http_get(port, "/healthz")[1], 20,
             "/healthz to say postgres-permission")
    text, j, health = look("refused")
    log("snowid status, refused: " + " | ".join(x for x in text.splitlines() if "error" in x))
    # the refusal is shown, in PostgreSQL's words
    if "postgres-permission: " not in text or "permission denied" not in text:
        problems.append(f"snowid status does not show the refusal: {text!r}")
    if j.get("store_error") != "postgres-permission" or \
            "permission denied" not in (j.get("store_error_message") or ""):
        problems.append(f"snowid status --json has no store_error: {j}")
    assert "PostgreSQL refuses snowidd" in health, health
    wait_for(lambda: "postgres-permission" in d.status(), 10, "STATUS= to say the refusal")
    problems.extend(f"STATUS= (refused): {x!r}" for x in says_etcd(d.status()))
    said = [x for x in d.log_text().splitlines() if "refuses snowidd" in x]
    assert len(said) == 1 and "PostgreSQL at " in said[0], said
    log(said[0].split("snowidd: ", 1)[-1][:200])

    # given back: it goes on by itself, and says so
    pg.pg.psql("GRANT SELECT, INSERT, UPDATE, DELETE ON snowid.numbers TO snowid_worker")
    wait_for(lambda: http_get(port, "/healthz")[0] == 200, 45, "/healthz to be 200 again")
    look("again")
    assert min(take(h.instance, 3)) > max(before)
    assert d.stop() == 0
    text = d.log_text()
    assert "PostgreSQL takes snowidd's requests again (postgres-permission is over)" in text, \
        text[-2000:]
    problems.extend(f"log: {s!r}" for s in says_etcd(text))
    assert not problems, "etcd named under PostgreSQL:\n" + "\n".join(problems)


def test_restart_during_claim(h):
    """The server is killed (-9) while a claim's transaction is open: the
    daemon gets no answer, reads back, finds the claim not applied, and
    claims again once the server is back; nothing is held twice."""
    pg = PgStore(h)
    # make the schema, and one holder, first
    a = Daemon(h, pg, instance=h.instance + "-a", name="a").start()
    # every claim now waits inside its transaction: a write that puts a
    # holder on a number's row (snowid.claim's INSERT ... ON CONFLICT DO
    # UPDATE, which fires the row's BEFORE INSERT trigger, and then its
    # BEFORE UPDATE trigger when the row is there)
    pg.pg.psql("""
        CREATE FUNCTION public.stall() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN IF NEW.lease IS NOT NULL AND NEW.lease IS DISTINCT FROM
                      (CASE WHEN TG_OP = 'UPDATE' THEN OLD.lease END) THEN
               PERFORM pg_sleep(60); END IF; RETURN NEW; END $$;
        CREATE TRIGGER stall BEFORE INSERT OR UPDATE ON snowid.numbers
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
    pg.pg.psql("DROP TRIGGER stall ON snowid.numbers; DROP FUNCTION public.stall();")
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


def test_schema_sent_only_when_needed(h):
    """A connection sends postgres.sql only when the database's schema is
    older than this release's, or its identity was not made for this
    server (a copy restored into another): else one small read instead of
    the whole file compiled again by the server."""
    pg = PgStore(h)
    pg.pg.psql("ALTER SYSTEM SET log_statement = 'all'; SELECT pg_reload_conf();", single=False)
    wait_for(lambda: pg.pg.psql("SHOW log_statement").strip() == "all", 10,
             "the setting to take effect")
    meta = "SELECT schema_version, system_identifier, cluster_id FROM snowid.meta"
    version, sid, cid = pg.pg.psql(meta).strip().split("|")

    def loads_during(start):
        at = os.path.getsize(pg.pg.log)
        d = start()
        with open(pg.pg.log, errors="replace") as f:
            f.seek(at)
            text = f.read()
        assert "ERROR" not in text, text[-2000:]
        return d, text.count("DO $install$"), text.count("FROM snowid.meta m")

    d, loads, reads = loads_during(lambda: Daemon(h, pg).start())
    assert loads == 0 and reads >= 1, f"{loads} loads of the file, {reads} reads of the version"
    first = take(d.instance, 20)
    assert d.stop() == 0
    def sent_over(change, what):
        """change made to snowid.meta: the file is sent, and makes the
        schema this release's, for this server, again"""
        pg.pg.psql(change)
        d, loads, _ = loads_during(lambda: Daemon(h, pg).start())
        assert loads >= 1, f"the file was not sent over {what}"
        assert pg.pg.psql(meta).strip().split("|") == [version, sid, cid]
        ids = take(d.instance, 20)
        assert d.stop() == 0
        return ids

    second = sent_over("UPDATE snowid.meta SET system_identifier = NULL",
                       "an identity made elsewhere")
    third = sent_over("UPDATE snowid.meta SET schema_version = schema_version - 1",
                      "an older schema")
    # a role that may not read the server's identifier (nor could the file):
    # the file not sent, and no query of it that would fail
    pg.pg.psql("CREATE ROLE limited LOGIN; GRANT USAGE ON SCHEMA snowid TO limited; "
               "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA snowid TO limited; "
               "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA snowid TO limited; "
               "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC", single=False)
    assert pg.pg.psql("SELECT has_function_privilege('limited', 'pg_control_system()', "
                      "'EXECUTE')").strip() == "f"
    pg.conninfo = pg.pg.conninfo().replace("user=postgres", "user=limited")
    d, loads, reads = loads_during(lambda: Daemon(h, pg).start())
    assert loads == 0 and reads >= 1, f"{loads} loads of the file, {reads} reads of the version"
    check_unique_and_increasing([first, second, third, take(d.instance, 20)])
    assert d.stop() == 0
    log(f"schema version {version}: the file sent only over an identity made elsewhere or an "
        "older schema, and read by a role that may not read the server's identifier")


if __name__ == "__main__":
    import sys
    harness.STORE = "postgres"
    tests = [test_settings, test_refused_and_unreachable, test_store_named,
             test_restart_during_claim, test_server_checks, test_schema_made_once,
             test_schema_sent_only_when_needed]
    run([t for t in tests if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]])
