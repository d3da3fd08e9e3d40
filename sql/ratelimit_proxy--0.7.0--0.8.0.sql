/* ratelimit_proxy 0.7.0 -> 0.8.0: every routed call's errors come back as data, a lean routed call; ratelimit_simulate, answered by any partition */

\echo Use "ALTER EXTENSION ratelimit_proxy UPDATE TO '0.8.0'" to load this file. \quit

-- ratelimit_proxy 0.7.0 got the errors of ratelimit_limit, ratelimit_check
-- and ratelimit_limit_all from the partition as data; every other routed
-- call still let the partition raise, which made PL/Proxy drop its
-- connection there (a bad config given to ratelimit_value, a refund of a
-- negative count, an invalid definition...). From 0.8.0 every function
-- that reaches a partition with arguments a caller chooses calls the
-- partition's ratelimit_proxy_<function> (ratelimit 0.8.0), which returns
-- the error as data, and raises it here as the partition raised it. Update
-- the partitions first (ALTER EXTENSION ratelimit UPDATE on each): over a
-- partition at 0.7.0 this router's ratelimit_limit, _check and _limit_all
-- work, and the other calls fail with PL/Proxy's error naming the partition
-- and the missing function ratelimit_proxy_<function> (SQLSTATE 42883).
-- ratelimit_stats and ratelimit_status take no argument and run no code a
-- caller's input could make fail: they stay as they are.

-- The routed calls to one partition: PL/Proxy functions of the partition's
-- function's name with the partition's hash first (RUN ON hash, computed by
-- the caller), then the partition's arguments.
CREATE FUNCTION @extschema@.ratelimit_proxy_value(
    hash integer, name text, key text, config jsonb,
    OUT value double precision,
    OUT ts timestamptz,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_value(name, key, config);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_value(integer, text, text, jsonb) IS
'The partition''s ratelimit_proxy_value on the partition of hash (ratelimit_hash(name, key)): ratelimit_value there, its error returned in the error_* columns; what the router''s ratelimit_value runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_reset(
    hash integer, name text, key text,
    OUT reset boolean,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_reset(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_reset(integer, text, text) IS
'The partition''s ratelimit_proxy_reset on the partition of hash (ratelimit_hash(name, key)): ratelimit_reset there, its error returned in the error_* columns; what the router''s ratelimit_reset runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_proxy_refund(
    hash integer, name text, key text, count double precision, config jsonb,
    OUT ok boolean,
    OUT retry_after double precision,
    OUT retry_at timestamptz,
    OUT remaining double precision,
    OUT reset_after double precision,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_refund(name, key, count, config);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_refund(integer, text, text, double precision, jsonb) IS
'The partition''s ratelimit_proxy_refund on the partition of hash (ratelimit_hash(name, key)): ratelimit_refund there, its error returned in the error_* columns; what the router''s ratelimit_refund runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_proxy_headers(
    hash integer, name text, result @extschema@.ratelimit_result, config jsonb, key text,
    OUT headers jsonb,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_headers(name, result, config, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_headers(integer, text, @extschema@.ratelimit_result, jsonb, text) IS
'The partition''s ratelimit_proxy_headers on the partition of hash (ratelimit_hash(name, key)): ratelimit_headers there, its error returned in the error_* columns; what the router''s ratelimit_headers runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_override(
    hash integer, name text, key text, config jsonb,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_override(name, key, config);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_override(integer, text, text, jsonb) IS
'The partition''s ratelimit_proxy_override on the partition of hash (ratelimit_hash(name, key)): ratelimit_override there, its error returned in the error_* columns; what the router''s ratelimit_override runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_proxy_unoverride(
    hash integer, name text, key text,
    OUT unoverridden boolean,
    OUT error_state text,
    OUT error_message text,
    OUT error_detail text,
    OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_unoverride(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_unoverride(integer, text, text) IS
'The partition''s ratelimit_proxy_unoverride on the partition of hash (ratelimit_hash(name, key)): ratelimit_unoverride there, its error returned in the error_* columns; what the router''s ratelimit_unoverride runs. Owner only unless granted.';

-- Run on every partition (RUN ON ALL needs a set: one row per partition).
-- Replacing them changes their result, so first the SQL functions that
-- read them become the PL/pgSQL ones below.
CREATE OR REPLACE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_define(name, config) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_define(text, jsonb) IS
'Routed ratelimit_define: validates and stores the named limit on every partition (each in its own transaction; after an error, such as a partition down, run it again); an invalid config raises the partition''s error (22023), and costs no reconnect. Needs EXECUTE on ratelimit_proxy_define too. Owner only unless granted.';

DROP FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb);
CREATE FUNCTION @extschema@.ratelimit_proxy_define(name text, config jsonb)
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT * FROM @extschema@.ratelimit_proxy_define(name, config);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) IS
'The partition''s ratelimit_proxy_define on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_define runs. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
    any_undefined boolean := false;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_undefine(name) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        any_undefined := any_undefined OR answer.undefined;
    END LOOP;
    RETURN any_undefined;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_undefine(text) IS
'Routed ratelimit_undefine: removes the named limit on every partition; true if any partition had it. Needs EXECUTE on ratelimit_proxy_undefine too. Owner only unless granted.';

DROP FUNCTION @extschema@.ratelimit_proxy_undefine(text);
CREATE FUNCTION @extschema@.ratelimit_proxy_undefine(name text)
RETURNS TABLE (undefined boolean, error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT * FROM @extschema@.ratelimit_proxy_undefine(name);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) IS
'The partition''s ratelimit_proxy_undefine on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_undefine runs. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
    total bigint := 0;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_cleanup() LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        total := total + answer.deleted;
    END LOOP;
    RETURN total;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_cleanup() IS
'Routed ratelimit_cleanup: deletes idle state rows on every partition; returns how many in all. Needs EXECUTE on ratelimit_proxy_cleanup too. Owner only unless granted.';

DROP FUNCTION @extschema@.ratelimit_proxy_cleanup();
CREATE FUNCTION @extschema@.ratelimit_proxy_cleanup()
RETURNS TABLE (deleted bigint, error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT * FROM @extschema@.ratelimit_proxy_cleanup();
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_cleanup() IS
'The partition''s ratelimit_proxy_cleanup on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_cleanup runs. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_stats_reset()
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_stats_reset() LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_stats_reset() IS
'Routed ratelimit_stats_reset: empties ratelimit_stats on every partition. Needs EXECUTE on ratelimit_proxy_stats_reset too. Owner only unless granted.';

DROP FUNCTION @extschema@.ratelimit_proxy_stats_reset();
CREATE FUNCTION @extschema@.ratelimit_proxy_stats_reset()
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT * FROM @extschema@.ratelimit_proxy_stats_reset();
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() IS
'The partition''s ratelimit_proxy_stats_reset on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_stats_reset runs. Owner only unless granted.';

-- The router's functions on one partition: the routed call, and its error
-- raised here (as ratelimit_limit's since 0.7.0).
CREATE OR REPLACE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
LANGUAGE plpgsql VOLATILE ROWS 1
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_value(@extschema@.ratelimit_hash(name, key), name, key, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN QUERY SELECT answer.value, answer.ts;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) IS
'Routed ratelimit_value: one row, the tokens available now of limit (name, key) on its partition, and the instant they hold for; the partition''s errors are raised as the partition raised them, and cost no reconnect.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_reset(@extschema@.ratelimit_hash(name, key), name, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.reset;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_reset(text, text) IS
'Routed ratelimit_reset: forgets the state of limit (name, key) on its partition; true if there was any. Needs EXECUTE on ratelimit_proxy_reset too. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_refund(name text, key text DEFAULT NULL, count double precision DEFAULT 1, config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_refund(@extschema@.ratelimit_hash(name, key), name, key, count, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN ROW(answer.ok, answer.retry_after, answer.retry_at, answer.remaining, answer.reset_after);
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) IS
'Routed ratelimit_refund: gives count tokens back to limit (name, key) on its partition, capped at capacity; the partition''s errors are raised as the partition raised them. Needs EXECUTE on ratelimit_proxy_refund too. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_headers(name text, result @extschema@.ratelimit_result, config jsonb DEFAULT NULL, key text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_headers(@extschema@.ratelimit_hash(name, key), name, result, config, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.headers;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'Routed ratelimit_headers: the HTTP response headers for a result of limit (name, key) (the key''s override, else config inline, else the definition), computed on the partition of (name, key), which holds that key''s override. A NULL key: the partition of the name''s global limit.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_override(name text, key text, config jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_override(@extschema@.ratelimit_hash(name, key), name, key, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;

END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) IS
'Routed ratelimit_override: stores config for key (name, key) on the partition that holds it (committed there before the call returns); an invalid config raises the partition''s error. Needs EXECUTE on ratelimit_proxy_override too. Owner only unless granted.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_unoverride(name text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_unoverride(@extschema@.ratelimit_hash(name, key), name, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.unoverridden;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_unoverride(text, text) IS
'Routed ratelimit_unoverride: removes the override of key (name, key) on its partition; true if there was one. Needs EXECUTE on ratelimit_proxy_unoverride too. Owner only unless granted.';

-- The same rights as the functions they serve.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_reset(integer, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_refund(integer, text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_override(integer, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_unoverride(integer, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() FROM PUBLIC;

-- A lean routed call. The router's ratelimit_limit and ratelimit_check were
-- PL/pgSQL functions around the PL/Proxy call; they are now one SQL
-- expression, which the planner inlines into the caller's statement (its
-- plan cached with the caller's prepared statement): the partition's hash,
-- the PL/Proxy call, and ratelimit_proxy_result, a C function of the
-- ratelimit library (installed with this extension), which raises the
-- error the partition returned or returns the row. (Called with a volatile
-- or costly argument expression, the function is not inlined and runs as a
-- SQL function, planned at each statement.) ratelimit_proxy_raise, which
-- the other routed functions call, becomes that library's C function too.
-- The public functions cannot be the PL/Proxy functions themselves:
-- PL/Proxy returns the partition's row as it is, and the error in it must
-- be raised on the router, after the call.
-- The partition's ratelimit_proxy_limit, _check and _limit_all return the
-- named row types ratelimit_proxy_answer and ratelimit_proxy_entry from
-- ratelimit 0.8.0 (the same columns as 0.7.0's OUT parameters, which
-- PostgreSQL rebuilt from pg_proc at every parse, plan and executor start
-- of PL/Proxy's unprepared statement), and so do the PL/Proxy functions
-- here (PL/Proxy reads the columns by name: over a 0.7.0 partition they
-- work as before).
CREATE TYPE @extschema@.ratelimit_proxy_answer AS (
    ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

COMMENT ON TYPE @extschema@.ratelimit_proxy_answer IS
'The row of ratelimit_proxy_limit and ratelimit_proxy_check: ratelimit_result''s columns (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';

CREATE TYPE @extschema@.ratelimit_proxy_entry AS (
    name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

COMMENT ON TYPE @extschema@.ratelimit_proxy_entry IS
'A row of ratelimit_proxy_limit_all: ratelimit_limit_all''s row (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';

DROP FUNCTION @extschema@.ratelimit_proxy_limit(integer, text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_check(integer, text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_limit_all(integer, jsonb, boolean, text);

CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_limit(name, key, config, count, reserve, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_limit on the partition of hash (ratelimit_hash(name, key)): ratelimit_limit there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_limit runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_check(name, key, config, count, reserve, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_check on the partition of hash (ratelimit_hash(name, key)): ratelimit_check there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_check runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(hash integer, limits jsonb, throws boolean, error_format text)
RETURNS SETOF @extschema@.ratelimit_proxy_entry
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_limit_all(limits, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(integer, jsonb, boolean, text) IS
'The partition''s ratelimit_proxy_limit_all on the partition of hash (ratelimit_limit_all_hash(limits): its elements''): ratelimit_limit_all there with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows, or one row carrying its error in the error_* columns; what the router''s ratelimit_limit_all runs.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_raise(state text, message text, detail text, hint text)
RETURNS void
AS '$libdir/ratelimit', 'ratelimit_proxy_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_raise(text, text, text, text) IS
'Raises the error a partition returned as data (from the partition''s ratelimit_proxy_* functions): SQLSTATE state with its message, detail and hint (each left out when NULL); does nothing when state is NULL.';

CREATE FUNCTION @extschema@.ratelimit_proxy_result(answer record)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_result'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_result(record) IS
'The answer of a routed ratelimit_proxy_limit or ratelimit_proxy_check: its ratelimit_result, or the partition''s error (error_state, error_message, error_detail, error_hint) raised.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT @extschema@.ratelimit_proxy_result(
        @extschema@.ratelimit_proxy_limit(@extschema@.ratelimit_hash(name, key), name, key, config, count, reserve,
            throws, NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), '')));
END;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it, in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429, or PGRST with ratelimit.error_format = postgrest in the router session, as one node does; the partition''s errors are raised as the partition raised them, and cost no reconnect.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT @extschema@.ratelimit_proxy_result(
        @extschema@.ratelimit_proxy_check(@extschema@.ratelimit_hash(name, key), name, key, config, count, reserve,
            throws, NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), '')));
END;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing. throws => true raises as ratelimit_limit does.';

-- ratelimit_simulate (another part of 0.8.0):
-- ratelimit_simulate touches no limit, so any partition can answer it:
-- the router sends it to one at random (RUN ON ANY) through the
-- partition's ratelimit_proxy_simulate (ratelimit 0.8.0), which returns an
-- error as data, and raises that error itself, as the partition would
-- have: the connection stays. Update the partitions first.
CREATE FUNCTION @extschema@.ratelimit_proxy_simulate(
    config jsonb, arrivals timestamptz[], counts double precision[], name text, key text)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ANY;
    SELECT * FROM @extschema@.ratelimit_proxy_simulate(config, arrivals, counts, name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'The partition''s ratelimit_proxy_simulate on any partition: ratelimit_simulate there, its error returned in the error_* columns of one row; what the router''s ratelimit_simulate runs.';

-- The router's ratelimit_simulate: the same arguments and rows as one
-- node's, its errors raised with the partition's SQLSTATE, message, detail
-- and hint. VOLATILE: it asks another server.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[],
    name text,
    key text DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_simulate(config, arrivals, counts, name, key) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        at := answer.at;
        count := answer.count;
        ok := answer.ok;
        remaining := answer.remaining;
        retry_after := answer.retry_after;
        RETURN NEXT;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'Routed ratelimit_simulate: one row per arrival, the answer ratelimit_limit(name, key, config, count) gives a key never used with the clock at that arrival, computed by any partition (it touches no limit); its errors raised as the partition raised them.';

-- The three-argument form, as on a node: windows on whole periods from the
-- Unix epoch.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[] DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
LANGUAGE sql VOLATILE
AS $$ SELECT * FROM @extschema@.ratelimit_simulate(config, arrivals, counts, NULL::text, NULL::text) $$;

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) IS
'Routed ratelimit_simulate(config, arrivals, counts): one row per arrival, the answer ratelimit_limit gives a key never used with the clock at that arrival (windows without start on whole periods from the Unix epoch), computed by any partition; its errors raised as the partition raised them.';
