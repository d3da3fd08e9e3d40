-- ratelimit_stats with ratelimit.stats_max_names = 1000000, the largest
-- allowed (scripts/stats-test.sh starts a second cluster so), every slot in
-- use: the view copies the entries a batch at a time, never all of them in
-- one allocation (a million entries of about 1 kB are past palloc's 1 GB).
-- Names without a definition take half of the slots, defined names the
-- rest. Every call is a shadow limit's refusal of a count that can never
-- fit, answered without a state row, to keep a million calls quick.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT current_setting('ratelimit.stats_max_names') AS max_names;
SELECT ratelimit_stats_reset();
-- Inline configs: 500,000 names get a row, the 500,001st shares the NULL row.
SELECT count(*) AS answered
FROM generate_series(1, 500001) i,
     ratelimit_limit('u' || i, 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": true}', count => 2) r
WHERE r.ok;
SELECT count(*) AS rows, count(name) AS named, sum(shadow_refused) AS shadow_refused,
       sum(shadow_refused) FILTER (WHERE name IS NULL) AS overflow_shadow_refused
FROM ratelimit_stats;
-- Defined names (the definition table's statement trigger makes a direct
-- insert seen) fill the other 500,000 slots; the 500,001st shares the NULL row.
INSERT INTO ratelimit_definition
SELECT 'd' || i, '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": true}' FROM generate_series(1, 500001) i;
SELECT count(*) AS answered FROM generate_series(1, 500001) i, ratelimit_limit('d' || i, 'k', count => 2) r WHERE r.ok;
SELECT count(*) AS rows, count(name) AS named, count(DISTINCT name) AS names,
       count(*) FILTER (WHERE name LIKE 'd%') AS defined_names, sum(shadow_refused) AS shadow_refused,
       sum(shadow_refused) FILTER (WHERE name IS NULL) AS overflow_shadow_refused
FROM ratelimit_stats;
SELECT name, shadow_refused FROM ratelimit_stats WHERE name IN ('u1', 'u500000', 'd1', 'd500000') OR name IS NULL
ORDER BY name NULLS LAST;
SELECT ratelimit_stats_reset();
SELECT count(*) AS rows FROM ratelimit_stats;
DELETE FROM ratelimit_definition;
RESET ratelimit.now;
