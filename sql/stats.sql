-- ratelimit_stats in the cluster the regression suite runs in, without
-- shared_preload_libraries: on PostgreSQL 15 and 16 the library gets no
-- shared memory, so the view is empty and nothing else changes; from 17 the
-- dynamic shared memory registry holds the counters. The counters
-- themselves are tested with the preload by scripts/stats-test.sh.
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT current_setting('server_version_num')::int >= 170000
       OR current_setting('shared_preload_libraries') LIKE '%ratelimit%' AS has_shared_memory \gset
SELECT ratelimit_stats_reset();
SELECT ok FROM ratelimit_limit('st', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ok FROM ratelimit_limit('st', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT ok FROM ratelimit_check('st', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
-- Empty without shared memory; else one row: one grant, one refusal.
SELECT CASE WHEN :'has_shared_memory'::boolean THEN count(*) = 1 AND sum(granted) = 1 AND sum(refused) = 1
            ELSE count(*) = 0 END AS as_expected
FROM ratelimit_stats WHERE name = 'st';
SELECT ratelimit_stats_reset();
SELECT count(*) AS rows FROM ratelimit_stats;
SELECT current_setting('ratelimit.stats_max_names') AS stats_max_names;
-- Readable by every role; the reset is the owner's.
CREATE ROLE ratelimit_stats_app;
SET ROLE ratelimit_stats_app;
SELECT count(*) AS rows FROM ratelimit_stats;
SELECT has_function_privilege('ratelimit_stats_reset()', 'EXECUTE') AS may_reset;
DO $$ BEGIN PERFORM ratelimit_stats_reset(); RAISE 'no error';
EXCEPTION WHEN insufficient_privilege THEN RAISE NOTICE 'ratelimit_stats_reset: %: %', SQLSTATE, SQLERRM; END $$;
RESET ROLE;
DROP ROLE ratelimit_stats_app;
DELETE FROM ratelimit_state WHERE name = 'st';
RESET ratelimit.now;
