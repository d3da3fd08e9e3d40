-- Named limits: define once, call without config; inline config wins.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';

SELECT ratelimit_define('def', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT * FROM ratelimit_limit('def', 'u1');
SELECT * FROM ratelimit_value('def', 'u1');
SELECT * FROM ratelimit_check('def', 'u1', count => 2);
-- An inline config wins over the defined one.
SELECT ok, remaining FROM ratelimit_limit('def', 'u1', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}');
-- Redefining replaces the config.
SELECT ratelimit_define('def', '{"kind": "token bucket", "rate": 1, "period": "1 minute"}');
SELECT config FROM ratelimit_definition WHERE name = 'def';
SELECT ok FROM ratelimit_limit('def', 'u2');
SELECT ok FROM ratelimit_limit('def', 'u2');
-- Undefine: true once, then false; the state stays until reset.
SELECT ratelimit_undefine('def');
SELECT ratelimit_undefine('def');
SELECT count(*) FROM ratelimit_state WHERE name = 'def';
SELECT ratelimit_reset('def', 'u2'), ratelimit_reset('def', 'u2');
RESET ratelimit.now;
