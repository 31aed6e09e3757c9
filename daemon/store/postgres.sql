-- SPDX-License-Identifier: MIT
--
-- snowid's store in PostgreSQL: etcd's v3 key-value model (one keyspace,
-- revisions, leases) and snowid.call(path, body), which executes the
-- requests snowidd sends to etcd's JSON gateway with etcd's semantics and
-- answers as the gateway does: {"status": <HTTP status>, "body": <answer>}.
--
-- The whole file is one simple-protocol query string.  Every daemon sends it
-- when it connects; it is idempotent, and the advisory lock makes daemons
-- that start at once take turns.
--
-- Serialization.  Every snowid.call() first locks the one row of
-- snowid.meta (SELECT ... FOR UPDATE) and holds it until its transaction
-- ends, so calls run one at a time, in the order they got the lock: one
-- total order of requests, as etcd's raft log gives.  At READ COMMITTED
-- each statement of a call takes a new snapshot after the lock was granted,
-- so a call sees every call committed before it and nothing of any call
-- after it: each call reads and writes the state left by the previous one,
-- which is what etcd's linearizable reads and serialized txns guarantee.
-- Only at READ COMMITTED: at REPEATABLE READ a call that waited for the
-- lock would read the snapshot taken before it (a lease revoked meanwhile
-- still there), so snowid.call refuses to run at any other level, and
-- snowidd sets it on every connection.  The revision is in the locked row,
-- so it grows by one per writing call, in lock order.
-- The only clock is the server's clock_timestamp(): lease expiry does not
-- depend on any daemon's clock.

BEGIN;

-- a fixed key of snowid's own: loads of this file take turns
SELECT pg_advisory_xact_lock(7306086541206302061);

-- Everything is made only when this file is newer than what the database
-- holds (schema_version), never by an older daemon over a newer one's, so
-- that a daemon starting while others run takes no lock on the tables.
-- Changing anything below: raise want.
DO $install$
DECLARE
        want constant int := 4;
BEGIN
IF to_regclass('snowid.meta') IS NOT NULL THEN
        IF (SELECT schema_version FROM snowid.meta) >= want AND
           to_regprocedure('snowid.call(text,jsonb)') IS NOT NULL THEN
                RETURN;
        END IF;
END IF;
-- an upgrade takes snowid.meta first, as every call does, so that its
-- DDL's table locks come after it in the same order; the whole table (not
-- only its row), so that a call waiting for the row, which holds the
-- table's ROW SHARE, does not meet the ALTER TABLE below in a deadlock
IF to_regclass('snowid.meta') IS NOT NULL THEN
        LOCK TABLE snowid.meta IN ACCESS EXCLUSIVE MODE;
END IF;
EXECUTE $schema$

CREATE SCHEMA IF NOT EXISTS snowid;

CREATE TABLE IF NOT EXISTS snowid.meta (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        revision bigint NOT NULL,
        cluster_id bigint NOT NULL,
        member_id bigint NOT NULL,
        schema_version int NOT NULL
);

CREATE TABLE IF NOT EXISTS snowid.kv (
        key bytea PRIMARY KEY,
        value bytea NOT NULL,
        create_revision bigint NOT NULL,
        mod_revision bigint NOT NULL,
        version bigint NOT NULL,
        lease bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS kv_lease ON snowid.kv (lease) WHERE lease <> 0;

CREATE TABLE IF NOT EXISTS snowid.leases (
        id bigint PRIMARY KEY,
        ttl bigint NOT NULL,
        expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_expires_at ON snowid.leases (expires_at);

-- made once: a restored or replaced database shows up as etcd's would (the
-- revision goes back, or the cluster id is another); etcd starts at 1
-- the server the data was made on (pg_control_system()), where readable:
-- data moved to another server (a dump restored) gets a new cluster_id
ALTER TABLE snowid.meta ADD COLUMN IF NOT EXISTS system_identifier bigint;

INSERT INTO snowid.meta (revision, cluster_id, member_id, schema_version)
SELECT 1,
       greatest(1, ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint
                   & 9223372036854775807),
       greatest(1, ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint
                   & 9223372036854775807),
       0
WHERE NOT EXISTS (SELECT 1 FROM snowid.meta);

$schema$;
EXECUTE $functions$

-- An etcd error: its HTTP status and gRPC code travel in the detail.
CREATE OR REPLACE FUNCTION snowid._fail(status int, code int, msg text) RETURNS void
LANGUAGE plpgsql AS $f$
BEGIN
        RAISE EXCEPTION USING ERRCODE = 'SNOW1', MESSAGE = msg, DETAIL = status || ' ' || code;
END $f$;

-- A field by its proto name or its lowerCamel JSON name; JSON null = absent
CREATE OR REPLACE FUNCTION snowid._f(o jsonb, a text, b text DEFAULT NULL) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $f$
        SELECT CASE WHEN jsonb_typeof(o) = 'object'
                    THEN coalesce(nullif(o -> a, 'null'::jsonb), nullif(o -> b, 'null'::jsonb)) END
$f$;

-- int64: a JSON number or a decimal string; absent = 0
CREATE OR REPLACE FUNCTION snowid._int(j jsonb) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
        t text;
BEGIN
        IF j IS NULL THEN
                RETURN 0;
        END IF;
        t := j #>> '{}';
        IF jsonb_typeof(j) NOT IN ('number', 'string') THEN
                PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' || replace(jsonb_typeof(j), 'boolean', 'bool') ||
                                     ' into Go value of type int64');
        ELSIF t !~ '^-?[0-9]+$' THEN
                PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' ||
                                     CASE WHEN jsonb_typeof(j) = 'number' THEN 'number ' || t
                                          ELSE 'string' END || ' into Go value of type int64');
        END IF;
        RETURN t::bigint; -- out of range: numeric_value_out_of_range, a 400
END $f$;

CREATE OR REPLACE FUNCTION snowid._bool(j jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
        IF j IS NULL THEN
                RETURN false;
        ELSIF jsonb_typeof(j) <> 'boolean' THEN
                PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' || replace(jsonb_typeof(j), 'boolean', 'bool') ||
                                     ' into Go value of type bool');
        END IF;
        RETURN (j #>> '{}')::boolean;
END $f$;

-- an enum: its UPPERCASE name or its number; absent = 0
CREATE OR REPLACE FUNCTION snowid._enum(j jsonb, names text[], what text) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
        i int;
BEGIN
        IF j IS NULL THEN
                RETURN 0;
        ELSIF jsonb_typeof(j) = 'number' AND (j #>> '{}') ~ '^[0-9]+$' THEN
                RETURN (j #>> '{}')::int;
        ELSIF jsonb_typeof(j) = 'string' THEN
                i := array_position(names, j #>> '{}');
                IF i IS NOT NULL THEN
                        RETURN i - 1;
                END IF;
        END IF;
        PERFORM snowid._fail(400, 3, 'unknown value ' || j::text || ' for enum etcdserverpb.' || what);
        RETURN NULL;
END $f$;

-- bytes: standard base64 with padding, as Go's encoding/json reads them
CREATE OR REPLACE FUNCTION snowid._bytes(j jsonb) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
        t text;
BEGIN
        IF j IS NULL THEN
                RETURN ''::bytea;
        ELSIF jsonb_typeof(j) <> 'string' THEN
                PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' || replace(jsonb_typeof(j), 'boolean', 'bool') ||
                                     ' into Go value of type []uint8');
        END IF;
        t := j #>> '{}';
        IF t !~ '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
                PERFORM snowid._fail(400, 3, 'illegal base64 data at input byte ' ||
                        coalesce(nullif(length(substring(t from '^[A-Za-z0-9+/]*')), length(t)),
                                 length(t) / 4 * 4));
        END IF;
        RETURN decode(t, 'base64');
END $f$;

-- base64 without the newlines PostgreSQL puts every 76 characters
CREATE OR REPLACE FUNCTION snowid._enc(b bytea) RETURNS text
LANGUAGE sql IMMUTABLE AS $f$
        SELECT translate(encode(b, 'base64'), E'\n', '')
$f$;

-- The exclusive upper bound of a key range: range_end empty = the key
-- alone; "\0" = every key from the key on (NULL: no bound).
CREATE OR REPLACE FUNCTION snowid._hi(k bytea, e bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $f$
        SELECT CASE WHEN length(e) = 0 THEN k || '\x00'::bytea
                    WHEN e = '\x00'::bytea THEN NULL ELSE e END
$f$;

CREATE OR REPLACE FUNCTION snowid._c(a bigint, b bigint) RETURNS int
LANGUAGE sql IMMUTABLE AS $f$
        SELECT CASE WHEN a < b THEN -1 WHEN a > b THEN 1 ELSE 0 END
$f$;

CREATE OR REPLACE FUNCTION snowid._cb(a bytea, b bytea) RETURNS int
LANGUAGE sql IMMUTABLE AS $f$
        SELECT CASE WHEN a < b THEN -1 WHEN a > b THEN 1 ELSE 0 END
$f$;

-- result: EQUAL, GREATER, LESS, NOT_EQUAL
CREATE OR REPLACE FUNCTION snowid._res(result int, c int) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $f$
        SELECT CASE result WHEN 0 THEN c = 0 WHEN 1 THEN c > 0 WHEN 2 THEN c < 0 ELSE c <> 0 END
$f$;

-- a kv as etcd writes it: int64 as strings, zero and empty fields left out
CREATE OR REPLACE FUNCTION snowid._kv(key bytea, value bytea, create_revision bigint,
                                      mod_revision bigint, version bigint, lease bigint,
                                      keys_only boolean) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $f$
        SELECT jsonb_strip_nulls(jsonb_build_object(
                'key', snowid._enc(key),
                'create_revision', nullif(create_revision, 0)::text,
                'mod_revision', nullif(mod_revision, 0)::text,
                'version', nullif(version, 0)::text,
                'value', CASE WHEN NOT keys_only AND length(value) > 0 THEN snowid._enc(value) END,
                'lease', nullif(lease, 0)::text))
$f$;

CREATE OR REPLACE FUNCTION snowid._hdr(rev bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $f$
        SELECT jsonb_build_object('cluster_id', cluster_id::text, 'member_id', member_id::text,
                                  'revision', rev::text, 'raft_term', '1')
        FROM snowid.meta
$f$;

CREATE OR REPLACE FUNCTION snowid._err(status int, code int, msg text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $f$
        SELECT jsonb_build_object('status', status, 'body',
                                  jsonb_build_object('error', msg, 'message', msg, 'code', code))
$f$;

CREATE OR REPLACE FUNCTION snowid._set_revision(rev bigint) RETURNS void
LANGUAGE sql AS $f$
        UPDATE snowid.meta SET revision = rev
$f$;

-- etcd's lessor: every lease whose time is up goes, with its keys, in one
-- statement (the time read once, so the index on expires_at serves it).
-- Unlike etcd's, this moves no revision: a restored backup brings back
-- leases whose time is already up, and a revision for each would carry the
-- revision past what daemons saw before the restore and hide it (rule 5 of
-- docs/fences.md).  Nothing in snowid reads a revision of a deletion.
-- The revision after: rev.
CREATE OR REPLACE FUNCTION snowid._expire(rev bigint) RETURNS bigint
LANGUAGE plpgsql AS $f$
DECLARE
        t timestamptz := clock_timestamp();
BEGIN
        WITH gone AS (DELETE FROM snowid.leases WHERE expires_at <= t RETURNING id)
        DELETE FROM snowid.kv WHERE lease <> 0 AND lease IN (SELECT id FROM gone);
        RETURN rev;
END $f$;

-- ---- key-value requests ----

-- RangeRequest -> RangeResponse at revision rev (header: the revision only)
CREATE OR REPLACE FUNCTION snowid._range(r jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        k bytea := snowid._bytes(snowid._f(r, 'key'));
        hi bytea := snowid._hi(k, snowid._bytes(snowid._f(r, 'range_end', 'rangeEnd')));
        lim bigint := snowid._int(snowid._f(r, 'limit'));
        ko boolean := snowid._bool(snowid._f(r, 'keys_only', 'keysOnly'));
        co boolean := snowid._bool(snowid._f(r, 'count_only', 'countOnly'));
        so int := snowid._enum(snowid._f(r, 'sort_order', 'sortOrder'),
                               '{NONE,ASCEND,DESCEND}', 'RangeRequest_SortOrder');
        st int := snowid._enum(snowid._f(r, 'sort_target', 'sortTarget'),
                               '{KEY,VERSION,CREATE,MOD,VALUE}', 'RangeRequest_SortTarget');
        at bigint := snowid._int(snowid._f(r, 'revision'));
        n bigint;
        kvs jsonb;
        res jsonb := jsonb_build_object('header', jsonb_build_object('revision', rev::text));
BEGIN
        IF length(k) = 0 THEN
                PERFORM snowid._fail(400, 3, 'etcdserver: key is not provided');
        END IF;
        -- no history is kept: only the current revision can be read
        IF at > rev THEN
                PERFORM snowid._fail(400, 11, 'etcdserver: mvcc: required revision is a future revision');
        ELSIF at > 0 AND at < rev THEN
                PERFORM snowid._fail(400, 11, 'etcdserver: mvcc: required revision has been compacted');
        END IF;
        IF snowid._int(snowid._f(r, 'min_mod_revision', 'minModRevision')) <> 0 OR
           snowid._int(snowid._f(r, 'max_mod_revision', 'maxModRevision')) <> 0 OR
           snowid._int(snowid._f(r, 'min_create_revision', 'minCreateRevision')) <> 0 OR
           snowid._int(snowid._f(r, 'max_create_revision', 'maxCreateRevision')) <> 0 THEN
                PERFORM snowid._fail(400, 12, 'snowid: revision filters are not supported');
        END IF;
        SELECT count(*) INTO n FROM snowid.kv WHERE key >= k AND (hi IS NULL OR key < hi);
        -- etcd sorts ascending by default when the target is not the key.
        -- Among equal values, etcd keeps the key order only up to 12 keys
        -- (Go's sort is an insertion sort there, unstable beyond): the key
        -- order here, always
        IF so = 0 AND st <> 0 THEN
                so := 1;
        END IF;
        IF NOT co AND n > 0 THEN
                SELECT jsonb_agg(snowid._kv(x.key, x.value, x.create_revision, x.mod_revision,
                                            x.version, x.lease, ko) ORDER BY x.o)
                INTO kvs
                FROM (SELECT kv.*, row_number() OVER (ORDER BY
                        CASE WHEN so = 2 AND st = 0 THEN kv.key END DESC,
                        CASE WHEN so = 1 AND st = 1 THEN kv.version END,
                        CASE WHEN so = 2 AND st = 1 THEN kv.version END DESC,
                        CASE WHEN so = 1 AND st = 2 THEN kv.create_revision END,
                        CASE WHEN so = 2 AND st = 2 THEN kv.create_revision END DESC,
                        CASE WHEN so = 1 AND st = 3 THEN kv.mod_revision END,
                        CASE WHEN so = 2 AND st = 3 THEN kv.mod_revision END DESC,
                        CASE WHEN so = 1 AND st = 4 THEN kv.value END,
                        CASE WHEN so = 2 AND st = 4 THEN kv.value END DESC,
                        kv.key) AS o
                      FROM snowid.kv WHERE key >= k AND (hi IS NULL OR key < hi)) x
                WHERE lim <= 0 OR x.o <= lim;
                res := res || jsonb_build_object('kvs', kvs);
                IF lim > 0 AND n > lim THEN
                        res := res || '{"more": true}'::jsonb;
                END IF;
        END IF;
        IF n > 0 THEN
                res := res || jsonb_build_object('count', n::text);
        END IF;
        RETURN res;
END $f$;

-- PutRequest at revision newrev -> PutResponse (header: the revision only)
CREATE OR REPLACE FUNCTION snowid._put(p jsonb, newrev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        k bytea := snowid._bytes(snowid._f(p, 'key'));
        v bytea := snowid._bytes(snowid._f(p, 'value'));
        l bigint := snowid._int(snowid._f(p, 'lease'));
        prev jsonb;
        res jsonb := jsonb_build_object('header', jsonb_build_object('revision', newrev::text));
BEGIN
        IF length(k) = 0 THEN
                PERFORM snowid._fail(400, 3, 'etcdserver: key is not provided');
        END IF;
        IF snowid._bool(snowid._f(p, 'ignore_value', 'ignoreValue')) OR
           snowid._bool(snowid._f(p, 'ignore_lease', 'ignoreLease')) THEN
                PERFORM snowid._fail(400, 12, 'snowid: ignore_value and ignore_lease are not supported');
        END IF;
        IF l <> 0 AND NOT EXISTS (SELECT 1 FROM snowid.leases WHERE id = l) THEN
                PERFORM snowid._fail(404, 5, 'etcdserver: requested lease not found');
        END IF;
        IF snowid._bool(snowid._f(p, 'prev_kv', 'prevKv')) THEN
                SELECT snowid._kv(x.key, x.value, x.create_revision, x.mod_revision, x.version,
                                  x.lease, false)
                INTO prev FROM snowid.kv x WHERE x.key = k;
                IF prev IS NOT NULL THEN
                        res := res || jsonb_build_object('prev_kv', prev);
                END IF;
        END IF;
        INSERT INTO snowid.kv AS x (key, value, create_revision, mod_revision, version, lease)
        VALUES (k, v, newrev, newrev, 1, l)
        ON CONFLICT (key) DO UPDATE
        SET value = excluded.value, mod_revision = excluded.mod_revision,
            version = x.version + 1, lease = excluded.lease;
        RETURN res;
END $f$;

-- DeleteRangeRequest in a txn begun at revision rev; changed: whether the
-- txn wrote before (and after: whether it has now)
CREATE OR REPLACE FUNCTION snowid._delete(d jsonb, rev bigint, INOUT changed boolean,
                                          OUT resp jsonb)
LANGUAGE plpgsql AS $f$
DECLARE
        k bytea := snowid._bytes(snowid._f(d, 'key'));
        hi bytea := snowid._hi(k, snowid._bytes(snowid._f(d, 'range_end', 'rangeEnd')));
        pk boolean := snowid._bool(snowid._f(d, 'prev_kv', 'prevKv'));
        n bigint;
        prevs jsonb;
BEGIN
        IF length(k) = 0 THEN
                PERFORM snowid._fail(400, 3, 'etcdserver: key is not provided');
        END IF;
        WITH gone AS (DELETE FROM snowid.kv WHERE key >= k AND (hi IS NULL OR key < hi)
                      RETURNING *)
        SELECT count(*), jsonb_agg(snowid._kv(g.key, g.value, g.create_revision, g.mod_revision,
                                              g.version, g.lease, false) ORDER BY g.key)
        INTO n, prevs FROM gone g;
        changed := changed OR n > 0;
        resp := jsonb_build_object('header', jsonb_build_object(
                        'revision', (rev + CASE WHEN changed THEN 1 ELSE 0 END)::text));
        IF n > 0 THEN
                resp := resp || jsonb_build_object('deleted', n::text);
                IF pk THEN
                        resp := resp || jsonb_build_object('prev_kvs', prevs);
                END IF;
        END IF;
END $f$;

-- one Compare: every key of its range must satisfy it; an empty range
-- compares as one absent key (all zero), except that a VALUE compare on it
-- is false
CREATE OR REPLACE FUNCTION snowid._cmp(c jsonb) RETURNS boolean
LANGUAGE plpgsql AS $f$
DECLARE
        k bytea := snowid._bytes(snowid._f(c, 'key'));
        hi bytea := snowid._hi(k, snowid._bytes(snowid._f(c, 'range_end', 'rangeEnd')));
        tg int := snowid._enum(snowid._f(c, 'target'), '{VERSION,CREATE,MOD,VALUE,LEASE}',
                               'Compare_CompareTarget');
        rs int := snowid._enum(snowid._f(c, 'result'), '{EQUAL,GREATER,LESS,NOT_EQUAL}',
                               'Compare_CompareResult');
        v bytea;
        a bigint := 0;
        n bigint;
        ok boolean;
BEGIN
        -- only the field of the target counts (the others are another
        -- member of the proto's oneof)
        CASE tg
        WHEN 0 THEN a := snowid._int(snowid._f(c, 'version'));
        WHEN 1 THEN a := snowid._int(snowid._f(c, 'create_revision', 'createRevision'));
        WHEN 2 THEN a := snowid._int(snowid._f(c, 'mod_revision', 'modRevision'));
        WHEN 3 THEN v := snowid._bytes(snowid._f(c, 'value'));
        WHEN 4 THEN a := snowid._int(snowid._f(c, 'lease'));
        ELSE PERFORM snowid._fail(400, 3, 'snowid: unknown compare target ' || tg);
        END CASE;
        IF rs > 3 THEN
                PERFORM snowid._fail(400, 3, 'snowid: unknown compare result ' || rs);
        END IF;
        SELECT count(*), bool_and(snowid._res(rs, CASE tg
                        WHEN 0 THEN snowid._c(x.version, a)
                        WHEN 1 THEN snowid._c(x.create_revision, a)
                        WHEN 2 THEN snowid._c(x.mod_revision, a)
                        WHEN 4 THEN snowid._c(x.lease, a)
                        ELSE snowid._cb(x.value, v) END))
        INTO n, ok
        FROM snowid.kv x WHERE x.key >= k AND (hi IS NULL OR x.key < hi);
        IF n = 0 THEN
                RETURN tg <> 3 AND snowid._res(rs, snowid._c(0, a));
        END IF;
        RETURN ok;
END $f$;

-- ---- transactions ----

CREATE OR REPLACE FUNCTION snowid._ops(t jsonb, branch text) RETURNS SETOF jsonb
LANGUAGE sql IMMUTABLE AS $f$
        SELECT e FROM jsonb_array_elements(coalesce(snowid._f(t, branch), '[]'::jsonb))
               WITH ORDINALITY AS a(e, i) ORDER BY i
$f$;

-- What etcd's server checks before it applies a txn: the number of
-- operations (128: etcd's --max-txn-ops default; a nested txn counts within
-- what its parent leaves), keys given, and every field well formed, in
-- both branches.
CREATE OR REPLACE FUNCTION snowid._check(t jsonb, maxops int) RETURNS void
LANGUAGE plpgsql AS $f$
DECLARE
        opc int;
        c jsonb;
        op jsonb;
        x jsonb;
BEGIN
        IF jsonb_typeof(t) <> 'object' THEN
                PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' || replace(jsonb_typeof(t), 'boolean', 'bool') ||
                                     ' into Go value of type etcdserverpb.TxnRequest');
        END IF;
        opc := greatest(jsonb_array_length(coalesce(snowid._f(t, 'compare'), '[]')),
                        jsonb_array_length(coalesce(snowid._f(t, 'success'), '[]')),
                        jsonb_array_length(coalesce(snowid._f(t, 'failure'), '[]')));
        IF opc > maxops THEN
                PERFORM snowid._fail(400, 3, 'etcdserver: too many operations in txn request');
        END IF;
        FOR c IN SELECT snowid._ops(t, 'compare') LOOP
                IF length(snowid._bytes(snowid._f(c, 'key'))) = 0 THEN
                        PERFORM snowid._fail(400, 3, 'etcdserver: key is not provided');
                END IF;
        END LOOP;
        FOR op IN SELECT snowid._ops(t, 'success') UNION ALL SELECT snowid._ops(t, 'failure') LOOP
                x := coalesce(snowid._f(op, 'request_range', 'requestRange'),
                              snowid._f(op, 'request_put', 'requestPut'),
                              snowid._f(op, 'request_delete_range', 'requestDeleteRange'));
                IF x IS NOT NULL THEN
                        IF length(snowid._bytes(snowid._f(x, 'key'))) = 0 THEN
                                PERFORM snowid._fail(400, 3, 'etcdserver: key is not provided');
                        END IF;
                        PERFORM snowid._bytes(snowid._f(x, 'range_end', 'rangeEnd')),
                                snowid._bytes(snowid._f(x, 'value')),
                                snowid._int(snowid._f(x, 'lease')),
                                snowid._int(snowid._f(x, 'limit'));
                ELSIF snowid._f(op, 'request_txn', 'requestTxn') IS NOT NULL THEN
                        PERFORM snowid._check(snowid._f(op, 'request_txn', 'requestTxn'), maxops - opc);
                ELSIF jsonb_typeof(op) <> 'object' THEN
                        PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' ||
                                replace(jsonb_typeof(op), 'boolean', 'bool') ||
                                ' into Go value of type map[string]json.RawMessage');
                ELSE -- an operation of no kind: etcd's answer
                        PERFORM snowid._fail(400, 3, 'etcdserver: key not found');
                END IF;
        END LOOP;
END $f$;

-- etcd's check that no two writes of one txn could touch the same key:
-- the keys a list of operations puts and the ranges it deletes (nested
-- txns: either branch; the same key put in both branches of one is fine);
-- a put of a key that another put or a delete of the list could also
-- write is a duplicate.  (A delete "from the key on", range_end "\0",
-- conflicts with nothing, as in etcd.)
CREATE OR REPLACE FUNCTION snowid._dup(k bytea, puts bytea[], dlo bytea[], dhi bytea[])
RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
        IF k = ANY (puts) OR EXISTS (SELECT 1 FROM unnest(dlo, dhi) AS d(lo, hi)
                                     WHERE k >= d.lo AND k < d.hi) THEN
                PERFORM snowid._fail(400, 3, 'etcdserver: duplicate key given in txn request');
        END IF;
END $f$;

CREATE OR REPLACE FUNCTION snowid._writes(ops jsonb, OUT puts bytea[], OUT dlo bytea[],
                                          OUT dhi bytea[])
LANGUAGE plpgsql AS $f$
DECLARE
        t record;
        e record;
        k bytea;
        op jsonb;
        x jsonb;
BEGIN
        puts := '{}';
        dlo := '{}';
        dhi := '{}';
        FOR x IN SELECT snowid._f(o, 'request_delete_range', 'requestDeleteRange')
                 FROM jsonb_array_elements(coalesce(ops, '[]')) AS a(o) LOOP
                CONTINUE WHEN x IS NULL;
                k := snowid._bytes(snowid._f(x, 'key'));
                dlo := dlo || k;
                dhi := dhi || snowid._hi(k, snowid._bytes(snowid._f(x, 'range_end', 'rangeEnd')));
        END LOOP;
        FOR x IN SELECT snowid._f(o, 'request_txn', 'requestTxn')
                 FROM jsonb_array_elements(coalesce(ops, '[]')) AS a(o) LOOP
                CONTINUE WHEN x IS NULL;
                SELECT * INTO t FROM snowid._writes(snowid._f(x, 'success'));
                SELECT * INTO e FROM snowid._writes(snowid._f(x, 'failure'));
                FOREACH k IN ARRAY t.puts LOOP
                        PERFORM snowid._dup(k, puts, dlo, dhi);
                        puts := puts || k;
                END LOOP;
                FOREACH k IN ARRAY e.puts LOOP
                        PERFORM snowid._dup(k, CASE WHEN k = ANY (t.puts) THEN '{}' ELSE puts END,
                                            dlo, dhi);
                        puts := puts || k;
                END LOOP;
                dlo := dlo || t.dlo || e.dlo;
                dhi := dhi || t.dhi || e.dhi;
        END LOOP;
        FOR x IN SELECT snowid._f(o, 'request_put', 'requestPut')
                 FROM jsonb_array_elements(coalesce(ops, '[]')) AS a(o) LOOP
                CONTINUE WHEN x IS NULL;
                k := snowid._bytes(snowid._f(x, 'key'));
                PERFORM snowid._dup(k, puts, dlo, dhi);
                puts := puts || k;
        END LOOP;
END $f$;

-- Which branch each txn takes, nested ones included, all decided on the
-- state before the txn applies anything, as etcd does:
-- {"ok": bool, "sub": [the path of each nested txn of the branch taken]}
CREATE OR REPLACE FUNCTION snowid._path(t jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        ok boolean := true;
        c jsonb;
        x jsonb;
        sub jsonb := '[]';
BEGIN
        FOR c IN SELECT snowid._ops(t, 'compare') LOOP
                ok := snowid._cmp(c) AND ok; -- every compare read: malformed ones fail
        END LOOP;
        FOR x IN SELECT snowid._f(o, 'request_txn', 'requestTxn')
                 FROM snowid._ops(t, CASE WHEN ok THEN 'success' ELSE 'failure' END) AS o LOOP
                IF x IS NOT NULL THEN
                        sub := sub || jsonb_build_array(snowid._path(x));
                END IF;
        END LOOP;
        RETURN jsonb_build_object('ok', ok, 'sub', sub);
END $f$;

-- Applies a txn along its path; rev: the revision it began at.  Per-op
-- headers carry the revision as etcd's do (rev + 1 once anything changed);
-- a nested txn's header is empty, as etcd's is.
CREATE OR REPLACE FUNCTION snowid._txn(t jsonb, path jsonb, rev bigint, INOUT changed boolean,
                                       OUT resp jsonb)
LANGUAGE plpgsql AS $f$
DECLARE
        ok boolean := (path ->> 'ok')::boolean;
        op jsonb;
        x jsonb;
        r jsonb;
        i int := 0;
        rs jsonb := '[]';
BEGIN
        FOR op IN SELECT snowid._ops(t, CASE WHEN ok THEN 'success' ELSE 'failure' END) LOOP
                IF snowid._f(op, 'request_range', 'requestRange') IS NOT NULL THEN
                        r := jsonb_build_object('response_range', snowid._range(
                                snowid._f(op, 'request_range', 'requestRange'),
                                rev + CASE WHEN changed THEN 1 ELSE 0 END));
                ELSIF snowid._f(op, 'request_put', 'requestPut') IS NOT NULL THEN
                        r := jsonb_build_object('response_put', snowid._put(
                                snowid._f(op, 'request_put', 'requestPut'), rev + 1));
                        changed := true;
                ELSIF snowid._f(op, 'request_delete_range', 'requestDeleteRange') IS NOT NULL THEN
                        SELECT d.changed, jsonb_build_object('response_delete_range', d.resp)
                        INTO changed, r
                        FROM snowid._delete(snowid._f(op, 'request_delete_range', 'requestDeleteRange'),
                                            rev, changed) d;
                ELSE
                        x := snowid._f(op, 'request_txn', 'requestTxn');
                        SELECT s.changed, jsonb_build_object('response_txn', s.resp)
                        INTO changed, r FROM snowid._txn(x, path -> 'sub' -> i, rev, changed) s;
                        i := i + 1;
                END IF;
                rs := rs || jsonb_build_array(r);
        END LOOP;
        resp := jsonb_build_object('header', '{}'::jsonb);
        IF ok THEN
                resp := resp || '{"succeeded": true}'::jsonb;
        END IF;
        IF jsonb_array_length(rs) > 0 THEN
                resp := resp || jsonb_build_object('responses', rs);
        END IF;
END $f$;

-- ---- the requests ----

CREATE OR REPLACE FUNCTION snowid._kv_txn(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        changed boolean;
        resp jsonb;
BEGIN
        PERFORM snowid._check(b, 128);
        PERFORM snowid._writes(snowid._f(b, 'success'));
        PERFORM snowid._writes(snowid._f(b, 'failure'));
        SELECT t.changed, t.resp INTO changed, resp FROM snowid._txn(b, snowid._path(b), rev, false) t;
        IF changed THEN
                rev := rev + 1;
                PERFORM snowid._set_revision(rev);
        END IF;
        RETURN resp || jsonb_build_object('header', snowid._hdr(rev));
END $f$;

CREATE OR REPLACE FUNCTION snowid._kv_put(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        resp jsonb := snowid._put(b, rev + 1);
BEGIN
        PERFORM snowid._set_revision(rev + 1);
        RETURN resp || jsonb_build_object('header', snowid._hdr(rev + 1));
END $f$;

CREATE OR REPLACE FUNCTION snowid._kv_deleterange(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        changed boolean;
        resp jsonb;
BEGIN
        SELECT d.changed, d.resp INTO changed, resp FROM snowid._delete(b, rev, false) d;
        IF changed THEN
                rev := rev + 1;
                PERFORM snowid._set_revision(rev);
        END IF;
        RETURN resp || jsonb_build_object('header', snowid._hdr(rev));
END $f$;

-- lease IDs: random positive int64, as etcd's are
CREATE OR REPLACE FUNCTION snowid._lease_grant(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        ttl bigint := snowid._int(snowid._f(b, 'TTL'));
        lid bigint := snowid._int(snowid._f(b, 'ID'));
BEGIN
        IF ttl > 9000000000 THEN
                PERFORM snowid._fail(400, 11, 'etcdserver: too large lease TTL');
        END IF;
        ttl := greatest(ttl, 2); -- etcd's minimum with its default election timeout
        IF lid = 0 THEN
                LOOP
                        lid := ('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint
                              & 9223372036854775807;
                        EXIT WHEN lid <> 0 AND NOT EXISTS (SELECT 1 FROM snowid.leases l WHERE l.id = lid);
                END LOOP;
        ELSIF EXISTS (SELECT 1 FROM snowid.leases l WHERE l.id = lid) THEN
                PERFORM snowid._fail(412, 9, 'etcdserver: lease already exists');
        END IF;
        INSERT INTO snowid.leases (id, ttl, expires_at)
        VALUES (lid, ttl, clock_timestamp() + ttl * interval '1 second');
        RETURN jsonb_build_object('header', snowid._hdr(rev), 'ID', lid::text, 'TTL', ttl::text);
END $f$;

-- one keepalive: {"result": ...}; an unknown or expired lease has no TTL
CREATE OR REPLACE FUNCTION snowid._lease_keepalive(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        lid bigint := snowid._int(snowid._f(b, 'ID'));
        ttl bigint;
BEGIN
        UPDATE snowid.leases l SET expires_at = clock_timestamp() + l.ttl * interval '1 second'
        WHERE l.id = lid RETURNING l.ttl INTO ttl;
        RETURN jsonb_build_object('result', jsonb_strip_nulls(jsonb_build_object(
                'header', snowid._hdr(rev), 'ID', lid::text, 'TTL', nullif(ttl, 0)::text)));
END $f$;

CREATE OR REPLACE FUNCTION snowid._lease_revoke(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        lid bigint := snowid._int(snowid._f(b, 'ID'));
BEGIN
        DELETE FROM snowid.leases l WHERE l.id = lid;
        IF NOT FOUND THEN
                PERFORM snowid._fail(404, 5, 'etcdserver: requested lease not found');
        END IF;
        DELETE FROM snowid.kv x WHERE x.lease = lid;
        IF FOUND THEN
                rev := rev + 1;
                PERFORM snowid._set_revision(rev);
        END IF;
        RETURN jsonb_build_object('header', snowid._hdr(rev));
END $f$;

-- TTL: the whole seconds left (left out in the last one); -1: no such lease
CREATE OR REPLACE FUNCTION snowid._lease_timetolive(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        lid bigint := snowid._int(snowid._f(b, 'ID'));
        l snowid.leases;
        left_s bigint;
        res jsonb;
        keys jsonb;
BEGIN
        SELECT * INTO l FROM snowid.leases x WHERE x.id = lid;
        IF NOT FOUND THEN
                RETURN jsonb_build_object('header', snowid._hdr(rev), 'ID', lid::text, 'TTL', '-1');
        END IF;
        left_s := greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp())))::bigint;
        res := jsonb_strip_nulls(jsonb_build_object('header', snowid._hdr(rev), 'ID', lid::text,
                'TTL', nullif(left_s, 0)::text, 'grantedTTL', l.ttl::text));
        IF snowid._bool(snowid._f(b, 'keys')) THEN
                SELECT jsonb_agg(snowid._enc(x.key) ORDER BY x.key) INTO keys
                FROM snowid.kv x WHERE x.lease = l.id;
                IF keys IS NOT NULL THEN
                        res := res || jsonb_build_object('keys', keys);
                END IF;
        END IF;
        RETURN res;
END $f$;

-- the leases, the soonest to expire first, as etcd lists them
CREATE OR REPLACE FUNCTION snowid._lease_leases(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE sql AS $f$
        SELECT jsonb_strip_nulls(jsonb_build_object('header', snowid._hdr(rev), 'leases',
                (SELECT jsonb_agg(jsonb_build_object('ID', id::text) ORDER BY expires_at, id)
                 FROM snowid.leases)))
$f$;

-- PostgreSQL has no NOSPACE alarm: a full disk is SQLSTATE 53100, which
-- the daemon's libpq side reports as etcd's nospace.  etcd 3.4 answers an
-- alarm request with no alarms as {}: not even a header.
CREATE OR REPLACE FUNCTION snowid._maintenance_alarm(b jsonb, rev bigint) RETURNS jsonb
LANGUAGE sql AS $f$
        SELECT '{}'::jsonb
$f$;

-- The entry point: one etcd gateway request.  {"status", "body"}
CREATE OR REPLACE FUNCTION snowid.call(path text, body jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $f$
DECLARE
        rev bigint;
        p text := regexp_replace(regexp_replace(coalesce(path, ''), '^/v3beta/', '/v3/'),
                                 '^/v3/kv/lease/(revoke|timetolive|leases)$', '/v3/lease/\1');
        res jsonb;
        msg text;
        det text;
        status int;
        code int;
BEGIN
        -- one call at a time: see the top of daemon/store/postgres.sql
        IF current_setting('transaction_isolation') <> 'read committed' THEN
                RETURN snowid._err(500, 13, 'snowid.call runs only at READ COMMITTED, not ' ||
                                   current_setting('transaction_isolation'));
        END IF;
        SELECT revision INTO rev FROM snowid.meta FOR UPDATE;
        rev := snowid._expire(rev);
        BEGIN
                IF body IS NULL OR jsonb_typeof(body) <> 'object' THEN
                        PERFORM snowid._fail(400, 3, 'json: cannot unmarshal ' ||
                                coalesce(jsonb_typeof(body), 'nothing') || ' into a request');
                END IF;
                CASE p
                WHEN '/v3/kv/txn' THEN res := snowid._kv_txn(body, rev);
                WHEN '/v3/kv/range' THEN
                        res := snowid._range(body, rev) || jsonb_build_object('header', snowid._hdr(rev));
                WHEN '/v3/kv/put' THEN res := snowid._kv_put(body, rev);
                WHEN '/v3/kv/deleterange' THEN res := snowid._kv_deleterange(body, rev);
                WHEN '/v3/lease/grant' THEN res := snowid._lease_grant(body, rev);
                WHEN '/v3/lease/keepalive' THEN res := snowid._lease_keepalive(body, rev);
                WHEN '/v3/lease/revoke' THEN res := snowid._lease_revoke(body, rev);
                WHEN '/v3/lease/timetolive' THEN res := snowid._lease_timetolive(body, rev);
                WHEN '/v3/lease/leases' THEN res := snowid._lease_leases(body, rev);
                WHEN '/v3/maintenance/alarm' THEN res := snowid._maintenance_alarm(body, rev);
                ELSE
                        RETURN snowid._err(404, 5, 'Not Found');
                END CASE;
                RETURN jsonb_build_object('status', 200, 'body', res);
        EXCEPTION
                WHEN SQLSTATE 'SNOW1' THEN
                        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                        status := split_part(det, ' ', 1)::int;
                        code := split_part(det, ' ', 2)::int;
                WHEN data_exception OR program_limit_exceeded THEN
                        -- malformed input the checks above let by, or a key
                        -- too long for the index
                        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
                        status := 400;
                        code := 3;
        END;
        -- etcd's keepalive is a stream: what it cannot read is a 500
        IF p = '/v3/lease/keepalive' AND status = 400 THEN
                status := 500;
                code := 2;
        END IF;
        RETURN snowid._err(status, code, msg);
END $f$;

$functions$;
UPDATE snowid.meta SET schema_version = want;
END
$install$;

-- A dump restored into another server (another system identifier) is a
-- restore the revisions may not show: the cluster gets a new cluster_id,
-- so that no daemon acts on it until `snowid fence` names it
-- (docs/postgres.md).  Read by whoever can; nothing is locked unless it
-- changed.
DO $moved$
DECLARE
        sid bigint;
BEGIN
IF has_function_privilege('pg_control_system()', 'EXECUTE') THEN
        SELECT system_identifier INTO sid FROM pg_control_system();
        IF (SELECT system_identifier FROM snowid.meta) IS DISTINCT FROM sid THEN
                UPDATE snowid.meta
                SET cluster_id = CASE WHEN system_identifier IS NULL THEN cluster_id
                        ELSE greatest(1, ('x' || substr(md5(gen_random_uuid()::text), 1, 16))
                                         ::bit(64)::bigint & 9223372036854775807) END,
                    system_identifier = sid;
        END IF;
END IF;
END
$moved$;

COMMIT;
