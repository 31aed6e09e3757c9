# SPDX-License-Identifier: MIT
"""The PostgreSQL store's schema (daemon/store/postgres.sql) through psql
alone, no daemon and no etcd: its verbs called as snowidd calls them, by
many sessions at once (twenty claimers racing for one number, and for a
pool: each number claimed once); a lease whose time is up frees its number;
a mark never goes down, whoever writes it; the schema loads again and again
(from several sessions at once, while verbs are served), leaves a newer
one alone, and survives kill -9; and a database of the previous release
(the etcd emulation, schema version 4) migrated: every key in the table
that holds it now, with its revision."""
import json
import os
import re
import subprocess
import sys
import threading
import time

from harness import log, run, wait_for
from pgserver import SQL, Postgres, available, sql_literal

FENCE = '{"token":"0123456789abcdef0123456789abcdef","era":1,"claims_above":0}'
EPOCH_MS = 1735689600000
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def start_pg(h):
    pg = Postgres(h)
    pg.load_schema()
    return pg


def make_cluster(pg, c, worker_bits):
    """The cluster made as a daemon makes it (init_marks, then make_cluster
    with every mark 0); its layout revision."""
    assert pg.verb("init_marks", c, 0, 1 << worker_bits)["ok"]
    assert pg.verb("make_cluster", c, EPOCH_MS, 41, worker_bits, 12, FENCE, 0, True)["ok"]
    r = pg.verb("read_cluster", c, False, -1)
    assert r["worker_bits"] == worker_bits and r["fence"] == FENCE and r["floor"] == 0, r
    return r["layout_rev"]


def number(pg, c, n):
    """A number's row, or None."""
    rows = pg.query_json(f"SELECT n, lease, holder, mark, mark_rev FROM snowid.numbers "
                         f"WHERE cluster = {sql_literal(c)} AND n = {int(n)}")
    return rows[0] if rows else None


def last_value(pg):
    return int(pg.psql("SELECT last_value FROM snowid.revision").strip())


def holder(i):
    return json.dumps({"host": f"c{i}", "instance": "i", "pid": i, "token": f"t-{i}"},
                      separators=(",", ":"))


def sqlstate_of(pg, sql):
    """Runs sql, which must fail; the SQLSTATE it failed with."""
    rc, out, err = pg.psql("\\set VERBOSITY verbose\n" + sql, check=False, single=False)
    assert rc != 0, f"{sql}: not refused: {out}"
    m = re.search(r"ERROR:\s+([0-9A-Z]{5}):", err)
    assert m, err
    return m.group(1)


# ---- many at once ----

def test_one_number_many_claimers(h):
    """Twenty sessions claim the same free number at the same moment (held
    back behind a lock on the cluster's row, then let go together): exactly
    one claim succeeds, and the number holds its lease, value and mark."""
    pg = start_pg(h)
    c, n_claimers, num = "one", 20, 3
    lrev = make_cluster(pg, c, 3)
    before = number(pg, c, num)
    gate = pg.session()
    sessions = [pg.session() for _ in range(n_claimers)]
    try:
        leases = [s.verb("lease_grant", 3600)["id"] for s in sessions]
        # the claims wait for the cluster's row (they take it FOR SHARE)
        gate.query("BEGIN")
        gate.query(f"SELECT FROM snowid.clusters WHERE name = {sql_literal(c)} FOR UPDATE")
        got, errors = {}, []

        def claimer(i):
            try:
                got[i] = sessions[i].verb("claim", c, FENCE, lrev, num, leases[i], holder(i),
                                          1, 1000 + i, before["mark_rev"], -1, 0)
            except Exception as e:
                errors.append(f"claimer {i}: {e!r}")
        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(n_claimers)]
        for t in threads:
            t.start()
        wait_for(lambda: int(pg.psql("SELECT count(*) FROM pg_stat_activity "
                                     "WHERE wait_event_type = 'Lock'").strip()) == n_claimers,
                 60, "every claim to wait for the cluster's row")
        gate.query("COMMIT")
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert len(got) == n_claimers, got
        won = [i for i, r in got.items() if r["ok"]]
        assert len(won) == 1, f"claims that succeeded: {won}"
        w = won[0]
        assert all(r["same"] for r in got.values()), got
        assert all(r["rev"] == 0 for i, r in got.items() if i != w), got
        row = number(pg, c, num)
        assert row["lease"] == leases[w] and row["holder"] == holder(w), (row, w)
        assert row["mark"] == 1000 + w and row["mark_rev"] == got[w]["rev"], (row, got[w])
        assert got[w]["rev"] > before["mark_rev"]
        r = pg.verb("read_number", c, FENCE, lrev, num, holder(w))
        assert r["held"] and r["lease"] == leases[w] and r["value_is"], r
        log(f"{n_claimers} claims of number {num} at once: claimer {w} alone got it")
    finally:
        for s in [gate] + sessions:
            s.close()


def test_concurrent_claims(h):
    """Twenty claimers at once, each on its own connection: each grants a
    lease, scans, and claims the lowest free number at the revision it
    scanned; every number is claimed once, by one claimer."""
    pg = start_pg(h)
    c, worker_bits, n_claimers = "conc", 5, 20
    n_workers = 1 << worker_bits
    lrev = make_cluster(pg, c, worker_bits)
    barrier = threading.Barrier(n_claimers)
    got, errors = {}, []

    def claimer(i):
        db = pg.session()  # a connection of its own, as each daemon has
        try:
            lease = db.verb("lease_grant", 3600)["id"]
            barrier.wait(timeout=120)
            for attempt in range(4 * n_claimers):
                s = db.verb("scan", c, FENCE, lrev, n_workers, None)
                assert s["same"], s
                rows = dict(zip(s["ns"], zip(s["held"], s["marks"], s["revs"])))
                free = [n for n in range(n_workers) if not rows[n][0]]
                assert free, "no number free"
                n = free[0]
                _, m, rev = rows[n]
                r = db.verb("claim", c, FENCE, lrev, n, lease, holder(i), 1, m + 1000, rev, -1, 0)
                if r["ok"]:
                    got[i] = (n, lease, attempt, r["rev"])
                    return
            raise AssertionError(f"claimer {i}: no number after {4 * n_claimers} tries")
        except Exception as e:
            errors.append(f"claimer {i}: {e!r}")
            barrier.abort()  # the others do not wait for this one
        finally:
            db.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(n_claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, [e for e in errors if "BrokenBarrier" not in e] or errors
    assert len(got) == n_claimers, got
    numbers = [g[0] for g in got.values()]
    assert len(set(numbers)) == n_claimers, f"a number claimed twice: {sorted(numbers)}"
    assert sorted(numbers) == list(range(n_claimers)), sorted(numbers)
    retries = sum(g[2] for g in got.values())
    log(f"{n_claimers} claimers: numbers {sorted(numbers)}, {retries} lost races retried")
    assert retries > 0, "no claimer ever lost a race: they did not run at once"
    revs = [g[3] for g in got.values()]
    assert len(set(revs)) == n_claimers, f"two claims at one revision: {sorted(revs)}"
    # what the store holds: each number once, with its claimer's lease and value
    s = pg.verb("scan", c, FENCE, lrev, n_workers, None)
    held = [n for n, x in zip(s["ns"], s["held"]) if x]
    assert sorted(held) == list(range(n_claimers)), held
    for i, (n, lease, _, rev) in got.items():
        row = number(pg, c, n)
        assert row["lease"] == lease and row["holder"] == holder(i) and row["mark_rev"] == rev, \
            (i, row)


# ---- leases ----

def test_lease_expiry(h):
    """A lease of 2 s that is not kept alive: its number is held until its
    time is up (a claim under another lease fails), free after it (the claim
    succeeds, and the lease is gone for good: keepalive answers ttl 0); its
    expiry takes no revision.  A revoked lease frees its number at once."""
    pg = start_pg(h)
    c = "exp"
    lrev = make_cluster(pg, c, 3)
    start = time.monotonic()  # before the lease is granted
    g = pg.verb("lease_grant", 1)
    short = g["id"]
    assert g["ttl"] == 2, g  # 2 s at least
    assert g["cid"] == int(pg.psql("SELECT cluster_id FROM snowid.meta")), g
    other = pg.verb("lease_grant", 300)["id"]
    m5 = number(pg, c, 5)
    r = pg.verb("claim", c, FENCE, lrev, 5, short, holder(1), 1, 1000, m5["mark_rev"], -1, 0)
    assert r["ok"], r
    r = pg.verb("claim", c, FENCE, lrev, 5, other, holder(2), 1, 2000, r["rev"], -1, 0)
    assert not r["ok"] and r["same"], "a claim of a held number succeeded"
    before = last_value(pg)

    def gone():
        return not pg.verb("read_number", c, FENCE, lrev, 5, holder(1))["held"]
    wait_for(gone, 15, "the 2 s lease to run out")
    took = time.monotonic() - start
    log(f"lease of 2 s gone after {took:.2f} s")
    assert took >= 1.95, f"a 2 s lease went after {took:.2f} s"
    assert last_value(pg) == before, "the lease's expiry took a revision"
    k = pg.verb("lease_keepalive", short)
    assert k["ttl"] == 0, k
    row = number(pg, c, 5)
    r = pg.verb("claim", c, FENCE, lrev, 5, other, holder(2), 1, 2000, row["mark_rev"], -1, 0)
    assert r["ok"], r
    row = number(pg, c, 5)
    assert row["lease"] == other and row["holder"] == holder(2) and row["mark"] == 2000, row
    # the claim deleted the lease that had run out: nothing brings it back
    assert pg.psql(f"SELECT count(*) FROM snowid.leases WHERE id = {short}").strip() == "0"
    assert pg.verb("lease_keepalive", short)["ttl"] == 0
    assert pg.verb("lease_keepalive", other)["ttl"] == 300
    # an extension under the lease that ran out fails, under the live one goes
    r = pg.verb("extend", c, FENCE, lrev, 5, short, holder(1), 3000, row["mark_rev"])
    assert not r["ok"] and r["held"] and r["holder_lease"] == other, r
    r = pg.verb("extend", c, FENCE, lrev, 5, other, holder(2), 3000, row["mark_rev"])
    assert r["ok"] and r["rev"] > row["mark_rev"], r
    # revoked: free at once
    assert pg.verb("lease_revoke", other)["gone"]
    assert not pg.verb("read_number", c, FENCE, lrev, 5, holder(2))["held"]
    assert pg.verb("lease_keepalive", other)["ttl"] == 0


# ---- marks ----

def test_mark_never_down(h):
    """The trigger refuses a write that lowers a mark, whoever makes it (a
    plain UPDATE, the raise verb's upsert) with SQLSTATE SNOW2; the same
    mark or a higher one goes through; extend refuses a mark not above."""
    pg = start_pg(h)
    c = "down"
    lrev = make_cluster(pg, c, 2)
    row = number(pg, c, 1)
    r = pg.verb("raise", c, FENCE, lrev, 1, True, 50000, row["mark_rev"])
    assert r["ok"] and r["rev"] > row["mark_rev"], r
    where = f"WHERE cluster = {sql_literal(c)} AND n = 1"
    assert sqlstate_of(pg, f"UPDATE snowid.numbers SET mark = 49999 {where}") == "SNOW2"
    assert sqlstate_of(pg, f"UPDATE snowid.numbers SET mark = 0, mark_rev = mark_rev + 1 "
                           f"{where}") == "SNOW2"
    assert sqlstate_of(pg, f"INSERT INTO snowid.numbers (cluster, n, mark, mark_rev) "
                           f"VALUES ({sql_literal(c)}, 1, 10, 1) ON CONFLICT (cluster, n) "
                           f"DO UPDATE SET mark = excluded.mark") == "SNOW2"
    # the verb that puts whatever it is given: its upsert is refused alike
    assert sqlstate_of(pg, f"SELECT * FROM snowid.raise({sql_literal(c)}, {sql_literal(FENCE)}, "
                           f"{lrev}, 1, true, 40000, {r['rev']})") == "SNOW2"
    row = number(pg, c, 1)
    assert row["mark"] == 50000 and row["mark_rev"] == r["rev"], row
    # the same mark, and a higher one, are written
    pg.psql(f"UPDATE snowid.numbers SET mark = 50000 {where}")
    pg.psql(f"UPDATE snowid.numbers SET mark = 60000 {where}")
    assert number(pg, c, 1)["mark"] == 60000
    # extend: a mark not above the stored one is not written
    lease = pg.verb("lease_grant", 300)["id"]
    r0 = number(pg, c, 0)
    cl = pg.verb("claim", c, FENCE, lrev, 0, lease, holder(0), 1, 7000, r0["mark_rev"], -1, 0)
    assert cl["ok"], cl
    r = pg.verb("extend", c, FENCE, lrev, 0, lease, holder(0), 7000, cl["rev"])
    assert not r["ok"] and r["old_mark"] == 7000, r
    r = pg.verb("extend", c, FENCE, lrev, 0, lease, holder(0), 6000, cl["rev"])
    assert not r["ok"], r
    assert number(pg, c, 0)["mark"] == 7000


# ---- the schema ----

def test_schema_load(h):
    """postgres.sql loads again and again, from several sessions at once,
    while verbs are served, and keeps the cluster id, the data and the
    revisions; a database made by a newer postgres.sql is left as it is,
    an older one brought up to date; kill -9 keeps what was committed."""
    pg = start_pg(h)
    c = "load"
    lrev = make_cluster(pg, c, 3)
    ident = pg.psql("SELECT cluster_id, schema_version FROM snowid.meta")
    rev0 = last_value(pg)
    errors = []

    def load():
        try:
            pg.load_schema()
        except Exception as e:
            errors.append(repr(e))

    def calls(i):
        try:
            for j in range(10):
                g = pg.verb("lease_grant", 3600)   # takes no revision
                assert g["id"] > 0, g
                # one revision each
                assert pg.verb("witness", c, f"w{i}-{j}", str(g["id"]))["ok"]
        except Exception as e:
            errors.append(repr(e))

    # loads at once, while requests are served
    threads = ([threading.Thread(target=load) for _ in range(8)]
               + [threading.Thread(target=calls, args=(i,)) for i in range(4)])
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert pg.psql("SELECT cluster_id, schema_version FROM snowid.meta") == ident
    assert last_value(pg) == rev0 + 40, (rev0, last_value(pg))
    assert pg.psql("SELECT count(*) FROM snowid.witnesses").strip() == "40"
    assert pg.verb("read_cluster", c, False, -1)["layout_rev"] == lrev
    # a database made by a newer postgres.sql is left as it is: nothing
    # made again (the install drops and makes every function of the schema)
    newer = "CREATE FUNCTION snowid.newer() RETURNS int LANGUAGE sql AS $$ SELECT 99 $$"
    pg.psql(newer + "; UPDATE snowid.meta SET schema_version = 99")
    tables = pg.psql("SELECT string_agg(relname || ':' || relfilenode, ',' ORDER BY relname) "
                     "FROM pg_class WHERE relnamespace = 'snowid'::regnamespace")
    pg.load_schema()
    assert pg.psql("SELECT snowid.newer()").strip() == "99"
    assert pg.psql("SELECT schema_version FROM snowid.meta").strip() == "99"
    assert pg.psql("SELECT string_agg(relname || ':' || relfilenode, ',' ORDER BY relname) "
                   "FROM pg_class WHERE relnamespace = 'snowid'::regnamespace") == tables
    # an older one is brought up to date: the functions made anew, the data kept
    pg.psql("UPDATE snowid.meta SET schema_version = 3")
    pg.load_schema()
    assert pg.psql("SELECT to_regprocedure('snowid.newer()') IS NULL").strip() == "t"
    want = re.search(r"want constant int := (\d+);", open(SQL).read()).group(1)
    assert pg.psql("SELECT cluster_id, schema_version FROM snowid.meta") == ident
    assert ident.strip().endswith("|" + want), (ident, want)
    assert last_value(pg) == rev0 + 40
    assert pg.verb("read_cluster", c, False, -1)["layout_rev"] == lrev
    where = f"WHERE cluster = {sql_literal(c)} AND n = 1"
    pg.psql(f"UPDATE snowid.numbers SET mark = 5 {where}")
    assert sqlstate_of(pg, f"UPDATE snowid.numbers SET mark = 4 {where}") == "SNOW2", \
        "the trigger is gone after the upgrade"
    # a fresh database, made by several at once: one meta row, another
    # cluster id, no revision taken
    other = Postgres(h)

    def load_other():
        try:
            other.load_schema()
        except Exception as e:
            errors.append(repr(e))
    threads = [threading.Thread(target=load_other) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert other.psql("SELECT count(*) FROM snowid.meta").strip() == "1"
    assert other.psql("SELECT cluster_id FROM snowid.meta") != ident.split("|")[0]
    assert other.psql("SELECT schema_version FROM snowid.meta").strip() == want
    assert other.psql("SELECT is_called FROM snowid.revision").strip() == "f"
    # kill -9 and a restart keep what was committed; the revision never
    # goes back (a sequence may move on across a crash: it logs ahead)
    marks = pg.psql("SELECT string_agg(n || ':' || mark || ':' || mark_rev, ',' ORDER BY n) "
                    "FROM snowid.numbers")
    rev = last_value(pg)
    pg.kill9()
    pg.start()
    assert pg.psql("SELECT cluster_id, schema_version FROM snowid.meta") == ident
    assert pg.psql("SELECT string_agg(n || ':' || mark || ':' || mark_rev, ',' ORDER BY n) "
                   "FROM snowid.numbers") == marks
    assert last_value(pg) >= rev
    assert pg.verb("lease_grant", 60)["cid"] == int(ident.split("|")[0])
    pg.stop("fast")
    pg.start()
    assert pg.psql("SELECT cluster_id, schema_version FROM snowid.meta") == ident


# ---- the previous release's database ----

def previous_schema(version=4):
    """The newest postgres.sql in the history that is schema version
    `version` (4: the etcd emulation); None without a git history."""
    try:
        revs = subprocess.run(["git", "-C", ROOT, "log", "--format=%H", "--",
                               "daemon/store/postgres.sql"],
                              capture_output=True, text=True, timeout=60, check=True).stdout.split()
        for rev in revs:
            text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:daemon/store/postgres.sql"],
                                  capture_output=True, text=True, timeout=60,
                                  check=True).stdout
            if f"want constant int := {version};" in text:
                return rev, text
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def old_database(h, version):
    """A server holding the schema of an earlier release, loaded from the
    newest postgres.sql of that version in the git history, and that file;
    None without one (a tarball)."""
    prev = previous_schema(version)
    if prev is None:
        log(f"no git history with a postgres.sql of version {version}: skipping")
        return None
    rev, old_sql = prev
    log(f"version {version}: postgres.sql of {rev[:12]}")
    pg = Postgres(h)
    pg.psql(old_sql)
    assert pg.psql("SELECT schema_version FROM snowid.meta").strip() == str(version)
    return pg, old_sql


def b64(s):
    import base64
    return base64.b64encode(s.encode()).decode()


def old_call(pg, path, body):
    """snowid.call() of the etcd emulation: the answer of a 200."""
    r = json.loads(pg.psql(f"SELECT snowid.call({sql_literal(path)}, "
                           f"{sql_literal(json.dumps(body))}::jsonb)"))
    assert r["status"] == 200, (path, body, r)
    return r["body"]


def test_migration(h):
    """A database of the previous release (version 4: etcd's keys in
    snowid.kv, snowid.call()) holding a cluster as its daemons wrote it,
    then postgres.sql loaded: every key in the row that holds it now, with
    its revision, the store's identity kept, the sequence above every
    revision the old store gave, the emulation gone; the verbs then work
    on the migrated cluster."""
    old = old_database(h, 4)
    if old is None:
        return
    pg, old_sql = old
    p = "/snowid/mig/"
    layout = '{"epoch_ms":1735689600000,"time_bits":41,"worker_bits":3,"seq_bits":12}'
    fence = ('{"token":"00112233445566778899aabbccddeeff","era":1790000000000,'
             '"claims_above":54000000000,"cluster_id":"1"}')
    marks = {0: 0, 1: 54000001000, 2: 54000002000, 3: 54000003000}

    def put(k, v, lease=0):
        r = {"key": b64(k), "value": b64(v)}
        if lease:
            r["lease"] = str(lease)
        return {"request_put": r}
    # the marks, then the cluster (as init_marks and the creation wrote them)
    old_call(pg, "/v3/kv/txn", {"success": [put(f"{p}hwm/{n}", "%020d" % 0) for n in marks]})
    old_call(pg, "/v3/kv/txn", {"success": [put(p + "layout", layout), put(p + "fence", fence),
                                            put(p + "floor", "%020d" % 54000000500)]})
    # the marks written since, one at a time; number 1 held under a lease
    for n, m in marks.items():
        if m:
            old_call(pg, "/v3/kv/put", {"key": b64(f"{p}hwm/{n}"), "value": b64("%020d" % m)})
    lease = old_call(pg, "/v3/lease/grant", {"TTL": 300})["ID"]
    value = '{"host":"h1","instance":"i1","pid":11,"token":"t-11"}'
    old_call(pg, "/v3/kv/txn", {"success": [put(f"{p}workers/1", value, lease),
                                            put(f"{p}hwm/1", "%020d" % 54000004000)]})
    marks[1] = 54000004000
    old_call(pg, "/v3/kv/put", {"key": b64(f"{p}witness/abcd"), "value": b64('{"fence":"x"}')})
    old_call(pg, "/v3/kv/put", {"key": b64(f"{p}ranges/eu"), "value": b64('{"from":0,"to":3}')})
    # a second cluster, being made: its host's key and its marks 0
    old_call(pg, "/v3/kv/txn", {"success": [put("/snowid/half/creating", '{"host":"h2"}'),
                                            put("/snowid/half/hwm/0", "%020d" % 0)]})
    keys = {r["key"]: r for r in pg.query_json(
        "SELECT convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value, "
        "create_revision, mod_revision, lease FROM snowid.kv")}
    meta = pg.query_json("SELECT cluster_id, revision FROM snowid.meta")[0]
    log(f"version 4: {len(keys)} keys, revision {meta['revision']}")

    pg.load_schema()

    def one(sql):
        rows = pg.query_json(sql)
        assert len(rows) == 1, (sql, rows)
        return rows[0]
    version = int(re.search(r"want constant int := (\d+);", open(SQL).read()).group(1))
    assert one("SELECT schema_version FROM snowid.meta")["schema_version"] == version
    assert one("SELECT cluster_id FROM snowid.meta")["cluster_id"] == meta["cluster_id"], \
        "the migration gave the store another identity"
    gone = one("SELECT to_regclass('snowid.kv') AS kv, "
               "to_regprocedure('snowid.call(text,jsonb)') AS call, "
               "(SELECT count(*) FROM information_schema.columns WHERE table_schema = 'snowid' "
               " AND table_name = 'meta' AND column_name IN ('revision', 'member_id')) AS cols")
    assert gone == {"kv": None, "call": None, "cols": 0}, gone
    # every function of the schema is the new file's, and none of the old's is left
    functions = {r["proname"] for r in pg.query_json(
        "SELECT proname FROM pg_proc WHERE pronamespace = 'snowid'::regnamespace")}
    old_names = set(re.findall(r"FUNCTION snowid\.(\w+)\(", old_sql))
    new_names = set(re.findall(r"FUNCTION snowid\.(\w+)\(", open(SQL).read()))
    assert functions == new_names, (functions ^ new_names)
    assert "call" in old_names and not (old_names - new_names) & functions
    # the sequence: at the old store's revision, the next one above it
    seq = one("SELECT last_value, is_called FROM snowid.revision")
    assert seq["last_value"] == meta["revision"] and seq["is_called"], (seq, meta)
    assert int(pg.psql("SELECT nextval('snowid.revision')")) > meta["revision"]

    cl = one("SELECT * FROM snowid.clusters WHERE name = 'mig'")
    lay = json.loads(layout)
    assert {f: cl[f] for f in lay} == lay, cl
    assert cl["layout_rev"] == keys[p + "layout"]["create_revision"], (cl, keys[p + "layout"])
    assert cl["fence"] == fence and cl["fence_rev"] == keys[p + "fence"]["mod_revision"], cl
    assert cl["floor"] == 54000000500, f"the floor did not land: {cl}"
    assert cl["creating"] is None and cl["creating_rev"] is None, cl
    half = one("SELECT * FROM snowid.clusters WHERE name = 'half'")
    assert half["creating"] == '{"host":"h2"}' and half["layout_rev"] is None, half
    assert half["creating_rev"] == keys["/snowid/half/creating"]["mod_revision"], half
    rows = {(r["cluster"], r["n"]): r for r in pg.query_json("SELECT * FROM snowid.numbers")}
    want = {("mig", n): m for n, m in marks.items()}
    want[("half", 0)] = 0
    assert {k: r["mark"] for k, r in rows.items()} == want, f"the marks did not land: {rows}"
    for (c, n), r in rows.items():
        assert r["mark_rev"] == keys[f"/snowid/{c}/hwm/{n}"]["mod_revision"], r
        if (c, n) == ("mig", 1):
            assert r["lease"] == int(lease) and r["holder"] == value, r
        else:
            assert r["lease"] is None and r["holder"] is None, r
    w = one("SELECT * FROM snowid.witnesses")
    assert w == {"cluster": "mig", "token": "abcd", "value": '{"fence":"x"}',
                 "rev": keys[p + "witness/abcd"]["mod_revision"]}, w
    g = one("SELECT * FROM snowid.ranges")
    assert g == {"cluster": "mig", "region": "eu", "value": '{"from":0,"to":3}',
                 "rev": keys[p + "ranges/eu"]["mod_revision"]}, g
    assert one(f"SELECT count(*) AS n FROM snowid.leases WHERE id = {int(lease)}")["n"] == 1

    # the verbs on what was migrated: the cluster as a daemon reads it, the
    # number held by its lease, a claim of a free number at its revision
    r = pg.verb("read_cluster", "mig", True, 1)
    assert r["layout_rev"] == cl["layout_rev"] and r["fence"] == fence, r
    assert r["floor"] == max(54000000500, max(marks.values())), r
    assert r["own_rev"] == rows[("mig", 1)]["mark_rev"], r
    r = pg.verb("read_number", "mig", fence, cl["layout_rev"], 1, value)
    assert r["held"] and r["value_is"] and r["lease"] == int(lease), r
    assert pg.verb("lease_keepalive", int(lease))["ttl"] == 300
    new = pg.verb("lease_grant", 60)["id"]
    r = pg.verb("claim", "mig", fence, cl["layout_rev"], 2, new, holder(2), 1, 54000010000,
                rows[("mig", 2)]["mark_rev"], -1, 0)
    assert r["ok"] and r["rev"] > meta["revision"], r
    r = pg.verb("claim", "mig", fence, cl["layout_rev"], 1, new, holder(2), 1, 54000010000,
                rows[("mig", 1)]["mark_rev"], -1, 0)
    assert not r["ok"], "a claim of the migrated holder's number succeeded"
    assert sqlstate_of(pg, "UPDATE snowid.numbers SET mark = 1 "
                           "WHERE cluster = 'mig' AND n = 3") == "SNOW2"
    # and it loads again as any current database does
    pg.load_schema()
    assert one("SELECT count(*) AS n FROM snowid.numbers")["n"] == len(want)


def test_upgrade_beside_old_verbs(h):
    """A database of version 5 (the first of the native tables), a verb of
    a daemon of that release in the middle of its transaction (the
    cluster's row FOR SHARE, a number's FOR UPDATE, the store's identity
    read), and this file loaded by a newer daemon: the load locks no table,
    so it ends while the old verb's transaction is still open, and that
    transaction then writes and commits; the functions are this file's,
    and the triggers that keep a mark from going down are still there."""
    old = old_database(h, 5)
    if old is None:
        return
    pg = old[0]
    pg.psql("INSERT INTO snowid.clusters (name, floor) VALUES ('up', 10); "
            "INSERT INTO snowid.numbers (cluster, n, mark, mark_rev) VALUES ('up', 0, 100, 1)")
    with open(SQL) as f:
        new_sql = f.read()
    session = pg.session()
    try:
        session.query("BEGIN")
        session.query("SELECT 1 FROM snowid.clusters WHERE name = 'up' FOR SHARE")
        session.query("SELECT 1 FROM snowid.numbers WHERE cluster = 'up' AND n = 0 FOR UPDATE")
        session.query("SELECT snowid._id()")
        # a load that waited for the old verb's locks would fail here, not hang
        rc, _, err = pg.psql("SET lock_timeout = 5000; " + new_sql, check=False)
        assert rc == 0, f"the load waited for the old verb's locks: {err[:500]}"
        session.query("UPDATE snowid.numbers SET mark = 200, mark_rev = 2 "
                  "WHERE cluster = 'up' AND n = 0")
        session.query("COMMIT")
    finally:
        session.close()
    version = re.search(r"want constant int := (\d+);", new_sql).group(1)
    assert pg.psql("SELECT schema_version FROM snowid.meta").strip() == version
    assert pg.psql("SELECT mark FROM snowid.numbers WHERE cluster = 'up' AND n = 0").strip() \
        == "200"
    assert pg.psql("SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
                   "WHERE p.oid = 'snowid._id()'::regprocedure").strip() == "plpgsql"
    assert pg.psql("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'snowid.numbers'::regclass "
                   "AND NOT tgisinternal").strip() == "3"
    assert sqlstate_of(pg, "UPDATE snowid.numbers SET mark = 150 "
                           "WHERE cluster = 'up' AND n = 0") == "SNOW2"
    g = pg.verb("lease_grant", 10)
    assert g["id"] > 0 and g["ttl"] == 10, g


def test_previous_release_statements(h):
    """A database of version 6 (the release before the cluster read said
    who makes the cluster), the statements a daemon of that release
    prepares on its connection, and this file loaded by a newer daemon
    meanwhile: on the same connection, the old read of the cluster answers
    exactly as before (no column added to the function it calls), and the
    old poll of `creating` still reads the host making it."""
    old = old_database(h, 6)
    if old is None:
        return
    pg = old[0]
    with open(SQL) as f:
        new_sql = f.read()
    session = pg.session()
    try:
        session.query("PREPARE rc AS SELECT * FROM snowid.read_cluster($1::text, $2::boolean, "
                      "$3::int)")
        session.query("PREPARE cr AS SELECT * FROM snowid.creating($1::text, $2::boolean, "
                      "$3::text, $4::bigint)")
        took = session.query("EXECUTE cr('v', false, 'host-a 1', 0)")
        assert took.startswith("t|"), took
        before = session.query("EXECUTE rc('v', false, -1)")
        pg.psql(new_sql)
        version = re.search(r"want constant int := (\d+);", new_sql).group(1)
        assert int(version) > 6, version
        assert pg.psql("SELECT schema_version FROM snowid.meta").strip() == version
        after = session.query("EXECUTE rc('v', false, -1)")
        assert after == before, (before, after)
        poll = session.query("EXECUTE cr('v', true, '', 0)")
        assert poll.startswith("f|f|host-a 1|"), poll
    finally:
        session.close()


if __name__ == "__main__":
    if not available():
        print("PostgreSQL 15 is not installed: skipping")
        sys.exit(77)
    tests = [test_one_number_many_claimers, test_concurrent_claims, test_lease_expiry,
             test_mark_never_down, test_schema_load, test_migration,
             test_upgrade_beside_old_verbs, test_previous_release_statements]
    run([t for t in tests if len(sys.argv) < 2 or t.__name__ in sys.argv[1:]], etcd=False)
