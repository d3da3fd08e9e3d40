\set k random(1, 100000)
UPDATE bench_minimal SET v = v - 1, ts = now() WHERE name = 'n' AND key = 'k' || :k;
