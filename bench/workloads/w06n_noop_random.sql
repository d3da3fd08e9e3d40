\set k random(1, 100000)
SELECT bench_noop_limit('m', 'k' || :k, '{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}');
