/* ratelimit_proxy 0.4.0 -> 0.6.0: the whole ratelimit 0.6.0 API on the router */

\echo Use "ALTER EXTENSION ratelimit_proxy UPDATE TO '0.6.0'" to load this file. \quit

-- From 0.6.0 the router offers every user-facing function and view of
-- ratelimit 0.6.0 with the same signature (scripts/plproxy-test.sh compares
-- the two catalogs), and the partitions run ratelimit 0.6.0. Update the
-- partitions first (ALTER EXTENSION ratelimit UPDATE on each): the 0.4.0
-- router works over 0.6.0 partitions; this one needs them.

-- ratelimit_headers gains a key (last, as in ratelimit 0.5.0) and runs on
-- the partition of (name, key), where that key's override is.
DROP FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb);

CREATE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL,
    key text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'Routed ratelimit_headers: the HTTP response headers for a result of limit (name, key) (the key''s override, else config inline, else the definition), computed on the partition of (name, key), which holds that key''s override. A NULL key: the partition of the name''s global limit.';

-- Per-key overrides live with the key's state, on its partition.
CREATE FUNCTION @extschema@.ratelimit_override(name text, key text, config jsonb)
RETURNS void
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) IS
'Routed ratelimit_override: stores config for key (name, key) on the partition that holds it (committed there before the call returns). Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_unoverride(name text, key text)
RETURNS boolean
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_unoverride(text, text) IS
'Routed ratelimit_unoverride: removes the override of key (name, key) on its partition; true if there was one. Owner only unless granted.';

-- ratelimit.error_format reaches the partition: PL/Proxy sends no settings,
-- so the calls that can refuse with throws => true send the router
-- session's value as an argument, and the partition sets it for its own
-- statement (set_config(..., true): that remote transaction only) while it
-- evaluates the throws argument, so before the call decides. NULL (the
-- router session has no value) keeps the partition's own setting.
CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_result
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
    SELECT * FROM @extschema@.ratelimit_limit(name, key, config, count, reserve,
        CASE WHEN error_format IS NULL THEN throws
             WHEN pg_catalog.set_config('ratelimit.error_format', error_format, true) IS NULL THEN throws
             ELSE throws END);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text) IS
'ratelimit_limit on the partition of (name, key) with ratelimit.error_format set to error_format there (NULL: the partition''s own); what the router''s ratelimit_limit runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_result
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
    SELECT * FROM @extschema@.ratelimit_check(name, key, config, count, reserve,
        CASE WHEN error_format IS NULL THEN throws
             WHEN pg_catalog.set_config('ratelimit.error_format', error_format, true) IS NULL THEN throws
             ELSE throws END);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text) IS
'ratelimit_check on the partition of (name, key) with ratelimit.error_format set to error_format there (NULL: the partition''s own); what the router''s ratelimit_check runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(limits jsonb, throws boolean, error_format text)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_limit_all_hash(limits);
    SELECT * FROM @extschema@.ratelimit_limit_all(limits,
        CASE WHEN error_format IS NULL THEN throws
             WHEN pg_catalog.set_config('ratelimit.error_format', error_format, true) IS NULL THEN throws
             ELSE throws END);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text) IS
'ratelimit_limit_all on the partition of its elements with ratelimit.error_format set to error_format there (NULL: the partition''s own); what the router''s ratelimit_limit_all runs.';

-- PL/Proxy raises a remote error with the remote SQLSTATE but prefixes its
-- message with "<function>(<arguments>): [<partition database>] REMOTE
-- ERROR: " and its detail and hint with "Remote detail: " / "Remote hint: ".
-- PostgREST parses a PGRST error's message and detail as JSON, and PT429's
-- detail is JSON for clients too: this raises the partition's error again as
-- the partition raised it. An error that is not a remote error of function
-- (PL/Proxy's own, such as a partition that cannot be reached), or that
-- ended the partition's connection (SQLSTATE class 08, or 57P01 .. 57P05
-- when the partition shuts down), is left alone, so it still names the
-- partition: this returns, and the caller re-raises the original.
CREATE FUNCTION @extschema@.ratelimit_proxy_raise_remote(
    function text, state text, message text, detail text, hint text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    prefix text := function || '(';
    rest   text;
    cut    integer;
BEGIN
    IF left(message, length(prefix)) <> prefix OR state LIKE '08%' OR state LIKE '57P%' THEN
        RETURN;
    END IF;
    rest := substr(message, length(prefix) + 1);
    -- "<n>): [<database>] REMOTE <severity>: <message>"
    cut := strpos(rest, '] REMOTE ');
    IF rest !~ '^[0-9]+\): \[' OR cut = 0 THEN
        RETURN;
    END IF;
    rest := substr(rest, cut + length('] REMOTE '));
    cut := strpos(rest, ': ');
    IF cut = 0 THEN
        RETURN;
    END IF;
    message := substr(rest, cut + 2);
    detail := CASE WHEN detail LIKE 'Remote detail: %' THEN substr(detail, length('Remote detail: ') + 1) ELSE detail END;
    hint := CASE WHEN hint LIKE 'Remote hint: %' THEN substr(hint, length('Remote hint: ') + 1) ELSE hint END;
    -- RAISE takes no NULL option, and an empty one would show: leave it out.
    IF detail = '' AND hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message;
    ELSIF hint = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, DETAIL = detail;
    ELSIF detail = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, HINT = hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, DETAIL = detail, HINT = hint;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_raise_remote(text, text, text, text, text) IS
'Raises a remote error of PL/Proxy function function (schema-qualified) again as the partition raised it: SQLSTATE state, the message, detail and hint without PL/Proxy''s prefixes. Returns (raises nothing) when message is not a remote error of that function, or one that ended the partition''s connection (SQLSTATE class 08, 57P01 .. 57P05).';

-- The router's ratelimit_limit, ratelimit_check and ratelimit_limit_all:
-- the routed call with the session's ratelimit.error_format, and the
-- partition's error raised as the partition raised it.
CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    state   text;
    message text;
    detail  text;
    hint    text;
BEGIN
    RETURN @extschema@.ratelimit_proxy_limit(name, key, config, count, reserve, throws,
        NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), ''));
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    PERFORM @extschema@.ratelimit_proxy_raise_remote('@extschema@.ratelimit_proxy_limit', state, message, detail, hint);
    RAISE;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it, in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429, or PGRST with ratelimit.error_format = postgrest in the router session, as one node does; the partition''s errors are raised as the partition raised them.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    state   text;
    message text;
    detail  text;
    hint    text;
BEGIN
    RETURN @extschema@.ratelimit_proxy_check(name, key, config, count, reserve, throws,
        NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), ''));
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    PERFORM @extschema@.ratelimit_proxy_raise_remote('@extschema@.ratelimit_proxy_check', state, message, detail, hint);
    RAISE;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing. throws => true raises as ratelimit_limit does.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    state   text;
    message text;
    detail  text;
    hint    text;
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.ratelimit_proxy_limit_all(limits, throws,
        NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), ''));
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    PERFORM @extschema@.ratelimit_proxy_raise_remote('@extschema@.ratelimit_proxy_limit_all', state, message, detail, hint);
    RAISE;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Routed ratelimit_limit_all: several limits all or nothing, on the one partition that holds them all; SQLSTATE 0A000 (and nothing consumed) when they are on different partitions. throws => true raises as ratelimit_limit does.';

-- ratelimit_stats_reset on every partition (RUN ON ALL needs a
-- set-returning function: one row per partition).
CREATE FUNCTION @extschema@.ratelimit_proxy_stats_reset()
RETURNS SETOF boolean
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT true AS reset FROM @extschema@.ratelimit_stats_reset();
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() IS
'ratelimit_stats_reset on every partition at once, one row per partition; what the router''s ratelimit_stats_reset runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_stats_reset()
RETURNS void
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT count(*) FROM @extschema@.ratelimit_proxy_stats_reset();
END;

COMMENT ON FUNCTION @extschema@.ratelimit_stats_reset() IS
'Routed ratelimit_stats_reset: empties ratelimit_stats on every partition. Needs EXECUTE on ratelimit_proxy_stats_reset too. Owner only unless granted.';

-- A partition's server, for the views: the counters of ratelimit_stats and
-- the memory limits are the server's shared memory, which every partition
-- database of one server sees. The postmaster's start time and port tell
-- servers apart (two servers started in the same microsecond on the same
-- port of different hosts would be taken for one).
-- ratelimit_stats of every partition, each row with its server.
CREATE FUNCTION @extschema@.ratelimit_proxy_stats()
RETURNS TABLE (server text, name text, granted bigint, refused bigint, shadow_refused bigint,
               tokens_granted double precision, lock_waits bigint, stats_reset timestamptz,
               memory_full bigint)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT EXTRACT(epoch FROM pg_catalog.pg_postmaster_start_time())::text || ' ' || pg_catalog.current_setting('port') AS server, s.*
    FROM @extschema@.ratelimit_stats AS s;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats() IS
'The rows of ratelimit_stats of every partition, each with its server (the postmaster''s start time and port); what the router''s ratelimit_stats view sums.';

-- ratelimit_stats: per name, the sum over the partitions' servers (a
-- server's counters counted once, however many partition databases it
-- holds: the latest of its reads). stats_reset is the latest reset of any.
CREATE VIEW @extschema@.ratelimit_stats AS
SELECT name, sum(granted)::bigint AS granted, sum(refused)::bigint AS refused,
       sum(shadow_refused)::bigint AS shadow_refused, sum(tokens_granted) AS tokens_granted,
       sum(lock_waits)::bigint AS lock_waits, max(stats_reset) AS stats_reset,
       sum(memory_full)::bigint AS memory_full
FROM (SELECT DISTINCT ON (s.server, s.name) s.*
      FROM @extschema@.ratelimit_proxy_stats() AS s
      ORDER BY s.server, s.name, s.stats_reset DESC,
               s.granted + s.refused + s.shadow_refused + s.memory_full DESC) AS per_server
GROUP BY name;

COMMENT ON VIEW @extschema@.ratelimit_stats IS
'Routed ratelimit_stats: one row per limit name, the counters of every partition''s server summed (each server once); stats_reset is the latest reset of any of them. Each partition counts the calls it decided; empty where a partition''s server has no shared memory for them (shared_preload_libraries before PostgreSQL 17).';

-- ratelimit_status of every partition, each row with its server and
-- database.
CREATE FUNCTION @extschema@.ratelimit_proxy_status()
RETURNS TABLE (server text, db text, name text, key text, shard smallint, kind text,
               value double precision, ts timestamptz, stored_value double precision,
               idle_at timestamptz, storage text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT EXTRACT(epoch FROM pg_catalog.pg_postmaster_start_time())::text || ' ' || pg_catalog.current_setting('port') AS server,
           pg_catalog.current_database()::text AS db, s.*
    FROM @extschema@.ratelimit_status AS s;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_status() IS
'The rows of ratelimit_status of every partition, each with its server (the postmaster''s start time and port) and database; what the router''s ratelimit_status view shows. Owner only unless granted.';

-- ratelimit_status: every partition's rows (each database has its own
-- table rows and memory entries).
CREATE VIEW @extschema@.ratelimit_status AS
SELECT name, key, shard, kind, value, ts, stored_value, idle_at, storage
FROM @extschema@.ratelimit_proxy_status();

COMMENT ON VIEW @extschema@.ratelimit_status IS
'Routed ratelimit_status: the stored limits of every partition (table rows and memory entries; each partition database has its own). Needs EXECUTE on ratelimit_proxy_status too. Owner only unless granted.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_status() FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_status FROM PUBLIC;
GRANT SELECT ON @extschema@.ratelimit_stats TO PUBLIC;
