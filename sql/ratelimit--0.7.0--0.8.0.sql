/* ratelimit 0.7.0 -> 0.8.0: every call a ratelimit_proxy 0.8.0 router sends returns its errors as data; ratelimit_simulate */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.8.0'" to load this file. \quit

-- PL/Proxy closes its connection to a partition whenever the remote
-- statement raises an error. ratelimit 0.7.0 gave the router errors as data
-- for ratelimit_limit, ratelimit_check and ratelimit_limit_all; these do the
-- same for every other call the router sends: ratelimit_value, _reset,
-- _refund, _headers, _override, _unoverride (routed to the key's partition)
-- and ratelimit_define, _undefine, _cleanup, _stats_reset (run on every
-- partition). Each runs the function of the name without "proxy_" with the
-- same arguments in an exception block (a subtransaction: an error rolls
-- back what the call did, as on one node, where it aborts the caller's
-- transaction) and returns its result, or NULL and the error's SQLSTATE,
-- message, detail and hint (NULL when absent) in the error_* columns, which
-- the router raises. A cancel is not caught (WHEN OTHERS leaves it alone).
-- The rights are those of the function each runs. The ones run on every
-- partition return a set (one row), as PL/Proxy's RUN ON ALL needs.

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_value(text, text, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_value: its row, or NULLs and the error it raised in error_state, error_message, error_detail and error_hint (NULL when absent), so the router''s connection survives.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_reset(text, text) IS
'What the ratelimit_proxy router runs for ratelimit_reset: its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_refund(text, text, double precision, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_refund: its row, or NULLs and the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'What the ratelimit_proxy router runs for ratelimit_headers: its answer, or NULL and the error it raised in the error_* columns.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_override(text, text, jsonb) IS
'What the ratelimit_proxy router runs for ratelimit_override: NULLs, or the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_unoverride(text, text) IS
'What the ratelimit_proxy router runs for ratelimit_unoverride: its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) IS
'What the ratelimit_proxy router runs on every partition for ratelimit_define: one row, of NULLs, or of the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) IS
'What the ratelimit_proxy router runs on every partition for ratelimit_undefine: one row, its answer, or NULL and the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_cleanup() IS
'What the ratelimit_proxy router runs on every partition for ratelimit_cleanup: one row, its count, or NULL and the error it raised in the error_* columns. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() IS
'What the ratelimit_proxy router runs on every partition for ratelimit_stats_reset: one row, of NULLs, or of the error it raised in the error_* columns. Owner only unless granted.';

-- The same rights as the functions they run.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() FROM PUBLIC;

-- ratelimit_proxy_limit, _check and _limit_all return a named row type
-- instead of OUT parameters (the same columns, so a 0.7.0 router's
-- SELECT * reads them as before): PostgreSQL rebuilds a function's OUT
-- parameters into a row description from pg_proc at every parse, plan and
-- executor start of the statement PL/Proxy sends, unprepared, at every call
-- (bench/plproxy-profile.sh: tens of thousands of instructions a call); a
-- named type's comes from the type cache.
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

DROP FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text);

CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises (a refusal with throws => true, a bad argument) is rolled back and returned in error_state, error_message, error_detail and error_hint instead of raised, so the router''s connection survives.';

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS 'MODULE_PATHNAME', 'ratelimit_proxy_check'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_check: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises is returned in error_state, error_message, error_detail and error_hint instead of raised.';

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(limits jsonb, throws boolean, error_format text)
RETURNS SETOF @extschema@.ratelimit_proxy_entry
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit_all: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows with NULL error columns; when it raises an error (nothing of it kept), one row whose error_state, error_message, error_detail and error_hint carry the error.';

-- ratelimit_simulate (another part of 0.8.0):
-- The answers ratelimit_limit(name, key, config, count) gives for a key
-- never used, with the clock at each arrival in turn, computed by the same
-- core without storage, locks or the catalog: a config can be tried on a
-- traffic pattern before it is shipped. Depends only on its arguments (the
-- config is parsed under fixed settings, as ratelimit_limit parses it), so
-- IMMUTABLE and PARALLEL SAFE; PUBLIC may call it, as it touches nothing.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[] DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_simulate'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 1000;

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) IS
'Simulates a limit: one row per arrival (in order, at most 100000), the answer ratelimit_limit(name, key, config, count) gives for a key never used with the clock at that arrival (retry_after before jitter). counts: 1 each when NULL. A window kind without start has its windows on whole periods from the Unix epoch (the five-argument form aligns them as a name and key do). Writes and locks nothing.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) TO PUBLIC;

-- The same with the name and key whose hash aligns the windows of a window
-- kind without "start", as ratelimit_limit(name, key, config) aligns them.
-- A separate function (not two more defaults) so that the three-argument
-- signature above is the function's identity.
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

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'Simulates a limit as ratelimit_simulate(config, arrivals, counts) does, for ratelimit_limit(name, key, config, count): name and key only align the windows of a config without start (a NULL name: on whole periods from the Unix epoch). Writes and locks nothing.';

REVOKE ALL ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) TO PUBLIC;

-- What the ratelimit_proxy 0.8.0 router runs for ratelimit_simulate on any
-- partition: the same simulation, its error (a bad argument) returned in
-- the error_* columns of one row instead of raised, so that PL/Proxy keeps
-- its connection (as ratelimit_proxy_limit_all, 0.7.0).
CREATE FUNCTION @extschema@.ratelimit_proxy_simulate(
    config jsonb, arrivals timestamptz[], counts double precision[], name text, key text)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
AS 'MODULE_PATHNAME', 'ratelimit_proxy_simulate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'What the ratelimit_proxy router runs for ratelimit_simulate: the same simulation, its rows with NULL error columns; when it raises an error, one row whose error_state, error_message, error_detail and error_hint carry the error.';
