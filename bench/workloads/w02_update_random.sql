\set k random(1, 100000)
UPDATE bench_plain SET value = value - 1, ts = clock_timestamp() WHERE name = 'n' AND key = 'k' || :k AND shard = 0;
