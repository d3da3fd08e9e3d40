/* ratelimit 0.7.0 -> 0.8.0: ratelimit_simulate, a limit's answers over a sequence of arrivals */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.8.0'" to load this file. \quit

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
