-- App roles can consume, check and read limits, but not tamper with them.
\i test/sql_support/setup.sql
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

-- PUBLIC may execute exactly limit, limit_all, check and value, the
-- router's calls of them, the stats rows and the simulator.
SELECT p.proname, has_function_privilege('ratelimit_app', p.oid, 'EXECUTE') AS app_can_execute
FROM pg_proc p WHERE p.proname LIKE 'ratelimit\_%' ORDER BY 1;

-- The owner can grant the management functions.
GRANT EXECUTE ON FUNCTION ratelimit_reset(text, text) TO ratelimit_app;
SET ROLE ratelimit_app;
SELECT pg_temp.try($$ SELECT ratelimit_reset('priv', 'u') $$);
RESET ROLE;

-- The functions run with the caller's rights (no SECURITY DEFINER, no SET
-- clause); the SQL they run is run as the tables' owner with a pinned
-- search_path (tested below).
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

-- An operator trap ahead of pg_catalog in the caller's search_path is not
-- used by the functions' SQL, even when a fresh session prepares it under
-- that path as an app role: a named limit (its definition is looked up with
-- name = $1), a new key (INSERT) and limit_all all work.
CREATE SCHEMA optrap;
CREATE FUNCTION optrap.text_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the caller''s = operator was used';
END $$;
CREATE OPERATOR optrap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = optrap.text_eq);
GRANT USAGE ON SCHEMA optrap TO ratelimit_app;
\c
SET ROLE ratelimit_app;
SET search_path = optrap, pg_catalog, public;
SELECT 'a' = 'a' AS trap_armed_for_the_caller;
SELECT ok FROM public.ratelimit_limit('priv', 'trap-user');
SELECT ok FROM public.ratelimit_limit('priv-inline', 'trap-user', '{"kind": "fixed window", "rate": 1, "period": 1000}');
SELECT name, key, ok FROM public.ratelimit_limit_all('[{"name": "priv", "key": "trap-user-2"}]');
RESET search_path;
RESET ROLE;
DROP SCHEMA optrap CASCADE;
\i test/sql_support/setup.sql

-- Code the owner added to ratelimit_state (here a trigger, then a CHECK)
-- runs as the calling role, in the caller's settings (its search_path), as
-- it would if the caller wrote the table itself: never as the owner. So it
-- needs the caller's own rights (here INSERT on the log). Afterwards, and
-- after an error inside it, the caller's role and search_path are as before.
CREATE TABLE sql_scope_log (is_owner boolean, search_path text);
GRANT INSERT ON sql_scope_log TO ratelimit_app;
CREATE FUNCTION sql_scope_probe() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.sql_scope_log
  SELECT current_user = p.proowner::regrole::name, current_setting('search_path')
  FROM pg_catalog.pg_proc p WHERE p.oid = 'public.ratelimit_limit(text, text, jsonb, float8, boolean, boolean)'::regprocedure;
  IF NEW.key = 'fail' THEN
    RAISE EXCEPTION 'probe refused the write';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER sql_scope_probe BEFORE INSERT OR UPDATE ON ratelimit_state
  FOR EACH ROW EXECUTE FUNCTION public.sql_scope_probe();
SET ROLE ratelimit_app;
SET search_path = public;
SELECT ok FROM ratelimit_limit('priv', 'u-scope');
SELECT ok FROM ratelimit_limit('priv', 'u-scope');
SELECT pg_temp.try($$ SELECT ratelimit_limit('priv', 'fail') $$);
SELECT current_user, current_setting('search_path') AS search_path;
RESET search_path;
RESET ROLE;
SELECT is_owner, search_path, count(*) FROM sql_scope_log GROUP BY 1, 2 ORDER BY 1, 2;
DROP TRIGGER sql_scope_probe ON ratelimit_state;
-- The same for a CHECK constraint that replaced the installed shard check
-- under its name: its function runs as the caller, not the owner.
TRUNCATE sql_scope_log;
CREATE FUNCTION sql_scope_check(shard smallint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.sql_scope_log
  SELECT current_user = p.proowner::regrole::name, current_setting('search_path')
  FROM pg_catalog.pg_proc p WHERE p.oid = 'public.ratelimit_limit(text, text, jsonb, float8, boolean, boolean)'::regprocedure;
  RETURN shard >= 0;
END $$;
ALTER TABLE ratelimit_state DROP CONSTRAINT ratelimit_state_shard_check;
ALTER TABLE ratelimit_state ADD CONSTRAINT ratelimit_state_shard_check CHECK (public.sql_scope_check(shard));
TRUNCATE sql_scope_log;  -- the rows ADD CONSTRAINT checked
SET ROLE ratelimit_app;
SET search_path = public;
SELECT ok FROM ratelimit_limit('priv', 'u-check');  -- inserts the row
SELECT ok FROM ratelimit_limit('priv', 'u-check');  -- updates it (directly)
RESET search_path;
RESET ROLE;
SELECT is_owner, search_path, count(*) FROM sql_scope_log GROUP BY 1, 2 ORDER BY 1, 2;
ALTER TABLE ratelimit_state DROP CONSTRAINT ratelimit_state_shard_check;
ALTER TABLE ratelimit_state ADD CONSTRAINT ratelimit_state_shard_check CHECK (shard >= 0);
DROP FUNCTION sql_scope_check(smallint);
DROP FUNCTION sql_scope_probe();
DROP TABLE sql_scope_log;

-- The extension's tables are its members owned by its owner: a table given
-- to another role is not the extension's any more (42P01 naming it,
-- nothing written) until it is given back.
SELECT ratelimit_define('priv-owner', '{"kind": "token bucket", "rate": 2, "period": 60000}');
CREATE ROLE ratelimit_maint;
ALTER TABLE ratelimit_state OWNER TO ratelimit_maint;
SET ROLE ratelimit_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('priv-owner', 'new-key') $$);
RESET ROLE;
ALTER TABLE ratelimit_state OWNER TO CURRENT_USER;
DROP ROLE ratelimit_maint;
SET ROLE ratelimit_app;
SELECT ok FROM ratelimit_limit('priv-owner', 'new-key');
RESET ROLE;
SELECT name, key, kind FROM ratelimit_status WHERE name = 'priv-owner';

REVOKE EXECUTE ON FUNCTION ratelimit_reset(text, text) FROM ratelimit_app;
DROP ROLE ratelimit_app;
