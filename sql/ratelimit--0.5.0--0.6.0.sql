/* ratelimit 0.5.0 -> 0.6.0: limits in shared memory ("storage": "memory") */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.6.0'" to load this file. \quit

-- ratelimit_status gains a last column, storage: which storage keeps the row.
DROP VIEW @extschema@.ratelimit_status;
DROP FUNCTION @extschema@.ratelimit_status_rows();

CREATE FUNCTION @extschema@.ratelimit_status_rows()
RETURNS TABLE (name text, key text, shard smallint, kind text, value double precision, ts timestamptz,
               stored_value double precision, idle_at timestamptz, storage text)
AS 'MODULE_PATHNAME', 'ratelimit_status_rows_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_status_rows() IS
'The rows of the ratelimit_status view. Owner only unless granted.';

CREATE VIEW @extschema@.ratelimit_status AS
SELECT name, key, shard, kind, value, ts, stored_value, idle_at, storage
FROM @extschema@.ratelimit_status_rows();

COMMENT ON VIEW @extschema@.ratelimit_status IS
'Every stored limit: name, key, shard; kind and the value (tokens available now) under the limit''s defined config (or the key''s override), NULL for limits only called with inline configs; the stored ts and value; idle_at, from when the row is the same as none (ratelimit_cleanup() deletes it); storage: table (a row of ratelimit_state) or memory (an entry in shared memory, this server''s). Owner only unless granted.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_status_rows() FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_status FROM PUBLIC;

-- ratelimit_stats gains a last column, memory_full: calls refused an entry
-- because ratelimit.memory_max_keys entries were live.
DROP VIEW @extschema@.ratelimit_stats;
DROP FUNCTION @extschema@.ratelimit_stats_rows();

CREATE FUNCTION @extschema@.ratelimit_stats_rows()
RETURNS TABLE (name text, granted bigint, refused bigint, shadow_refused bigint,
               tokens_granted double precision, lock_waits bigint, stats_reset timestamptz,
               memory_full bigint)
AS 'MODULE_PATHNAME', 'ratelimit_stats_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_stats_rows() IS
'The rows of the ratelimit_stats view.';

CREATE VIEW @extschema@.ratelimit_stats AS
SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits, stats_reset, memory_full
FROM @extschema@.ratelimit_stats_rows();

COMMENT ON VIEW @extschema@.ratelimit_stats IS
'One row per limit name used since the last reset: decisions of ratelimit_limit, ratelimit_limit_all and ratelimit_refund granted, refused and refused in shadow mode, tokens granted (net of refunds), calls that waited for a row lock, and calls of a memory limit that found no room (53200: ratelimit.memory_max_keys). Cumulative, like pg_stat_*: counted when decided, whether or not the transaction commits. Empty without shared memory (shared_preload_libraries before PostgreSQL 17). Names past ratelimit.stats_max_names are counted in one row whose name is NULL.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_rows() FROM PUBLIC;
-- Like pg_stat_* views, the counters are readable by every role.
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_stats_rows() TO PUBLIC;
GRANT SELECT ON @extschema@.ratelimit_stats TO PUBLIC;
