-- Every SQL function of the extension, once per path worth checking, for
-- scripts/memcheck.sh: it runs this file against a server whose backends
-- run under valgrind's memcheck and fails on any error reported in the
-- extension's frames. Outputs are not compared (the regression suite does
-- that); errors that a call is expected to raise are caught by pg_temp.try.
\set ON_ERROR_STOP 1
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
CREATE EXTENSION IF NOT EXISTS ratelimit;
\set tb '''{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20, "maxReserved": 50}'''
\set fw '''{"kind": "fixed window", "rate": 5, "period": "1 minute", "jitter": true}'''
\set sw '''{"kind": "sliding window", "rate": 4, "period": "1 minute"}'''
\set sh '''{"kind": "token bucket", "rate": 16, "period": "1 minute", "shards": 4, "maxReserved": 8}'''

-- ratelimit_limit and ratelimit_check: each kind, a new and an existing row,
-- a grant, a reservation, a refusal, the global key, a sharded limit.
SELECT ok, retry_after, remaining FROM ratelimit_limit('mc_tb', 'k', :tb, 3);
SELECT ok, retry_after, remaining FROM ratelimit_limit('mc_tb', 'k', :tb, 30, reserve => true);
SELECT ok, retry_after, remaining FROM ratelimit_limit('mc_tb', 'k', :tb, 40, reserve => true);
SELECT ok, remaining FROM ratelimit_limit('mc_tb', NULL, :tb);
SELECT ok, retry_after FROM ratelimit_limit('mc_fw', 'k', :fw, 5);
SELECT ok, retry_after FROM ratelimit_limit('mc_fw', 'k', :fw, 1);
SELECT ok, remaining FROM ratelimit_limit('mc_sw', 'k', :sw, 3);
SELECT ok, remaining FROM ratelimit_limit('mc_sw', 'k', :sw, 2);
SELECT ok, remaining FROM ratelimit_limit('mc_sh', NULL, :sh, 3);
SELECT ok, remaining FROM ratelimit_limit('mc_sh', NULL, :sh, 6, reserve => true);
SELECT ok, remaining FROM ratelimit_check('mc_tb', 'k', :tb, 1);
SELECT ok, remaining FROM ratelimit_check('mc_sh', NULL, :sh, 2, reserve => true);
SELECT pg_temp.try($$SELECT ratelimit_limit('mc_fw', 'k', '{"kind": "fixed window", "rate": 5, "period": "1 minute"}', 1, throws => true)$$);
-- Long names and keys (stored compressed) and a key that is not ASCII.
SELECT ok FROM ratelimit_limit(repeat('n', 1024), repeat('k', 1024), :tb);
SELECT ok FROM ratelimit_limit(repeat('n', 1024), repeat('k', 1024), :tb);
SELECT ok FROM ratelimit_limit('mc_tb', 'ключ "q"', :tb);

-- Named limits: define, use, the definition trigger, undefine.
SELECT ratelimit_define('mc_named', :tb);
SELECT ok, remaining FROM ratelimit_limit('mc_named', 'k');
UPDATE ratelimit_definition SET config = :sw WHERE name = 'mc_named';
SELECT ok, remaining FROM ratelimit_limit('mc_named', 'k2');
SELECT ratelimit_undefine('mc_named');
SELECT pg_temp.try($$SELECT ratelimit_limit('mc_named', 'k')$$);

-- ratelimit_value, refunds, headers, status, reset, cleanup.
SELECT value FROM ratelimit_value('mc_tb', 'k', :tb);
SELECT value FROM ratelimit_value('mc_sh', NULL, :sh);
SELECT ok, remaining FROM ratelimit_refund('mc_tb', 'k', 2, :tb);
SELECT ok, remaining FROM ratelimit_refund('mc_sh', NULL, 5, :sh);
SELECT ok, remaining FROM ratelimit_refund('mc_sw', 'k', 1, :sw);
SELECT ratelimit_headers('mc_tb', r, :tb) FROM ratelimit_limit('mc_tb', 'k', :tb) r;
SELECT ratelimit_headers('mc_fw', r, :fw) FROM ratelimit_limit('mc_fw', 'k', :fw) r;
SELECT ratelimit_headers('mc "quoted"', r, :sh) FROM ratelimit_check('mc "quoted"', NULL, :sh) r;
SELECT count(*) FROM ratelimit_status;
SET ratelimit.error_format = postgrest;
SELECT pg_temp.try($$SELECT ratelimit_limit('mc "q"', 'k', '{"kind": "fixed window", "rate": 1, "period": "1 minute"}', 1, throws => true)$$);
SELECT pg_temp.try($$SELECT ratelimit_limit('mc "q"', 'k', '{"kind": "fixed window", "rate": 1, "period": "1 minute"}', 1, throws => true)$$);
RESET ratelimit.error_format;
SELECT ratelimit_reset('mc_fw', 'k');
SET ratelimit.now = '2026-01-02 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;

-- ratelimit_simulate: each kind with its counts, a shadow limit's count
-- that never fits, 10,000 arrivals, its errors; and the router's call.
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_simulate(:tb,
  ARRAY(SELECT '2026-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, 10000) g));
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_simulate(:fw, ARRAY['2026-01-01', '2026-01-01', '2026-01-01 00:01']::timestamptz[],
  '{5, 1, 0}', 'mc_fw', 'k');
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_simulate('{"kind": "sliding window", "rate": 4, "period": "1 minute", "shadow": true}',
  ARRAY['2026-01-01', '2026-01-01', '2026-01-01 00:01']::timestamptz[], '{4, 9, 1}');
SELECT pg_temp.try($$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-02, 2026-01-01}')$$);
SELECT pg_temp.try($$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01}', '{2}')$$);
SELECT pg_temp.try($$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, NULL}')$$);
SELECT pg_temp.try($$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 0, "period": 1000}', '{2026-01-01}')$$);
SELECT count(*), count(error_state) FROM ratelimit_proxy_simulate(:sw, '{2026-01-01, 2026-01-01}', NULL, 'mc', NULL);
SELECT error_state, error_message FROM ratelimit_proxy_simulate(:sw, '{2026-01-02, 2026-01-01}', NULL, NULL, NULL);

-- ratelimit_limit_all: small, with a refusal and throws, and 1,000 elements.
SELECT name, key, ok, remaining FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_tb', 'key', 'a', 'config', :tb::jsonb),
  jsonb_build_object('name', 'mc_sh', 'config', :sh::jsonb, 'count', 2),
  jsonb_build_object('name', 'mc_sw', 'key', 'a', 'config', :sw::jsonb)));
SELECT pg_temp.try(format($$SELECT * FROM ratelimit_limit_all(%L, throws => true)$$, jsonb_build_array(
  jsonb_build_object('name', 'mc_tb', 'key', 'a', 'config', :tb::jsonb),
  jsonb_build_object('name', 'mc_tb', 'key', 'a', 'config', :tb::jsonb, 'count', 25))));
SELECT count(*) FILTER (WHERE ok) AS granted, count(*) AS answers
FROM ratelimit_limit_all((SELECT jsonb_agg(jsonb_build_object('name', 'mc_all', 'key', 'k' || g, 'config', :tb::jsonb))
                          FROM generate_series(1, 1000) g));
SELECT count(*) FILTER (WHERE ok) AS granted, count(*) AS answers
FROM ratelimit_limit_all((SELECT jsonb_agg(jsonb_build_object('name', 'mc_all', 'key', 'k' || g, 'config', :tb::jsonb, 'count', 19))
                          FROM generate_series(1, 1000) g));

-- Errors: bad configs, NULLs, a too-long key, a read-only transaction.
SELECT pg_temp.try($$SELECT ratelimit_limit('mc', 'k', '{"kind": "token bucket", "rate": 0, "period": 1}')$$);
SELECT pg_temp.try($$SELECT ratelimit_limit('mc', 'k', '{"kind": "token bucket", "peroid": 1}')$$);
SELECT pg_temp.try($$SELECT ratelimit_limit(NULL)$$);
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L)', 'mc', repeat('k', 1025)));
SELECT pg_temp.try($$SELECT * FROM ratelimit_limit_all('[{"name": 1}]')$$);
BEGIN READ ONLY;
SELECT pg_temp.try($$SELECT ratelimit_limit('mc_tb', 'k', '{"kind": "token bucket", "rate": 10, "period": 1000}')$$);
COMMIT;

-- The state table changed by its owner: an added trigger, index, column and
-- CHECK (every write still goes through PostgreSQL's own machinery).
CREATE TABLE mc_log (op text, key text);
CREATE FUNCTION mc_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.mc_log VALUES (TG_OP, NEW.key); RETURN NEW; END $$;
CREATE TRIGGER mc_log AFTER INSERT OR UPDATE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION mc_log_write();
CREATE INDEX mc_value ON ratelimit_state (value);
ALTER TABLE ratelimit_state ADD COLUMN mc_note text NOT NULL DEFAULT 'x';
ALTER TABLE ratelimit_state ADD CONSTRAINT mc_check CHECK (value > -1e9);
SELECT ok FROM ratelimit_limit('mc_tb', 'k', :tb);
SELECT ok FROM ratelimit_limit('mc_tb', 'new', :tb);
SELECT ok FROM ratelimit_limit('mc_sh', NULL, :sh, 2);
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_tb', 'key', 'k', 'config', :tb::jsonb),
  jsonb_build_object('name', 'mc_sh', 'config', :sh::jsonb)));
SELECT ok FROM ratelimit_refund('mc_tb', 'k', 1, :tb);
SELECT count(*) AS trigger_rows FROM mc_log;
DROP TRIGGER mc_log ON ratelimit_state;
DROP INDEX mc_value;
ALTER TABLE ratelimit_state DROP COLUMN mc_note;
ALTER TABLE ratelimit_state DROP CONSTRAINT mc_check;
DROP TABLE mc_log;
DROP FUNCTION mc_log_write();

-- An owner's column type change: every call through SQL.
ALTER TABLE ratelimit_state ALTER COLUMN value TYPE numeric;
SELECT ok FROM ratelimit_limit('mc_tb', 'k', :tb);
SELECT ok FROM ratelimit_limit('mc_sh', NULL, :sh, 2);
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_tb', 'key', 'k', 'config', :tb::jsonb),
  jsonb_build_object('name', 'mc_sh', 'config', :sh::jsonb)));
SELECT count(*) FROM ratelimit_status;
ALTER TABLE ratelimit_state ALTER COLUMN value TYPE double precision;

-- 0.5.0: overrides (carrying rows over, a kind change, shards), the owner
-- rule, shadow mode, stats (the cluster preloads the library: the counters
-- in shared memory are written and read), headers for a key.
SELECT ratelimit_define('mc_def', :tb);
SELECT ok FROM ratelimit_limit('mc_def', 'k', count => 3);
SELECT ok FROM ratelimit_limit('mc_def', 'k2', :tb);
SELECT ratelimit_override('mc_def', 'k', '{"kind": "token bucket", "rate": 5, "period": "1 minute", "shards": 2}');
SELECT ratelimit_override('mc_def', 'k', '{"kind": "token bucket", "rate": 5, "period": "1 minute", "capacity": 3}');
SELECT ratelimit_override('mc_def', 'k', :fw);
SELECT ok FROM ratelimit_limit('mc_def', 'k');
SELECT ratelimit_headers('mc_def', r, key => 'k') IS NOT NULL FROM ratelimit_check('mc_def', 'k') r;
SELECT ratelimit_define('mc_def', '{"kind": "token bucket", "rate": 20, "period": "1 minute"}');
SELECT ratelimit_define('mc_def', :sw);
SELECT ratelimit_unoverride('mc_def', 'k'), ratelimit_unoverride('mc_def', 'k');
DO $$ BEGIN PERFORM ratelimit_limit('mc_def', 'k', '{"kind": "token bucket", "rate": 99, "period": 1000}');
EXCEPTION WHEN invalid_parameter_value THEN NULL; END $$;
SELECT ok FROM ratelimit_limit('mc_shadow', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "shadow": true}', count => 1);
SELECT ok FROM ratelimit_limit('mc_shadow', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "shadow": true}', throws => true);
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_shadow', 'key', 'k', 'config', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "shadow": true}'::jsonb),
  jsonb_build_object('name', 'mc_def', 'key', 'k3')));
SELECT ok FROM ratelimit_limit('mc_kind', 'k', :sw);
SELECT ok FROM ratelimit_limit('mc_kind', 'k', :tb);
SELECT count(*) > 0 AS counted FROM ratelimit_stats;
SELECT ratelimit_stats_reset();
SELECT ratelimit_undefine('mc_def');

-- 0.6.0: memory limits (scripts/memcheck.sh preloads the library with
-- ratelimit.memory_max_keys = 8 and max_prepared_transactions = 2): every
-- kind and function, rollbacks and savepoints giving grants back, PREPARE
-- refused, on_rollback keep, read-only, a full memory and its sweep, a long
-- identity, status, cleanup; the postmaster writes them at shutdown.
\set mtb '''{"kind": "token bucket", "rate": 10, "period": "1 minute", "maxReserved": 5, "storage": "memory"}'''
\set mfw '''{"kind": "fixed window", "rate": 5, "period": "1 minute", "storage": "memory", "jitter": true}'''
\set msw '''{"kind": "sliding window", "rate": 4, "period": "1 minute", "shards": 4, "storage": "memory"}'''
\set mkeep '''{"kind": "token bucket", "rate": 3, "period": "1 minute", "storage": "memory", "on_rollback": "keep"}'''
SET ratelimit.now = '2026-01-03 00:00:00+00';
SELECT ok, remaining FROM ratelimit_limit('mc_mem', 'tb', :mtb, 3);
SELECT ok, remaining FROM ratelimit_limit('mc_mem', 'tb', :mtb, 10, reserve => true);
SELECT ok, retry_after FROM ratelimit_limit('mc_mem', 'fw', :mfw, 5);
SELECT ok, retry_after FROM ratelimit_limit('mc_mem', 'fw', :mfw, 1);
SELECT ok, remaining FROM ratelimit_limit('mc_mem', NULL, :msw, 2);
SELECT ok, remaining FROM ratelimit_check('mc_mem', 'tb', :mtb, 1);
SELECT value FROM ratelimit_value('mc_mem', 'tb', :mtb);
SELECT ok, remaining FROM ratelimit_refund('mc_mem', 'tb', 2, :mtb);
SELECT ratelimit_headers('mc_mem', r, :mtb) FROM ratelimit_limit('mc_mem', 'tb', :mtb) r;
SELECT pg_temp.try($$SELECT ratelimit_limit('mc_mem', 'fw', '{"kind": "fixed window", "rate": 5, "period": "1 minute", "storage": "memory"}', 10, throws => true)$$);
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_mem', 'key', 'tb', 'config', :mtb::jsonb),
  jsonb_build_object('name', 'mc_mem', 'key', 'keep', 'config', :mkeep::jsonb),
  jsonb_build_object('name', 'mc_tb', 'key', 'k', 'config', :tb::jsonb)));
SELECT count(*) FILTER (WHERE ok) FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'mc_mem', 'key', 'keep', 'config', :mkeep::jsonb),
  jsonb_build_object('name', 'mc_mem', 'key', 'tb', 'config', :mtb::jsonb, 'count', 14, 'reserve', true)));
-- (room in the inline half for what follows)
SELECT ratelimit_reset('mc_mem', 'fw'), ratelimit_reset('mc_mem', NULL);
BEGIN;
SELECT ok FROM ratelimit_limit('mc_mem', 'rb', :mtb, 2);
SAVEPOINT s;
SELECT ok FROM ratelimit_limit('mc_mem', 'rb', :msw, 1);
SELECT ok FROM ratelimit_limit('mc_mem', 'rb2', :msw, 1);
ROLLBACK TO SAVEPOINT s;
SELECT ok FROM ratelimit_limit('mc_mem', 'keep', :mkeep, 1);
ROLLBACK;
BEGIN;
SELECT ok FROM ratelimit_limit('mc_mem', 'prep', :mtb, 1);
\set ON_ERROR_STOP 0
PREPARE TRANSACTION 'mc_prep';
\set ON_ERROR_STOP 1
BEGIN READ ONLY;
SELECT ok FROM ratelimit_limit('mc_mem', 'ro', :mtb, 1);
SELECT ratelimit_reset('mc_mem', 'ro');
SELECT ratelimit_cleanup() >= 0;
COMMIT;
-- Full: 8 entries, 4 for inline configs; then 53200, then a sweep of idle ones.
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L, %L)', 'mc_full', 'k' || g, :mtb)) FROM generate_series(1, 6) g;
SELECT ratelimit_define('mc_mem_def', :mfw);
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L)', 'mc_mem_def', 'k' || g)) FROM generate_series(1, 6) g;
SET ratelimit.now = '2026-01-03 01:00:00+00';
SELECT ok FROM ratelimit_limit('mc_mem_def', 'after-sweep');
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L, %L)', repeat('n', 200), repeat('k', 41), :mtb));
SELECT name, key, kind, value, storage FROM ratelimit_status WHERE storage = 'memory' ORDER BY name, key;
SELECT name, memory_full FROM ratelimit_stats WHERE memory_full > 0;
SELECT ratelimit_undefine('mc_mem_def');
SELECT ratelimit_reset('mc_mem', 'tb');
SELECT ratelimit_cleanup() >= 0 AS cleaned;
-- Live at the shutdown's real clock: written by the postmaster at its exit.
RESET ratelimit.now;
SELECT ok FROM ratelimit_limit('mc_mem', 'at-shutdown', '{"kind": "token bucket", "rate": 1, "period": "1 day", "storage": "memory"}');

-- The router's side (ratelimit_proxy loads these from this library): a
-- routed call's row returned, its error raised, an error raised.
CREATE FUNCTION pg_temp.result_of(answer record) RETURNS ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_result' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.raise(state text, message text, detail text, hint text) RETURNS void
AS '$libdir/ratelimit', 'ratelimit_proxy_raise' LANGUAGE C;
SELECT ok, remaining FROM pg_temp.result_of(ratelimit_proxy_limit('mc_routed', 'k', :tb, 1, false, false, NULL));
SELECT pg_temp.try($$ SELECT pg_temp.result_of(ratelimit_proxy_limit('mc_routed', 'k', '{"kind": "token bucket", "rate": 0, "period": 1}', 1, false, false, NULL)) $$);
SELECT pg_temp.try($$ SELECT pg_temp.raise('PT429', 'm', 'd', 'h') $$);
SELECT pg_temp.try($$ SELECT pg_temp.raise('bad', 'm', NULL, NULL) $$);
