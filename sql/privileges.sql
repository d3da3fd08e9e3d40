-- App roles can consume, check and read limits, but not tamper with them.
SET timezone = 'UTC';
CREATE FUNCTION pg_temp.try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT ratelimit_define('priv', '{"kind": "token bucket", "rate": 2, "period": 60000}');
CREATE ROLE ratelimit_app;
SET ROLE ratelimit_app;

SELECT pg_temp.try($$ SELECT ratelimit_limit('priv', 'u') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('priv', 'u') $$);
SELECT pg_temp.try($$ SELECT ratelimit_value('priv', 'u') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('priv-inline', 'u', '{"kind": "fixed window", "rate": 1, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "priv", "key": "u"}]') $$);
-- Owner-only functions.
SELECT pg_temp.try($$ SELECT ratelimit_reset('priv', 'u') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('priv', 'u') $$);
SELECT pg_temp.try($$ SELECT ratelimit_cleanup() $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('priv', '{"kind": "token bucket", "rate": 1000, "period": 1000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_undefine('priv') $$);
-- The tables are not readable or writable.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_state $$);
SELECT pg_temp.try($$ UPDATE ratelimit_state SET value = 1000 $$);
SELECT pg_temp.try($$ DELETE FROM ratelimit_state $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_definition $$);
SELECT pg_temp.try($$ INSERT INTO ratelimit_definition VALUES ('x', '{}') $$);
RESET ROLE;

-- PUBLIC may execute exactly limit, limit_all, check and value.
SELECT p.proname, has_function_privilege('ratelimit_app', p.oid, 'EXECUTE') AS app_can_execute
FROM pg_proc p WHERE p.proname LIKE 'ratelimit\_%' ORDER BY 1;

-- The owner can grant the management functions.
GRANT EXECUTE ON FUNCTION ratelimit_reset(text, text) TO ratelimit_app;
SET ROLE ratelimit_app;
SELECT pg_temp.try($$ SELECT ratelimit_reset('priv', 'u') $$);
RESET ROLE;

-- The functions run as their owner with a pinned search_path.
SELECT proname, prosecdef, proconfig FROM pg_proc
WHERE proname LIKE 'ratelimit\_%' ORDER BY proname;

-- A search_path trap set by the caller does not redirect the functions.
CREATE SCHEMA trap;
CREATE TABLE trap.ratelimit_state (LIKE ratelimit_state);
SET search_path = trap, public;
SELECT ok FROM public.ratelimit_limit('priv-path', 'u', '{"kind": "token bucket", "rate": 2, "period": 60000}');
SELECT count(*) FROM trap.ratelimit_state;
SELECT count(*) FROM public.ratelimit_state WHERE name = 'priv-path';
RESET search_path;
DROP SCHEMA trap CASCADE;

REVOKE EXECUTE ON FUNCTION ratelimit_reset(text, text) FROM ratelimit_app;
DROP ROLE ratelimit_app;
