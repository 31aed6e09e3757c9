-- SPDX-License-Identifier: MIT
--
-- snowid's store in PostgreSQL: tables that say what they hold, and one
-- function per verb of the store's contract (docs/design.md, "The store's
-- verbs"; docs/postgres.md argues each one).  snowidd calls them as
-- prepared statements with typed arguments; each answers with one row.
--
-- The whole file is one simple-protocol query string.  A daemon sends it on
-- a new connection unless snowid.meta says the schema is this file's or
-- newer and its identity was made on this server (daemon/store/pg-conn.c);
-- it is idempotent, and the advisory lock makes daemons that start at once
-- take turns.
--
-- Locks.  A verb locks only the rows it touches: a claim, an extension or a
-- raise the one number's row (FOR UPDATE) and its cluster's row (FOR SHARE,
-- which many take at once), so that a fence, which takes the cluster's row
-- FOR UPDATE, is never between a write's check of the fence and its commit.
-- No row is taken by every call of every daemon.
--
-- Revisions.  Every write takes its revision from the sequence
-- snowid.revision after it holds the row it writes: a later write of the
-- same row waited for this one to commit, so it takes a higher one.  A
-- row's revision is what a daemon compares to find its own write still
-- there (a restore takes it back).  Reads answer with revision 0: a
-- sequence's value read outside a committed write may not survive a crash
-- of the server, and would look like a restore.
--
-- The only clock is the server's clock_timestamp(): lease expiry does not
-- depend on any daemon's clock.

BEGIN;

-- Everything is made only when this file is newer than what the database
-- holds (schema_version), never by an older daemon over a newer one's, so
-- that a daemon starting while others run takes no lock on the tables, and
-- daemons connecting at once do not wait for each other.  A fixed key of
-- snowid's own (an advisory lock) makes the loads that do change something
-- take turns.  Changing anything below: raise want.
--
-- From version 5 on, the tables are as they are here and a newer file only
-- replaces the functions' bodies (CREATE OR REPLACE): it locks no table,
-- so the verbs of daemons still running an older release go on beside the
-- load, row locks held and all, and take the new bodies at their next
-- call.  A version that changes a function's arguments or a table adds a
-- step of its own for it, under IF have < its number.
DO $install$
DECLARE
        want constant int := 7;
        have int := 0;
BEGIN
IF to_regclass('snowid.meta') IS NOT NULL THEN
        IF (SELECT schema_version FROM snowid.meta) >= want THEN
                RETURN;
        END IF;
END IF;
PERFORM pg_advisory_xact_lock(7306086541206302061);
IF to_regclass('snowid.meta') IS NOT NULL THEN
        SELECT schema_version INTO have FROM snowid.meta;
        have := coalesce(have, 0); -- its row deleted: made again
        IF have >= want THEN
                RETURN; -- made meanwhile
        END IF;
        IF have < 5 THEN
                -- the etcd emulation of earlier releases (version 4 and
                -- before): its calls wait behind this lock, and fail once
                -- it is gone
                LOCK TABLE snowid.meta IN ACCESS EXCLUSIVE MODE;
        END IF;
END IF;
IF have < 5 THEN
EXECUTE $schema$

CREATE SCHEMA IF NOT EXISTS snowid;

-- one row: the store's identity (what etcd's cluster ID is to etcd), and
-- the server the data was made on
CREATE TABLE IF NOT EXISTS snowid.meta (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        cluster_id bigint NOT NULL,
        schema_version int NOT NULL
);
ALTER TABLE snowid.meta ADD COLUMN IF NOT EXISTS system_identifier bigint;
INSERT INTO snowid.meta (cluster_id, schema_version)
SELECT greatest(1, ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint
                   & 9223372036854775807), 0
WHERE NOT EXISTS (SELECT 1 FROM snowid.meta);

CREATE SEQUENCE IF NOT EXISTS snowid.revision;

-- a cluster: its layout (absent until made), fence and floor, and the
-- host making it
CREATE TABLE IF NOT EXISTS snowid.clusters (
        name text PRIMARY KEY,
        epoch_ms bigint,
        time_bits int,
        worker_bits int,
        seq_bits int,
        layout_rev bigint,
        fence text,
        fence_rev bigint,
        floor bigint,
        creating text,
        creating_rev bigint
);

-- the leases; expires_at is the server's clock_timestamp() plus the TTL.
-- A lease whose time is up is gone, whether or not its row still is.
CREATE TABLE IF NOT EXISTS snowid.leases (
        id bigint PRIMARY KEY,
        ttl bigint NOT NULL,
        expires_at timestamptz NOT NULL
) WITH (fillfactor = 50);

-- a worker number: its mark, and its holder while its lease lives.  Every
-- write of the mark takes a new revision; the mark never goes down
-- (snowid._mark_up).  No index on what changes: updates stay HOT.
CREATE TABLE IF NOT EXISTS snowid.numbers (
        cluster text NOT NULL,
        n int NOT NULL CHECK (n >= 0),
        lease bigint,
        holder text,
        mark bigint NOT NULL CHECK (mark >= 0),
        mark_rev bigint NOT NULL,
        PRIMARY KEY (cluster, n)
) WITH (fillfactor = 50);

-- what a halted daemon wrote down for `snowid fence` (docs/fences.md rule 7)
CREATE TABLE IF NOT EXISTS snowid.witnesses (
        cluster text NOT NULL,
        token text NOT NULL,
        value text NOT NULL,
        rev bigint NOT NULL,
        PRIMARY KEY (cluster, token)
);

-- the regions' ranges of numbers (docs/regions.md)
CREATE TABLE IF NOT EXISTS snowid.ranges (
        cluster text NOT NULL,
        region text NOT NULL,
        value text NOT NULL,
        rev bigint NOT NULL,
        PRIMARY KEY (cluster, region)
);

$schema$;

-- from the etcd emulation: every key to the row that holds it now, the
-- revisions kept (the sequence goes on above them), and the emulation gone
IF to_regclass('snowid.kv') IS NOT NULL THEN
        EXECUTE $migrate$
        CREATE TEMP TABLE keys ON COMMIT DROP AS
        SELECT substring(k FROM '^/snowid/([^/]+)/') AS cluster,
               substring(k FROM '^/snowid/[^/]+/(.*)$') AS what,
               convert_from(value, 'UTF8') AS value, create_revision, mod_revision, lease
        FROM (SELECT convert_from(key, 'UTF8') AS k, * FROM snowid.kv) x
        WHERE k ~ '^/snowid/[^/]+/';

        INSERT INTO snowid.clusters (name)
        SELECT DISTINCT cluster FROM keys ON CONFLICT DO NOTHING;
        UPDATE snowid.clusters c
        SET epoch_ms = (k.value::jsonb ->> 'epoch_ms')::bigint,
            time_bits = (k.value::jsonb ->> 'time_bits')::int,
            worker_bits = (k.value::jsonb ->> 'worker_bits')::int,
            seq_bits = (k.value::jsonb ->> 'seq_bits')::int,
            layout_rev = k.create_revision
        FROM keys k WHERE k.cluster = c.name AND k.what = 'layout' AND k.value ~
            '^\{"epoch_ms":[0-9]{1,18},"time_bits":[0-9]{1,2},"worker_bits":[0-9]{1,2},"seq_bits":[0-9]{1,2}\}$';
        UPDATE snowid.clusters c SET fence = k.value, fence_rev = k.mod_revision
        FROM keys k WHERE k.cluster = c.name AND k.what = 'fence';
        UPDATE snowid.clusters c SET floor = k.value::bigint
        FROM keys k WHERE k.cluster = c.name AND k.what = 'floor' AND k.value ~ '^[0-9]{1,20}$'
                      AND k.value::numeric <= 9223372036854775807;
        UPDATE snowid.clusters c SET creating = k.value, creating_rev = k.mod_revision
        FROM keys k WHERE k.cluster = c.name AND k.what = 'creating';

        INSERT INTO snowid.numbers (cluster, n, lease, holder, mark, mark_rev)
        SELECT m.cluster, substring(m.what FROM 5)::int, nullif(w.lease, 0), w.value,
               m.value::bigint, m.mod_revision
        FROM keys m LEFT JOIN keys w
          ON w.cluster = m.cluster AND w.what = 'workers/' || substring(m.what FROM 5)
        WHERE m.what ~ '^hwm/[0-9]{1,9}$' AND m.value ~ '^[0-9]{1,20}$'
              AND m.value::numeric <= 9223372036854775807;
        INSERT INTO snowid.witnesses (cluster, token, value, rev)
        SELECT cluster, substring(what FROM 9), value, mod_revision
        FROM keys WHERE what LIKE 'witness/%';
        INSERT INTO snowid.ranges (cluster, region, value, rev)
        SELECT cluster, substring(what FROM 8), value, mod_revision
        FROM keys WHERE what LIKE 'ranges/%';

        SELECT setval('snowid.revision', greatest((SELECT revision FROM snowid.meta), 1));
        ALTER TABLE snowid.meta DROP COLUMN revision, DROP COLUMN member_id;
        DROP TABLE snowid.kv;
        ALTER TABLE snowid.leases SET (fillfactor = 50);
        DROP INDEX IF EXISTS snowid.leases_expires_at;
        $migrate$;
END IF;
-- the functions of earlier releases, the emulation's among them
DECLARE
        f regprocedure;
BEGIN
        FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                 JOIN pg_namespace s ON s.oid = p.pronamespace
                 WHERE s.nspname = 'snowid' LOOP
                EXECUTE 'DROP FUNCTION ' || f || ' CASCADE';
        END LOOP;
END;
END IF;
EXECUTE $functions$

-- a mark never goes down, whoever writes it
CREATE OR REPLACE FUNCTION snowid._mark_up() RETURNS trigger
LANGUAGE plpgsql AS $f$
BEGIN
        IF NEW.mark < OLD.mark THEN
                RAISE EXCEPTION 'snowid: the mark of number % would go down from % to %',
                        OLD.n, OLD.mark, NEW.mark USING ERRCODE = 'SNOW2';
        END IF;
        RETURN NEW;
END $f$;

-- No verb deletes a number's row; one deleted by hand keeps its mark in
-- the floor, as a mark key deleted from etcd leaves the floor the mark's
-- write raised (docs/fences.md rule 2: the floor stays at or above every
-- mark ever written).  A floor that is gone stays gone.
CREATE OR REPLACE FUNCTION snowid._mark_kept() RETURNS trigger
LANGUAGE plpgsql AS $f$
BEGIN
        IF TG_OP = 'TRUNCATE' THEN
                UPDATE snowid.clusters c
                SET floor = greatest(c.floor, (SELECT max(x.mark) FROM snowid.numbers x
                                               WHERE x.cluster = c.name))
                WHERE c.floor IS NOT NULL;
                RETURN NULL;
        END IF;
        UPDATE snowid.clusters SET floor = OLD.mark
        WHERE name = OLD.cluster AND floor < OLD.mark;
        RETURN OLD;
END $f$;

-- The helpers that read a table are PL/pgSQL, whose plans a connection
-- keeps: a SQL function that reads one is planned again at every call.
CREATE OR REPLACE FUNCTION snowid._id() RETURNS bigint
LANGUAGE plpgsql STABLE AS $f$
BEGIN
        RETURN (SELECT cluster_id FROM snowid.meta);
END $f$;

CREATE OR REPLACE FUNCTION snowid._live(l bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $f$
BEGIN
        RETURN l IS NOT NULL AND EXISTS (
                SELECT 1 FROM snowid.leases WHERE id = l AND expires_at > clock_timestamp());
END $f$;

-- a mark that fits the layout's time bits (any, while there is no layout):
-- one written by hand past them is not one, as it raises no floor in etcd
CREATE OR REPLACE FUNCTION snowid._valid(mark bigint, tb int) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $f$
        SELECT tb IS NULL OR tb >= 63 OR mark < (1::bigint << tb)
$f$;

-- the floor: at or above every mark ever written, while it is there (the
-- highest mark counts as it; `snowid fence` puts it; a number's row
-- deleted by hand leaves its mark in it, snowid._mark_kept)
CREATE OR REPLACE FUNCTION snowid._floor(c text, stored bigint, tb int) RETURNS bigint
LANGUAGE plpgsql STABLE AS $f$
BEGIN
        RETURN CASE WHEN stored IS NOT NULL THEN
                greatest(stored, (SELECT max(mark) FROM snowid.numbers
                                  WHERE cluster = c AND snowid._valid(mark, tb))) END;
END $f$;


-- the cluster's row, held FOR SHARE until the verb commits: the fence
-- cannot change between a write's check and its commit
CREATE OR REPLACE FUNCTION snowid._cluster(c text) RETURNS snowid.clusters
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        SELECT * INTO r FROM snowid.clusters WHERE name = c FOR SHARE;
        RETURN r;
END $f$;

-- ---- leases ----

CREATE OR REPLACE FUNCTION snowid.lease_grant(ttl_s bigint, OUT id bigint, OUT ttl bigint, OUT cid bigint)
LANGUAGE plpgsql AS $f$
BEGIN
        ttl := greatest(ttl_s, 2);
        LOOP
                id := ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint
                      & 9223372036854775807;
                EXIT WHEN id <> 0 AND NOT EXISTS (SELECT 1 FROM snowid.leases l WHERE l.id = lease_grant.id);
        END LOOP;
        INSERT INTO snowid.leases (id, ttl, expires_at)
        VALUES (id, ttl, clock_timestamp() + ttl * interval '1 second');
        -- a few leases whose time is up, gone with no revoke
        DELETE FROM snowid.leases l WHERE l.id IN (
                SELECT x.id FROM snowid.leases x
                WHERE x.expires_at < clock_timestamp() - interval '1 minute'
                LIMIT 4 FOR UPDATE SKIP LOCKED);
        cid := snowid._id();
END $f$;

-- ttl 0: the lease is unknown (revoked, or its time was up).  Committed
-- with the flush, as every write: a keepalive lost in a crash would end
-- the lease earlier than its holder counts, and another daemon's claim of
-- the number would then look to the holder like a restore (a halt until
-- `snowid fence`; docs/postgres.md, "Commits and the flush")
CREATE OR REPLACE FUNCTION snowid.lease_keepalive(lease bigint, OUT ttl bigint, OUT cid bigint)
LANGUAGE plpgsql AS $f$
BEGIN
        UPDATE snowid.leases l SET expires_at = clock_timestamp() + l.ttl * interval '1 second'
        WHERE l.id = lease AND l.expires_at > clock_timestamp() RETURNING l.ttl INTO ttl;
        ttl := coalesce(ttl, 0);
        cid := snowid._id();
END $f$;

CREATE OR REPLACE FUNCTION snowid.lease_revoke(lease bigint, OUT gone boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
BEGIN
        DELETE FROM snowid.leases l WHERE l.id = lease;
        gone := true;
        cid := snowid._id();
END $f$;

-- ---- numbers ----

-- The numbers of a sample (NULL: every number below workers) that have a
-- row: its number, whether a live lease holds it, its mark and the mark's
-- revision; the floor; whether the fence and layout are the caller's.
CREATE OR REPLACE FUNCTION snowid.scan(c text, f text, lrev bigint, workers bigint, sample int[],
                            OUT same boolean, OUT floor bigint, OUT ns int[], OUT held boolean[],
                            OUT marks bigint[], OUT revs bigint[], OUT cid bigint)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        SELECT * INTO r FROM snowid.clusters WHERE name = c;
        same := coalesce(r.fence = f AND r.layout_rev = lrev, false);
        floor := snowid._floor(c, r.floor, r.time_bits);
        SELECT array_agg(x.n ORDER BY x.n), array_agg(snowid._live(x.lease) ORDER BY x.n),
               array_agg(x.mark ORDER BY x.n), array_agg(x.mark_rev ORDER BY x.n)
        INTO ns, held, marks, revs
        FROM snowid.numbers x
        WHERE x.cluster = c AND x.n < workers AND (sample IS NULL OR x.n = ANY (sample));
        cid := snowid._id();
END $f$;

-- A number's row locked, and its holder's lease, if the lease's time is
-- up, deleted (so that no keepalive brings it back once the number is
-- taken).  No row: nothing locked, and a write inserts one only if there is
-- still none.
CREATE OR REPLACE FUNCTION snowid._number(c text, num int) RETURNS snowid.numbers
LANGUAGE plpgsql AS $f$
DECLARE
        x snowid.numbers;
BEGIN
        SELECT * INTO x FROM snowid.numbers WHERE cluster = c AND n = num FOR UPDATE;
        IF FOUND AND x.lease IS NOT NULL AND NOT snowid._live(x.lease) THEN
                -- only if still out of time: a keepalive committing
                -- meanwhile kept it
                DELETE FROM snowid.leases l
                WHERE l.id = x.lease AND l.expires_at <= clock_timestamp();
                IF NOT snowid._live(x.lease) THEN
                        x.lease := NULL;
                        x.holder := NULL;
                END IF;
        END IF;
        RETURN x;
END $f$;

-- A claim: the number under lease (live) with value and mark, if no live
-- lease holds it, its mark is at revision mrev (0: no mark, and then the floor
-- must be below start), the fence and layout are the caller's, and (orev
-- > 0) this daemon's last acknowledged write of number own is still there.
-- Failed: own's mark revision (-1: no row).
CREATE OR REPLACE FUNCTION snowid.claim(c text, f text, lrev bigint, num int, lease bigint, val text,
                             start bigint, mark bigint, mrev bigint, own int, orev bigint,
                             OUT ok boolean, OUT same boolean, OUT rev bigint,
                             OUT own_rev bigint, OUT own_mark bigint, OUT lease_gone boolean,
                             OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters := snowid._cluster(c);
        x snowid.numbers := snowid._number(c, num);
        o bigint;
        om bigint;
        live boolean;
BEGIN
        same := coalesce(r.fence = f AND r.layout_rev = lrev, false);
        rev := 0;
        cid := snowid._id();
        IF orev > 0 THEN
                SELECT y.mark_rev, y.mark INTO o, om
                FROM snowid.numbers y WHERE y.cluster = c AND y.n = own;
        END IF;
        own_rev := coalesce(o, -1);
        own_mark := om;
        -- the claim's own lease, live, and held so until the commit: a
        -- claim that comes after its lease was revoked takes nothing
        PERFORM 1 FROM snowid.leases l
        WHERE l.id = claim.lease AND l.expires_at > clock_timestamp() FOR SHARE;
        live := FOUND;
        ok := coalesce(same AND x.lease IS NULL AND coalesce(x.mark_rev, 0) = mrev
              AND (orev <= 0 OR o >= orev)
              AND (mrev <> 0 OR snowid._floor(c, r.floor, r.time_bits) < start), false);
        -- every compare held but the lease is gone: as etcd's put under a
        -- lease it does not know, an error rather than a refusal
        lease_gone := ok AND NOT live;
        ok := ok AND live;
        IF NOT ok THEN
                RETURN;
        END IF;
        rev := nextval('snowid.revision');
        IF mrev = 0 THEN
                -- no row when it was read: one only if there is still none
                -- (a claim of the same number under way waits here for the
                -- other's commit, and then takes nothing)
                INSERT INTO snowid.numbers (cluster, n, lease, holder, mark, mark_rev)
                VALUES (c, num, claim.lease, val, claim.mark, rev)
                ON CONFLICT (cluster, n) DO NOTHING;
        ELSE
                UPDATE snowid.numbers y
                SET lease = claim.lease, holder = val, mark = claim.mark, mark_rev = rev
                WHERE y.cluster = c AND y.n = num;
        END IF;
        IF NOT FOUND THEN
                ok := false;
                rev := 0;
        END IF;
END $f$;

-- A number as read: whether a live lease holds it, under which lease and
-- whether with value val; its mark and revision (no row: NULLs).
CREATE OR REPLACE FUNCTION snowid.read_number(c text, f text, lrev bigint, num int, val text,
                                   OUT same boolean, OUT held boolean, OUT lease bigint,
                                   OUT value_is boolean, OUT mark bigint, OUT mark_rev bigint,
                                   OUT cid bigint)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
        r snowid.clusters;
        x snowid.numbers;
BEGIN
        SELECT * INTO r FROM snowid.clusters WHERE name = c;
        same := coalesce(r.fence = f AND r.layout_rev = lrev, false);
        SELECT * INTO x FROM snowid.numbers y WHERE y.cluster = c AND y.n = num;
        held := snowid._live(x.lease);
        lease := CASE WHEN held THEN x.lease ELSE 0 END;
        value_is := held AND x.holder = val;
        mark := x.mark;
        mark_rev := x.mark_rev;
        cid := snowid._id();
END $f$;

-- A mark extension: the mark to mark, if the number is held by (lease,
-- val), its mark is below mark and at revision orev or later, and the fence
-- and layout are the caller's.  Failed: the number as read.
CREATE OR REPLACE FUNCTION snowid.extend(c text, f text, lrev bigint, num int, lease bigint, val text,
                              mark bigint, orev bigint,
                              OUT ok boolean, OUT same boolean, OUT rev bigint,
                              OUT held boolean, OUT holder_lease bigint, OUT value_is boolean,
                              OUT old_mark bigint, OUT old_rev bigint, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters := snowid._cluster(c);
        x snowid.numbers := snowid._number(c, num);
BEGIN
        same := coalesce(r.fence = f AND r.layout_rev = lrev, false);
        cid := snowid._id();
        held := x.lease IS NOT NULL;
        holder_lease := coalesce(x.lease, 0);
        value_is := held AND x.holder = val;
        old_mark := x.mark;
        old_rev := x.mark_rev;
        rev := 0;
        ok := coalesce(same AND x.lease = extend.lease AND x.holder = val AND x.mark < extend.mark
              AND x.mark_rev >= greatest(orev, 1), false);
        IF ok THEN
                rev := nextval('snowid.revision');
                UPDATE snowid.numbers y SET mark = extend.mark, mark_rev = rev
                WHERE y.cluster = c AND y.n = num;
        END IF;
END $f$;

-- A mark raised (docs/fences.md rule 4): put it at mark if its revision is
-- mrev (0: no mark) and the fence and layout are the caller's, or (put
-- false) only read.  The mark as read, unless put.
CREATE OR REPLACE FUNCTION snowid.raise(c text, f text, lrev bigint, num int, put boolean, mark bigint,
                             mrev bigint,
                             OUT ok boolean, OUT same boolean, OUT rev bigint,
                             OUT old_mark bigint, OUT old_rev bigint, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters := snowid._cluster(c);
        x snowid.numbers;
BEGIN
        same := coalesce(r.fence = f AND r.layout_rev = lrev, false);
        cid := snowid._id();
        rev := 0;
        IF put THEN
                SELECT * INTO x FROM snowid.numbers y WHERE y.cluster = c AND y.n = num FOR UPDATE;
        ELSE
                SELECT * INTO x FROM snowid.numbers y WHERE y.cluster = c AND y.n = num;
        END IF;
        old_mark := x.mark;
        old_rev := x.mark_rev;
        ok := coalesce(same AND (NOT put OR coalesce(x.mark_rev, 0) = mrev), false);
        IF put AND ok THEN
                rev := nextval('snowid.revision');
                IF mrev = 0 THEN
                        INSERT INTO snowid.numbers (cluster, n, mark, mark_rev)
                        VALUES (c, num, raise.mark, rev)
                        ON CONFLICT (cluster, n) DO NOTHING;
                ELSE
                        UPDATE snowid.numbers y SET mark = raise.mark, mark_rev = rev
                        WHERE y.cluster = c AND y.n = num;
                END IF;
                IF NOT FOUND THEN
                        ok := false;
                        rev := 0;
                END IF;
        END IF;
END $f$;

-- ---- the cluster ----

-- The layout (with its revision), fence and floor; while there is no
-- layout, whether a number is held, whether every mark is 0 (marks), and
-- whether a witness is there; the regions' records, hex-encoded
-- "region:value" pairs, and the highest revision among them; the revision
-- of number own's mark (-1: none).
CREATE OR REPLACE FUNCTION snowid.read_cluster(c text, marks boolean, own int,
                                    OUT epoch_ms bigint, OUT time_bits int, OUT worker_bits int,
                                    OUT seq_bits int, OUT layout_rev bigint, OUT fence text,
                                    OUT floor bigint, OUT held boolean, OUT marks_zero boolean,
                                    OUT witnessed boolean, OUT records text,
                                    OUT records_rev bigint, OUT own_rev bigint, OUT cid bigint)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        SELECT * INTO r FROM snowid.clusters WHERE name = c;
        epoch_ms := r.epoch_ms;
        time_bits := r.time_bits;
        worker_bits := r.worker_bits;
        seq_bits := r.seq_bits;
        layout_rev := r.layout_rev;
        fence := r.fence;
        floor := snowid._floor(c, r.floor, r.time_bits);
        held := false;
        marks_zero := true;
        witnessed := false;
        IF r.layout_rev IS NULL THEN
                -- a join, not snowid._live() per number: a fleet waiting
                -- for the creation reads this again and again
                held := EXISTS (SELECT 1 FROM snowid.numbers x
                                JOIN snowid.leases l ON l.id = x.lease
                                WHERE x.cluster = c AND l.expires_at > clock_timestamp());
                IF marks THEN
                        marks_zero := NOT EXISTS (SELECT 1 FROM snowid.numbers x
                                                  WHERE x.cluster = c AND x.mark <> 0);
                END IF;
                witnessed := EXISTS (SELECT 1 FROM snowid.witnesses w WHERE w.cluster = c);
        END IF;
        SELECT string_agg(encode(convert_to(g.region, 'UTF8'), 'hex') || ':' ||
                          encode(convert_to(g.value, 'UTF8'), 'hex'), ',' ORDER BY g.region),
               coalesce(max(g.rev), 0)
        INTO records, records_rev
        FROM snowid.ranges g WHERE g.cluster = c;
        own_rev := -1;
        IF own >= 0 THEN
                SELECT coalesce(max(x.mark_rev), -1) INTO own_rev
                FROM snowid.numbers x WHERE x.cluster = c AND x.n = own;
        END IF;
        cid := snowid._id();
END $f$;

-- The host making the cluster: taken (value; over a stale one at srev),
-- or only read (poll: daemons of releases before schema version 7 ask it;
-- later ones read it with the cluster).  layout: there; creating's value
-- and revision.
CREATE OR REPLACE FUNCTION snowid.creating(c text, poll boolean, val text, srev bigint,
                                OUT ok boolean, OUT layout boolean, OUT creating text,
                                OUT creating_rev bigint, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        cid := snowid._id();
        IF NOT poll THEN
                INSERT INTO snowid.clusters (name) VALUES (c) ON CONFLICT DO NOTHING;
                SELECT * INTO r FROM snowid.clusters WHERE name = c FOR UPDATE;
        ELSE
                SELECT * INTO r FROM snowid.clusters WHERE name = c;
        END IF;
        layout := r.layout_rev IS NOT NULL;
        creating := r.creating;
        creating_rev := coalesce(r.creating_rev, 0);
        ok := coalesce(NOT poll AND NOT layout AND
              CASE WHEN srev <> 0 THEN r.creating IS NOT NULL AND r.creating_rev = srev
                   ELSE r.creating IS NULL END, false);
        IF ok THEN
                UPDATE snowid.clusters SET creating = val,
                                           creating_rev = nextval('snowid.revision')
                WHERE name = c;
        END IF;
END $f$;

-- Marks 0 for numbers [lo, hi) where there is none, while there is no
-- layout and no floor.
CREATE OR REPLACE FUNCTION snowid.init_marks(c text, lo int, hi int, OUT ok boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        cid := snowid._id();
        INSERT INTO snowid.clusters (name) VALUES (c) ON CONFLICT DO NOTHING;
        SELECT * INTO r FROM snowid.clusters WHERE name = c FOR SHARE;
        ok := coalesce(r.layout_rev IS NULL AND r.floor IS NULL, false);
        IF ok THEN
                INSERT INTO snowid.numbers (cluster, n, mark, mark_rev)
                SELECT c, g, 0, nextval('snowid.revision') FROM generate_series(lo, hi - 1) g
                ON CONFLICT DO NOTHING;
        END IF;
END $f$;

-- The cluster made: layout, fence and floor, and the host making it
-- forgotten, if none of them is there, no number is held, no witness is
-- there, and every mark is 0 (marked) or there is none.
CREATE OR REPLACE FUNCTION snowid.make_cluster(c text, e bigint, tb int, wb int, sb int, f text,
                                    fl bigint, marked boolean, OUT ok boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        cid := snowid._id();
        INSERT INTO snowid.clusters (name) VALUES (c) ON CONFLICT DO NOTHING;
        SELECT * INTO r FROM snowid.clusters WHERE name = c FOR UPDATE;
        ok := coalesce(r.layout_rev IS NULL AND r.fence IS NULL AND r.floor IS NULL
              AND NOT EXISTS (SELECT 1 FROM snowid.numbers x
                              WHERE x.cluster = c AND snowid._live(x.lease))
              AND NOT EXISTS (SELECT 1 FROM snowid.witnesses w WHERE w.cluster = c)
              AND NOT EXISTS (SELECT 1 FROM snowid.numbers x
                              WHERE x.cluster = c AND (NOT marked OR x.mark <> 0)), false);
        IF ok THEN
                UPDATE snowid.clusters
                SET epoch_ms = e, time_bits = tb, worker_bits = wb, seq_bits = sb,
                    layout_rev = nextval('snowid.revision'), fence = f,
                    fence_rev = nextval('snowid.revision'), floor = fl,
                    creating = NULL, creating_rev = NULL
                WHERE name = c;
        END IF;
END $f$;

-- A witness put (held FOR SHARE on the cluster: a fence compares them
-- under FOR UPDATE), or deleted.
CREATE OR REPLACE FUNCTION snowid.witness(c text, tok text, val text, OUT ok boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
BEGIN
        cid := snowid._id();
        -- the cluster's row held FOR SHARE (made if need be): a fence that
        -- is being written waits for this, or this for it
        INSERT INTO snowid.clusters (name) VALUES (c) ON CONFLICT DO NOTHING;
        PERFORM snowid._cluster(c);
        IF val IS NULL THEN
                DELETE FROM snowid.witnesses w WHERE w.cluster = c AND w.token = tok;
        ELSE
                INSERT INTO snowid.witnesses AS w (cluster, token, value, rev)
                VALUES (c, tok, val, nextval('snowid.revision'))
                ON CONFLICT (cluster, token) DO UPDATE SET value = excluded.value, rev = excluded.rev;
        END IF;
        ok := true;
END $f$;

-- A region's record put, if no record was written after revision rrev
-- (records are written one at a time, under the cluster's row: their
-- revisions are in the order they commit) and the layout is at lrev.
CREATE OR REPLACE FUNCTION snowid.record_range(c text, reg text, val text, rrev bigint, lrev bigint,
                                    OUT ok boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        cid := snowid._id();
        SELECT * INTO r FROM snowid.clusters WHERE name = c FOR UPDATE;
        ok := coalesce(r.layout_rev = lrev AND
              coalesce((SELECT max(g.rev) FROM snowid.ranges g WHERE g.cluster = c), 0) <= rrev, false);
        IF ok THEN
                INSERT INTO snowid.ranges AS g (cluster, region, value, rev)
                VALUES (c, reg, val, nextval('snowid.revision'))
                ON CONFLICT (cluster, region) DO UPDATE SET value = excluded.value, rev = excluded.rev;
        END IF;
END $f$;

-- ---- `snowid fence` ----

-- What a fence reads: the layout (its revision), the fence and its
-- revision, the floor as stored, how many marks below 2^tb and the
-- highest, the witnesses (hex "token:value" pairs, comma-separated), and a
-- digest of the
-- witnesses' revisions (and, with no floor, of the marks') that the
-- fence's write compares.
CREATE OR REPLACE FUNCTION snowid.fence_read(c text, tb int,
                                  OUT layout_rev bigint, OUT fence text, OUT fence_rev bigint,
                                  OUT floor bigint, OUT marks bigint, OUT highest bigint,
                                  OUT witnesses text, OUT digest text, OUT cid bigint)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        SELECT * INTO r FROM snowid.clusters WHERE name = c;
        layout_rev := coalesce(r.layout_rev, 0);
        fence := r.fence;
        fence_rev := coalesce(r.fence_rev, 0);
        floor := r.floor;
        SELECT count(*), coalesce(max(x.mark), 0) INTO marks, highest
        FROM snowid.numbers x WHERE x.cluster = c AND snowid._valid(x.mark, tb);
        SELECT string_agg(encode(convert_to(w.token, 'UTF8'), 'hex') || ':' ||
                          encode(convert_to(w.value, 'UTF8'), 'hex'), ',' ORDER BY w.token)
        INTO witnesses FROM snowid.witnesses w WHERE w.cluster = c;
        digest := snowid._digest(c, r.floor IS NULL);
        cid := snowid._id();
END $f$;

CREATE OR REPLACE FUNCTION snowid._digest(c text, with_marks boolean) RETURNS text
LANGUAGE sql STABLE AS $f$
        SELECT md5(CASE WHEN with_marks THEN
                           coalesce((SELECT string_agg(x.n || ':' || x.mark_rev, ',' ORDER BY x.n)
                                     FROM snowid.numbers x WHERE x.cluster = c), '')
                        ELSE '' END || '/' ||
                   coalesce((SELECT string_agg(w.token || ':' || w.rev, ',' ORDER BY w.token)
                             FROM snowid.witnesses w WHERE w.cluster = c), ''))
$f$;

-- A fence written: the fence and the floor (and the layout, if absent),
-- every witness deleted, if the layout and fence are at the revisions read,
-- the floor (every mark) at most fl, or still absent and then no mark
-- written since the read, and no witness written since (digest).
CREATE OR REPLACE FUNCTION snowid.fence_write(c text, f text, fl bigint, lrev bigint, frev bigint,
                                   floor_read boolean, dig text,
                                   e bigint, tb int, wb int, sb int,
                                   OUT ok boolean, OUT cid bigint)
LANGUAGE plpgsql AS $f$
DECLARE
        r snowid.clusters;
BEGIN
        cid := snowid._id();
        INSERT INTO snowid.clusters (name) VALUES (c) ON CONFLICT DO NOTHING;
        SELECT * INTO r FROM snowid.clusters WHERE name = c FOR UPDATE;
        ok := coalesce(coalesce(r.layout_rev, 0) = lrev AND coalesce(r.fence_rev, 0) = frev
              AND CASE WHEN floor_read THEN snowid._floor(c, r.floor, r.time_bits) <= fl
                       ELSE r.floor IS NULL END
              AND snowid._digest(c, NOT floor_read) = dig, false);
        IF NOT ok THEN
                RETURN;
        END IF;
        UPDATE snowid.clusters SET fence = f, fence_rev = nextval('snowid.revision'), floor = fl
        WHERE name = c;
        IF r.layout_rev IS NULL THEN
                UPDATE snowid.clusters
                SET epoch_ms = e, time_bits = tb, worker_bits = wb, seq_bits = sb,
                    layout_rev = nextval('snowid.revision')
                WHERE name = c;
        END IF;
        DELETE FROM snowid.witnesses w WHERE w.cluster = c;
END $f$;

$functions$;
-- the triggers call the functions by name: made once, with the tables
IF have < 5 THEN
EXECUTE $triggers$
CREATE TRIGGER mark_up BEFORE UPDATE OF mark ON snowid.numbers
FOR EACH ROW EXECUTE FUNCTION snowid._mark_up();
CREATE TRIGGER mark_kept BEFORE DELETE ON snowid.numbers
FOR EACH ROW EXECUTE FUNCTION snowid._mark_kept();
CREATE TRIGGER marks_kept BEFORE TRUNCATE ON snowid.numbers
FOR EACH STATEMENT EXECUTE FUNCTION snowid._mark_kept();
$triggers$;
END IF;
UPDATE snowid.meta SET schema_version = want;
END
$install$;

-- A dump restored into another server (another system identifier) is a
-- restore the revisions may not show: the store gets a new cluster_id, so
-- that no daemon acts on it until `snowid fence` names it
-- (docs/postgres.md).  Read by whoever can; nothing is locked unless it
-- changed.
DO $moved$
DECLARE
        sid bigint;
BEGIN
IF has_function_privilege('pg_control_system()', 'EXECUTE') THEN
        SELECT system_identifier INTO sid FROM pg_control_system();
        IF (SELECT system_identifier FROM snowid.meta) IS DISTINCT FROM sid THEN
                -- one new identity, however many daemons connect at once
                PERFORM pg_advisory_xact_lock(7306086541206302061);
                UPDATE snowid.meta
                SET cluster_id = CASE WHEN system_identifier IS NULL THEN cluster_id
                        ELSE greatest(1, ('x' || substr(md5(gen_random_uuid()::text), 1, 16))
                                         ::bit(64)::bigint & 9223372036854775807) END,
                    system_identifier = sid
                WHERE system_identifier IS DISTINCT FROM sid;
        END IF;
END IF;
END
$moved$;

COMMIT;
