/* ratelimit 0.2.0 -> 0.3.0: HTTP rate-limit headers and the ratelimit_status view */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.3.0'" to load this file. \quit

CREATE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'ratelimit_headers'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb) IS
'The HTTP response headers for a ratelimit_result of limit name (config inline, else defined): RateLimit-Policy and RateLimit (IETF httpapi draft), Retry-After (whole seconds, only when refused or reserved for later) and X-RateLimit-Limit/-Remaining/-Reset (epoch seconds), as a JSON object of strings.';

-- What ratelimit_status shows; the view is the interface.
CREATE FUNCTION @extschema@.ratelimit_status_rows()
RETURNS TABLE (name text, key text, shard smallint, kind text, value double precision, ts timestamptz,
               stored_value double precision, idle_at timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_status_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_status_rows() IS
'The rows of the ratelimit_status view. Owner only unless granted.';

CREATE VIEW @extschema@.ratelimit_status AS
SELECT name, key, shard, kind, value, ts, stored_value, idle_at
FROM @extschema@.ratelimit_status_rows();

COMMENT ON VIEW @extschema@.ratelimit_status IS
'Every stored limit row: name, key, shard; kind and the value (tokens available now) under the limit''s defined config, NULL for limits only called with inline configs; the stored ts and value; idle_at, when ratelimit_cleanup() may delete it. Owner only unless granted.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_status_rows() FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_status FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb) TO PUBLIC;

-- A publication (e.g. FOR ALL TABLES) refuses UPDATE and DELETE on a table
-- without a replica identity, and the unique index cannot be one (key is
-- nullable). FULL costs nothing unless wal_level = logical.
ALTER TABLE @extschema@.ratelimit_state REPLICA IDENTITY FULL;
