/* ratelimit_proxy 0.8.0 -> 0.9.0: the routed calls over the router's own connections, prepared once */

\echo Use "ALTER EXTENSION ratelimit_proxy UPDATE TO '0.9.0'" to load this file. \quit

-- Until 0.8.0 every ratelimit_proxy_* function below was a PL/Proxy
-- function. PL/Proxy sends each call as an unprepared statement, which the
-- partition parses and plans every time, and its call handler costs the
-- router about as much again (bench/README.md): together most of what a
-- routed call added to a direct one. From 0.9.0 they are one C function of
-- the ratelimit library, ratelimit_proxy_route (src/pg/api/routing.cpp),
-- with the same signatures and the same partitions' functions behind them:
-- it reads the partitions from the same SQL/MED server ratelimit (options
-- p0, p1, ... or partition_0, ...; modular_mapping, connection_lifetime and
-- query_timeout as PL/Proxy reads them) and the caller's user mapping,
-- needs USAGE on the server as PL/Proxy does, routes as PL/Proxy's RUN ON
-- hash, ALL and ANY do, and keeps one connection per partition and
-- backend on which each statement is prepared once. A partition's error
-- keeps the connection and is raised as PL/Proxy raised it
-- ("<function>(<arguments>): [<database>] REMOTE ERROR: ..."); a lost
-- connection is raised naming the function and the partition's database,
-- and the next call connects again. Nothing changes on the partitions: a
-- 0.9.0 router works over partitions at 0.8.0. PL/Proxy stays required:
-- its foreign data wrapper validates the server's options, and an
-- application's own PL/Proxy functions run beside these.

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_stats()
RETURNS TABLE(server text, name text, granted bigint, refused bigint, shadow_refused bigint, tokens_granted double precision, lock_waits bigint, stats_reset timestamp with time zone, memory_full bigint)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_status()
RETURNS TABLE(server text, db text, name text, key text, shard smallint, kind text, value double precision, ts timestamp with time zone, stored_value double precision, idle_at timestamp with time zone, storage text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_value(hash integer, name text, key text, config jsonb, OUT value double precision, OUT ts timestamp with time zone, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_reset(hash integer, name text, key text, OUT reset boolean, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_refund(hash integer, name text, key text, count double precision, config jsonb, OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamp with time zone, OUT remaining double precision, OUT reset_after double precision, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_headers(hash integer, name text, result @extschema@.ratelimit_result, config jsonb, key text, OUT headers jsonb, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_override(hash integer, name text, key text, config jsonb, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_unoverride(hash integer, name text, key text, OUT unoverridden boolean, OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_define(name text, config jsonb)
RETURNS TABLE(error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_undefine(name text)
RETURNS TABLE(undefined boolean, error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_cleanup()
RETURNS TABLE(deleted bigint, error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_stats_reset()
RETURNS TABLE(error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_limit(hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean, error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_check(hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean, error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_limit_all(hash integer, limits jsonb, throws boolean, error_format text)
RETURNS SETOF @extschema@.ratelimit_proxy_entry
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_proxy_simulate(config jsonb, arrivals timestamp with time zone[], counts double precision[], name text, key text)
RETURNS TABLE(at timestamp with time zone, count double precision, ok boolean, remaining double precision, retry_after double precision, error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- ratelimit_limit and ratelimit_check, the hot path, are ratelimit_proxy_route
-- themselves: it computes ratelimit_hash(name, key) (the same md5), sends the
-- call and the session's ratelimit.error_format to the partition's
-- ratelimit_proxy_limit / _check, and returns the row or raises the error in
-- it. 0.8.0's SQL function around them could be inlined into a select list
-- only: in FROM (SELECT * FROM ratelimit_limit(...), the usual call)
-- PostgreSQL parsed and planned its body at every call.
CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it (ratelimit_partition(name, key)), in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429, or PGRST with ratelimit.error_format = postgrest in the router session, as one node does; the partition''s errors are raised as the partition raised them, and cost no reconnect.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing. throws => true raises as ratelimit_limit does.';
