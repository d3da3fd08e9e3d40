-- ratelimit_proxy in a router database, in front of 4 partitions (rl_p0 ..
-- rl_p3, each with CREATE EXTENSION ratelimit), configured by
-- scripts/plproxy-test.sh. The partitions' clocks are frozen at
-- 2026-01-01 00:00:00+00 (ALTER DATABASE ... SET ratelimit.now).
\set cfg '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}'

-- Test helpers: what each partition holds, read through PL/Proxy itself.
CREATE FUNCTION partition_rows()
RETURNS TABLE (db text, name text, key text, shard smallint, value double precision)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, s.name, s.key, s.shard, s.value FROM public.ratelimit_state AS s;
$$;
CREATE FUNCTION partition_overrides()
RETURNS TABLE (db text, name text, key text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, o.name, o.key FROM public.ratelimit_override AS o;
$$;
CREATE FUNCTION partition_definitions()
RETURNS TABLE (db text, name text, config jsonb)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, d.name, d.config FROM public.ratelimit_definition AS d;
$$;
-- The user-facing API of ratelimit on every partition (test/regress/router/api.sql,
-- loaded there and here by scripts/plproxy-test.sh).
CREATE FUNCTION partition_api()
RETURNS TABLE (db text, kind text, object text, signature text, result text, public_access boolean)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, a.* FROM public.extension_api('ratelimit') AS a;
$$;
-- SQLSTATE and message of a statement, or 'ok'.
CREATE FUNCTION pg_temp.outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END;
$$;

-- The router: plproxy and ratelimit_proxy, and no limit state of its own.
SELECT extname, CASE extname WHEN 'ratelimit_proxy' THEN extversion ELSE 'any' END AS extversion
FROM pg_extension WHERE extname IN ('plproxy', 'ratelimit_proxy') ORDER BY 1;
SELECT count(*) AS router_tables FROM pg_class WHERE relname LIKE 'ratelimit%' AND relkind = 'r';
SELECT ratelimit_partitions();

-- Every user-facing function, view and type of ratelimit on the partitions
-- has a twin on the router of the same name, argument names, types and
-- defaults, result type and PUBLIC access, and the router has nothing else
-- but its own (the hash, the partition count and ratelimit_proxy_*): both
-- differences are empty, on every partition.
CREATE TEMP TABLE router_api AS
SELECT * FROM extension_api('ratelimit_proxy')
WHERE object NOT IN ('ratelimit_hash', 'ratelimit_partition', 'ratelimit_partitions', 'ratelimit_limit_all_hash')
  AND object NOT LIKE 'ratelimit\_proxy\_%';
CREATE TEMP TABLE partitions_api AS SELECT * FROM partition_api() WHERE object NOT LIKE 'ratelimit\_proxy\_%';
SELECT kind, count(*) AS objects FROM router_api GROUP BY kind ORDER BY kind;
SELECT count(DISTINCT db) AS partitions_compared FROM partitions_api;
(SELECT p.db, r.* FROM router_api AS r CROSS JOIN (SELECT DISTINCT db FROM partitions_api) AS p
 EXCEPT SELECT * FROM partitions_api)
UNION ALL
(SELECT * FROM partitions_api
 EXCEPT SELECT p.db, r.* FROM router_api AS r CROSS JOIN (SELECT DISTINCT db FROM partitions_api) AS p);

-- The partition's side of the router (ratelimit_proxy_<function>, which
-- return errors as data) has a router function of the same name for each,
-- which takes the partition's hash first and then the partition's
-- arguments (the ones run on every partition, and ratelimit_proxy_simulate,
-- which any partition answers: the same arguments), with the same result
-- and rights; their row types have twins too. (Empty.)
CREATE TEMP TABLE partitions_proxy AS SELECT * FROM partition_api() WHERE object LIKE 'ratelimit\_proxy\_%';
SELECT DISTINCT object FROM partitions_proxy ORDER BY 1;
SELECT * FROM partitions_proxy AS p
WHERE NOT EXISTS (SELECT FROM extension_api('ratelimit_proxy') AS r
                  WHERE (r.kind, r.object, r.signature, r.result, r.public_access)
                        IN ((p.kind, p.object, 'hash integer, ' || p.signature, p.result, p.public_access),
                            (p.kind, p.object, p.signature, p.result, p.public_access)));

-- The hash: stable (these values never change), NULL key distinct from ''.
SELECT ratelimit_hash('sendMessage', 'u1') AS u1, ratelimit_hash('sendMessage', NULL) AS global,
       ratelimit_hash('sendMessage', '') AS empty, ratelimit_hash('', NULL) AS nothing;
SELECT ratelimit_hash('n', 'k') = ('x' || left(md5('1:n=k'), 8))::bit(32)::integer AS documented,
       ratelimit_hash('n', NULL) = ('x' || left(md5('1:n'), 8))::bit(32)::integer AS documented_null,
       ratelimit_hash('né', 'ü') = ('x' || left(md5('3:né=ü'), 8))::bit(32)::integer AS bytes_not_characters;
SELECT k, ratelimit_partition('pair', k) FROM unnest(ARRAY['a', 'b', 'c']) AS k;
SELECT ratelimit_partition('global', NULL) AS global_null, ratelimit_partition('global', '') AS global_empty;

-- ratelimit_limit: each key's row is on exactly one partition, its own, and
-- 40 keys use every partition.
SELECT count(*) FILTER (WHERE r.ok) AS granted
FROM generate_series(1, 40) AS g, ratelimit_limit('spread', 'k' || g, :'cfg') AS r;
SELECT count(*) AS rows, count(DISTINCT key) AS keys, count(DISTINCT db) AS partitions,
       count(*) FILTER (WHERE db <> 'rl_p' || ratelimit_partition(name, key)) AS misplaced
FROM partition_rows() WHERE name = 'spread';
SELECT db, count(*) FROM partition_rows() WHERE name = 'spread' GROUP BY db ORDER BY db;
-- The router computes ratelimit_hash itself (in C since 0.9.0): the same
-- partitions for multibyte names and keys, '' keys and NULL keys.
SELECT count(*) FILTER (WHERE r.ok) AS granted
FROM generate_series(1, 60) AS g,
     ratelimit_limit('né' || g, CASE g % 3 WHEN 0 THEN NULL WHEN 1 THEN '' ELSE 'ü' || g END, :'cfg') AS r;
SELECT count(*) AS rows, count(DISTINCT db) AS partitions,
       count(*) FILTER (WHERE db <> 'rl_p' || ratelimit_partition(name, key)) AS misplaced
FROM partition_rows() WHERE name LIKE 'né%';
-- The global limit (NULL key) and the key '' are different limits, each on its partition.
SELECT * FROM ratelimit_limit('global', NULL, :'cfg', 2);
SELECT * FROM ratelimit_limit('global', '', :'cfg');
SELECT db, key IS NULL AS global, value FROM partition_rows() WHERE name = 'global' ORDER BY db;

-- Every other function, routed.
SELECT * FROM ratelimit_check('spread', 'k1', :'cfg', 4);
SELECT * FROM ratelimit_check('spread', 'k1', :'cfg', 5);
SELECT * FROM ratelimit_value('spread', 'k1', :'cfg');
SELECT * FROM ratelimit_limit('spread', 'k1', :'cfg', 4);
SELECT * FROM ratelimit_limit('spread', 'k1', :'cfg');
SELECT ratelimit_headers('spread', r, :'cfg') FROM ratelimit_limit('spread', 'k1', :'cfg') AS r;
SELECT * FROM ratelimit_refund('spread', 'k1', 2, :'cfg');
SELECT * FROM ratelimit_limit('spread', 'k1', :'cfg', reserve => true, count => 3);
SELECT ratelimit_reset('spread', 'k1') AS reset, ratelimit_reset('spread', 'k1') AS again;
SELECT count(*) AS rows_of_k1 FROM partition_rows() WHERE name = 'spread' AND key = 'k1';
SELECT ratelimit_cleanup();

-- Overrides live on the key's partition; the key's calls and its headers
-- (routed by the key) see them, other keys do not.
SELECT ratelimit_override('spread', 'k3', '{"kind": "token bucket", "rate": 100, "period": "1 minute", "capacity": 50}');
SELECT db, key FROM partition_overrides() ORDER BY db, key;
SELECT count(*) FILTER (WHERE db = 'rl_p' || ratelimit_partition('spread', 'k3')) AS on_its_partition FROM partition_overrides();
SELECT ok, remaining FROM ratelimit_limit('spread', 'k3', :'cfg', 10);
SELECT ratelimit_headers('spread', r, :'cfg', 'k3') -> 'RateLimit-Policy' AS keyed_policy,
       ratelimit_headers('spread', r, :'cfg') -> 'RateLimit-Policy' AS global_policy
FROM ratelimit_check('spread', 'k3', :'cfg') AS r;
SELECT ratelimit_unoverride('spread', 'k3') AS unoverridden, ratelimit_unoverride('spread', 'k3') AS again;
SELECT count(*) AS overrides_left FROM partition_overrides();
SELECT ratelimit_headers('spread', r, :'cfg', 'k3') -> 'RateLimit-Policy' AS keyed_policy
FROM ratelimit_check('spread', 'k3', :'cfg') AS r;

-- ratelimit_status gathers every partition's rows (each on its own).
SELECT s.key, s.storage, s.stored_value, p.db = 'rl_p' || ratelimit_partition(s.name, s.key) AS own_partition
FROM ratelimit_status AS s JOIN partition_rows() AS p USING (name, key, shard)
WHERE s.name = 'spread' AND s.key IN ('k3', 'k4', 'k5') ORDER BY s.key;
SELECT count(*) AS status_rows, (SELECT count(*) FROM partition_rows()) AS partition_rows FROM ratelimit_status;
-- ratelimit_stats_reset reaches every partition (the counters need shared
-- memory: test/regress/router/sql/router_shared.sql).
SELECT ratelimit_stats_reset();

-- Named limits are stored on every partition and removed from every one.
SELECT ratelimit_define('named', :'cfg');
SELECT db, name, config FROM partition_definitions() WHERE name = 'named' ORDER BY db;
SELECT count(*) FILTER (WHERE r.ok) AS granted FROM generate_series(1, 12) AS g, ratelimit_limit('named', 'k' || g) AS r;
SELECT count(DISTINCT db) AS partitions FROM partition_rows() WHERE name = 'named';
SELECT ratelimit_headers('named', (true, NULL, NULL, 4, 12)::ratelimit_result);
SELECT ratelimit_undefine('named') AS undefined, ratelimit_undefine('named') AS again;
SELECT count(*) AS definitions_left FROM partition_definitions() WHERE name = 'named';

-- ratelimit_limit_all: on one partition, all or nothing there ('a' and 'c'
-- are on partition 2, 'b' on 1).
SELECT * FROM ratelimit_limit_all(jsonb_build_array(
    jsonb_build_object('name', 'pair', 'key', 'a', 'config', :'cfg'::jsonb, 'count', 2),
    jsonb_build_object('name', 'pair', 'key', 'c', 'config', :'cfg'::jsonb, 'count', 5)));
SELECT * FROM ratelimit_limit_all(jsonb_build_array(
    jsonb_build_object('name', 'pair', 'key', 'a', 'config', :'cfg'::jsonb),
    jsonb_build_object('name', 'pair', 'key', 'c', 'config', :'cfg'::jsonb)));
-- Spanning partitions: 0A000, and nothing is consumed anywhere.
\set VERBOSITY default
SELECT * FROM ratelimit_limit_all(jsonb_build_array(
    jsonb_build_object('name', 'pair', 'key', 'a', 'config', :'cfg'::jsonb),
    jsonb_build_object('name', 'pair', 'key', 'b', 'config', :'cfg'::jsonb)));
SELECT key, value FROM partition_rows() WHERE name = 'pair' ORDER BY key;

-- Errors keep their SQLSTATE through the router. Every routed function
-- raises the partition's error as the partition raised it (message,
-- detail, hint), returned as data: the partition connection stays (no
-- NOTICE from PL/Proxy). Only errors that end the connection (a partition
-- going away) keep PL/Proxy's prefix naming the function and partition.
SELECT * FROM ratelimit_limit('spread', 'k2', :'cfg', 5, throws => true);
SELECT * FROM ratelimit_limit('spread', 'k2', :'cfg', throws => true);
SELECT * FROM ratelimit_limit('spread', 'k2', :'cfg');
SET client_min_messages = warning;
SELECT pg_temp.outcome($$SELECT ratelimit_limit('spread', 'k2', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}', 5, throws => true)$$) AS throws;
SELECT pg_temp.outcome($$SELECT ratelimit_check('spread', 'k2', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}', 5, throws => true)$$) AS check_throws;
SELECT pg_temp.outcome($$SELECT ratelimit_limit('spread', 'k2', '{"kind": "token bucket", "rate": 0, "period": 1000}')$$) AS bad_config;
SELECT pg_temp.outcome($$SELECT ratelimit_limit('spread', 'k2', '{"kind": "token bucket", "rate": 1, "peroid": 1000}')$$) AS unknown_field;
SELECT pg_temp.outcome($$SELECT ratelimit_limit('spread', 'k2', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}', -1)$$) AS negative_count;
SELECT pg_temp.outcome($$SELECT ratelimit_limit(NULL, 'k2', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}')$$) AS null_name;
SELECT pg_temp.outcome($$SELECT ratelimit_limit('undefined', 'k2')$$) AS not_defined;
SELECT pg_temp.outcome($$SELECT ratelimit_value('undefined', 'k2')$$) AS value_not_defined;
SELECT pg_temp.outcome($$SELECT ratelimit_override('spread', NULL, '{"kind": "token bucket", "rate": 10, "period": "1 minute"}')$$) AS override_null_key;
-- (Every partition refuses it; the router raises the first answer's error.)
SELECT pg_temp.outcome($$SELECT ratelimit_define('bad', '{"kind": "token bucket"}')$$) AS define_bad;
SELECT pg_temp.outcome($$SELECT ratelimit_limit_all('{"name": "pair"}')$$) AS not_an_array;
SELECT pg_temp.outcome($$SELECT ratelimit_limit_all('[{"name": "pair", "key": "a", "kee": "c"}]')$$) AS unknown_element_field;
SELECT pg_temp.outcome($$SELECT ratelimit_limit_all('[{"name": "pair", "key": "a"}, {"name": "pair", "key": "b"}]', throws => true)$$) AS spanning;
SELECT pg_temp.outcome($$SELECT ratelimit_limit_all('[{"name": "pair", "key": "a", "count": 5, "config": {"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}}]', throws => true)$$) AS limit_all_throws;
-- The router's own refusals, before any partition is asked: a NULL hash
-- for a function routed by hash (22004), and a C function on the router's
-- entry point that is not one of its routed functions (55000; only a
-- superuser can create one).
SELECT pg_temp.outcome($$SELECT ratelimit_proxy_value(NULL, 'spread', 'k2', NULL)$$) AS null_hash;
CREATE FUNCTION public.stray_route() RETURNS record AS '$libdir/ratelimit', 'ratelimit_proxy_route' LANGUAGE C;
SELECT pg_temp.outcome($$SELECT * FROM public.stray_route() AS t(x integer)$$) AS not_routed;
DROP FUNCTION public.stray_route();
SELECT count(*) AS definitions_of_bad FROM partition_definitions() WHERE name = 'bad';

-- ratelimit_simulate: any partition answers, and every partition answers
-- the same rows as the router returns (instants compared as epochs: the
-- partitions' sessions have their own time zone); its errors come back as one node
-- raises them (test/regress/router/sql/no_reconnect.sql compares them); it writes
-- nothing anywhere.
CREATE FUNCTION partition_simulations(config jsonb, arrivals timestamptz[], counts float8[], name text, key text)
RETURNS TABLE (db text, answers text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, string_agg(concat_ws(':', extract(epoch FROM s.at), s.count, s.ok, s.remaining, s.retry_after), ' ' ORDER BY s.at, s.ok DESC) AS answers
    FROM public.ratelimit_simulate(config, arrivals, counts, name, key) AS s;
$$;
\set simcfg '{"kind": "sliding window", "rate": 3, "period": "1 minute"}'
\set simarrivals '{2026-01-01 00:00:00+00, 2026-01-01 00:00:10+00, 2026-01-01 00:00:20+00, 2026-01-01 00:00:30+00, 2026-01-01 00:01:10+00, 2026-01-01 00:01:30+00}'
SELECT * FROM ratelimit_simulate(:'simcfg', :'simarrivals', counts => NULL, name => 'sim', key => 'k');
SELECT count(*) AS partitions, count(*) FILTER (WHERE p.answers = r.answers) AS same_answers
FROM partition_simulations(:'simcfg', :'simarrivals', NULL, 'sim', 'k') AS p,
     (SELECT string_agg(concat_ws(':', extract(epoch FROM s.at), s.count, s.ok, s.remaining, s.retry_after), ' ' ORDER BY s.at, s.ok DESC) AS answers
      FROM ratelimit_simulate(:'simcfg', :'simarrivals', NULL, 'sim', 'k') AS s) AS r;
SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 1000}', '{2026-01-01 00:00:00+00, 2026-01-01 00:00:00+00, 2026-01-01 00:00:00+00}', '{1, 0, 2}');
SELECT count(*) AS rows FROM ratelimit_simulate(:'simcfg', '{}');
SELECT pg_temp.outcome($$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-02, 2026-01-01}')$$) AS out_of_order;
SELECT count(*) AS rows_of_sim FROM partition_rows() WHERE name = 'sim';
DROP FUNCTION partition_simulations(jsonb, timestamptz[], float8[], text, text);

-- The trade-off: a routed call commits on its partition in its own
-- transaction, so rolling back the caller's transaction does not give the
-- token back (the pattern of examples/plproxy keeps that property).
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('tx', 'k', :'cfg', 3);
ROLLBACK;
SELECT value FROM ratelimit_value('tx', 'k', :'cfg');
BEGIN READ ONLY;
SELECT ok, remaining FROM ratelimit_limit('tx', 'k', :'cfg');
COMMIT;

-- Rights as in the extension: an app role with USAGE on the server may
-- consume; reset, refund, define, undefine and cleanup are the owner's.
CREATE ROLE regress_rl_app;
GRANT USAGE ON FOREIGN SERVER ratelimit TO regress_rl_app;
SET ROLE regress_rl_app;
SELECT ok, remaining FROM ratelimit_limit('app', 'u1', :'cfg');
SELECT ok, remaining FROM ratelimit_simulate(:'cfg', '{2026-01-01}');
SELECT pg_temp.outcome($$SELECT ratelimit_reset('app', 'u1')$$) AS reset;
SELECT pg_temp.outcome($$SELECT ratelimit_define('app', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}')$$) AS define;
SELECT pg_temp.outcome($$SELECT ratelimit_proxy_define('app', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 5}')$$) AS define_directly;
SELECT pg_temp.outcome($$SELECT ratelimit_override('app', 'u1', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}')$$) AS override;
SELECT pg_temp.outcome($$SELECT ratelimit_unoverride('app', 'u1')$$) AS unoverride;
SELECT pg_temp.outcome($$SELECT ratelimit_stats_reset()$$) AS stats_reset;
SELECT pg_temp.outcome($$SELECT * FROM ratelimit_status$$) AS status;
SELECT pg_temp.outcome($$SELECT * FROM ratelimit_stats$$) AS stats;
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER ratelimit FROM regress_rl_app;
DROP ROLE regress_rl_app;

DROP FUNCTION partition_rows(), partition_overrides(), partition_definitions(), partition_api();
