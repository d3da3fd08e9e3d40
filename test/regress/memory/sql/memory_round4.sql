-- Issue 25's memory cases, each against the same limit kept in the table
-- (its "table twin") where the two must agree:
-- a decision under a config this transaction changed and has not committed
-- (55000, nothing written; a rolled-back change leaves the entry as it was),
-- windows realigned on a period or start change as a table row is, and a
-- transaction's pending refunds bounded by the limits it called, not by its
-- calls, with the real clock.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- A rolled-back redefinition that changes the kind leaves a drained key drained.
SELECT ratelimit_define('r4kind', '{"kind": "token bucket", "rate": 10, "period": "1 hour", "storage": "memory"}');
SELECT ratelimit_define('r4kind_t', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SELECT ok FROM ratelimit_limit('r4kind', 'k', NULL, 10);
SELECT ok FROM ratelimit_limit('r4kind_t', 'k', NULL, 10);
BEGIN;
SELECT ratelimit_define('r4kind', '{"kind": "fixed window", "rate": 10, "period": "1 hour", "storage": "memory"}');
SELECT pg_temp.try($$SELECT ratelimit_limit('r4kind', 'k', NULL, 1)$$);
ROLLBACK;
BEGIN;
SELECT ratelimit_define('r4kind_t', '{"kind": "fixed window", "rate": 10, "period": "1 hour"}');
SELECT ok FROM ratelimit_limit('r4kind_t', 'k', NULL, 1);
ROLLBACK;
-- Both refuse: the rollback took the definition back, and nothing else changed.
SELECT ok, remaining FROM ratelimit_limit('r4kind', 'k', NULL, 1);
SELECT ok, remaining FROM ratelimit_limit('r4kind_t', 'k', NULL, 1);

-- The same through an override, an unoverride and an undefine; a refund too.
BEGIN;
SELECT ratelimit_override('r4kind', 'k', '{"kind": "sliding window", "rate": 10, "period": "1 hour", "storage": "memory"}');
SELECT pg_temp.try($$SELECT ratelimit_limit('r4kind', 'k', NULL, 1)$$);
ROLLBACK;
BEGIN;
SELECT ratelimit_undefine('r4kind');
SELECT pg_temp.try($$SELECT ratelimit_limit('r4kind', 'k', '{"kind": "token bucket", "rate": 99, "period": "1 hour", "storage": "memory"}', 1)$$);
SELECT pg_temp.try($$SELECT ratelimit_refund('r4kind', 'k', 5, '{"kind": "token bucket", "rate": 99, "period": "1 hour", "storage": "memory"}')$$);
ROLLBACK;
-- The owner's own DML on the config tables is a config change too: an
-- uncommitted UPDATE of the definition, or an INSERT of an override.
SELECT ratelimit_define('r4dml', '{"kind": "token bucket", "rate": 3, "period": "1 day", "storage": "memory"}');
SELECT ok FROM ratelimit_limit('r4dml', 'u', NULL, 3);
BEGIN;
UPDATE ratelimit_definition SET config = '{"kind": "fixed window", "rate": 3, "period": "1 day", "storage": "memory"}'
WHERE name = 'r4dml';
SELECT pg_temp.try($$SELECT ratelimit_limit('r4dml', 'u', NULL, 1)$$);
ROLLBACK;
BEGIN;
INSERT INTO ratelimit_override (name, key, config)
VALUES ('r4dml', 'u', '{"kind": "token bucket", "rate": 1000, "period": "1 day", "storage": "memory"}');
SELECT pg_temp.try($$SELECT ratelimit_limit('r4dml', 'u', NULL, 1)$$);
ROLLBACK;
SELECT ok, remaining FROM ratelimit_limit('r4dml', 'u', NULL, 1);

-- Another limit in the same transaction is decided as usual.
BEGIN;
SELECT ratelimit_define('r4kind', '{"kind": "fixed window", "rate": 10, "period": "1 hour", "storage": "memory"}');
SELECT ok FROM ratelimit_limit('r4other', 'k', '{"kind": "token bucket", "rate": 10, "period": "1 hour", "storage": "memory"}', 1);
ROLLBACK;
-- A change rolled back to a savepoint is forgotten: the call is decided.
BEGIN;
SAVEPOINT s;
SELECT ratelimit_define('r4kind', '{"kind": "fixed window", "rate": 10, "period": "1 hour", "storage": "memory"}');
ROLLBACK TO SAVEPOINT s;
SELECT ok, remaining FROM ratelimit_limit('r4kind', 'k', NULL, 1);
ROLLBACK;
-- Committed: the new kind applies (a new kind starts full).
SELECT ratelimit_define('r4kind', '{"kind": "fixed window", "rate": 10, "period": "1 hour", "start": 0, "storage": "memory"}');
SELECT ok, remaining FROM ratelimit_limit('r4kind', 'k', NULL, 1);

-- Windows realign on a period change, as the table twin's do: the value,
-- the retry time and (after the call) the stored window on the new grid.
-- (A memory entry is carried at its next call, the table's row at the
-- change: both here, while the old window still runs.)
SET ratelimit.now = '2026-01-01 00:10:00+00';
SELECT ratelimit_define('r4win', '{"kind": "fixed window", "rate": 3, "period": "15 minutes", "start": 0, "storage": "memory"}');
SELECT ratelimit_define('r4win_t', '{"kind": "fixed window", "rate": 3, "period": "15 minutes", "start": 0}');
SELECT ratelimit_define('r4sw', '{"kind": "sliding window", "rate": 4, "period": "10 minutes", "start": 0, "storage": "memory"}');
SELECT ratelimit_define('r4sw_t', '{"kind": "sliding window", "rate": 4, "period": "10 minutes", "start": 0}');
SELECT n.name, l.ok FROM (VALUES ('r4win'), ('r4win_t'), ('r4sw'), ('r4sw_t')) n(name),
  LATERAL ratelimit_limit(n.name, 'k', NULL, 3) l;
SELECT ratelimit_define('r4win', '{"kind": "fixed window", "rate": 3, "period": "1 hour", "start": 0, "storage": "memory"}');
SELECT ratelimit_define('r4win_t', '{"kind": "fixed window", "rate": 3, "period": "1 hour", "start": 0}');
SELECT ratelimit_define('r4sw', '{"kind": "sliding window", "rate": 4, "period": "30 minutes", "start": 0, "storage": "memory"}');
SELECT ratelimit_define('r4sw_t', '{"kind": "sliding window", "rate": 4, "period": "30 minutes", "start": 0}');
SET ratelimit.now = '2026-01-01 00:12:00+00';
SELECT name, value FROM ratelimit_status WHERE name LIKE 'r4%w%' ORDER BY name;
SELECT n.name, l.ok, l.remaining, l.retry_at FROM (VALUES ('r4win'), ('r4win_t'), ('r4sw'), ('r4sw_t')) n(name),
  LATERAL ratelimit_limit(n.name, 'k', NULL, 1) l;
SELECT name, stored_value, ts FROM ratelimit_status WHERE name LIKE 'r4%w%' ORDER BY name;
-- ... and on a start change (same period).
SELECT ratelimit_define('r4win', '{"kind": "fixed window", "rate": 3, "period": "1 hour", "start": "2026-01-01 00:30:00+00", "storage": "memory"}');
SELECT ratelimit_define('r4win_t', '{"kind": "fixed window", "rate": 3, "period": "1 hour", "start": "2026-01-01 00:30:00+00"}');
SET ratelimit.now = '2026-01-01 00:14:00+00';
SELECT name, value FROM ratelimit_status WHERE name LIKE 'r4win%' ORDER BY name;
SELECT n.name, l.ok, l.remaining, l.retry_at FROM (VALUES ('r4win'), ('r4win_t')) n(name),
  LATERAL ratelimit_limit(n.name, 'k', NULL, 1) l;
SELECT name, stored_value, ts FROM ratelimit_status WHERE name LIKE 'r4win%' ORDER BY name;

-- Pending refunds with the real clock: one limit called 20,000 times in a
-- transaction keeps one record (each call reads another clock), so do two
-- called in turn and ten called in turn; all given back at rollback. (0.6.0
-- kept ~256 bytes per call: 5 MB here.)
RESET ratelimit.now;
\set big '''{"kind": "token bucket", "rate": 1000000, "period": "1 day", "storage": "memory"}'''
\set big2 '''{"kind": "token bucket", "rate": 1000000, "period": "2 days", "storage": "memory"}'''
\set bigfw '''{"kind": "fixed window", "rate": 1000000, "period": "1 day", "storage": "memory"}'''
BEGIN;
-- ('one' || left(g::text, 0): one call per row, not one call joined 20,000 times)
SELECT count(*) FILTER (WHERE ok) FROM generate_series(1, 20000) g, ratelimit_limit('r4many', 'one' || left(g::text, 0), :big, 1);
SELECT count(*) FILTER (WHERE ok) FROM generate_series(1, 10000) g,
  ratelimit_limit('r4many', CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END, :big, 1);
SELECT count(*) FILTER (WHERE ok) FROM generate_series(1, 10000) g, ratelimit_limit('r4many', 'fw' || left(g::text, 0), :bigfw, 1);
SELECT total_bytes < 64 * 1024 AS few_records FROM pg_backend_memory_contexts WHERE name = 'ratelimit pending grants';
SELECT count(*) FILTER (WHERE ok) FROM generate_series(1, 10000) g, ratelimit_limit('r4many', 'key' || g % 10, :big, 1);
-- A call per subtransaction (a PL/pgSQL exception block per row), and two
-- configs of one inline limit called in turn: one record each still.
DO $$ BEGIN
  FOR i IN 1..5000 LOOP
    BEGIN
      PERFORM ratelimit_limit('r4many', 'exc', '{"kind": "token bucket", "rate": 1000000, "period": "1 day", "storage": "memory"}', 1);
    EXCEPTION WHEN others THEN NULL;
    END;
  END LOOP;
END $$;
SELECT count(*) FILTER (WHERE ok) FROM generate_series(1, 5000) g,
  ratelimit_limit('r4many', 'alt', CASE WHEN g % 2 = 0 THEN :big ELSE :big2 END::jsonb, 1);
SELECT total_bytes < 64 * 1024 AS per_limit FROM pg_backend_memory_contexts WHERE name = 'ratelimit pending grants';
ROLLBACK;
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'one', :big);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'odd', :big);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'fw', :bigfw);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'key3', :big);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'exc', :big);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'alt', :big2);
SELECT round(value::numeric) AS back_to_full FROM ratelimit_value('r4many', 'even', :big);

-- A session's test clock set far ahead does not make other sessions' live
-- entries idle for a full table's sweep: the inline half filled with live
-- entries, a new key at 2100 sweeps none of them out.
SET ratelimit.now = '2026-06-01 00:00:00+00';
DO $$ DECLARE n int := 0; is_full boolean := false; BEGIN
  WHILE n <= 100 AND NOT is_full LOOP
    BEGIN
      PERFORM ratelimit_limit('r4sweep', 'k' || n, '{"kind": "token bucket", "rate": 1, "period": "365 days", "storage": "memory"}');
    EXCEPTION WHEN out_of_memory THEN
      is_full := true;
    END;
    n := n + 1;
  END LOOP;
  RAISE NOTICE 'the inline half is full: %', is_full;
END $$;
SELECT count(*) > 0 AS live_entries FROM ratelimit_status WHERE name = 'r4sweep';
CREATE TEMP TABLE r4sweep_before AS SELECT count(*) AS n FROM ratelimit_status WHERE name = 'r4sweep';
SET ratelimit.now = '2100-01-01 00:00:00+00';
-- (granted if entries of earlier tests have become idle by now, else 53200)
SELECT left(pg_temp.try($$SELECT ratelimit_limit('r4sweep', 'new', '{"kind": "token bucket", "rate": 1, "period": "365 days", "storage": "memory"}')$$), 5) IN ('ok', '53200') AS answered;
SET ratelimit.now = '2026-06-01 00:00:00+00';
SELECT (SELECT count(*) FROM ratelimit_status WHERE name = 'r4sweep' AND key <> 'new') = n AS none_swept FROM r4sweep_before;
SELECT ok FROM ratelimit_limit('r4sweep', 'k0', '{"kind": "token bucket", "rate": 1, "period": "365 days", "storage": "memory"}');
SELECT ratelimit_reset('r4sweep', 'new') IS NOT NULL AS reset_new;
SELECT count(*) > 0 AS reset FROM generate_series(0, 100) g, ratelimit_reset('r4sweep', 'k' || g) r WHERE r;

-- A memory limit in a parallel worker (a function its author marked
-- PARALLEL SAFE) is refused: the worker's rollback could not give it back.
CREATE FUNCTION r4_parallel_take() RETURNS boolean PARALLEL SAFE LANGUAGE sql
AS $$ SELECT ok FROM ratelimit_limit('r4par', 'k', '{"kind": "token bucket", "rate": 5, "period": "1 hour", "storage": "memory"}') $$;
SELECT current_setting('server_version_num')::int >= 160000 AS debug_parallel_query \gset
\if :debug_parallel_query
SET debug_parallel_query = on;
\else
SET force_parallel_mode = on;
\endif
SELECT left(pg_temp.try('SELECT r4_parallel_take()'), 5) AS parallel_call;
RESET ALL;
DROP FUNCTION r4_parallel_take();
SELECT round(value::numeric) AS untouched FROM ratelimit_value('r4par', 'k', '{"kind": "token bucket", "rate": 5, "period": "1 hour", "storage": "memory"}');

SELECT ratelimit_undefine(n) FROM unnest(ARRAY['r4dml', 'r4kind', 'r4kind_t', 'r4win', 'r4win_t', 'r4sw', 'r4sw_t']) n;
SELECT ratelimit_cleanup() >= 0 AS cleaned;
