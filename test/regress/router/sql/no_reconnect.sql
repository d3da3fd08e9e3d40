-- A flood of errors through the router costs no partition connection: the
-- partition returns the error of every routed call (ratelimit_limit,
-- _check and _limit_all since 0.7.0; ratelimit_value, _reset, _refund,
-- _headers, _override, _unoverride, _define, _undefine and _simulate since
-- 0.8.0) as data and the router raises it, with the SQLSTATE, message,
-- detail and hint one node raises; since 0.9.0 the router's own
-- connections (ratelimit_proxy_route, one per partition, apart from
-- PL/Proxy's) carry them, and a partition's error leaves them as they
-- were. (ratelimit_cleanup and ratelimit_stats_reset take no argument: no
-- caller input makes them fail.) Before ratelimit_proxy 0.7.0
-- each of these calls made PL/Proxy drop its connection ("NOTICE: PL/Proxy:
-- dropping stale conn", which pg_regress would show here) and open a new
-- partition backend. The partitions' clocks are frozen at 2026-01-01
-- 00:00:00+00.
\set cfg '{"kind": "token bucket", "rate": 1, "period": "3650 days"}'

-- Each partition's connection of this router session: the backend's pid
-- and the partition database's sessions (pg_stat_database: every backend
-- ever connected to it; a new backend's own is counted when its first
-- statement ends, before PL/Proxy sees the answer).
CREATE FUNCTION partition_sessions()
RETURNS TABLE (db text, pid integer, sessions bigint)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, pg_backend_pid() AS pid,
           (SELECT d.sessions FROM pg_stat_database AS d WHERE d.datname = current_database()) AS sessions;
$$;
-- Connected to every partition: the router's own connections (a routed
-- call on every partition), then PL/Proxy's of the function above (twice:
-- the first call's own session is counted after it).
SELECT count(*) >= 0 AS routed FROM ratelimit_proxy_stats();
SELECT count(*) AS partitions FROM partition_sessions();
SELECT count(*) AS partitions FROM partition_sessions();
CREATE TEMP TABLE before AS SELECT * FROM partition_sessions();
-- Empty buckets on several partitions, each refusing from now on.
SELECT k, ratelimit_partition('flood', k) AS partition, (ratelimit_limit('flood', k, :'cfg')).ok
FROM unnest(ARRAY['a', 'b', 'c', 'd']) AS k ORDER BY k;

-- 20 rounds of every error a caller can provoke, on those keys: refusals
-- with throws => true (plain and PostgREST), bad arguments, an undefined
-- name, a bad error format, and bad input to every other routed function;
-- each statement's SQLSTATE as the client sees it.
CREATE TEMP TABLE calls (what text, key text, statement text, error_format text);
INSERT INTO calls VALUES
  ('limit refused', 'a', $$SELECT ratelimit_limit('flood', 'a', '{"kind": "token bucket", "rate": 1, "period": "3650 days"}', throws => true)$$, NULL),
  ('limit refused, postgrest', 'b', $$SELECT ratelimit_limit('flood', 'b', '{"kind": "token bucket", "rate": 1, "period": "3650 days"}', throws => true)$$, 'postgrest'),
  ('check refused', 'c', $$SELECT ratelimit_check('flood', 'c', '{"kind": "token bucket", "rate": 1, "period": "3650 days"}', throws => true)$$, NULL),
  ('limit_all refused', 'd', $$SELECT ratelimit_limit_all('[{"name": "flood", "key": "d", "config": {"kind": "token bucket", "rate": 1, "period": "3650 days"}}]', throws => true)$$, NULL),
  ('limit_all refused, postgrest', 'd', $$SELECT ratelimit_limit_all('[{"name": "flood", "key": "d", "config": {"kind": "token bucket", "rate": 1, "period": "3650 days"}}]', throws => true)$$, 'postgrest'),
  ('bad config', 'a', $$SELECT ratelimit_limit('flood', 'a', '{"kind": "token bucket", "rate": 0, "period": 1000}')$$, NULL),
  ('unknown field', 'b', $$SELECT ratelimit_check('flood', 'b', '{"kind": "token bucket", "rate": 1, "peroid": 1000}')$$, NULL),
  ('negative count', 'c', $$SELECT ratelimit_limit('flood', 'c', '{"kind": "token bucket", "rate": 1, "period": 1000}', -1)$$, NULL),
  ('null name', 'd', $$SELECT ratelimit_limit(NULL, 'd', '{"kind": "token bucket", "rate": 1, "period": 1000}')$$, NULL),
  ('not defined', 'a', $$SELECT ratelimit_limit('flood undefined', 'a')$$, NULL),
  ('bad error format', 'a', $$SELECT ratelimit_limit('flood', 'a', '{"kind": "token bucket", "rate": 1, "period": "3650 days"}', throws => true)$$, 'bogus'),
  ('limit_all bad element', 'a', $$SELECT ratelimit_limit_all('[{"name": "flood", "key": "a", "kee": "c"}]')$$, NULL),
  ('value bad config', 'a', $$SELECT ratelimit_value('flood', 'a', '{"kind": "token bucket", "rate": 0, "period": 1000}')$$, NULL),
  ('value not defined', 'b', $$SELECT ratelimit_value('flood undefined', 'b')$$, NULL),
  ('reset null name', 'c', $$SELECT ratelimit_reset(NULL, 'c')$$, NULL),
  ('refund negative count', 'd', $$SELECT ratelimit_refund('flood', 'd', -1, '{"kind": "token bucket", "rate": 1, "period": "3650 days"}')$$, NULL),
  ('headers not defined', 'a', $$SELECT ratelimit_headers('flood undefined', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, NULL, 'a')$$, NULL),
  ('override bad config', 'b', $$SELECT ratelimit_override('flood', 'b', '{"kind": "token bucket", "rate": -1, "period": 1000}')$$, NULL),
  ('unoverride null key', 'c', $$SELECT ratelimit_unoverride('flood', NULL)$$, NULL),
  ('define bad config', 'd', $$SELECT ratelimit_define('flood def', '{"kind": "token bucket", "rate": 1, "peroid": 1000}')$$, NULL),
  ('undefine null name', 'a', $$SELECT ratelimit_undefine(NULL)$$, NULL),
  ('simulate out of order', 'a', $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-02, 2026-01-01}')$$, NULL),
  ('simulate count never fits', 'b', $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01}', '{2}')$$, NULL),
  ('simulate null arrival', 'c', $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{NULL}')$$, NULL),
  ('simulate sharded', 'd', $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 8, "period": 1000, "shards": 4}', '{2026-01-01}')$$, NULL);
CREATE TEMP TABLE outcomes AS
SELECT c.what, g, e.* FROM calls AS c, generate_series(1, 20) AS g, LATERAL error_of(c.statement, c.error_format) AS e;
SELECT what, state, count(*) AS calls, count(DISTINCT (message, detail, hint)) AS distinct_errors
FROM outcomes GROUP BY what, state ORDER BY what;

-- The same errors as one node's, raised on the partition directly (the
-- refusals' retry times are the frozen clock's, so every round's is the same).
CREATE FUNCTION partition_error_of(name text, key text, statement text, error_format text)
RETURNS TABLE (state text, message text, detail text, hint text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ratelimit_hash(name, key);
    SELECT * FROM public.error_of(statement, error_format);
$$;
SELECT c.what, (o.state, o.message, o.detail, o.hint) = (p.state, p.message, p.detail, p.hint) AS same_as_one_node
FROM calls AS c JOIN outcomes AS o ON o.what = c.what AND o.g = 1,
     LATERAL partition_error_of('flood', c.key, c.statement, c.error_format) AS p
ORDER BY c.what;

-- 500 errors later: the same partition backends, and no new session on any partition.
SELECT b.db, a.pid = b.pid AS same_backend, a.sessions - b.sessions AS new_sessions
FROM before AS b JOIN partition_sessions() AS a USING (db) ORDER BY b.db;
-- Nothing was consumed by the refused calls.
SELECT k, v.value FROM unnest(ARRAY['a', 'b', 'c', 'd']) AS k, ratelimit_value('flood', k, :'cfg') AS v ORDER BY k;

-- The router raises the error itself, so a refusal with throws => true
-- aborts the caller's transaction, as on one node.
CREATE TABLE work_done (n integer);
BEGIN;
INSERT INTO work_done VALUES (1);
SELECT ratelimit_limit('flood', 'a', :'cfg', throws => true);
COMMIT;
SELECT count(*) AS work_kept FROM work_done;
DROP TABLE work_done;
DROP FUNCTION partition_sessions(), partition_error_of(text, text, text, text);
