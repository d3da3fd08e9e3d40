-- Fixed window maths through SQL, on a frozen clock.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:10+00';

-- Windows aligned by start (numeric ms since 1970 or a timestamptz string).
-- start = 00:00:00, period 1 minute: the window is [00:00, 00:01).
SELECT * FROM ratelimit_limit('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0}', 2);
SELECT * FROM ratelimit_value('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0}');
SELECT * FROM ratelimit_limit('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0}', 2);
-- Refused: retry_at is the start of the next window.
SET ratelimit.now = '2026-01-01 00:00:59.999999+00';
SELECT ok, retry_at FROM ratelimit_limit('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0}', 2);
SET ratelimit.now = '2026-01-01 00:01:00+00';
SELECT * FROM ratelimit_limit('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0}', 2);
SELECT value, ts FROM ratelimit_state WHERE name = 'fw' AND key = 'a';

-- Rollover up to capacity: unused windows accumulate, but never above capacity.
SET ratelimit.now = '2026-01-01 00:05:30+00';
SELECT * FROM ratelimit_value('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0, "capacity": 5}');
SELECT * FROM ratelimit_limit('fw', 'a', '{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0, "capacity": 5}', 5);

-- start as a timestamptz string aligns windows to it (here: to :30 seconds).
SELECT ts FROM ratelimit_value('fw', 's', '{"kind": "fixed window", "rate": 1, "period": "1 minute", "start": "2020-01-01 00:00:30+00"}');

-- A start without a UTC offset is read as UTC (and 01/02 as January 2), not
-- by the session's TimeZone or DateStyle: every session aligns the windows
-- alike, here a fresh session each time (configs are cached per session).
-- Weekly windows from 2020-01-02 00:20 UTC; read in New York as 1 February
-- (DMY) or in Tokyo's time, they would start on other days and hours.
\c
SET ratelimit.now = '2026-01-01 00:05:30+00';
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
SELECT extract(epoch FROM ts) AS new_york_epoch FROM ratelimit_value('fw', 'zoneless', '{"kind": "fixed window", "rate": 1, "period": "7 days", "start": "01/02/2020 00:20"}');
\c
SET ratelimit.now = '2026-01-01 00:05:30+00';
SET TimeZone = 'Asia/Tokyo';
SELECT extract(epoch FROM ts) AS tokyo_epoch FROM ratelimit_value('fw', 'zoneless', '{"kind": "fixed window", "rate": 1, "period": "7 days", "start": "01/02/2020 00:20"}');
SELECT extract(epoch FROM timestamptz '2020-01-02 00:20:00+00')
       + floor((extract(epoch FROM timestamptz '2026-01-01 00:05:30+00')
                - extract(epoch FROM timestamptz '2020-01-02 00:20:00+00')) / 604800) * 604800 AS expected_epoch;
-- Likewise an interval: with IntervalStyle sql_standard a leading minus
-- would apply to every field ('-1 day 25 hours' = -49 hours, refused); the
-- config reads it as PostgreSQL's default does: 1 hour.
SET IntervalStyle = 'sql_standard';
SELECT ok, reset_after FROM ratelimit_limit('fw', 'istyle', '{"kind": "fixed window", "rate": 1, "period": "-1 day 25 hours", "start": 0}');
RESET IntervalStyle;
SET TimeZone = 'UTC';
RESET DateStyle;

-- Reservations wait for as many windows as the deficit needs.
SELECT * FROM ratelimit_limit('fw', 'res', '{"kind": "fixed window", "rate": 10, "period": 60000, "start": 0}', 25, reserve => true);
SELECT ok, retry_at FROM ratelimit_limit('fw', 'res', '{"kind": "fixed window", "rate": 10, "period": 60000, "start": 0, "maxReserved": 15}', 1, reserve => true);

-- Without start, the window start is derived from a hash of (name, key):
-- stable across calls and resets, different across keys.
SELECT ts FROM ratelimit_value('fw', 'k1', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
SELECT ts FROM ratelimit_value('fw', 'k2', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
SELECT ts FROM ratelimit_value('fw', NULL, '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
SELECT ok FROM ratelimit_limit('fw', 'k1', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}', 5);
SELECT ratelimit_reset('fw', 'k1');
SELECT ts FROM ratelimit_value('fw', 'k1', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
RESET ratelimit.now;
