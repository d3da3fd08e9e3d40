/* ratelimit 0.3.0 -> 0.4.0: the functions run with the caller's rights; their SQL runs as the tables' owner */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.4.0'" to load this file. \quit

-- Before 0.4.0 every function was SECURITY DEFINER with
-- SET search_path = pg_catalog, pg_temp. That SET saves and restores the
-- search_path GUC on every call (about a tenth of a grant's cost), though a
-- grant on an existing key runs no SQL at all: it reads and writes the state
-- row directly, which checks no privileges and resolves no names.
--
-- From 0.4.0 the functions are SECURITY INVOKER without a SET clause. Each
-- SQL statement they do run (inserting a new key, shards, definitions,
-- fallbacks) runs as the owner of the state table with search_path pinned to
-- pg_catalog, pg_temp, exactly as the SECURITY DEFINER functions ran it. Who
-- may call which function is unchanged: EXECUTE privileges still decide.
ALTER FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean)
    SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean)
    SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_value(text, text, jsonb) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_reset(text, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_define(text, jsonb) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_undefine(text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_cleanup() SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb)
    SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.ratelimit_status_rows() SECURITY INVOKER RESET search_path;
