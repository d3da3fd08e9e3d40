/* ratelimit 0.4.0 -> 0.5.0: limits as data: per-key overrides, shadow mode, live stats */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.5.0'" to load this file. \quit

-- Per-key overrides: the operator's word about one key of a limit. A key's
-- override wins over an inline config and over the definition.
CREATE TABLE @extschema@.ratelimit_override (
    name   text COLLATE "C" NOT NULL,
    key    text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    CONSTRAINT ratelimit_override_pkey PRIMARY KEY (name, key)
);

COMMENT ON TABLE @extschema@.ratelimit_override IS
'Per-key rate limit configs stored by ratelimit_override(): the key (name, key) uses config instead of any inline config or definition.';

REVOKE ALL ON @extschema@.ratelimit_override FROM PUBLIC;

-- pg_dump keeps the overrides, as it keeps definitions and state.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_override', '');

-- Backends cache which names have overrides and the overrides looked up;
-- any change to the table (ratelimit_override/unoverride, or direct DML by
-- the owner) invalidates them, as for definitions.
CREATE TRIGGER ratelimit_overrides_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.ratelimit_override
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.ratelimit_definitions_changed();

COMMENT ON TRIGGER ratelimit_overrides_changed ON @extschema@.ratelimit_override IS
'Tells every backend that overrides changed, so cached configs are re-read.';
COMMENT ON TRIGGER ratelimit_definitions_changed ON @extschema@.ratelimit_definition IS
'Tells every backend that named limit definitions changed, so cached configs are re-read.';

-- From 0.5.0 a state row says which algorithm wrote it, in prev: NULL a
-- token bucket, -1 a fixed window, -2 a token bucket or fixed window whose
-- kind is not known, any other value a sliding window's previous count. So
-- a row is never read as another algorithm's state. Rows written before
-- 0.5.0 have a NULL prev for both token buckets and fixed windows: those of
-- a defined fixed window are marked as such, those of names without a
-- definition as "either" (read as the kind the next call has, as before).
-- Writers wait meanwhile, so no row is written unmarked after this.
LOCK TABLE @extschema@.ratelimit_state IN EXCLUSIVE MODE;
UPDATE @extschema@.ratelimit_state s SET prev = -1
FROM @extschema@.ratelimit_definition d
WHERE d.name = s.name AND s.prev IS NULL AND d.config ->> 'kind' = 'fixed window';
UPDATE @extschema@.ratelimit_state s SET prev = -2
WHERE s.prev IS NULL AND NOT EXISTS (SELECT FROM @extschema@.ratelimit_definition d WHERE d.name = s.name);

CREATE FUNCTION @extschema@.ratelimit_override(name text, key text, config jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_override'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) IS
'Validates and stores config for one key of a limit: from now on (name, key) uses it, whatever config calls pass. The key''s rows are brought up to now under the config they had and carried over (tokens stay, capped at the new capacity; a new kind resets them). Transactional. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_unoverride(name text, key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_unoverride'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_unoverride(text, text) IS
'Removes the override of one key (its rows are carried over into the definition, if any); true if there was one. Owner only unless granted.';

-- ratelimit_headers gains a key (last, so every call written for 0.3.0
-- and 0.4.0 means the same): the headers describe the config that key uses.
DROP FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb);
CREATE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL,
    key text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'ratelimit_headers_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'The HTTP response headers for a ratelimit_result of limit name (the config of key: its override, else the inline config, else the definition): RateLimit-Policy and RateLimit (IETF httpapi draft), Retry-After (whole seconds, only when refused or reserved for later) and X-RateLimit-Limit/-Remaining/-Reset (epoch seconds), as a JSON object of strings.';

-- Decision counters per limit name, in shared memory (see the README).
CREATE FUNCTION @extschema@.ratelimit_stats_rows()
RETURNS TABLE (name text, granted bigint, refused bigint, shadow_refused bigint,
               tokens_granted double precision, lock_waits bigint, stats_reset timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_stats_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_stats_rows() IS
'The rows of the ratelimit_stats view.';

CREATE VIEW @extschema@.ratelimit_stats AS
SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits, stats_reset
FROM @extschema@.ratelimit_stats_rows();

COMMENT ON VIEW @extschema@.ratelimit_stats IS
'One row per limit name used since the last reset: decisions of ratelimit_limit, ratelimit_limit_all and ratelimit_refund granted, refused and refused in shadow mode, tokens granted (net of refunds), calls that waited for a row lock. Cumulative, like pg_stat_*: counted when decided, whether or not the transaction commits. Empty without shared memory (shared_preload_libraries before PostgreSQL 17). Names past ratelimit.stats_max_names are counted in one row whose name is NULL.';

CREATE FUNCTION @extschema@.ratelimit_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_stats_reset() IS
'Empties ratelimit_stats (every name, and stats_reset becomes now). Owner only unless granted.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_rows() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) TO PUBLIC;
-- Like pg_stat_* views, the counters are readable by every role.
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_stats_rows() TO PUBLIC;
GRANT SELECT ON @extschema@.ratelimit_stats TO PUBLIC;
