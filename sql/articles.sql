-- The source articles' examples, end to end.
SET timezone = 'UTC';
SET ratelimit.now = '2026-03-01 12:00:00+00';

-- Failed logins: 10 per hour per user; check (throws) before trying, limit on
-- failure, reset on success.
SELECT ratelimit_define('failedLogins', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
CREATE FUNCTION pg_temp.log_in(user_id text, password_ok boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r ratelimit_result;
BEGIN
  PERFORM ratelimit_check('failedLogins', user_id, throws => true);
  IF password_ok THEN
    PERFORM ratelimit_reset('failedLogins', user_id);
    RETURN 'logged in';
  END IF;
  r := ratelimit_limit('failedLogins', user_id);
  RETURN format('wrong password, %s attempts left', r.remaining);
EXCEPTION WHEN SQLSTATE 'PT429' THEN
  RETURN 'locked out: ' || SQLERRM;
END $$;
SELECT pg_temp.log_in('alice', false) FROM generate_series(1, 11);
-- One attempt comes back every 6 minutes.
SET ratelimit.now = '2026-03-01 12:06:00+00';
SELECT pg_temp.log_in('alice', false);
SELECT pg_temp.log_in('alice', false);
SET ratelimit.now = '2026-03-01 12:12:00+00';
SELECT pg_temp.log_in('alice', true);
SELECT * FROM ratelimit_value('failedLogins', 'alice');

-- Account creation via a global limit: 100 sign-ups per hour for everyone.
SET ratelimit.now = '2026-03-01 13:00:00+00';
SELECT count(*) FILTER (WHERE ok) AS granted, count(*) FILTER (WHERE NOT ok) AS refused
FROM (SELECT (ratelimit_limit('freeTrialSignUp', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour"}')).ok
      FROM generate_series(1, 120)) AS calls;
SELECT ok, retry_after FROM ratelimit_limit('freeTrialSignUp', NULL, '{"kind": "token bucket", "rate": 100, "period": "1 hour"}');

-- Sending messages per user: 10 per minute, bursts up to 20.
SELECT count(*) FILTER (WHERE ok) AS granted
FROM (SELECT (ratelimit_limit('sendMessage', 'bob', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}')).ok
      FROM generate_series(1, 25)) AS calls;
SELECT ok, remaining FROM ratelimit_limit('sendMessage', 'carol', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}');

-- LLM tokens with reserve: 40,000 tokens per minute; big requests are
-- scheduled for later instead of starving; maxReserved bounds the queue.
SELECT ratelimit_define('chatCompletion', '{"kind": "token bucket", "rate": 40000, "period": 60000, "maxReserved": 50000}');
SELECT * FROM ratelimit_limit('chatCompletion', NULL, count => 30000, reserve => true);
SELECT * FROM ratelimit_limit('chatCompletion', NULL, count => 30000, reserve => true);
SELECT * FROM ratelimit_limit('chatCompletion', NULL, count => 30000, reserve => true);
SELECT * FROM ratelimit_limit('chatCompletion', NULL, count => 30000, reserve => true);

-- A third-party API allowing 100 requests per minute: a fixed window.
SELECT count(*) FILTER (WHERE (r).ok) AS granted, max((r).retry_at) AS next_window
FROM (SELECT ratelimit_limit('thirdParty', NULL, '{"kind": "fixed window", "rate": 100, "period": "1 minute", "start": 0}') AS r
      FROM generate_series(1, 105)) AS calls;
RESET ratelimit.now;
