SELECT ratelimit_limit('m', 'k1', '{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}');
