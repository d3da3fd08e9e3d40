-- Memory limits work in READ ONLY transactions (a table limit keeps its
-- 25006): ratelimit_limit, ratelimit_limit_all, ratelimit_refund,
-- ratelimit_reset and ratelimit_cleanup (which then cleans memory only);
-- and in a PostgREST pre-request of a GET, which runs READ ONLY.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '''{"kind": "token bucket", "rate": 3, "period": 60000, "storage": "memory"}'''
\set fw '''{"kind": "fixed window", "rate": 3, "period": 60000, "start": 0, "storage": "memory"}'''
\set tbt '''{"kind": "token bucket", "rate": 3, "period": 60000}'''
SELECT ok FROM ratelimit_limit('mro', 'table', :tbt);

BEGIN READ ONLY;
SELECT ok, remaining FROM ratelimit_limit('mro', 'tb', :tb);
SELECT ok, remaining FROM ratelimit_limit('mro', 'fw', :fw, 3);
SELECT ok, remaining FROM ratelimit_limit('mro', 'fw', :fw);
SELECT ok, remaining FROM ratelimit_check('mro', 'tb', :tb);
SELECT name, key, ok, remaining FROM ratelimit_limit_all(format('[{"name": "mro", "key": "tb", "config": %s}]', :tb)::jsonb);
SELECT remaining FROM ratelimit_refund('mro', 'tb', 1, :tb);
SELECT ratelimit_reset('mro', 'fw');
SELECT value FROM ratelimit_value('mro', 'fw', :fw);
-- Table limits: 25006, on a new and an existing row, nothing written.
SELECT pg_temp.try($$ SELECT ratelimit_limit('mro', 'table', '{"kind": "token bucket", "rate": 3, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mro', 'table-new', '{"kind": "token bucket", "rate": 3, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('mro', 'table', 1, '{"kind": "token bucket", "rate": 3, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_reset('mro', 'table') $$);
SELECT pg_temp.try($$ SELECT ratelimit_reset('mro', 'nothing') $$);
-- A mixed limit_all: 25006, and its memory element is not taken.
SELECT pg_temp.try(format($$ SELECT * FROM ratelimit_limit_all('[{"name": "mro", "key": "mixed-m", "config": %s}, {"name": "mro", "key": "table", "config": %s}]') $$, :tb, :tbt));
SELECT value FROM ratelimit_value('mro', 'mixed-m', :tb);
-- ratelimit_check of a table limit reads as before.
SELECT ok, remaining FROM ratelimit_check('mro', 'table', :tbt);
COMMIT;
SELECT value FROM ratelimit_value('mro', 'tb', :tb);
SELECT value FROM ratelimit_value('mro', 'table', :tbt);

-- ratelimit_reset of a memory limit that has no entry (never used, or full
-- again): false, as in a writable transaction, when the owner's config
-- (definition or override) says memory; a name only called with inline
-- configs cannot be told from a table limit: 25006.
SELECT ratelimit_define('mro-def', :tb);
SELECT ratelimit_define('mro-def-t', :tbt);
SELECT ratelimit_override('mro-def-t', 'mem', :fw);
BEGIN READ ONLY;
SELECT ratelimit_reset('mro-def', 'never-used');
SELECT ok FROM ratelimit_limit('mro-def', 'used');
SELECT ratelimit_reset('mro-def', 'used');
SELECT ratelimit_reset('mro-def', 'used');
SELECT ratelimit_reset('mro-def-t', 'mem');
SELECT pg_temp.try($$ SELECT ratelimit_reset('mro-def-t', 'table-key') $$);
COMMIT;
SELECT ratelimit_unoverride('mro-def-t', 'mem');
SELECT ratelimit_undefine('mro-def-t');
SELECT ratelimit_undefine('mro-def');

-- A read-only transaction that rolls back gives its grants back.
BEGIN READ ONLY;
SELECT ok, remaining FROM ratelimit_limit('mro', 'ro-rb', :tb, 2);
ROLLBACK;
SELECT value FROM ratelimit_value('mro', 'ro-rb', :tb);
-- default_transaction_read_only too.
SET default_transaction_read_only = on;
SELECT ok, remaining FROM ratelimit_limit('mro', 'default-ro', :tb, 2);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mro', 'table', '{"kind": "token bucket", "rate": 3, "period": 60000}') $$);
RESET default_transaction_read_only;

-- ratelimit_cleanup read-only: the memory entries back in their initial
-- state only; the table's idle rows stay for a writable transaction.
SET ratelimit.now = '2026-01-02 00:00:00+00';
SELECT count(*) AS idle_table_rows FROM ratelimit_state WHERE name = 'mro';
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE name = 'mro' AND storage = 'memory';
BEGIN READ ONLY;
SELECT ratelimit_cleanup() >= 3 AS cleaned;
COMMIT;
SELECT count(*) AS idle_table_rows FROM ratelimit_state WHERE name = 'mro';
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE name = 'mro' AND storage = 'memory';
SELECT ratelimit_cleanup() >= 1 AS cleaned;
SELECT count(*) AS idle_table_rows FROM ratelimit_state WHERE name = 'mro';
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- PostgREST runs a GET's pre-request in a READ ONLY transaction, as the
-- request's role, with the request's settings local to it.
CREATE ROLE mro_anon;
CREATE FUNCTION public.mro_pre_request() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_catalog, pg_temp AS $$
BEGIN
  PERFORM ratelimit_limit('mro-api', current_setting('request.headers', true)::jsonb ->> 'x-forwarded-for',
                          throws => true);
END $$;
REVOKE ALL ON FUNCTION public.mro_pre_request() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.mro_pre_request() TO mro_anon;
SELECT ratelimit_define('mro-api', '{"kind": "fixed window", "rate": 2, "period": "1 minute", "start": 0, "storage": "memory"}');
-- Two GETs pass, the third is PT429 (PostgREST answers 429); a second
-- client is not affected.
\set get 'BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY; SET LOCAL ROLE mro_anon; SET LOCAL request.method = \'GET\'; SET LOCAL request.path = \'/items\';'
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.1"}'; SELECT public.mro_pre_request(); COMMIT;
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.1"}'; SELECT public.mro_pre_request(); COMMIT;
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.1"}'; SELECT pg_temp.try('SELECT public.mro_pre_request()'); COMMIT;
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.2"}'; SELECT public.mro_pre_request(); COMMIT;
-- With PostgREST's error format, the 429 carries its headers.
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.1"}'; SET LOCAL ratelimit.error_format = 'postgrest'; SELECT pg_temp.try('SELECT public.mro_pre_request()'); COMMIT;
-- A GET whose handler fails after the pre-request: its grant is given back.
:get SET LOCAL request.headers = '{"x-forwarded-for": "10.0.0.3"}'; SELECT public.mro_pre_request(); SELECT 1 / 0;
ROLLBACK;
SELECT value FROM ratelimit_value('mro-api', '10.0.0.3');
SELECT key, stored_value, storage FROM ratelimit_status WHERE name = 'mro-api' ORDER BY key;
-- A table limit in the pre-request of a GET: 25006.
SELECT ratelimit_define('mro-api-table', '{"kind": "fixed window", "rate": 2, "period": "1 minute", "start": 0}');
CREATE FUNCTION public.mro_pre_request_table() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_catalog, pg_temp AS $$
BEGIN
  PERFORM ratelimit_limit('mro-api-table', 'k', throws => true);
END $$;
GRANT EXECUTE ON FUNCTION public.mro_pre_request_table() TO mro_anon;
:get SELECT pg_temp.try('SELECT public.mro_pre_request_table()'); COMMIT;

DROP FUNCTION public.mro_pre_request();
DROP FUNCTION public.mro_pre_request_table();
DROP ROLE mro_anon;
SELECT ratelimit_undefine('mro-api');
SELECT ratelimit_undefine('mro-api-table');
SELECT ratelimit_reset('mro-api', key) FROM ratelimit_status WHERE name = 'mro-api' ORDER BY key;
DELETE FROM ratelimit_state WHERE name LIKE 'mro%';
RESET ratelimit.now;
