-- Several limits in one call: all or nothing, rows locked in canonical order.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_define('la-user', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT ratelimit_define('la-global', '{"kind": "fixed window", "rate": 5, "period": "1 minute", "start": 0}');

-- Both grant: both are consumed; one row per limit, in input order.
SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "key": "u1"}, {"name": "la-global"}]');
SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "key": "u1", "count": 2}, {"name": "la-global", "count": 2}]');
-- u1 is empty now: nothing is consumed from la-global either.
SELECT name, key, ok, retry_after FROM ratelimit_limit_all('[{"name": "la-user", "key": "u1"}, {"name": "la-global"}]');
SELECT value FROM ratelimit_value('la-global');
-- One answer: bool_and(ok) and max(retry_after).
SELECT bool_and(ok) AS ok, max(retry_after) AS retry_after
FROM ratelimit_limit_all('[{"name": "la-user", "key": "u1"}, {"name": "la-global"}]');
-- Inline configs, reserve, and the same row twice in one call.
SELECT name, key, ok, remaining FROM ratelimit_limit_all('[
  {"name": "la-inline", "key": "k", "config": {"kind": "token bucket", "rate": 10, "period": 1000}, "count": 4},
  {"name": "la-inline", "key": "k", "config": {"kind": "token bucket", "rate": 10, "period": 1000}, "count": 4},
  {"name": "la-inline", "key": "k", "config": {"kind": "token bucket", "rate": 10, "period": 1000}, "count": 4, "reserve": true}]');
SELECT value FROM ratelimit_value('la-inline', 'k', '{"kind": "token bucket", "rate": 10, "period": 1000}');
-- Sharded entries.
SELECT ok FROM ratelimit_limit_all('[{"name": "la-sharded", "config": {"kind": "token bucket", "rate": 8, "period": 1000, "shards": 4}, "count": 3}]');
SELECT count(*) AS rows, sum(value) AS tokens FROM ratelimit_state WHERE name = 'la-sharded';
-- An empty array grants nothing and returns no rows.
SELECT count(*) FROM ratelimit_limit_all('[]');

-- throws => true raises PT429 naming the first refused limit.
SELECT * FROM ratelimit_limit_all('[{"name": "la-global"}, {"name": "la-user", "key": "u1"}]', throws => true);

-- Errors: 22023 / 22004 / 42704, nothing written.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all(NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[]', NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('{"name": "x"}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[1]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"key": "k"}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": 1}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "key": 5}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "count": "1"}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "count": -1}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "reserve": "yes"}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "config": []}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "cnt": 1}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "key": "a"}, {"name": "la-nope"}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "la-user", "key": "a"}, {"name": "la-user", "count": 4}]') $$);
SELECT pg_temp.try(format('SELECT * FROM ratelimit_limit_all(%L)', (SELECT jsonb_agg(jsonb_build_object('name', 'la-user')) FROM generate_series(1, 1001))));
SELECT count(*) FROM ratelimit_state WHERE name = 'la-user' AND key = 'a';
RESET ratelimit.now;
