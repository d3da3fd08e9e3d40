UPDATE bench_plain SET value = value - 1, ts = clock_timestamp() WHERE name = 'n' AND key = 'k1' AND shard = 0;
