-- Token bucket maths through SQL, on a frozen clock.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- 10 per minute: a new limit starts full; using 5 leaves 5.
SELECT * FROM ratelimit_limit('tb', 'a', '{"kind": "token bucket", "rate": 10, "period": 60000}', 5);
-- Refill is continuous: 30 seconds later all 10 are back (capped at capacity).
SET ratelimit.now = '2026-01-01 00:00:30+00';
SELECT * FROM ratelimit_value('tb', 'a', '{"kind": "token bucket", "rate": 10, "period": 60000}');
SELECT * FROM ratelimit_limit('tb', 'a', '{"kind": "token bucket", "rate": 10, "period": 60000}', 10);
-- Empty: a refusal reports the tokens available now and when count fits.
SELECT * FROM ratelimit_limit('tb', 'a', '{"kind": "token bucket", "rate": 10, "period": 60000}', 2);
-- The refusal wrote nothing: the row is as the last grant left it.
SELECT value, ts FROM ratelimit_state WHERE name = 'tb';
-- At retry_at exactly, the same request is granted.
SET ratelimit.now = '2026-01-01 00:00:42+00';
SELECT * FROM ratelimit_limit('tb', 'a', '{"kind": "token bucket", "rate": 10, "period": 60000}', 2);

-- Capacity above rate lets unused tokens accumulate (rollover).
SELECT * FROM ratelimit_limit('tb', 'cap', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}', 20);
SELECT (ratelimit_limit('tb', 'cap', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}')).ok;

-- Reservations: the value may go negative; retry_after says when to run.
SELECT * FROM ratelimit_limit('tb', 'res', '{"kind": "token bucket", "rate": 10, "period": 60000, "maxReserved": 5}', 8);
SELECT * FROM ratelimit_limit('tb', 'res', '{"kind": "token bucket", "rate": 10, "period": 60000, "maxReserved": 5}', 6, reserve => true);
-- Past maxReserved: refused, nothing written, retry_after says when it would be accepted.
SELECT * FROM ratelimit_limit('tb', 'res', '{"kind": "token bucket", "rate": 10, "period": 60000, "maxReserved": 5}', 2, reserve => true);
SELECT value FROM ratelimit_state WHERE name = 'tb' AND key = 'res';
-- maxReserved 0 means no deficit at all.
SELECT ok, remaining FROM ratelimit_limit('tb', 'res0', '{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": 0}', 1, reserve => true);
SELECT ok, retry_after FROM ratelimit_limit('tb', 'res0', '{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": 0}', 1, reserve => true);
-- Capacity 0 with reserve schedules every request (the article's perfect spacing).
SELECT ok, retry_after, remaining FROM ratelimit_limit('tb', 'zero', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": 0}', 1, reserve => true);
SELECT ok, retry_after, remaining FROM ratelimit_limit('tb', 'zero', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": 0}', 1, reserve => true);

-- count 0 and fractional counts.
SELECT ok, remaining FROM ratelimit_limit('tb', 'frac', '{"kind": "token bucket", "rate": 1, "period": 1000}', 0);
SELECT ok, remaining FROM ratelimit_limit('tb', 'frac', '{"kind": "token bucket", "rate": 1, "period": 1000}', 0.25);
SELECT ok, remaining FROM ratelimit_limit('tb', 'frac', '{"kind": "token bucket", "rate": 1, "period": 1000}', 0.75);
SELECT ok, retry_after FROM ratelimit_limit('tb', 'frac', '{"kind": "token bucket", "rate": 1, "period": 1000}', 0.5);

-- The clock going backwards: no refill, and the stored ts never moves back.
SET ratelimit.now = '2026-01-01 00:10:00+00';
SELECT ok, remaining FROM ratelimit_limit('tb', 'back', '{"kind": "token bucket", "rate": 10, "period": 60000}', 10);
SET ratelimit.now = '2026-01-01 00:09:00+00';
SELECT * FROM ratelimit_limit('tb', 'back', '{"kind": "token bucket", "rate": 10, "period": 60000}', 1);
SELECT * FROM ratelimit_value('tb', 'back', '{"kind": "token bucket", "rate": 10, "period": 60000}');
SELECT ts FROM ratelimit_state WHERE name = 'tb' AND key = 'back';

-- check answers like limit but consumes nothing.
SET ratelimit.now = '2026-01-01 01:00:00+00';
SELECT * FROM ratelimit_check('tb', 'chk', '{"kind": "token bucket", "rate": 3, "period": 60000}', 3);
SELECT * FROM ratelimit_check('tb', 'chk', '{"kind": "token bucket", "rate": 3, "period": 60000}', 3);
SELECT count(*) FROM ratelimit_state WHERE name = 'tb' AND key = 'chk';
SELECT ok FROM ratelimit_limit('tb', 'chk', '{"kind": "token bucket", "rate": 3, "period": 60000}', 3);
SELECT * FROM ratelimit_check('tb', 'chk', '{"kind": "token bucket", "rate": 3, "period": 60000}', 1);
SELECT * FROM ratelimit_check('tb', 'chk', '{"kind": "token bucket", "rate": 3, "period": 60000}', 1, reserve => true);

-- NULL key is the global limit; '' is a different, ordinary key.
SELECT ok, remaining FROM ratelimit_limit('tb-global', NULL, '{"kind": "token bucket", "rate": 2, "period": 60000}');
SELECT ok, remaining FROM ratelimit_limit('tb-global', '', '{"kind": "token bucket", "rate": 2, "period": 60000}');
SELECT ok, remaining FROM ratelimit_limit('tb-global', NULL, '{"kind": "token bucket", "rate": 2, "period": 60000}');
SELECT key IS NULL AS global, value FROM ratelimit_state WHERE name = 'tb-global' ORDER BY key NULLS FIRST;

-- A never-used limit reads as full.
SELECT * FROM ratelimit_value('tb', 'never', '{"kind": "token bucket", "rate": 7, "period": 60000, "capacity": 9}');
RESET ratelimit.now;
