/* ratelimit 0.11.0, complete: transactional rate limits locked inside the caller's transaction */

\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

-- What ratelimit 0.11.0 is, in one script: CREATE EXTENSION ratelimit runs
-- this file, not ratelimit--0.1.0.sql and the update scripts after it. Those
-- stay, unedited, for databases installed at an earlier release; updated
-- along them, a database has exactly the catalog this script gives it
-- (sql/upgrade.sql compares the two object by object, from every release).
-- A new release copies this file to ratelimit--<new>.sql and makes its
-- change both there and in ratelimit--0.11.0--<new>.sql (docs/internals.md,
-- "Making a release").
--
-- In order: the tables, the types, the functions by family, the views, who
-- may call and read what, and the documentation of every object (COMMENT ON).
-- Every function runs with the caller's rights (SECURITY INVOKER, no SET
-- clause). The SQL statements the C functions run themselves (a new key's
-- row, shards, definitions, fallbacks) run as the function's owner with
-- search_path pinned to pg_catalog, pg_temp and the time zone to UTC, and
-- the rows of an existing key are read and written directly, which checks
-- no privileges and resolves no names (docs/security.md). Who may call which
-- function is decided by EXECUTE privileges alone.

--------------------------------------------------------------------------
-- Tables
--------------------------------------------------------------------------

-- One row per limit (name, key, shard) stored in a table. value and ts are
-- the state at an instant (tokens, or the current window's count); prev
-- says which algorithm wrote the row, so that it is never read as another's
-- state: NULL a token bucket, -1 a fixed window, -2 a token bucket or fixed
-- window of a row written before 0.5.0 by a name without a definition
-- (read as the kind of the next call), any other value a sliding window's
-- previous-window count. idle_at: from when the row is the same as no row
-- at all (a bucket refilled to capacity, windows passed with nothing
-- reserved), what ratelimit_cleanup() deletes by; not indexed, so that
-- updates stay HOT. A NULL key is the one global limit of a name, '' an
-- ordinary key. COLLATE "C" makes (name, key, shard) a byte order: the
-- canonical lock order.
CREATE TABLE @extschema@.ratelimit_state (
    name  text COLLATE "C" NOT NULL,
    key   text COLLATE "C",
    shard smallint NOT NULL DEFAULT 0 CHECK (shard >= 0),
    value double precision NOT NULL,
    ts    timestamptz NOT NULL,
    prev  double precision,
    idle_at timestamptz,
    CONSTRAINT ratelimit_state_name_key_shard UNIQUE (name, key, shard)
);
-- Unique NULL keys (UNIQUE treats NULLs as distinct before PostgreSQL 15).
CREATE UNIQUE INDEX ratelimit_state_global ON @extschema@.ratelimit_state (name, shard) WHERE key IS NULL;
-- A publication (e.g. FOR ALL TABLES) refuses UPDATE and DELETE on a table
-- without a replica identity, and the unique index cannot be one (key is
-- nullable). FULL costs nothing unless wal_level = logical.
ALTER TABLE @extschema@.ratelimit_state REPLICA IDENTITY FULL;

-- Named limits, so that calls can omit their config.
CREATE TABLE @extschema@.ratelimit_definition (
    name   text COLLATE "C" PRIMARY KEY,
    config jsonb NOT NULL
);

-- Per-key overrides: the operator's word about one key of a limit, which
-- wins over an inline config and over the definition.
CREATE TABLE @extschema@.ratelimit_override (
    name   text COLLATE "C" NOT NULL,
    key    text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    CONSTRAINT ratelimit_override_pkey PRIMARY KEY (name, key)
);

-- pg_dump keeps the rows of all three (state, named limits and overrides
-- survive a restore).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_state', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_definition', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_override', '');

--------------------------------------------------------------------------
-- Types
--------------------------------------------------------------------------

-- The answer of ratelimit_limit, ratelimit_check and ratelimit_refund.
CREATE TYPE @extschema@.ratelimit_result AS (
    ok          boolean,
    retry_after double precision,
    retry_at    timestamptz,
    remaining   double precision,
    reset_after double precision
);

-- The rows the router's calls return (below, "The router's calls"): named
-- row types rather than OUT parameters, because PostgreSQL rebuilds a
-- function's OUT parameters into a row description from pg_proc at every
-- parse, plan and executor start of a statement, and a named type's comes
-- from the type cache.
CREATE TYPE @extschema@.ratelimit_proxy_answer AS (
    ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

CREATE TYPE @extschema@.ratelimit_proxy_entry AS (
    name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

--------------------------------------------------------------------------
-- Functions: taking, checking and giving back
--------------------------------------------------------------------------

-- The C entry points are the *_invoker ones: a session that still has a
-- library older than 0.4.0 loaded fails with "could not find function"
-- until it reconnects, rather than running SQL without the owner's scope.

CREATE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_limit_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_check_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_limit_all_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_value_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION @extschema@.ratelimit_refund(
    name text,
    key text DEFAULT NULL,
    count double precision DEFAULT 1,
    config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_refund_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_reset_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
AS 'MODULE_PATHNAME', 'ratelimit_cleanup_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

--------------------------------------------------------------------------
-- Functions: definitions and overrides
--------------------------------------------------------------------------

CREATE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_define_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_undefine_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_override(name text, key text, config jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_override'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_unoverride(name text, key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_unoverride'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Backends cache parsed definitions, which names have overrides and the
-- overrides looked up; any change to either table (the functions above, or
-- the owner's own DML) invalidates them in every backend.
CREATE FUNCTION @extschema@.ratelimit_definitions_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'ratelimit_definitions_changed'
LANGUAGE C;

CREATE TRIGGER ratelimit_definitions_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.ratelimit_definition
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.ratelimit_definitions_changed();

CREATE TRIGGER ratelimit_overrides_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.ratelimit_override
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.ratelimit_definitions_changed();

--------------------------------------------------------------------------
-- Functions: HTTP headers and simulation
--------------------------------------------------------------------------

-- key is last, so that a call written before it existed (0.3.0, 0.4.0)
-- means the same.
CREATE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL,
    key text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'ratelimit_headers_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The answers ratelimit_limit(name, key, config, count) gives for a key
-- never used, with the clock at each arrival in turn, computed by the same
-- core without storage, locks or the catalog. It depends only on its
-- arguments (the config is parsed under fixed settings, as ratelimit_limit
-- parses it), so IMMUTABLE and PARALLEL SAFE. The five-argument form takes
-- the name and key whose hash aligns the windows of a window kind without
-- "start"; it is a function of its own (not two more defaults) so that the
-- three-argument signature is the first one's identity.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[] DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_simulate'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 1000;

CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[],
    name text,
    key text DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_simulate'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 1000;

--------------------------------------------------------------------------
-- Functions: status and stats (the views' rows; the views are the interface)
--------------------------------------------------------------------------

CREATE FUNCTION @extschema@.ratelimit_status_rows()
RETURNS TABLE (name text, key text, shard smallint, kind text, value double precision, ts timestamptz,
               stored_value double precision, idle_at timestamptz, storage text)
AS 'MODULE_PATHNAME', 'ratelimit_status_rows_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Decision counters per limit name, in shared memory.
CREATE FUNCTION @extschema@.ratelimit_stats_rows()
RETURNS TABLE (name text, granted bigint, refused bigint, shadow_refused bigint,
               tokens_granted double precision, lock_waits bigint, stats_reset timestamptz,
               memory_full bigint)
AS 'MODULE_PATHNAME', 'ratelimit_stats_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

--------------------------------------------------------------------------
-- Functions: the router's calls (what a ratelimit_proxy router runs here)
--------------------------------------------------------------------------

-- PL/Proxy closed its connection to a partition whenever the remote
-- statement raised an error, so the router (ratelimit_proxy) calls these
-- instead of the functions of the same name without "proxy_": each makes
-- that call with the same arguments in a subtransaction, so that an error
-- rolls back what the call did (as on one node, where it aborts the
-- caller's transaction), and returns its result, or NULL and the error's
-- SQLSTATE, message, detail and hint (NULL when absent) in the error_*
-- columns, which the router raises. A cancel is not caught (WHEN OTHERS
-- leaves it alone). The rights are those of the function each runs.

-- The hot path, in C: ratelimit_limit, ratelimit_check and
-- ratelimit_limit_all (same code, same decision and counters), with
-- ratelimit.error_format set to error_format for the call (NULL: the
-- partition's own); and ratelimit_simulate, which any partition answers.
CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS 'MODULE_PATHNAME', 'ratelimit_proxy_check'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(limits jsonb, throws boolean, error_format text)
RETURNS SETOF @extschema@.ratelimit_proxy_entry
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_proxy_simulate(
    config jsonb, arrivals timestamptz[], counts double precision[], name text, key text)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
AS 'MODULE_PATHNAME', 'ratelimit_proxy_simulate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The other calls, in PL/pgSQL, each the same exception block around its
-- call. Routed to the key's partition: ratelimit_value, _reset, _refund,
-- _headers, _override, _unoverride.
CREATE FUNCTION @extschema@.ratelimit_proxy_value(
    name text, key text, config jsonb,
    OUT value double precision, OUT ts timestamptz,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    SELECT v.value, v.ts INTO value, ts FROM @extschema@.ratelimit_value(name, key, config) AS v;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_reset(
    name text, key text,
    OUT reset boolean,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    reset := @extschema@.ratelimit_reset(name, key);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_refund(
    name text, key text, count double precision, config jsonb,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    SELECT r.ok, r.retry_after, r.retry_at, r.remaining, r.reset_after
    INTO ok, retry_after, retry_at, remaining, reset_after
    FROM @extschema@.ratelimit_refund(name, key, count, config) AS r;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_headers(
    name text, result @extschema@.ratelimit_result, config jsonb, key text,
    OUT headers jsonb,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    headers := @extschema@.ratelimit_headers(name, result, config, key);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_override(
    name text, key text, config jsonb,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    PERFORM @extschema@.ratelimit_override(name, key, config);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_unoverride(
    name text, key text,
    OUT unoverridden boolean,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    unoverridden := @extschema@.ratelimit_unoverride(name, key);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END;
$$;

-- Run on every partition (the router's RUN ON ALL needs a set: one row
-- each): ratelimit_define, _undefine, _cleanup, _stats_reset.
CREATE FUNCTION @extschema@.ratelimit_proxy_define(name text, config jsonb)
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
BEGIN
    BEGIN
        PERFORM @extschema@.ratelimit_define(name, config);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
        error_detail := NULLIF(error_detail, '');
        error_hint := NULLIF(error_hint, '');
    END;
    RETURN NEXT;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_undefine(name text)
RETURNS TABLE (undefined boolean, error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
BEGIN
    BEGIN
        undefined := @extschema@.ratelimit_undefine(name);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
        error_detail := NULLIF(error_detail, '');
        error_hint := NULLIF(error_hint, '');
    END;
    RETURN NEXT;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_cleanup()
RETURNS TABLE (deleted bigint, error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
BEGIN
    BEGIN
        deleted := @extschema@.ratelimit_cleanup();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
        error_detail := NULLIF(error_detail, '');
        error_hint := NULLIF(error_hint, '');
    END;
    RETURN NEXT;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_proxy_stats_reset()
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
BEGIN
    BEGIN
        PERFORM @extschema@.ratelimit_stats_reset();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
        error_detail := NULLIF(error_detail, '');
        error_hint := NULLIF(error_hint, '');
    END;
    RETURN NEXT;
END;
$$;

--------------------------------------------------------------------------
-- Views
--------------------------------------------------------------------------

CREATE VIEW @extschema@.ratelimit_status AS
SELECT name, key, shard, kind, value, ts, stored_value, idle_at, storage
FROM @extschema@.ratelimit_status_rows();

CREATE VIEW @extschema@.ratelimit_stats AS
SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits, stats_reset, memory_full
FROM @extschema@.ratelimit_stats_rows();

--------------------------------------------------------------------------
-- Privileges
--------------------------------------------------------------------------

-- App roles reach the tables only through the functions.
REVOKE ALL ON @extschema@.ratelimit_state FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_definition FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_override FROM PUBLIC;

-- PUBLIC may take, check and read limits, get headers and simulate;
-- changing limits is the owner's (or whom the owner grants it).
REVOKE ALL ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) TO PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_definitions_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_reset() FROM PUBLIC;

-- The status of every limit is the owner's; like pg_stat_* views, the
-- counters are readable by every role.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_status_rows() FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_status FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_stats_rows() TO PUBLIC;
GRANT SELECT ON @extschema@.ratelimit_stats TO PUBLIC;

-- The router's calls: the same rights as the functions they run
-- (ratelimit_proxy_limit, _check, _limit_all, _value, _headers and
-- _simulate keep PUBLIC's default EXECUTE).
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() FROM PUBLIC;

--------------------------------------------------------------------------
-- Documentation
--------------------------------------------------------------------------

COMMENT ON TABLE @extschema@.ratelimit_state IS
'Rate limit state: value (tokens, or the current window''s count for a sliding window) at ts, per (name, key, shard). Managed by the ratelimit functions.';
COMMENT ON COLUMN @extschema@.ratelimit_state.idle_at IS
'When this row''s state becomes the same as no row at all; ratelimit_cleanup() deletes rows past it.';
COMMENT ON TABLE @extschema@.ratelimit_definition IS
'Named rate limit configs stored by ratelimit_define(); an inline config wins over these.';
COMMENT ON TABLE @extschema@.ratelimit_override IS
'Per-key rate limit configs stored by ratelimit_override(): the key (name, key) uses config instead of any inline config or definition.';

COMMENT ON TYPE @extschema@.ratelimit_result IS
'ok: granted; retry_after/retry_at: when to retry (refused) or run the reserved work (NULL when granted now); remaining: tokens left (negative when reserved); reset_after: seconds until full again.';
COMMENT ON TYPE @extschema@.ratelimit_proxy_answer IS
'The row of ratelimit_proxy_limit and ratelimit_proxy_check: ratelimit_result''s columns (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';
COMMENT ON TYPE @extschema@.ratelimit_proxy_entry IS
'A row of ratelimit_proxy_limit_all: ratelimit_limit_all''s row (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Consumes count tokens of limit (name, key) inside the calling transaction: rolls back with it. A refusal writes nothing; throws => true raises SQLSTATE PT429 instead.';
COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Answers what ratelimit_limit would answer, from the latest committed state, without locking or writing anything.';
COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Consumes several limits all or nothing: limits is a JSON array of {name, key, config, count, reserve}; rows are locked in (name, key, shard) order. One result row per limit; nothing is consumed unless every row is ok. throws => true raises PT429 naming the first refused limit.';
COMMENT ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) IS
'One row: the tokens available now without consuming, and the instant they hold for (token bucket: now; window kinds: the current window''s start).';
COMMENT ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) IS
'Gives count tokens back to limit (name, key): capped at capacity, never below the current value; sharded limits refill their emptiest shards first. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_reset(text, text) IS
'Forgets the state of limit (name, key), so it is full again; true if there was any state. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_cleanup() IS
'Deletes state rows that are the same as no row at all (refilled, or windows passed), skipping rows a transaction holds; returns how many. Safe to run during traffic. Owner only unless granted.';

COMMENT ON FUNCTION @extschema@.ratelimit_define(text, jsonb) IS
'Validates and stores (or replaces) the config of a named limit, so calls can omit config. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_undefine(text) IS
'Removes a named limit''s config (its state stays until reset); true if it was defined. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) IS
'Validates and stores config for one key of a limit: from now on (name, key) uses it, whatever config calls pass. The key''s rows are brought up to now under the config they had and carried over (tokens stay, capped at the new capacity; a new kind resets them). Transactional. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_unoverride(text, text) IS
'Removes the override of one key (its rows are carried over into the definition, if any); true if there was one. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_definitions_changed() IS
'Trigger function: tells every backend that named limit definitions changed, so cached configs are re-read.';
COMMENT ON TRIGGER ratelimit_definitions_changed ON @extschema@.ratelimit_definition IS
'Tells every backend that named limit definitions changed, so cached configs are re-read.';
COMMENT ON TRIGGER ratelimit_overrides_changed ON @extschema@.ratelimit_override IS
'Tells every backend that overrides changed, so cached configs are re-read.';

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'The HTTP response headers for a ratelimit_result of limit name (the config of key: its override, else the inline config, else the definition): RateLimit-Policy and RateLimit (IETF httpapi draft), Retry-After (whole seconds, only when refused or reserved for later) and X-RateLimit-Limit/-Remaining/-Reset (epoch seconds), as a JSON object of strings.';
COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) IS
'Simulates a limit: one row per arrival (in order, at most 100000), the answer ratelimit_limit(name, key, config, count) gives for a key never used with the clock at that arrival (retry_after before jitter). counts: 1 each when NULL. A window kind without start has its windows on whole periods from the Unix epoch (the five-argument form aligns them as a name and key do). Writes and locks nothing.';
COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'Simulates a limit as ratelimit_simulate(config, arrivals, counts) does, for ratelimit_limit(name, key, config, count): name and key only align the windows of a config without start (a NULL name: on whole periods from the Unix epoch). Writes and locks nothing.';

COMMENT ON FUNCTION @extschema@.ratelimit_status_rows() IS
'The rows of the ratelimit_status view. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_stats_rows() IS
'The rows of the ratelimit_stats view.';
COMMENT ON FUNCTION @extschema@.ratelimit_stats_reset() IS
'Empties ratelimit_stats (every name, and stats_reset becomes now). Owner only unless granted.';
COMMENT ON VIEW @extschema@.ratelimit_status IS
'Every stored limit: name, key, shard; kind and the value (tokens available now) under the limit''s defined config (or the key''s override), NULL for limits only called with inline configs; the stored ts and value; idle_at, from when the row is the same as none (ratelimit_cleanup() deletes it); storage: table (a row of ratelimit_state) or memory (an entry in shared memory, this server''s). Owner only unless granted.';
COMMENT ON VIEW @extschema@.ratelimit_stats IS
'One row per limit name used since the last reset: decisions of ratelimit_limit, ratelimit_limit_all and ratelimit_refund granted, refused and refused in shadow mode, tokens granted (net of refunds), calls that waited for a row lock, and calls of a memory limit that found no room (53200: ratelimit.memory_max_keys). Cumulative, like pg_stat_*: counted when decided, whether or not the transaction commits. Empty without shared memory (shared_preload_libraries before PostgreSQL 17). Names past ratelimit.stats_max_names are counted in one row whose name is NULL.';

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises (a refusal with throws => true, a bad argument) is rolled back and returned in error_state, error_message, error_detail and error_hint instead of raised, so the router''s connection survives.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_check: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises is returned in error_state, error_message, error_detail and error_hint instead of raised.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit_all: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows with NULL error columns; when it raises an error (nothing of it kept), one row whose error_state, error_message, error_detail and error_hint carry the error.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'What the ratelimit_proxy router runs for ratelimit_simulate: the same simulation, its rows with NULL error columns; when it raises an error, one row whose error_state, error_message, error_detail and error_hint carry the error.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_value(text, text, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_value: its row, or NULLs and the error it raised in error_state, error_message, error_detail and error_hint (NULL when absent), so the router''s connection survives.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_reset(text, text) IS
'What the ratelimit_proxy router runs for ratelimit_reset: its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_refund(text, text, double precision, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_refund: its row, or NULLs and the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'What the ratelimit_proxy router runs for ratelimit_headers: its answer, or NULL and the error it raised in the error_* columns.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_override(text, text, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_override: NULLs, or the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_unoverride(text, text) IS
'What the ratelimit_proxy router runs for ratelimit_unoverride: its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) IS
'What the ratelimit_proxy router runs on every partition for ratelimit_define: one row, of NULLs, or of the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) IS
'What the ratelimit_proxy router runs on every partition for ratelimit_undefine: one row, its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_cleanup() IS
'What the ratelimit_proxy router runs on every partition for ratelimit_cleanup: one row, its count, or NULL and the error it raised in the error_* columns. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() IS
'What the ratelimit_proxy router runs on every partition for ratelimit_stats_reset: one row, of NULLs, or of the error it raised in the error_* columns. Owner only unless granted.';
