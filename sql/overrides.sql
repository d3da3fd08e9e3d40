-- Limits as data: per-key overrides, the owner rule for defined names, kind
-- mismatches and what a config change does to stored rows.
\i test/sql_support/setup.sql
CREATE FUNCTION pg_temp.rows() RETURNS TABLE (name text, key text, shard smallint, value float8, prev float8)
LANGUAGE sql AS $$ SELECT name, key, shard, value, prev FROM ratelimit_state WHERE name LIKE 'ov%' ORDER BY 1, 2, 3 $$;
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- Errors: NULL arguments are 22004, an invalid config 22023 naming the
-- field, a name or key past 1024 bytes 22023; nothing is written.
SELECT pg_temp.try($$ SELECT ratelimit_override(NULL, 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', NULL, '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '{"kind": "token bucket", "rate": 0, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '{"kind": "token bucket", "rate": 1, "peroid": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": "yes"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '[1]') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override(repeat('n', 1025), 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', repeat('k', 1025), '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride(NULL, 'k') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('ov', NULL) $$);
SELECT count(*) AS overrides FROM ratelimit_override;
-- A read-only transaction: 25006.
BEGIN READ ONLY;
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('ov', 'k') $$);
COMMIT;
-- Owner only (42501), like ratelimit_define.
CREATE ROLE ratelimit_ov_app;
SET ROLE ratelimit_ov_app;
SELECT pg_temp.try($$ SELECT ratelimit_override('ov', 'k', '{"kind": "token bucket", "rate": 1000, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('ov', 'k') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_override $$);
RESET ROLE;
SELECT count(*) AS overrides FROM ratelimit_override;

-- Precedence: the key's override, then an inline config, then the definition.
SELECT ratelimit_define('ov', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');
SELECT ratelimit_override('ov', 'enterprise', '{"kind": "token bucket", "rate": 1000, "period": "1 minute"}');
SELECT remaining FROM ratelimit_limit('ov', 'enterprise');
SELECT remaining FROM ratelimit_limit('ov', 'enterprise', '{"kind": "token bucket", "rate": 10, "period": 60000}');
SELECT remaining FROM ratelimit_limit('ov', 'basic');
SELECT ratelimit_override('ov-inline', 'vip', '{"kind": "token bucket", "rate": 50, "period": "1 minute"}');
SELECT remaining FROM ratelimit_limit('ov-inline', 'vip', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT remaining FROM ratelimit_limit('ov-inline', 'other', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
-- Without inline config or definition, an overridden key still has a config.
SELECT remaining FROM ratelimit_limit('ov-inline', 'vip');
SELECT pg_temp.try($$ SELECT ratelimit_limit('ov-inline', 'other') $$);
-- Every function uses the key's config.
SELECT ok, remaining FROM ratelimit_check('ov', 'enterprise', count => 500);
SELECT value FROM ratelimit_value('ov', 'enterprise');
SELECT name, key, ok, remaining FROM ratelimit_limit_all('[{"name": "ov", "key": "enterprise", "count": 100}, {"name": "ov", "key": "basic"}]');
SELECT ratelimit_headers('ov', r, key => 'enterprise') ->> 'X-RateLimit-Limit' AS enterprise_limit,
       ratelimit_headers('ov', r) ->> 'X-RateLimit-Limit' AS defined_limit
FROM ratelimit_check('ov', 'enterprise') r;
SELECT remaining FROM ratelimit_refund('ov', 'enterprise', 50);
SELECT key, kind, value FROM ratelimit_status WHERE name = 'ov' ORDER BY key;
SELECT name, key, config FROM ratelimit_override ORDER BY 1, 2;

-- The owner rule: an inline config for a defined name must be the same
-- limit as the definition (written any way); else 22023, nothing consumed.
SELECT pg_temp.try($$ SELECT ratelimit_limit('ov', 'basic', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 1e300}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('ov', 'basic', '{"kind": "sliding window", "rate": 10, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('ov', 'basic', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "maxReserved": 1e300}', count => 1e299, reserve => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('ov', 'basic', 1e300, '{"kind": "token bucket", "rate": 1e300, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_value('ov', 'basic', '{"kind": "token bucket", "rate": 11, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('ov', 'basic', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "shadow": true}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "ov", "key": "basic", "config": {"kind": "token bucket", "rate": 99, "period": 60000}}]') $$);
SELECT pg_temp.try($$ SELECT ratelimit_headers('ov', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, '{"kind": "token bucket", "rate": 99, "period": 60000}') $$);
SELECT ok, remaining FROM ratelimit_limit('ov', 'basic', '{"kind": "token bucket", "rate": 10, "period": 60000, "capacity": 10}');
SELECT key, value FROM ratelimit_status WHERE name = 'ov' AND key = 'basic';
-- The message names the field of an invalid inline config first, as always.
SELECT pg_temp.try($$ SELECT ratelimit_limit('ov', 'basic', '{"kind": "token bucket", "rate": -1, "period": 60000}') $$);

-- A row is never read as another algorithm's state: a name called inline
-- with another kind starts from that kind's initial state.
SELECT ok, remaining FROM ratelimit_limit('ov-kind', 'k', '{"kind": "sliding window", "rate": 10, "period": "1 minute"}', count => 9);
SELECT ok, remaining FROM ratelimit_limit('ov-kind', 'k', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT * FROM ratelimit_value('ov-kind', 'k', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_limit('ov-kind', 'k', '{"kind": "fixed window", "rate": 4, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_limit('ov-kind', 'k', '{"kind": "sliding window", "rate": 10, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_check('ov-kind', 'k', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT * FROM pg_temp.rows() WHERE name = 'ov-kind';

-- An override carries the key's tokens over: the row is brought up to the
-- moment of the change under the old config, then capped at the new
-- capacity; a larger capacity does not refill it.
SELECT ratelimit_define('ov-carry', '{"kind": "token bucket", "rate": 60, "period": "1 minute"}');
SELECT remaining FROM ratelimit_limit('ov-carry', 'a', count => 58);
SELECT remaining FROM ratelimit_limit('ov-carry', 'b', count => 10);
SET ratelimit.now = '2026-01-01 00:00:10+00';
-- a: 2 + 10 s at 1/s = 12 at the change; the new rate applies from now on.
SELECT ratelimit_override('ov-carry', 'a', '{"kind": "token bucket", "rate": 6, "period": "1 minute", "capacity": 1000}');
SELECT * FROM ratelimit_value('ov-carry', 'a');
-- b: 50 + 10 = 60, capped at the new capacity 5.
SELECT ratelimit_override('ov-carry', 'b', '{"kind": "token bucket", "rate": 6, "period": "1 minute", "capacity": 5}');
SELECT * FROM ratelimit_value('ov-carry', 'b');
SET ratelimit.now = '2026-01-01 00:00:20+00';
SELECT * FROM ratelimit_value('ov-carry', 'a');
-- Removing the override carries the row back into the definition.
SELECT ratelimit_unoverride('ov-carry', 'a'), ratelimit_unoverride('ov-carry', 'a');
SELECT * FROM ratelimit_value('ov-carry', 'a');
-- A fixed window carried into another period is aligned to its new windows.
SELECT ratelimit_define('ov-fw', '{"kind": "fixed window", "rate": 10, "period": "1 hour", "start": 0}');
SELECT remaining FROM ratelimit_limit('ov-fw', 'k', count => 7);
SELECT ratelimit_override('ov-fw', 'k', '{"kind": "fixed window", "rate": 2, "period": "1 minute", "start": 0}');
SELECT * FROM ratelimit_value('ov-fw', 'k');
SELECT ok, remaining, retry_at FROM ratelimit_limit('ov-fw', 'k', count => 2);
-- A sharded key keeps its total when the shard count changes.
SELECT ratelimit_override('ov-carry', 'sharded', '{"kind": "token bucket", "rate": 60, "period": "1 minute", "shards": 4}');
SELECT ok FROM ratelimit_limit('ov-carry', 'sharded', count => 20);
SELECT value FROM ratelimit_value('ov-carry', 'sharded');
SELECT ratelimit_override('ov-carry', 'sharded', '{"kind": "token bucket", "rate": 60, "period": "1 minute", "shards": 2}');
SELECT value FROM ratelimit_value('ov-carry', 'sharded');
SELECT shard, value FROM pg_temp.rows() WHERE name = 'ov-carry' AND key = 'sharded';

-- Changing the kind resets the affected rows, in the same transaction: an
-- override's key; a definition's keys without an override.
SELECT remaining FROM ratelimit_limit('ov-carry', 'c', count => 50);
SELECT ratelimit_override('ov-carry', 'c', '{"kind": "sliding window", "rate": 5, "period": "1 minute"}');
SELECT * FROM pg_temp.rows() WHERE name = 'ov-carry' AND key = 'c';
SELECT ok, remaining FROM ratelimit_limit('ov-carry', 'c');
SELECT remaining FROM ratelimit_limit('ov-carry', 'b');
SELECT remaining FROM ratelimit_limit('ov-carry', 'd', count => 30);
BEGIN;
SELECT ratelimit_define('ov-carry', '{"kind": "fixed window", "rate": 60, "period": "1 minute"}');
SELECT key FROM pg_temp.rows() WHERE name = 'ov-carry';
ROLLBACK;
SELECT key, value FROM pg_temp.rows() WHERE name = 'ov-carry' AND key IN ('a', 'd');
-- A definition changed without a new kind carries the rows of keys without
-- an override: d's 30 tokens capped at the new capacity 20.
SELECT ratelimit_define('ov-carry', '{"kind": "token bucket", "rate": 60, "period": "1 minute", "capacity": 20}');
SELECT key, value FROM ratelimit_status WHERE name = 'ov-carry' AND key IN ('a', 'b', 'd') ORDER BY key;

-- Transactional: a rolled-back override never applies.
BEGIN;
SELECT ratelimit_override('ov', 'basic', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 1}');
SELECT ok, remaining FROM ratelimit_limit('ov', 'basic');
ROLLBACK;
SELECT ok, remaining FROM ratelimit_limit('ov', 'basic');
-- Direct DML on the table (by the owner) is seen at once, as for definitions.
UPDATE ratelimit_override SET config = '{"kind": "token bucket", "rate": 7, "period": "1 minute"}' WHERE name = 'ov' AND key = 'enterprise';
SELECT * FROM ratelimit_value('ov', 'enterprise');
DELETE FROM ratelimit_override WHERE name = 'ov' AND key = 'enterprise';
SELECT * FROM ratelimit_value('ov', 'enterprise');
SELECT ratelimit_unoverride('ov', 'enterprise');

-- Clean up.
SELECT ratelimit_unoverride(name, key) FROM ratelimit_override WHERE name LIKE 'ov%' ORDER BY name, key;
SELECT ratelimit_undefine(name) FROM ratelimit_definition WHERE name LIKE 'ov%' ORDER BY name;
DELETE FROM ratelimit_state WHERE name LIKE 'ov%';
DROP ROLE ratelimit_ov_app;
RESET ratelimit.now;
