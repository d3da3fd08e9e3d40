/* ratelimit 0.1.0 -> 0.2.0: shards, all-or-nothing calls, refunds, jitter, cleanup */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.2.0'" to load this file. \quit

-- When a row's state becomes the same as no row at all (a bucket refilled to
-- capacity, windows passed with nothing reserved): what ratelimit_cleanup()
-- deletes by. Rows written by 0.1.0 have none until their next write. Not
-- indexed, so updates stay HOT.
ALTER TABLE @extschema@.ratelimit_state ADD COLUMN idle_at timestamptz;

COMMENT ON COLUMN @extschema@.ratelimit_state.idle_at IS
'When this row''s state becomes the same as no row at all; ratelimit_cleanup() deletes rows past it.';

CREATE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_limit_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Consumes several limits all or nothing: limits is a JSON array of {name, key, config, count, reserve}; rows are locked in (name, key, shard) order. One result row per limit; nothing is consumed unless every row is ok. throws => true raises PT429 naming the first refused limit.';

CREATE FUNCTION @extschema@.ratelimit_refund(
    name text,
    key text DEFAULT NULL,
    count double precision DEFAULT 1,
    config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_refund'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) IS
'Gives count tokens back to limit (name, key): capped at capacity, never below the current value; sharded limits refill their emptiest shards first. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
AS 'MODULE_PATHNAME', 'ratelimit_cleanup'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_cleanup() IS
'Deletes state rows that are the same as no row at all (refilled, or windows passed), skipping rows a transaction holds; returns how many. Safe to run during traffic. Owner only unless granted.';

-- Backends cache parsed named configs; any change to the definition table
-- (ratelimit_define/undefine, or direct DML by the owner) invalidates them.
CREATE FUNCTION @extschema@.ratelimit_definitions_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'ratelimit_definitions_changed'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.ratelimit_definitions_changed() IS
'Trigger function: tells every backend that named limit definitions changed, so cached configs are re-read.';

CREATE TRIGGER ratelimit_definitions_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.ratelimit_definition
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.ratelimit_definitions_changed();

REVOKE ALL ON FUNCTION @extschema@.ratelimit_definitions_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_cleanup() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) TO PUBLIC;
