-- Named limits: define once, call without config.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';

SELECT ratelimit_define('def', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT * FROM ratelimit_limit('def', 'u1');
SELECT * FROM ratelimit_value('def', 'u1');
SELECT * FROM ratelimit_check('def', 'u1', count => 2);
-- A defined limit belongs to its owner: an inline config for it must be the
-- same limit as the definition (22023 otherwise, nothing consumed); the same
-- limit written another way is accepted.
SELECT ok, remaining FROM ratelimit_limit('def', 'u1', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_limit('def', 'u1', '{"kind": "token bucket", "rate": 3, "period": 60000, "capacity": 3}');
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

-- Backends cache parsed configs; every change to a definition is seen at
-- once: through ratelimit_define, and through direct DML on the table. Each
-- step uses a fresh key, so remaining = capacity - 1 shows the config used.
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_define('def-cache', '{"kind": "token bucket", "rate": 1, "period": "1 hour"}');
SELECT remaining FROM ratelimit_limit('def-cache', 'k1');
SELECT remaining FROM ratelimit_limit('def-cache', 'k1');
SELECT ratelimit_define('def-cache', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 3}');
SELECT remaining FROM ratelimit_limit('def-cache', 'k2');
UPDATE ratelimit_definition SET config = '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 10}'
WHERE name = 'def-cache';
SELECT remaining FROM ratelimit_limit('def-cache', 'k3');
DELETE FROM ratelimit_definition WHERE name = 'def-cache';
SELECT remaining FROM ratelimit_limit('def-cache', 'k4');
-- A redefinition rolled back leaves the old config in force.
SELECT ratelimit_define('def-cache', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 2}');
SELECT remaining FROM ratelimit_limit('def-cache', 'k5');
BEGIN;
SELECT ratelimit_define('def-cache', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 50}');
SELECT remaining FROM ratelimit_limit('def-cache', 'k6');
ROLLBACK;
SELECT remaining FROM ratelimit_limit('def-cache', 'k7');
SELECT ratelimit_undefine('def-cache');
RESET ratelimit.now;
