-- memoryKeys: the owner's bound on how many memory entries one limit's name
-- may hold (over all its keys, in this database). A caller with nothing but
-- PUBLIC's grants calling a defined memory limit with made-up keys fills
-- that limit's share only (53200 naming memoryKeys, counted in
-- ratelimit_stats.memory_full); every other limit keeps its room.
\i test/sql_support/setup.sql
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
SELECT ratelimit_stats_reset();
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_define('mkeys-login', '{"kind": "fixed window", "rate": 5, "period": "15 minutes", "start": 0, "storage": "memory", "memoryKeys": 3}');
SELECT ratelimit_define('mkeys-api', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "storage": "memory"}');

CREATE ROLE mkeys_app;
SET ROLE mkeys_app;
SELECT count(*) FILTER (WHERE (ratelimit_limit('mkeys-login', 'fake' || i)).ok) AS granted
FROM generate_series(1, 3) i;
SELECT pg_temp.try($$ SELECT ratelimit_limit('mkeys-login', 'fake4') $$);
-- A key that has its entry still decides; reads need no entry.
SELECT ok, remaining FROM ratelimit_limit('mkeys-login', 'fake1');
SELECT ok, remaining FROM ratelimit_check('mkeys-login', 'fake9');
RESET ROLE;
-- The other limits are untouched.
SELECT ok FROM ratelimit_limit('mkeys-api', 'real-user');
SELECT ok FROM ratelimit_limit('mkeys-inline', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}');
SELECT name, granted, memory_full FROM ratelimit_stats WHERE name LIKE 'mkeys%' ORDER BY name;
-- A reset frees one of the name's entries.
SELECT ratelimit_reset('mkeys-login', 'fake2');
SELECT ok FROM ratelimit_limit('mkeys-login', 'fake4');
-- Once the window is over the entries are idle (back in their initial
-- state): new keys of the name take their room.
SET ratelimit.now = '2026-01-01 00:15:00+00';
SELECT count(*) FILTER (WHERE (ratelimit_limit('mkeys-login', 'later' || i)).ok) AS granted
FROM generate_series(1, 3) i;
SELECT pg_temp.try($$ SELECT ratelimit_limit('mkeys-login', 'later4') $$);
SELECT count(*) AS login_entries FROM ratelimit_status WHERE name = 'mkeys-login' AND storage = 'memory';
-- A bound set later holds at once: the name already has 3 entries.
SELECT ratelimit_define('mkeys-login', '{"kind": "fixed window", "rate": 5, "period": "15 minutes", "start": 0, "storage": "memory", "memoryKeys": 2}');
SELECT pg_temp.try($$ SELECT ratelimit_limit('mkeys-login', 'later5') $$);
SELECT ok FROM ratelimit_limit('mkeys-login', 'later1');

-- Errors (22023), nothing defined.
SELECT pg_temp.try($$ SELECT ratelimit_define('mkeys-bad', '{"kind": "token bucket", "rate": 1, "period": 1000, "memoryKeys": 3}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('mkeys-bad', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": 0}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('mkeys-bad', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": 2.5}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('mkeys-bad', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": 100000001}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('mkeys-bad', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": "3"}') $$);
SELECT count(*) AS defined FROM ratelimit_definition WHERE name = 'mkeys-bad';
-- A caller's inline config cannot loosen the owner's bound.
SELECT pg_temp.try($$ SELECT ratelimit_limit('mkeys-login', 'x', '{"kind": "fixed window", "rate": 5, "period": "15 minutes", "start": 0, "storage": "memory", "memoryKeys": 300}') $$);

SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() > 0 AS cleaned;
DROP ROLE mkeys_app;
SELECT ratelimit_undefine('mkeys-login');
SELECT ratelimit_undefine('mkeys-api');
SELECT ratelimit_stats_reset();
RESET ratelimit.now;
