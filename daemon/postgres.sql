-- A placeholder: snowid.call() answers every call with an empty body.  The
-- real schema and transactions replace this file.
SELECT pg_advisory_xact_lock(7723);
CREATE SCHEMA IF NOT EXISTS snowid;
CREATE OR REPLACE FUNCTION snowid.call(path text, body jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT '{"status": 200, "body": {}}'::jsonb $$;
