/* ratelimit 0.3.0 -> 0.4.0: the functions run with the caller's rights; their SQL runs as their owner */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.4.0'" to load this file. \quit

-- Before 0.4.0 every function was SECURITY DEFINER with
-- SET search_path = pg_catalog, pg_temp. That SET saves and restores the
-- search_path GUC on every call (about a tenth of a grant's cost), though a
-- grant on an existing key runs no SQL at all: it reads and writes the state
-- row directly, which checks no privileges and resolves no names.
--
-- From 0.4.0 the functions are SECURITY INVOKER without a SET clause. Each
-- SQL statement they do run (inserting a new key, shards, definitions,
-- fallbacks) runs as the function's owner with search_path pinned to
-- pg_catalog, pg_temp, exactly as the SECURITY DEFINER functions ran it. Who
-- may call which function is unchanged: EXECUTE privileges still decide
-- (CREATE OR REPLACE keeps each function's owner, privileges and comment).
--
-- The functions point at new entry points (*_invoker): a session that still
-- has the previous library loaded fails with "could not find function"
-- until it reconnects, rather than running SQL without that switch.

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_limit_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_check_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_reset_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_value_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_define_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_undefine_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
AS 'MODULE_PATHNAME', 'ratelimit_limit_all_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_refund(
    name text,
    key text DEFAULT NULL,
    count double precision DEFAULT 1,
    config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_refund_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
AS 'MODULE_PATHNAME', 'ratelimit_cleanup_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'ratelimit_headers_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_status_rows()
RETURNS TABLE (name text, key text, shard smallint, kind text, value double precision, ts timestamptz,
               stored_value double precision, idle_at timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_status_rows_invoker'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
