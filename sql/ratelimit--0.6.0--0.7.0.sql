/* ratelimit 0.6.0 -> 0.7.0: the calls a ratelimit_proxy 0.7.0 router sends, which return errors as data */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.7.0'" to load this file. \quit

-- PL/Proxy closes its connection to a partition whenever the remote
-- statement raises an error, so a router that let the partition raise
-- paid a new connection for every refusal with throws => true and every
-- bad argument. The router (ratelimit_proxy 0.7.0) calls these instead:
-- the same call as ratelimit_limit, ratelimit_check and ratelimit_limit_all
-- (same arguments, same code, same decision and counters), made in a
-- subtransaction; an error it raises is rolled back with the subtransaction
-- and returned in the error_* columns (SQLSTATE, message, detail, hint;
-- NULL when there is none), and the router raises it. error_format is the
-- router session's ratelimit.error_format (NULL: the partition's own),
-- set for the partition's transaction as set_config(..., true) would.
-- PUBLIC may call them, as it may call the functions they run.

CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises (a refusal with throws => true, a bad argument) is rolled back and returned in error_state, error_message, error_detail and error_hint instead of raised, so the router''s connection survives.';

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
AS 'MODULE_PATHNAME', 'ratelimit_proxy_check'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_check: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own); an error it raises is returned in error_state, error_message, error_detail and error_hint instead of raised.';

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(limits jsonb, throws boolean, error_format text)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
AS 'MODULE_PATHNAME', 'ratelimit_proxy_limit_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text) IS
'What the ratelimit_proxy router runs for ratelimit_limit_all: the same call, with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows with NULL error columns; when it raises an error (nothing of it kept), one row whose error_state, error_message, error_detail and error_hint carry the error.';
