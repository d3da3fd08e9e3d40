-- ratelimit_headers: HTTP rate-limit headers for an answer, and
-- ratelimit.error_format = postgrest (PostgREST's RAISE SQLSTATE 'PGRST').
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
-- The SQLSTATE, message and detail of a failing statement.
CREATE FUNCTION pg_temp.error_of(query text, OUT state text, OUT message text, OUT detail text)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  state := 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
END $$;

-- A fixed window of 3 per minute: policy, remaining counting down, reset at the window's end.
SELECT ratelimit_define('sendMessage', '{"kind": "fixed window", "rate": 3, "period": "1 minute", "start": "2026-01-01 00:00:00+00"}');
SELECT r.ok, r.remaining, jsonb_pretty(ratelimit_headers('sendMessage', r)) FROM ratelimit_limit('sendMessage', 'u1') r;
SELECT r.ok, ratelimit_headers('sendMessage', r) ->> 'RateLimit' AS ratelimit FROM ratelimit_limit('sendMessage', 'u1') r;
SELECT r.ok, ratelimit_headers('sendMessage', r) ->> 'RateLimit' AS ratelimit FROM ratelimit_limit('sendMessage', 'u1') r;
-- Refused: Retry-After in whole seconds, remaining 0.
SET ratelimit.now = '2026-01-01 00:00:20.5+00';
SELECT r.ok, r.retry_after, jsonb_pretty(ratelimit_headers('sendMessage', r)) FROM ratelimit_limit('sendMessage', 'u1') r;

-- A token bucket with an inline config: the limit is the capacity, the
-- policy the rate per period; a fractional remaining is rounded down.
SELECT jsonb_pretty(ratelimit_headers('llm', r, '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 25}'))
FROM ratelimit_limit('llm', 'u1', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 25}', count => 2.5) r;
-- A reservation for later: Retry-After is sent, remaining is never negative.
SELECT r.ok, r.remaining, r.retry_after, jsonb_pretty(ratelimit_headers('llm', r, '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 25, "maxReserved": 50}'))
FROM ratelimit_limit('llm', 'u1', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 25, "maxReserved": 50}', count => 30, reserve => true) r;
-- A sliding window, sub-second period: the policy is scaled to one second.
SELECT ratelimit_headers('fast', r, '{"kind": "sliding window", "rate": 5, "period": 500}') ->> 'RateLimit-Policy' AS policy
FROM ratelimit_limit('fast', NULL, '{"kind": "sliding window", "rate": 5, "period": 500}') r;
-- A sharded limit reports the whole limit's quota.
SELECT ratelimit_headers('global', r, '{"kind": "token bucket", "rate": 1000, "period": "1 hour", "shards": 16}') ->> 'RateLimit-Policy' AS policy,
       ratelimit_headers('global', r, '{"kind": "token bucket", "rate": 1000, "period": "1 hour", "shards": 16}') ->> 'X-RateLimit-Limit' AS limit
FROM ratelimit_limit('global', NULL, '{"kind": "token bucket", "rate": 1000, "period": "1 hour", "shards": 16}') r;
-- The answer of ratelimit_check works too, and a hand-made result.
SELECT ratelimit_headers('sendMessage', ratelimit_check('sendMessage', 'u2'));
SELECT ratelimit_headers('sendMessage', ROW(false, 0.25, NULL, -3, 0)::ratelimit_result);
-- Names are quoted as structured-field strings: " and \ escaped, bytes a
-- header cannot carry replaced by _.
SELECT ratelimit_headers(E'a"b\\c\u00e9\t', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') ->> 'RateLimit-Policy' AS policy;
-- Huge numbers are capped at 15 digits (structured-field integers).
SELECT ratelimit_headers('huge', ROW(true, NULL, NULL, 1e200, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1e250, "period": 1000}') ->> 'RateLimit' AS ratelimit;
-- Extreme hand-made results stay whole, non-negative and at most 15 digits.
SELECT ratelimit_headers('x', ROW(false, 1e308, 'infinity', -1e308, 1e308)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ratelimit_headers('x', ROW(false, -5, '-infinity', 0, -1)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ratelimit_headers('x', ROW(true, 2, '2026-01-01 00:00:01.2+00', 0, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}');

-- Errors.
SELECT pg_temp.try($$ SELECT ratelimit_headers(NULL, ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', NULL, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('undefined', ROW(true, NULL, NULL, 1, 0)::ratelimit_result) $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000, "bogus": 1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(NULL, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(true, NULL, NULL, NULL, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(true, NULL, NULL, 1, NULL)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(true, NULL, NULL, 'infinity', 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('x', ROW(false, 'NaN', NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers(repeat('n', 1025), ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);

-- ratelimit.error_format: plain (the default) raises PT429 with a JSON detail.
SHOW ratelimit.error_format;
SELECT * FROM pg_temp.error_of($$ SELECT ratelimit_limit('sendMessage', 'u1', throws => true) $$);
-- postgrest: SQLSTATE PGRST, the message PostgREST's error object and the
-- detail the response's status and headers.
SET ratelimit.error_format = postgrest;
SELECT state, jsonb_pretty(message::jsonb) AS message, jsonb_pretty(detail::jsonb) AS detail
FROM pg_temp.error_of($$ SELECT ratelimit_limit('sendMessage', 'u1', throws => true) $$);
SELECT state, (detail::jsonb) -> 'headers' ->> 'Retry-After' AS retry_after, (message::jsonb) ->> 'message' AS message
FROM pg_temp.error_of($$ SELECT * FROM ratelimit_limit_all('[{"name": "sendMessage", "key": "u1"}]', throws => true) $$);
SELECT state, (detail::jsonb) ->> 'status' AS status
FROM pg_temp.error_of($$ SELECT ratelimit_check('sendMessage', 'u1', throws => true) $$);
-- Without throws nothing is raised; other errors keep their SQLSTATE.
SELECT ok FROM ratelimit_limit('sendMessage', 'u1');
SELECT pg_temp.try($$ SELECT ratelimit_limit('sendMessage', 'u1', '{"kind": "token bucket", "rate": -1, "period": 1000}', throws => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('nope', 'u1', throws => true) $$);
-- Any role may choose the format; an unknown format is refused.
SELECT pg_temp.try($$ SET ratelimit.error_format = 'html' $$);
CREATE ROLE ratelimit_headers_app;
SET ROLE ratelimit_headers_app;
SET ratelimit.error_format = plain;
SELECT state FROM pg_temp.error_of($$ SELECT ratelimit_limit('sendMessage', 'u1', throws => true) $$);
SET ratelimit.error_format = postgrest;
SELECT state FROM pg_temp.error_of($$ SELECT ratelimit_limit('sendMessage', 'u1', throws => true) $$);
-- PUBLIC may compute headers (defined configs included).
SELECT ratelimit_headers('sendMessage', ratelimit_check('sendMessage', 'u1')) ->> 'X-RateLimit-Limit' AS limit;
RESET ROLE;
DROP ROLE ratelimit_headers_app;
RESET ratelimit.error_format;
RESET ratelimit.now;
