\set k random(1, 1000000000000)
SELECT ratelimit_limit('new', 'k' || :k, '{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}');
