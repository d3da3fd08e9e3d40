-- Approximated sliding window through SQL, on a frozen clock.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- 10 per minute, windows aligned to whole minutes.
SELECT * FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 8);
SELECT ok, remaining FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 3);
SELECT value, ts, prev FROM ratelimit_state WHERE name = 'sw';
-- 15 s into the next window the previous 8 weigh 0.75: floor(8 * 0.75) = 6 used.
SET ratelimit.now = '2026-01-01 00:01:15+00';
SELECT * FROM ratelimit_value('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}');
SELECT * FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 4);
-- Now floor(8 * 0.75) + 4 = 10: full. One microsecond later the weight is
-- below 0.75, floor(8 * weight) drops to 5, and one more fits: that is retry_at.
SELECT * FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 1);
SELECT value, ts, prev FROM ratelimit_state WHERE name = 'sw';
SET ratelimit.now = '2026-01-01 00:01:15.000001+00';
SELECT ok, remaining FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 1);
-- At 22.5 s the weight is 0.625: floor(8 * 0.625) = 5, so 5 + 5 + 1 does not fit until just after.
SET ratelimit.now = '2026-01-01 00:01:22.500001+00';
SELECT ok, remaining FROM ratelimit_limit('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}', 1);
-- Two windows later everything has slid out.
SET ratelimit.now = '2026-01-01 00:03:00+00';
SELECT * FROM ratelimit_value('sw', 'a', '{"kind": "sliding window", "rate": 10, "period": 60000, "start": 0}');
RESET ratelimit.now;
