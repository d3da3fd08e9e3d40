-- Shadow mode: "shadow": true decides as usual; a grant consumes, a call
-- that would be refused is answered ok (retry_after NULL), consumes nothing
-- and never raises PT429.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_define('sh', '{"kind": "token bucket", "rate": 2, "period": "1 minute", "shadow": true}');
SELECT * FROM ratelimit_limit('sh', 'k');
SELECT * FROM ratelimit_limit('sh', 'k');
-- Would be refused: granted, nothing consumed, no PT429 even with throws.
SELECT * FROM ratelimit_limit('sh', 'k');
SELECT * FROM ratelimit_limit('sh', 'k', throws => true);
SELECT * FROM ratelimit_limit('sh', 'k', count => 2, reserve => true);
SELECT value FROM ratelimit_value('sh', 'k');
SELECT * FROM ratelimit_check('sh', 'k', throws => true);
SELECT stored_value FROM ratelimit_status WHERE name = 'sh';
-- Every kind.
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-fw', 'k', '{"kind": "fixed window", "rate": 1, "period": "1 hour", "shadow": true}', count => 1);
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-fw', 'k', '{"kind": "fixed window", "rate": 1, "period": "1 hour", "shadow": true}', count => 1);
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-sw', 'k', '{"kind": "sliding window", "rate": 1, "period": "1 hour", "shadow": true}');
SELECT ok, retry_after, remaining FROM ratelimit_limit('sh-sw', 'k', '{"kind": "sliding window", "rate": 1, "period": "1 hour", "shadow": true}');
-- Sharded: a refusal consumes from no shard.
SELECT ok FROM ratelimit_limit('sh-shards', NULL, '{"kind": "token bucket", "rate": 4, "period": "1 hour", "shards": 2, "shadow": true}', count => 4);
SELECT ok, retry_after FROM ratelimit_limit('sh-shards', NULL, '{"kind": "token bucket", "rate": 4, "period": "1 hour", "shards": 2, "shadow": true}');
SELECT value FROM ratelimit_value('sh-shards', NULL, '{"kind": "token bucket", "rate": 4, "period": "1 hour", "shards": 2, "shadow": true}');
-- ratelimit_limit_all: a shadow entry that would be refused does not stop
-- the others; an enforced refusal still stops all (the shadow one included).
SELECT ratelimit_define('sh-enforced', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT name, ok, retry_after, remaining FROM ratelimit_limit_all('[{"name": "sh", "key": "k"}, {"name": "sh-enforced", "key": "k"}]', throws => true);
SELECT name, ok, remaining FROM ratelimit_limit_all('[{"name": "sh", "key": "k"}, {"name": "sh-enforced", "key": "k", "count": 5}]');
SELECT value FROM ratelimit_value('sh-enforced', 'k');
-- Rolling out a stricter limit: a shadow override for one key, then enforced.
SELECT ratelimit_override('sh-enforced', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 minute", "shadow": true}');
SELECT ok, retry_after FROM ratelimit_limit('sh-enforced', 'k');
SELECT ratelimit_override('sh-enforced', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 minute"}');
SELECT ok, retry_after FROM ratelimit_limit('sh-enforced', 'k');
SELECT pg_temp.try($$ SELECT ratelimit_limit('sh-enforced', 'k', throws => true) $$);
-- A count that can never fit is a shadow refusal, found for each request
-- of one inline config: fits, never fits, fits.
SELECT ok, retry_after, remaining FROM ratelimit_check('sh-fits', 'k', '{"kind": "token bucket", "rate": 2, "period": "1 minute", "shadow": true}', count => 1);
SELECT ok, retry_after, remaining FROM ratelimit_check('sh-fits', 'k', '{"kind": "token bucket", "rate": 2, "period": "1 minute", "shadow": true}', count => 3);
SELECT ok, retry_after, remaining FROM ratelimit_check('sh-fits', 'k', '{"kind": "token bucket", "rate": 2, "period": "1 minute", "shadow": true}', count => 1);
-- The field is a boolean: null is absent (false), anything else 22023.
SELECT pg_temp.try($$ SELECT ratelimit_check('x', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": 1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('x', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": "true"}') $$);
SELECT ok FROM ratelimit_check('x', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": null}', count => 1);
SELECT ok FROM ratelimit_check('x', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "shadow": false}', count => 1);
SELECT ratelimit_unoverride('sh-enforced', 'k');
SELECT ratelimit_undefine('sh'), ratelimit_undefine('sh-enforced');
DELETE FROM ratelimit_state WHERE name LIKE 'sh%';
RESET ratelimit.now;
