-- Memory limits in the cluster the regression suite runs in, without
-- shared_preload_libraries: on PostgreSQL 15 the library gets no shared
-- memory, so a memory config is 55000 naming shared_preload_libraries
-- (expected/memory_storage_1.out), while the functions that only look
-- (ratelimit_reset, ratelimit_cleanup, ratelimit_status) find nothing; from
-- 17 the dynamic shared memory registry holds them (memory_storage.out).
-- scripts/memory-test.sh tests them with the preload.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT current_setting('server_version_num')::int >= 170000 AS dsm_registry;
SELECT pg_temp.try($$ SELECT ratelimit_limit('ms', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}') $$);
-- Without the preload memory limits cannot be durable (the WAL resource
-- manager and its worker are registered only at server start): the setting
-- reads off, and cannot be set.
SHOW ratelimit.memory_durability;
SELECT pg_temp.try($$ SET ratelimit.memory_durability = wal $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('ms', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_value('ms', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('ms', 'k', 1, '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit_all('[{"name": "ms", "key": "k", "config": {"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}}]') $$);
-- (on 15 the error's detail and hint say why and what to do)
DO $$ BEGIN
  PERFORM ratelimit_limit('ms', 'k2', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}');
  RAISE NOTICE 'granted';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
  DECLARE detail text; hint text;
  BEGIN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE '%: % %', SQLERRM, detail, hint;
  END;
END $$;
-- A rolled-back grant is given back.
BEGIN;
SELECT pg_temp.try($$ SELECT ratelimit_limit('ms', 'rb', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}', 2) $$);
ROLLBACK;
SELECT pg_temp.try($$ SELECT 1 / ok::int FROM ratelimit_limit('ms', 'rb', '{"kind": "token bucket", "rate": 2, "period": 60000, "storage": "memory"}', 2) $$);
SELECT key, stored_value, storage FROM ratelimit_status WHERE name = 'ms' ORDER BY key;
SELECT ratelimit_reset('ms', 'k');
SELECT ratelimit_reset('ms', 'k');
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE name = 'ms';
-- A definition of a memory limit is accepted on every major.
SELECT ratelimit_define('ms-def', '{"kind": "fixed window", "rate": 1, "period": 60000, "storage": "memory", "on_rollback": "keep"}');
SELECT ratelimit_undefine('ms-def');
RESET ratelimit.now;
