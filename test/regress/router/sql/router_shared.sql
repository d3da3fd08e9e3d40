-- What needs the partitions' shared memory (on PostgreSQL 15 and 16,
-- shared_preload_libraries = 'ratelimit'): ratelimit_stats and memory limits
-- through the router. scripts/plproxy-test.sh runs it against the router
-- whose 4 partitions are servers of their own, so each partition keeps its
-- own counters and its own memory limits. Clocks frozen at 2026-01-01.
\set cfg '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 1}'
\set mem '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5, "storage": "memory"}'
CREATE FUNCTION partition_stats()
RETURNS TABLE (db text, name text, granted bigint, refused bigint, tokens_granted double precision, stats_reset timestamptz)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, s.name, s.granted, s.refused, s.tokens_granted, s.stats_reset
    FROM public.ratelimit_stats AS s;
$$;
CREATE FUNCTION partition_status()
RETURNS TABLE (db text, name text, key text, stored_value double precision, storage text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, s.name, s.key, s.stored_value, s.storage FROM public.ratelimit_status AS s;
$$;

-- ratelimit_stats: every partition's counters, summed per name.
SELECT ratelimit_stats_reset();
SELECT count(*) AS names_after_reset FROM ratelimit_stats;
SELECT count(*) FILTER (WHERE r.ok) AS granted FROM generate_series(1, 40) AS g, ratelimit_limit('counted', 'k' || g, :'cfg') AS r;
SELECT count(*) FILTER (WHERE r.ok) AS granted FROM generate_series(1, 30) AS g, ratelimit_limit('counted', 'k' || g, :'cfg') AS r;
SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits, memory_full FROM ratelimit_stats ORDER BY name;
SELECT count(DISTINCT db) AS partitions_counting, sum(granted) AS granted, sum(refused) AS refused,
       max(stats_reset) = (SELECT stats_reset FROM ratelimit_stats WHERE name = 'counted') AS latest_reset
FROM partition_stats() WHERE name = 'counted';
SELECT ratelimit_stats_reset();
SELECT count(*) AS names_after_reset FROM ratelimit_stats;
SELECT count(*) AS partition_names_after_reset FROM partition_stats();

-- Memory limits route like table limits: each key's entry is in the shared
-- memory of its own partition, in no other, and in no table.
SELECT count(*) FILTER (WHERE r.ok) AS granted FROM generate_series(1, 40) AS g, ratelimit_limit('mem', 'k' || g, :'mem', 2) AS r;
SELECT count(*) AS entries, count(DISTINCT db) AS partitions,
       count(*) FILTER (WHERE db <> 'rl_p' || ratelimit_partition(name, key)) AS misplaced,
       count(*) FILTER (WHERE stored_value = 3) AS with_3_left
FROM partition_status() WHERE name = 'mem' AND storage = 'memory';
SELECT count(*) AS table_rows FROM partition_status() WHERE name = 'mem' AND storage <> 'memory';
-- Every call on a memory limit, routed.
SELECT * FROM ratelimit_value('mem', 'k1', :'mem');
SELECT * FROM ratelimit_check('mem', 'k1', :'mem', 4);
SELECT * FROM ratelimit_limit('mem', 'k1', :'mem', 3);
SELECT * FROM ratelimit_refund('mem', 'k1', 1, :'mem');
SELECT ratelimit_headers('mem', r, :'mem', 'k1') ->> 'RateLimit' AS ratelimit FROM ratelimit_check('mem', 'k1', :'mem') AS r;
SELECT ratelimit_reset('mem', 'k1') AS reset, ratelimit_reset('mem', 'k1') AS again;
SELECT * FROM ratelimit_value('mem', 'k1', :'mem');
-- ratelimit_status through the router: every partition's memory entries.
SELECT count(*) AS entries, count(*) FILTER (WHERE stored_value = 3) AS with_3_left
FROM ratelimit_status WHERE name = 'mem' AND storage = 'memory';
-- A defined memory limit and an override to memory, on the key's partition.
SELECT ratelimit_define('memdef', :'mem');
SELECT count(*) FILTER (WHERE r.ok) AS granted FROM generate_series(1, 12) AS g, ratelimit_limit('memdef', 'k' || g) AS r;
SELECT ratelimit_override('counted', 'k1', :'mem');
SELECT ok FROM ratelimit_limit('counted', 'k1');
SELECT db = 'rl_p' || ratelimit_partition(name, key) AS own_partition, storage
FROM partition_status() WHERE name = 'counted' AND key = 'k1' ORDER BY storage;
SELECT ratelimit_unoverride('counted', 'k1');
SELECT ratelimit_undefine('memdef');
-- The counters saw the memory limits too.
SELECT name, granted, refused, memory_full FROM ratelimit_stats WHERE name IN ('mem', 'memdef') ORDER BY name;

DROP FUNCTION partition_stats(), partition_status();
