-- A short tour of ratelimit with the source articles' examples.
\set ECHO queries
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS ratelimit;
SET timezone = 'UTC';

\echo '\n== Sending messages: 10 per minute per user, bursts up to 20 (token bucket with capacity)'
WITH calls AS MATERIALIZED (
  SELECT n, ratelimit_limit('sendMessage', 'user-42',
           '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}', count => 1 + 0 * n) AS r
  FROM generate_series(1, 22) AS n)
SELECT n AS call, (r).ok, round((r).remaining::numeric, 2) AS remaining,
       round((r).retry_after::numeric, 2) AS retry_after
FROM calls WHERE n IN (1, 2, 19, 20, 21, 22) ORDER BY n;

\echo '\n== Global sign-up limit: 100 per hour for the whole app (NULL key)'
SELECT ratelimit_define('freeTrialSignUp', '{"kind": "token bucket", "rate": 100, "period": "1 hour"}');
SELECT count(*) FILTER (WHERE ok) AS granted, count(*) FILTER (WHERE NOT ok) AS refused
FROM (SELECT (ratelimit_limit('freeTrialSignUp')).ok FROM generate_series(1, 105)) AS calls;

\echo '\n== Failed logins: refuse with SQLSTATE PT429 (throws => true), reset on success'
SELECT ratelimit_define('failedLogins', '{"kind": "token bucket", "rate": 3, "period": "1 hour"}');
SELECT round((ratelimit_limit('failedLogins', 'alice')).remaining::numeric, 2) AS attempts_left FROM generate_series(1, 3);
\set ON_ERROR_STOP 0
SELECT ratelimit_check('failedLogins', 'alice', throws => true);
\set ON_ERROR_STOP 1
SELECT ratelimit_reset('failedLogins', 'alice') AS reset_after_successful_login;

\echo '\n== LLM tokens with reserve: 40k tokens/minute; big requests are scheduled, not starved'
SELECT ratelimit_define('chatCompletion', '{"kind": "token bucket", "rate": 40000, "period": "1 minute", "maxReserved": 60000}');
SELECT n AS request, (r).ok, round((r).retry_after::numeric, 1) AS run_in_seconds, round((r).remaining::numeric) AS remaining
FROM generate_series(1, 4) AS n, LATERAL ratelimit_limit('chatCompletion', count => 30000 + 0 * n, reserve => true) AS r;

\echo '\n== Transactions: a rolled-back transaction gets its tokens back'
BEGIN;
SELECT (ratelimit_limit('sendMessage', 'user-7', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}', count => 10)).remaining AS inside_transaction;
ROLLBACK;
SELECT round(value::numeric, 2) AS after_rollback FROM ratelimit_value('sendMessage', 'user-7', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');

\echo '\n== A third-party API allowing 5 calls per window: fixed window, window start derived from the key'
SELECT n AS call, (r).ok, (r).retry_at IS NOT NULL AS told_when
FROM generate_series(1, 6) AS n,
     LATERAL ratelimit_limit('thirdParty', 'tenant-1', '{"kind": "fixed window", "rate": 5, "period": "1 minute"}', count => 1 + 0 * n) AS r;

\echo '\n== Sliding window: 3 per second, smoothed across the window boundary'
SELECT n AS call, (r).ok, (r).remaining
FROM generate_series(1, 4) AS n,
     LATERAL ratelimit_limit('search', 'ip-10.0.0.1', '{"kind": "sliding window", "rate": 3, "period": 1000}', count => 1 + 0 * n) AS r;

\echo '\n== The state: two numbers per limit'
SELECT name, key, round(value::numeric, 2) AS value, ts FROM ratelimit_state ORDER BY name, key;

\echo '\n== HTTP: the response headers of a refusal (ratelimit_headers)'
SELECT jsonb_pretty(ratelimit_headers('thirdParty', r, '{"kind": "fixed window", "rate": 5, "period": "1 minute"}')) AS headers
FROM ratelimit_limit('thirdParty', 'tenant-1', '{"kind": "fixed window", "rate": 5, "period": "1 minute"}') AS r;

\echo '\n== The operator view (kind and value now for defined limits)'
SELECT name, key, shard, kind, round(value::numeric, 2) AS value, round(stored_value::numeric, 2) AS stored_value
FROM ratelimit_status ORDER BY name, key NULLS FIRST, shard;
