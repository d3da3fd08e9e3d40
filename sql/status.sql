-- The ratelimit_status view: every stored row with its kind and value now.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_define('st_bucket', '{"kind": "token bucket", "rate": 10, "period": "10 seconds"}');
SELECT ratelimit_define('st_fixed', '{"kind": "fixed window", "rate": 5, "period": "1 minute", "start": "2026-01-01 00:00:00+00"}');
SELECT ratelimit_define('st_sliding', '{"kind": "sliding window", "rate": 4, "period": "1 minute", "start": "2026-01-01 00:00:00+00"}');
SELECT ratelimit_define('st_sharded', '{"kind": "token bucket", "rate": 8, "period": "8 seconds", "shards": 4}');
SELECT ok FROM ratelimit_limit('st_bucket', 'u1', count => 6);
SELECT ok FROM ratelimit_limit('st_bucket', NULL, count => 10);
SELECT ok FROM ratelimit_limit('st_fixed', 'u1', count => 2);
SELECT ok FROM ratelimit_limit('st_sliding', 'u1', count => 3);
SELECT ok FROM ratelimit_limit('st_sharded', NULL, count => 2);
SELECT ok FROM ratelimit_limit('st_inline', 'u1', '{"kind": "token bucket", "rate": 3, "period": 1000}');
SELECT name, key, shard, kind, value, ts, stored_value, idle_at FROM ratelimit_status
WHERE name LIKE 'st\_%' AND name <> 'st_sharded';
-- Only the shard that paid has a row (its 2 tokens taken; which one is
-- random): the other shards are full and have no row until first locked.
SELECT kind, count(*) AS shards, sum(value) AS value, sum(stored_value) AS stored_value,
       min(value) AS emptiest, max(value) AS fullest FROM ratelimit_status WHERE name = 'st_sharded' GROUP BY kind;
-- Two seconds later the values have refilled (or not, for the windows);
-- the stored columns are unchanged.
SET ratelimit.now = '2026-01-01 00:00:02+00';
SELECT name, key, shard, kind, value, stored_value FROM ratelimit_status
WHERE name LIKE 'st\_%' AND name <> 'st_sharded';
SELECT count(*) AS shards, sum(value) AS value, min(value) AS emptiest FROM ratelimit_status WHERE name = 'st_sharded';
-- Next window: the fixed window is full again, the sliding window weighs the previous one.
SET ratelimit.now = '2026-01-01 00:01:15+00';
SELECT name, key, kind, value FROM ratelimit_status WHERE name IN ('st_fixed', 'st_sliding');
-- A limit that is undefined later shows no kind or value, but its row.
SELECT ratelimit_undefine('st_bucket');
SELECT name, key, kind, value, stored_value FROM ratelimit_status WHERE name = 'st_bucket';
-- Owner only.
CREATE ROLE ratelimit_status_app;
SET ROLE ratelimit_status_app;
SELECT pg_temp.try($$ SELECT * FROM ratelimit_status $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_status_rows() $$);
RESET ROLE;
-- An operator role gets both the view and the function behind it.
GRANT SELECT ON ratelimit_status TO ratelimit_status_app;
SET ROLE ratelimit_status_app;
SELECT pg_temp.try($$ SELECT * FROM ratelimit_status $$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION ratelimit_status_rows() TO ratelimit_status_app;
SET ROLE ratelimit_status_app;
SELECT count(*) AS granted_can_read FROM ratelimit_status WHERE name LIKE 'st\_%';
RESET ROLE;
REVOKE SELECT ON ratelimit_status FROM ratelimit_status_app;
REVOKE EXECUTE ON FUNCTION ratelimit_status_rows() FROM ratelimit_status_app;
DROP ROLE ratelimit_status_app;
SELECT ratelimit_reset(n, k) FROM (VALUES ('st_bucket', 'u1'), ('st_bucket', NULL), ('st_fixed', 'u1'),
  ('st_sliding', 'u1'), ('st_sharded', NULL), ('st_inline', 'u1')) AS v(n, k);
SELECT count(*) FROM ratelimit_status WHERE name LIKE 'st\_%';
SELECT ratelimit_undefine(n) FROM (VALUES ('st_fixed'), ('st_sliding'), ('st_sharded')) AS v(n);
RESET ratelimit.now;
