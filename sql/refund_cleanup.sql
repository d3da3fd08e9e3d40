-- Refunds, jitter and cleanup.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set cfg '''{"kind": "token bucket", "rate": 100, "period": "1 minute"}'''

-- An LLM call reserved 80 tokens but used 30: give 50 back.
SELECT ok, remaining FROM ratelimit_limit('rf', 'u', :cfg, 80);
SELECT * FROM ratelimit_refund('rf', 'u', 50, :cfg);
-- Capped at capacity.
SELECT remaining FROM ratelimit_refund('rf', 'u', 1000, :cfg);
-- A never-used limit is already full: nothing to give, nothing written.
SELECT remaining FROM ratelimit_refund('rf', 'never', 5, :cfg);
SELECT count(*) FROM ratelimit_state WHERE name = 'rf' AND key = 'never';
-- Refunds pay back reservations too, never above capacity.
SELECT ok, remaining FROM ratelimit_limit('rf', 'res', :cfg, 150, reserve => true);
SELECT remaining FROM ratelimit_refund('rf', 'res', 100, :cfg);
-- Window kinds: fixed windows get tokens back, sliding windows count down.
SELECT ok FROM ratelimit_limit('rf-fw', 'u', '{"kind": "fixed window", "rate": 5, "period": 60000, "start": 0}', 5);
SELECT remaining FROM ratelimit_refund('rf-fw', 'u', 2, '{"kind": "fixed window", "rate": 5, "period": 60000, "start": 0}');
SELECT ok FROM ratelimit_limit('rf-sw', 'u', '{"kind": "sliding window", "rate": 5, "period": 60000, "start": 0}', 5);
SELECT remaining FROM ratelimit_refund('rf-sw', 'u', 3, '{"kind": "sliding window", "rate": 5, "period": 60000, "start": 0}');
-- Sharded: the emptiest shards are refilled first (2 shards of 20 each).
\set shcfg '''{"kind": "token bucket", "rate": 40, "period": "1 hour", "shards": 2}'''
SELECT ok FROM ratelimit_limit('rf-sh', NULL, :shcfg, 15);
SELECT shard, value FROM ratelimit_state WHERE name = 'rf-sh' ORDER BY shard;
SELECT remaining FROM ratelimit_refund('rf-sh', NULL, 4, :shcfg);
SELECT shard, value FROM ratelimit_state WHERE name = 'rf-sh' ORDER BY shard;
SELECT ok FROM ratelimit_limit('rf-sh', NULL, :shcfg, 15);
SELECT shard, value FROM ratelimit_state WHERE name = 'rf-sh' ORDER BY shard;
-- Shards at the same level rise together; none goes above capacity.
SELECT remaining FROM ratelimit_refund('rf-sh', NULL, 6, :shcfg);
SELECT shard, value FROM ratelimit_state WHERE name = 'rf-sh' ORDER BY shard;
SELECT remaining FROM ratelimit_refund('rf-sh', NULL, 100, :shcfg);
SELECT shard, value FROM ratelimit_state WHERE name = 'rf-sh' ORDER BY shard;
-- Refund errors.
SELECT pg_temp.try($$ SELECT ratelimit_refund('rf', 'u', -1, '{"kind": "token bucket", "rate": 100, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('rf', 'u', 'NaN', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('rf', 'u', 'Infinity', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('rf', 'u', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund(NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('rf-undefined') $$);

-- Jitter: refused calls are told to come back at spread-out times; grants
-- and reservations are exact.
SELECT ok FROM ratelimit_limit('jt', 'u', '{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "jitter": true}');
SELECT count(DISTINCT retry_at) > 1 AS spread, min(retry_at) >= '2026-01-01 00:01:00+00' AS not_early,
       max(retry_at) < '2026-01-01 00:02:00+00' AS within_one_period
FROM generate_series(1, 20) AS g,
     LATERAL ratelimit_limit('jt', 'u', '{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "jitter": true}', count => 1 + 0 * g) AS r;
SELECT max(retry_at) < '2026-01-01 00:01:05+00' AS within_jitter
FROM generate_series(1, 20) AS g,
     LATERAL ratelimit_check('jt', 'u', '{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "jitter": "5 seconds"}', count => 1 + 0 * g) AS r;
SELECT retry_at FROM ratelimit_limit('jt', 'r', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": 0, "jitter": true}', reserve => true);
SELECT pg_temp.try($$ SELECT ratelimit_limit('jt', 'u', '{"kind": "token bucket", "rate": 1, "period": 1000, "jitter": "soon"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('jt', 'u', '{"kind": "token bucket", "rate": 1, "period": 1000, "jitter": 0}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('jt', 'u', '{"kind": "token bucket", "rate": 1, "period": 1000, "jitter": [1]}') $$);

-- Cleanup deletes rows that are the same as no row at all, and only those.
DELETE FROM ratelimit_state;
SELECT ok FROM ratelimit_limit('cl', 'soon-full', '{"kind": "token bucket", "rate": 60, "period": "1 minute"}', 30);
SELECT ok FROM ratelimit_limit('cl', 'later-full', '{"kind": "token bucket", "rate": 60, "period": "1 hour"}', 30);
SELECT ok FROM ratelimit_limit('cl', 'window', '{"kind": "fixed window", "rate": 5, "period": 60000, "start": 0}', 5);
SELECT key, idle_at FROM ratelimit_state WHERE name = 'cl' ORDER BY key;
SELECT ratelimit_cleanup();
SET ratelimit.now = '2026-01-01 00:01:00+00';
SELECT ratelimit_cleanup();
SELECT key FROM ratelimit_state WHERE name = 'cl' ORDER BY key;
-- Cleanup changes no answer: the deleted rows read as full either way.
SELECT value FROM ratelimit_value('cl', 'soon-full', '{"kind": "token bucket", "rate": 60, "period": "1 minute"}');
SET ratelimit.now = '2026-01-01 00:31:00+00';
SELECT ratelimit_cleanup();
SELECT count(*) FROM ratelimit_state WHERE name = 'cl';
RESET ratelimit.now;
