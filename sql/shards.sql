-- Sharded limits: one limit spread over N rows, each with 1/N of the rate,
-- capacity and maxReserved. A call picks two shards at random and uses the
-- one with more tokens, or both balanced when neither alone has enough.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set cfg '''{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 4}'''

-- A never-used sharded limit is full; value and check report the total.
SELECT * FROM ratelimit_value('sh', NULL, :cfg);
SELECT ok, remaining FROM ratelimit_check('sh', NULL, :cfg, 40);
-- Two shards hold 50 together: 40 is grantable; 51 never is (22023).
SELECT ok FROM ratelimit_limit('sh', NULL, :cfg, 40);
-- Only the shards the grant took from have rows (each created when it was
-- first locked); the two others are full and have none.
SELECT count(*) AS shard_rows, sum(value) AS tokens FROM ratelimit_state WHERE name = 'sh';
SELECT * FROM ratelimit_value('sh', NULL, :cfg);
-- Never more than the configured total: every grant takes exactly one token
-- from some shard (which shards is random, so only the sums are fixed).
CREATE TEMP TABLE calls AS SELECT (ratelimit_limit('sh', NULL, :cfg)).ok FROM generate_series(1, 80);
SELECT count(*) FILTER (WHERE ok) <= 60 AS within_total,
       count(*) FILTER (WHERE ok) + (SELECT sum(value) FROM ratelimit_state WHERE name = 'sh') = 60 AS conserved,
       (SELECT bool_and(value >= 0) FROM ratelimit_state WHERE name = 'sh') AS no_shard_below_zero
FROM calls;
-- With two shards every call sees both: exactly the total is granted, then
-- refusals report a finite, positive retry time.
SELECT count(*) FILTER (WHERE ok) AS granted
FROM (SELECT (ratelimit_limit('sh2', NULL, '{"kind": "token bucket", "rate": 10, "period": "1 hour", "shards": 2}')).ok
      FROM generate_series(1, 15)) AS calls;
SELECT ok, retry_after FROM ratelimit_limit('sh2', NULL, '{"kind": "token bucket", "rate": 10, "period": "1 hour", "shards": 2}');

-- Reservations on shards: each shard may go down to -maxReserved/N.
SELECT ok, retry_after FROM ratelimit_limit('sh-res', 'k', '{"kind": "token bucket", "rate": 10, "period": 1000, "shards": 2, "maxReserved": 10}', 10);
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-res', 'k', '{"kind": "token bucket", "rate": 10, "period": 1000, "shards": 2, "maxReserved": 10}', 8, reserve => true);
SELECT ok FROM ratelimit_limit('sh-res', 'k', '{"kind": "token bucket", "rate": 10, "period": 1000, "shards": 2, "maxReserved": 10}', 4, reserve => true);
SELECT shard, value FROM ratelimit_state WHERE name = 'sh-res' ORDER BY shard;

-- Window kinds shard too.
SELECT count(*) FILTER (WHERE ok) AS granted
FROM (SELECT (ratelimit_limit('sh-fw', 'k', '{"kind": "fixed window", "rate": 6, "period": 60000, "start": 0, "shards": 2}')).ok
      FROM generate_series(1, 10)) AS calls;
SELECT count(*) FILTER (WHERE ok) AS granted
FROM (SELECT (ratelimit_limit('sh-sw', 'k', '{"kind": "sliding window", "rate": 8, "period": 60000, "start": 0, "shards": 2}')).ok
      FROM generate_series(1, 10)) AS calls;

-- remaining is estimated from the two shards a call looked at, the same way
-- by ratelimit_limit and ratelimit_limit_all (exact: check and value).
SELECT remaining FROM ratelimit_limit('sh-est1', 'k', '{"kind": "token bucket", "rate": 8, "period": "1 hour", "shards": 4}');
SELECT remaining FROM ratelimit_limit_all('[{"name": "sh-est2", "key": "k", "config": {"kind": "token bucket", "rate": 8, "period": "1 hour", "shards": 4}}]');
SELECT value FROM ratelimit_value('sh-est1', 'k', '{"kind": "token bucket", "rate": 8, "period": "1 hour", "shards": 4}');

-- reset clears every shard.
SELECT ratelimit_reset('sh');
SELECT count(*) FROM ratelimit_state WHERE name = 'sh';

-- A count two shards can never hold is a configuration error.
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 4}', 51) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 0}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 1025}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 2.5}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": "4"}') $$);
SELECT count(*) FROM ratelimit_state WHERE name = 'sh';
-- shards: 1 is an ordinary limit.
SELECT ok, remaining FROM ratelimit_limit('sh-one', NULL, '{"kind": "token bucket", "rate": 5, "period": 1000, "shards": 1}');
RESET ratelimit.now;

-- A sharded reservation answers the same in check, limit and limit_all, and
-- never worse than the same call without reserve (2 shards of 2 tokens, one
-- token a second each; the clock frozen). Shards at 1 and 1: 2 is taken from
-- both, at once.
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set rcfg '''{"kind": "token bucket", "rate": 2, "period": 1000, "capacity": 4, "shards": 2}'''
INSERT INTO ratelimit_state (name, key, shard, value, ts, idle_at)
VALUES ('sh-agree', NULL, 0, 1, '2026-01-01 00:00:00+00', '2026-01-01 00:00:01+00'),
       ('sh-agree', NULL, 1, 1, '2026-01-01 00:00:00+00', '2026-01-01 00:00:01+00');
SELECT 'check' AS call, ok, retry_after, remaining FROM ratelimit_check('sh-agree', NULL, :rcfg, 2, reserve => true)
UNION ALL SELECT 'check, no reserve', ok, retry_after, remaining FROM ratelimit_check('sh-agree', NULL, :rcfg, 2);
BEGIN;
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-agree', NULL, :rcfg, 2, reserve => true);
SELECT shard, value FROM ratelimit_state WHERE name = 'sh-agree' ORDER BY shard;
ROLLBACK;
BEGIN;
SELECT ok, retry_after, remaining FROM ratelimit_limit_all(jsonb_build_array(jsonb_build_object(
  'name', 'sh-agree', 'config', :rcfg::jsonb, 'count', 2, 'reserve', true)));
ROLLBACK;
-- Shards at 0 and 0: each refills 1 token in 1 s, so 2 can run in 1 s.
UPDATE ratelimit_state SET value = 0 WHERE name = 'sh-agree';
SELECT 'check' AS call, ok, retry_after, remaining FROM ratelimit_check('sh-agree', NULL, :rcfg, 2, reserve => true)
UNION ALL SELECT 'check, no reserve', ok, retry_after, remaining FROM ratelimit_check('sh-agree', NULL, :rcfg, 2);
BEGIN;
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-agree', NULL, :rcfg, 2, reserve => true);
SELECT shard, value FROM ratelimit_state WHERE name = 'sh-agree' ORDER BY shard;
ROLLBACK;
BEGIN;
SELECT ok, retry_after, remaining FROM ratelimit_limit_all(jsonb_build_array(jsonb_build_object(
  'name', 'sh-agree', 'config', :rcfg::jsonb, 'count', 2, 'reserve', true)));
ROLLBACK;
SELECT ok, retry_after FROM ratelimit_limit('sh-agree', NULL, :rcfg, 2);
SELECT ratelimit_reset('sh-agree');
RESET ratelimit.now;
