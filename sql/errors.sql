-- Every error path: its SQLSTATE and message, and that nothing was written.
\i test/sql_support/setup.sql
\set tb '''{"kind": "token bucket", "rate": 10, "period": 60000}'''

-- NULL arguments that must not be NULL: 22004.
SELECT pg_temp.try($$ SELECT ratelimit_limit(NULL, 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 1, NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 1, false, NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_check(NULL, 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_value(NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_reset(NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_define(NULL, '{"kind": "token bucket", "rate": 10, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('e', NULL) $$);
SELECT pg_temp.try($$ SELECT ratelimit_undefine(NULL) $$);

-- Bad numbers: 22023.
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', -1) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 'NaN') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 'Infinity') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', '-Infinity') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', -0.5) $$);
-- A count that can never succeed is a configuration error, not a refusal.
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 11) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000, "maxReserved": 5}', 16, reserve => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "fixed window", "rate": 10, "period": 60000, "capacity": 12}', 13) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 10, "period": 60000}', 11) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 10, "period": 60000}', 1, reserve => true) $$);
-- A request found valid for an inline config is checked again when it
-- changes: a count that fits, then one that never can, then one that fits;
-- a sliding window without reserve, then with it (22023).
SELECT ok FROM ratelimit_check('e-again', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 10);
SELECT pg_temp.try($$ SELECT ratelimit_check('e-again', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 11) $$);
SELECT ok FROM ratelimit_check('e-again', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}', 10);
SELECT ok FROM ratelimit_check('e-again', 'k', '{"kind": "sliding window", "rate": 10, "period": 60000}', 1);
SELECT pg_temp.try($$ SELECT ratelimit_check('e-again', 'k', '{"kind": "sliding window", "rate": 10, "period": 60000}', 1, reserve => true) $$);
-- Unbounded reservations still stop at the 100-year horizon.
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 day"}', 1e6, reserve => true) $$);

-- Names and keys over 1024 bytes: 22023.
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, NULL, %L)', repeat('n', 1025), :tb));
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L, %L)', 'e', repeat('k', 1025), :tb));
SELECT pg_temp.try(format('SELECT ratelimit_reset(%L, %L)', 'e', repeat('k', 1025)));
SELECT pg_temp.try(format('SELECT ratelimit_define(%L, %L)', repeat('n', 1025), :tb));
-- Exactly 1024 bytes is fine (multi-byte characters count in bytes).
SELECT (ratelimit_limit(repeat('n', 1024), repeat('é', 512), :tb)).ok;
SELECT pg_temp.try(format('SELECT ratelimit_limit(%L, %L, %L)', 'e', repeat('é', 513), :tb));

-- Config errors name the field: 22023.
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '[]') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '5') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '"token bucket"') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "peroid": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "leaky bucket", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": 1, "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": "10", "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 0, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": -1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1e400, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1e301, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": 1e308}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": 1e301}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1e300, "period": 1000}', 1e301) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 0}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": -1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": true}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "soon"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "1 month"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "-1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "40000 days"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": -1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "capacity": [1]}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": -1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": {}}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "start": 0}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "fixed window", "rate": 1, "period": 1000, "start": "whenever"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "fixed window", "rate": 1, "period": 1000, "start": "infinity"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "fixed window", "rate": 1, "period": 1000, "start": "now"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 1, "period": 1000, "start": "Today 10:00"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('e', '{"kind": "fixed window", "rate": 1, "period": 1000, "start": "tomorrow"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "fixed window", "rate": 1, "period": 1000, "start": false}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 1, "period": 1000, "capacity": 2}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 1, "period": 1000, "maxReserved": 2}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": "365 days", "capacity": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1e-320, "period": 1000, "capacity": 0}') $$);
-- The storage options, checked by the adapter (the core never sees them):
-- "memoryKeys" a whole number from 1 to 100000000 (22023, its message and
-- detail), checked before whether the storage takes it, for every storage.
CREATE FUNCTION pg_temp.try_detail(query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  message text;
  detail text;
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || message || ' / ' || detail;
END $f$;
SELECT pg_temp.try_detail($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "memoryKeys": 0}') $$);
SELECT pg_temp.try_detail($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "table", "memoryKeys": 2.5}') $$);
SELECT pg_temp.try_detail($$ SELECT ratelimit_define('e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": 100000001}') $$);
SELECT pg_temp.try_detail($$ SELECT ratelimit_define('e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "memoryKeys": -1}') $$);
-- After the checks of each core field, before those of the fields together.
SELECT pg_temp.try_detail($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 0, "period": 1000, "memoryKeys": 0}') $$);
SELECT pg_temp.try_detail($$ SELECT ratelimit_limit('e', 'k', '{"kind": "sliding window", "rate": 1, "period": 1000, "capacity": 2, "memoryKeys": 0}') $$);
-- In range, but the table storage does not bound a name's rows.
SELECT pg_temp.try_detail($$ SELECT ratelimit_limit('e', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000, "memoryKeys": 3}') $$);
-- JSON null means the field is absent.
SELECT ok, remaining FROM ratelimit_limit('e-null', 'k', '{"kind": "token bucket", "rate": 2, "period": 1000, "capacity": null, "start": null}');
SELECT pg_temp.try($$ SELECT ratelimit_limit('e', 'k', '{"kind": null, "rate": 1, "period": 1000}') $$);

-- Neither an inline nor a defined config: 42704.
SELECT pg_temp.try($$ SELECT ratelimit_limit('e-undefined') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('e-undefined', 'k') $$);
SELECT pg_temp.try($$ SELECT ratelimit_value('e-undefined') $$);
-- ratelimit_define validates what it stores.
SELECT pg_temp.try($$ SELECT ratelimit_define('e-bad', '{"kind": "token bucket", "rate": 1}') $$);
SELECT count(*) FROM ratelimit_definition WHERE name = 'e-bad';

-- throws => true raises PT429 with a JSON DETAIL.
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ok FROM ratelimit_limit('e-throw', 'u"1', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT * FROM ratelimit_limit('e-throw', 'u"1', '{"kind": "token bucket", "rate": 1, "period": 1000}', throws => true);
SELECT * FROM ratelimit_check('e-throw', 'u"1', '{"kind": "token bucket", "rate": 1, "period": 1000}', throws => true);
-- The SQLSTATE is PT429 and the DETAIL parses as JSON.
DO $$
DECLARE detail jsonb;
BEGIN
  PERFORM ratelimit_limit('e-throw', 'u"1', '{"kind": "token bucket", "rate": 1, "period": 1000}', throws => true);
EXCEPTION WHEN SQLSTATE 'PT429' THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RAISE NOTICE 'sqlstate=% message=%', SQLSTATE, SQLERRM;
  RAISE NOTICE 'name=% key=% retry_after=% retry_at=% remaining=%', detail->>'name', detail->>'key',
    detail->'retry_after', detail->>'retry_at', detail->'remaining';
END $$;
-- A name containing " or \ is escaped in the message, as in the headers.
SELECT ok FROM ratelimit_limit('e-"quoted" \ name', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT * FROM ratelimit_limit('e-"quoted" \ name', 'k', '{"kind": "token bucket", "rate": 1, "period": 1000}', throws => true);
-- A NULL key appears as JSON null.
SELECT ok FROM ratelimit_limit('e-throw', NULL, '{"kind": "fixed window", "rate": 1, "period": 1000, "start": 0}');
SELECT ok FROM ratelimit_limit('e-throw', NULL, '{"kind": "fixed window", "rate": 1, "period": 1000, "start": 0}', throws => true);
RESET ratelimit.now;

-- ratelimit.now is superuser-only and must be a finite timestamp.
SELECT pg_temp.try($$ SET ratelimit.now = 'not a time' $$);
SELECT pg_temp.try($$ SET ratelimit.now = 'infinity' $$);
CREATE ROLE ratelimit_clock_user;
SET ROLE ratelimit_clock_user;
SELECT pg_temp.try($$ SET ratelimit.now = '2026-01-01' $$);
RESET ROLE;
DROP ROLE ratelimit_clock_user;

-- A call reached in a parallel operation (through a function its author
-- marked PARALLEL SAFE, with parallel query forced) is refused before it
-- touches anything: 25000. (force_parallel_mode became
-- debug_parallel_query in PostgreSQL 16.)
CREATE FUNCTION public.e_parallel_wrapper() RETURNS boolean LANGUAGE plpgsql PARALLEL SAFE AS $$
BEGIN
  RETURN (ratelimit_limit('e-parallel', 'k', '{"kind": "token bucket", "rate": 10, "period": 60000}')).ok;
END $$;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) AS forced;
SELECT pg_temp.try($$ SELECT public.e_parallel_wrapper() $$);
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'off', false) AS forced;
DROP FUNCTION public.e_parallel_wrapper();

-- None of the failed calls above wrote anything.
SELECT name, key FROM ratelimit_state WHERE name LIKE 'e%' ORDER BY 1, 2;
