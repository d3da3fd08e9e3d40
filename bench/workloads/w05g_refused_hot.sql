SELECT ratelimit_limit('refused', 'k1', '{"kind": "token bucket", "rate": 1, "period": "3650 days"}');
