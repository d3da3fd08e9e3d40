-- ratelimit_stats with shared_preload_libraries = 'ratelimit' and
-- ratelimit.stats_max_names = 3 (scripts/stats-test.sh starts the cluster
-- so): decisions of limit, limit_all and refunds are counted when made, a
-- rolled-back one too; checks are not; a fourth name goes to the overflow
-- row, whose name is NULL; names without a definition take at most one of
-- the three slots.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT current_setting('shared_preload_libraries') AS preloaded, current_setting('ratelimit.stats_max_names') AS max_names;
SELECT ratelimit_stats_reset();
SELECT count(*) AS rows FROM ratelimit_stats;
SELECT ratelimit_define('s1', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}');
SELECT ok FROM ratelimit_limit('s1', 'k', count => 1.5);
SELECT ok FROM ratelimit_limit('s1', 'k');
SELECT ok FROM ratelimit_limit('s1', 'k');
SELECT ok FROM ratelimit_check('s1', 'k');
SELECT ok FROM ratelimit_check('s1', 'other');
SELECT remaining FROM ratelimit_refund('s1', 'k', 0.5);
-- A rolled-back grant was still decided: it counts.
BEGIN;
SELECT ok FROM ratelimit_limit('s1', 'k2');
ROLLBACK;
-- Shadow refusals are counted apart.
SELECT ratelimit_define('s2', '{"kind": "fixed window", "rate": 1, "period": "1 hour", "shadow": true}');
SELECT ok FROM ratelimit_limit('s2', 'k');
SELECT ok FROM ratelimit_limit('s2', 'k');
SELECT ok FROM ratelimit_limit('s2', 'k', throws => true);
-- limit_all counts each element under its name.
SELECT name, ok FROM ratelimit_limit_all('[{"name": "s1", "key": "k3"}, {"name": "s3", "key": "k", "config": {"kind": "sliding window", "rate": 1, "period": 60000}}]');
SELECT name, ok FROM ratelimit_limit_all('[{"name": "s1", "key": "k4"}, {"name": "s3", "key": "k", "config": {"kind": "sliding window", "rate": 1, "period": 60000}}]');
-- An error decides nothing.
SELECT ratelimit_limit('s1', 'k', count => -1);
SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits, stats_reset IS NOT NULL AS has_reset
FROM ratelimit_stats ORDER BY name NULLS LAST;
-- Names past ratelimit.stats_max_names share the row whose name is NULL.
SELECT ok FROM ratelimit_limit('s4', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ok FROM ratelimit_limit('s5', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ok FROM ratelimit_limit('s5', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT name, granted, refused, tokens_granted FROM ratelimit_stats ORDER BY name NULLS LAST;
-- The reset empties the view and moves stats_reset; it is the owner's.
CREATE TEMP TABLE before AS SELECT max(stats_reset) AS at FROM ratelimit_stats;
SELECT ratelimit_stats_reset();
SELECT count(*) AS rows FROM ratelimit_stats;
SELECT ok FROM ratelimit_limit('s1', 'k');
SELECT name, refused, stats_reset > (SELECT at FROM before) AS reset_moved FROM ratelimit_stats;
CREATE ROLE ratelimit_stats_reader;
SET ROLE ratelimit_stats_reader;
SELECT name FROM ratelimit_stats;
SELECT ratelimit_stats_reset();
RESET ROLE;
DROP ROLE ratelimit_stats_reader;
-- Names without a definition (inline configs) take at most half of the
-- slots, rounded down: one of three. Defined names take any free slot, so
-- made-up names cannot push the owner's limits into the NULL row.
SELECT ratelimit_stats_reset();
SELECT count(*) AS granted
FROM generate_series(1, 5) i, ratelimit_limit('junk' || i, 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}') r
WHERE r.ok;
SELECT ratelimit_define('d1', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT ratelimit_define('d2', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT ratelimit_define('d3', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT ok FROM ratelimit_limit('d1', 'k');
SELECT ok FROM ratelimit_limit('d2', 'k');
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
-- The table is full now: a further defined name shares the NULL row too, and
-- so does a further made-up one.
SELECT ok FROM ratelimit_limit('d3', 'k');
SELECT ok FROM ratelimit_limit('junk6', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
-- A name with a row keeps counting in it.
SELECT ok FROM ratelimit_limit('junk1', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ok FROM ratelimit_limit('d1', 'k');
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
-- The same within one ratelimit_limit_all call: each element by its own name;
-- a defined name called with its definition as an inline config is defined.
SELECT ratelimit_stats_reset();
SELECT name, ok FROM ratelimit_limit_all('[{"name": "junk7", "key": "k", "config": {"kind": "fixed window", "rate": 9, "period": 1000}},
  {"name": "junk8", "key": "k", "config": {"kind": "fixed window", "rate": 9, "period": 1000}},
  {"name": "d1", "key": "k2"}, {"name": "d2", "key": "k2", "config": {"kind": "token bucket", "rate": 5, "period": "1 minute"}}]');
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
SELECT ratelimit_undefine('s1'), ratelimit_undefine('s2');
SELECT ratelimit_undefine('d1'), ratelimit_undefine('d2'), ratelimit_undefine('d3');
DELETE FROM ratelimit_state;
SELECT ratelimit_stats_reset();
RESET ratelimit.now;
