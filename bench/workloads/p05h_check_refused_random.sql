\set k random(1, 100000)
SELECT ratelimit_check('refused', 'k' || :k, '{"kind": "token bucket", "rate": 1, "period": "3650 days"}');
