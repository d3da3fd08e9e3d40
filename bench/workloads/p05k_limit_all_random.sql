\set k random(1, 100000)
SELECT count(*) FROM ratelimit_limit_all(('[{"name": "all", "key": "k' || :k || '", "config": {"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}}]')::jsonb);
