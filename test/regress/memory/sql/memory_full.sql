-- ratelimit.memory_max_keys bounds the entries (scripts/memory-test.sh
-- starts the cluster with 40): entries made under callers' inline configs
-- may take half (20); a live entry is never evicted, and a new key finding
-- no room is 53200, counted in ratelimit_stats.memory_full; an idle entry
-- (back in its initial state) is reused.
\i test/sql_support/setup.sql
SELECT current_setting('ratelimit.memory_max_keys') AS memory_max_keys;
SELECT pg_temp.try($$ SET ratelimit.memory_max_keys = 100 $$);
-- Start empty: far in the future every entry of earlier tests is idle.
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
-- (an entry left by an earlier test would show here)
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
SELECT ratelimit_stats_reset();
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set inline '''{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}'''
\set daily '{"kind": "token bucket", "rate": 2, "period": "1 day", "storage": "memory"}'
SELECT ratelimit_define('mfull-def', :'daily');
SELECT ratelimit_define('mfull-other', '{"kind": "token bucket", "rate": 1, "period": "1 hour"}');

-- A caller with nothing but PUBLIC's grants fills the inline half ...
CREATE ROLE mfull_app;
SET ROLE mfull_app;
SELECT count(*) FILTER (WHERE (ratelimit_limit('mfull-inline', 'k' || i, :inline)).ok) AS granted
FROM generate_series(1, 20) i;
-- ... and the next new inline key is 53200, naming the setting.
SELECT pg_temp.try($$ SELECT ratelimit_limit('mfull-inline', 'k21', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mfull-inline2', NULL, '{"kind": "fixed window", "rate": 1, "period": "1 hour", "storage": "memory"}') $$);
-- An existing entry is not new: it still decides.
SELECT ok FROM ratelimit_limit('mfull-inline', 'k1', :inline);
-- Reading a new key needs no entry: check, value and refund answer.
SELECT ok, remaining FROM ratelimit_check('mfull-inline', 'k99', :inline);
SELECT value FROM ratelimit_value('mfull-inline', 'k99', :inline);
-- The owner's defined limits still have their half (the caller calls them too).
SELECT count(*) FILTER (WHERE (ratelimit_limit('mfull-def', 'd' || i)).ok) AS granted
FROM generate_series(1, 10) i;
RESET ROLE;
SELECT count(*) FILTER (WHERE (ratelimit_limit('mfull-def', 'd' || i)).ok) AS granted
FROM generate_series(11, 20) i;
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
-- Full of live entries: a new defined key is 53200 too (its detail differs).
SELECT pg_temp.try($$ SELECT ratelimit_limit('mfull-def', 'd21') $$);
SELECT ratelimit_limit('mfull-def', 'd21');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT ratelimit_limit('mfull-inline', 'k21', :inline);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- An override moving a key to memory finds no room either.
SELECT ratelimit_override('mfull-other', 'o1', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}');
SELECT pg_temp.try($$ SELECT ratelimit_limit('mfull-other', 'o1') $$);
-- In ratelimit_limit_all the error aborts the whole call: its other
-- memory element (taken first) is given back.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "mfull-def", "key": "d1"}, {"name": "mfull-def", "key": "d21"}]') $$);
SELECT value FROM ratelimit_value('mfull-def', 'd1');
-- The refusals are counted in ratelimit_stats.memory_full, per name.
SELECT name, granted, memory_full FROM ratelimit_stats WHERE name LIKE 'mfull%' ORDER BY name;

-- A reset frees an entry at once.
SELECT ratelimit_reset('mfull-def', 'd20');
SELECT ok FROM ratelimit_limit('mfull-def', 'd21');
-- An hour later the inline entries are back in their initial state (idle):
-- a new key reuses their room, inline or defined; the defined ones are live.
SET ratelimit.now = '2026-01-01 01:00:00+00';
SELECT ok FROM ratelimit_limit('mfull-inline', 'k21', :inline);
SELECT ok FROM ratelimit_limit('mfull-def', 'd22');
SELECT ok FROM ratelimit_limit('mfull-other', 'o1');
SELECT count(*) FILTER (WHERE name = 'mfull-def') AS defined, count(*) FILTER (WHERE name <> 'mfull-def') AS other,
       count(*) FILTER (WHERE value = 1) AS full_now
FROM ratelimit_status WHERE storage = 'memory';
-- Not more than the inline half even then (the sweep gave the inline
-- share its room back: k21 is its one entry), with room left in the whole.
SELECT count(*) FILTER (WHERE ratelimit_reset('mfull-def', 'd' || i)) AS reset FROM generate_series(1, 15) i;
SELECT count(*) FILTER (WHERE (ratelimit_limit('mfull-inline', 'n' || i, :inline)).ok) AS granted
FROM generate_series(1, 19) i;
SELECT pg_temp.try($$ SELECT ratelimit_limit('mfull-inline', 'n20', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}') $$);
SELECT name, memory_full FROM ratelimit_stats WHERE name LIKE 'mfull%' ORDER BY name;

SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() > 0 AS cleaned;
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
DROP ROLE mfull_app;
SELECT ratelimit_undefine('mfull-def');
SELECT ratelimit_unoverride('mfull-other', 'o1');
SELECT ratelimit_undefine('mfull-other');
SELECT ratelimit_stats_reset();
RESET ratelimit.now;
