-- Code the owner adds to ratelimit_state (triggers, CHECKs, defaults,
-- rules) and what a caller can make of it. The rule (docs/security.md): such
-- code runs as the calling role, in the caller's session, as if the caller
-- wrote the table itself; where a call could only reach it through SQL run
-- as the owner (rules, row security, changed column types, inheritance),
-- a caller without the owner's privileges is refused with 42501.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
SELECT ratelimit_define('oc', '{"kind": "token bucket", "rate": 100, "period": "1 hour"}');

-- The owner's audit trigger, written the common way: SET search_path =
-- public and an unqualified table name.
CREATE TABLE public.audit (name text, key text, by_role name);
CREATE FUNCTION public.audit_state() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
BEGIN
  INSERT INTO audit VALUES (NEW.name, NEW.key, current_user);
  RETURN NULL;
END $$;
CREATE TRIGGER audit_state AFTER INSERT OR UPDATE ON ratelimit_state
  FOR EACH ROW EXECUTE FUNCTION public.audit_state();
SELECT ok FROM ratelimit_limit('oc', 'existing');  -- the owner creates a row
CREATE ROLE oc_mallory;
CREATE ROLE oc_app;
GRANT INSERT ON public.audit TO oc_app;

-- An app role the owner granted the audit table: the trigger works for it,
-- as the app role.
SET ROLE oc_app;
SELECT ok FROM ratelimit_limit('oc', 'app-key');
SELECT ok FROM ratelimit_limit('oc', 'app-key');
RESET ROLE;
SELECT key, by_role, count(*) FROM public.audit WHERE key = 'app-key' GROUP BY 1, 2;

-- The attack: an unprivileged role shadows "audit" with a temporary table
-- whose trigger tries to make it a superuser. Its trigger runs as the
-- caller (not as the owner), on the insert path (a new key) and the update
-- path (an existing key) alike, and cannot escalate. (A fresh session, as
-- the attacker's would be: this one has the owner's trigger planned
-- already, against public.audit.)
\c
SET timezone = 'UTC';
SET ratelimit.now = '2026-03-01 12:00:00+00';
SET ROLE oc_mallory;
CREATE TEMP TABLE audit (name text, key text, by_role name);
CREATE FUNCTION pg_temp.evil() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'evil() runs as %', current_user;
  BEGIN
    EXECUTE 'ALTER ROLE oc_mallory SUPERUSER';
    RAISE NOTICE 'evil() made oc_mallory a superuser';
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'evil() could not escalate (42501)';
  END;
  RETURN NEW;
END $$;
CREATE TRIGGER evil BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION pg_temp.evil();
SELECT ok FROM ratelimit_limit('oc', 'new-key');   -- insert path
SELECT ok FROM ratelimit_limit('oc', 'existing');  -- update path
SELECT name, key, by_role FROM audit ORDER BY key;  -- the caller's own temp table
RESET ROLE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'oc_mallory';
SELECT name, key, by_role FROM public.audit ORDER BY key, by_role;

-- Once the temporary table is gone, the trigger runs into the owner's
-- table without the owner's grant: it fails as the caller's own INSERT
-- would, and nothing is written.
DISCARD TEMP;
\i test/sql_support/setup.sql
SET ROLE oc_mallory;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'mallory-key') $$);
RESET ROLE;
SELECT count(*) FROM ratelimit_state WHERE key = 'mallory-key';
DROP TRIGGER audit_state ON ratelimit_state;

-- A delete trigger of the owner's runs as the caller too, for a role the
-- owner granted ratelimit_reset (every shard's row is deleted).
CREATE TABLE public.delete_log (key text, shard smallint, by_role name);
GRANT INSERT ON public.delete_log TO oc_app;
CREATE FUNCTION public.log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.delete_log VALUES (OLD.key, OLD.shard, current_user);
  RETURN OLD;
END $$;
CREATE TRIGGER log_delete BEFORE DELETE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION public.log_delete();
SELECT ok FROM ratelimit_limit('oc-reset', 'k', '{"kind": "token bucket", "rate": 40, "period": 60000, "shards": 4}', count => 15);
GRANT EXECUTE ON FUNCTION ratelimit_reset(text, text) TO oc_app;
SET ROLE oc_app;
SELECT ratelimit_reset('oc-reset', 'k');
SELECT ratelimit_reset('oc-reset', 'k');
RESET ROLE;
SELECT key, count(*) AS rows, min(by_role) AS by_role FROM public.delete_log GROUP BY key;
SELECT count(*) FROM ratelimit_state WHERE name = 'oc-reset';
REVOKE EXECUTE ON FUNCTION ratelimit_reset(text, text) FROM oc_app;
DROP TRIGGER log_delete ON ratelimit_state;
DROP FUNCTION public.log_delete();
DROP TABLE public.delete_log;

-- A BEFORE INSERT trigger that changes the new row's key (or name, or
-- shard): 27000 naming it, never a call that cannot find its own row and
-- retries forever.
CREATE FUNCTION public.lower_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.key := lower(NEW.key);
  RETURN NEW;
END $$;
CREATE TRIGGER lower_key BEFORE INSERT OR UPDATE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION public.lower_key();
SET statement_timeout = '60s';
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'MixedCase') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'lower') $$);
RESET statement_timeout;
DROP TRIGGER lower_key ON ratelimit_state;
UPDATE ratelimit_state SET key = 'Upper' WHERE name = 'oc' AND key = 'lower';
CREATE TRIGGER lower_key BEFORE INSERT OR UPDATE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION public.lower_key();
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'Upper') $$);
DROP TRIGGER lower_key ON ratelimit_state;
DROP FUNCTION public.lower_key();
SELECT key FROM ratelimit_state WHERE name = 'oc' AND lower(key) IN ('mixedcase', 'lower', 'upper') ORDER BY key;

-- A column the owner added with a default: a new row gets the default,
-- computed as the caller.
ALTER TABLE ratelimit_state ADD COLUMN created_by name DEFAULT current_user;
SET ROLE oc_app;
SELECT ok FROM ratelimit_limit('oc', 'default-key');
RESET ROLE;
SELECT key, created_by FROM ratelimit_state WHERE key = 'default-key';
ALTER TABLE ratelimit_state DROP COLUMN created_by;

-- A statement-level INSERT trigger of the owner's fires for a new key (the
-- new row then goes through SQL: only the executor's ModifyTable node
-- fires statement triggers), as it would for an INSERT.
CREATE TABLE public.statement_log (fired int);
CREATE FUNCTION public.log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.statement_log VALUES (1);
  RETURN NULL;
END $$;
CREATE TRIGGER log_statement AFTER INSERT ON ratelimit_state
  FOR EACH STATEMENT EXECUTE FUNCTION public.log_statement();
SELECT ok FROM ratelimit_limit('oc', 'statement-key');
SELECT ok FROM ratelimit_limit('oc', 'statement-key');
SELECT count(*) AS statement_triggers_fired FROM public.statement_log;
DROP TRIGGER log_statement ON ratelimit_state;
DROP FUNCTION public.log_statement();
DROP TABLE public.statement_log;

-- An installed index replaced under its own name by one that calls a
-- function of the owner's: a call that would reach it through SQL (as the
-- owner) is refused for a role without the owner's privileges; the owner's
-- own call works.
CREATE FUNCTION public.owner_predicate(text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN true; END $$;
DROP INDEX ratelimit_state_global;
CREATE UNIQUE INDEX ratelimit_state_global ON ratelimit_state (name, shard)
  WHERE key IS NULL AND public.owner_predicate(name);
SET ROLE oc_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc-index', NULL, '{"kind": "token bucket", "rate": 5, "period": 60000}') $$);
RESET ROLE;
SELECT ok FROM ratelimit_limit('oc-index', NULL, '{"kind": "token bucket", "rate": 5, "period": 60000}');
DROP INDEX ratelimit_state_global;
CREATE UNIQUE INDEX ratelimit_state_global ON ratelimit_state (name, shard) WHERE key IS NULL;
DROP FUNCTION public.owner_predicate(text);

-- A BEFORE INSERT trigger that skips the new row: the decision cannot be
-- stored, 27000, nothing written (no endless retry).
CREATE FUNCTION public.skip_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RETURN NULL;
END $$;
CREATE TRIGGER skip_state BEFORE INSERT ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION public.skip_state();
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'skipped') $$);
DROP TRIGGER skip_state ON ratelimit_state;
DROP FUNCTION public.skip_state();

-- A rule makes every call go through SQL run as the owner. New keys and
-- new shard rows work (INSERT ... ON CONFLICT cannot be used with rules:
-- the row's creation lock makes a plain INSERT safe), for the owner.
CREATE TABLE public.rule_log (name text, key text);
CREATE RULE log_updates AS ON UPDATE TO ratelimit_state DO ALSO
  INSERT INTO public.rule_log VALUES (NEW.name, NEW.key);
SELECT ok, remaining FROM ratelimit_limit('oc', 'rule-key');
SELECT ok, remaining FROM ratelimit_limit('oc', 'rule-key');
SELECT ok, remaining FROM ratelimit_limit('oc-sharded', 'rule-key',
  '{"kind": "token bucket", "rate": 100, "period": "1 hour", "shards": 4}');
SELECT ok FROM ratelimit_limit('oc', NULL);
SELECT ok FROM ratelimit_limit('oc', NULL);
SELECT name, key, count(*) FROM public.rule_log GROUP BY 1, 2 ORDER BY 1, 2;
SELECT key, count(*) FROM ratelimit_state WHERE name = 'oc' AND key IS NOT DISTINCT FROM 'rule-key' GROUP BY 1;
-- ... and a caller without the owner's privileges is refused rather than
-- run the rule as the owner: 42501, nothing written. Statements that run
-- none of the owner's code are not refused: a new key's INSERT (the rule is
-- ON UPDATE), a check.
GRANT INSERT ON public.rule_log TO oc_app;
SET ROLE oc_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'rule-key') $$);
SELECT value FROM ratelimit_value('oc', 'rule-key');
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'rule-new-key') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'rule-new-key') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('oc', 'rule-key') $$);
RESET ROLE;
SELECT key, value FROM ratelimit_state WHERE key = 'rule-new-key';
-- A rule that does the insert instead: 27000, never an endless retry.
CREATE RULE no_inserts AS ON INSERT TO ratelimit_state DO INSTEAD NOTHING;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'instead-key') $$);
DROP RULE no_inserts ON ratelimit_state;
DROP RULE log_updates ON ratelimit_state;
DROP TABLE public.rule_log;

-- Owner DDL ALTER COLUMN ts TYPE timestamp: the statements convert in UTC,
-- whatever TimeZone the caller set, so a drained bucket stays drained.
SELECT ratelimit_define('oc-tz', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
ALTER TABLE ratelimit_state ALTER COLUMN ts TYPE timestamp;
SELECT count(*) FILTER (WHERE ok) AS granted FROM generate_series(1, 12) g, ratelimit_limit('oc-tz', 'k', count => g * 0 + 1);
SET TimeZone = 'Etc/GMT-14';
SELECT count(*) FILTER (WHERE ok) AS granted_after_tz FROM generate_series(1, 3) g, ratelimit_limit('oc-tz', 'k', count => g * 0 + 1);
SET TimeZone = 'Etc/GMT+12';
SELECT count(*) FILTER (WHERE ok) AS granted_after_tz FROM generate_series(1, 3) g, ratelimit_limit('oc-tz', 'k', count => g * 0 + 1);
SET TimeZone = 'UTC';
ALTER TABLE ratelimit_state ALTER COLUMN ts TYPE timestamptz;

-- A nondeterministic collation on the key would make two keys one row
-- (and let ratelimit_limit_all, which tells rows apart by their bytes,
-- take one row's tokens twice): every call is refused with 0A000.
-- (In a transaction rolled back: other tests' keys collide under it.)
CREATE COLLATION public.case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
BEGIN;
DELETE FROM ratelimit_state;
ALTER TABLE ratelimit_state ALTER COLUMN key TYPE text COLLATE public.case_insensitive;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'existing') $$);
ROLLBACK;
DROP COLLATION public.case_insensitive;
SELECT ok FROM ratelimit_limit('oc', 'existing');

-- A state column changed to a built-in type the owner converts with casts
-- of its own (here ts as epoch microseconds): the statements' conversions
-- would run the owner's cast functions as the owner, so a role without the
-- owner's privileges is refused; the owner's own calls work.
CREATE FUNCTION public.us_to_ts(bigint) RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN to_timestamp($1 / 1e6);
END $$;
CREATE FUNCTION public.ts_to_us(timestamptz) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (extract(epoch FROM $1) * 1e6)::bigint;
END $$;
ALTER TABLE ratelimit_state ALTER COLUMN ts TYPE bigint USING (extract(epoch FROM ts) * 1e6)::bigint;
CREATE CAST (timestamptz AS bigint) WITH FUNCTION public.ts_to_us(timestamptz) AS ASSIGNMENT;
CREATE CAST (bigint AS timestamptz) WITH FUNCTION public.us_to_ts(bigint);
SET ROLE oc_app;
SELECT pg_temp.try($$ SELECT ratelimit_check('oc', 'existing') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'cast-key') $$);
RESET ROLE;
SELECT ok FROM ratelimit_check('oc', 'existing');
DROP CAST (timestamptz AS bigint);
DROP CAST (bigint AS timestamptz);
ALTER TABLE ratelimit_state ALTER COLUMN ts TYPE timestamptz USING to_timestamp(ts / 1e6);
DROP FUNCTION public.us_to_ts(bigint);
DROP FUNCTION public.ts_to_us(timestamptz);

-- The same attack through the config tables: an owner's audit trigger on
-- ratelimit_definition and ratelimit_override, written the common way (SET
-- search_path = public, an unqualified table name), and a role granted
-- only EXECUTE on ratelimit_define, undefine, override and unoverride
-- (docs/api.md: "owner (grant it)") that shadows the audit table with a
-- temporary one whose trigger tries to make it a superuser. The writes run
-- as the owner, so they are refused (42501) and nothing is written; the
-- caller stays what it was. The owner's own calls run the trigger.
CREATE TABLE public.config_audit (tbl name, name text, by_role name);
CREATE FUNCTION public.audit_config() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
  INSERT INTO config_audit VALUES (TG_TABLE_NAME, r.name, current_user);
  RETURN NULL;
END $$;
CREATE TRIGGER audit_definition AFTER INSERT OR UPDATE OR DELETE ON ratelimit_definition
  FOR EACH ROW EXECUTE FUNCTION public.audit_config();
CREATE TRIGGER audit_override AFTER INSERT OR UPDATE OR DELETE ON ratelimit_override
  FOR EACH ROW EXECUTE FUNCTION public.audit_config();
SELECT ratelimit_define('oc-cfg', '{"kind": "token bucket", "rate": 5, "period": 60000}');
SELECT ratelimit_override('oc-cfg', 'vip', '{"kind": "token bucket", "rate": 50, "period": 60000}');
CREATE ROLE oc_admin;
GRANT EXECUTE ON FUNCTION ratelimit_define(text, jsonb), ratelimit_undefine(text),
  ratelimit_override(text, text, jsonb), ratelimit_unoverride(text, text) TO oc_admin;
GRANT INSERT ON public.config_audit TO oc_admin;
\c
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
SET ROLE oc_admin;
CREATE TEMP TABLE config_audit (tbl name, name text, by_role name);
CREATE FUNCTION pg_temp.evil() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'evil() runs as %', current_user;
  BEGIN
    EXECUTE 'ALTER ROLE oc_admin SUPERUSER';
    RAISE NOTICE 'evil() made oc_admin a superuser';
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'evil() could not escalate (42501)';
  END;
  RETURN NEW;
END $$;
CREATE TRIGGER evil BEFORE INSERT ON config_audit FOR EACH ROW EXECUTE FUNCTION pg_temp.evil();
SELECT pg_temp.try($$ SELECT ratelimit_define('oc-cfg', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('oc-cfg-new', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('oc-cfg', 'vip', '{"kind": "token bucket", "rate": 60, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('oc-cfg', 'other', '{"kind": "token bucket", "rate": 60, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('oc-cfg', 'vip') $$);
SELECT pg_temp.try($$ SELECT ratelimit_undefine('oc-cfg') $$);
SELECT count(*) AS caller_rows FROM config_audit;
RESET ROLE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'oc_admin';
SELECT name, config ->> 'rate' AS rate FROM ratelimit_definition WHERE name LIKE 'oc-cfg%' ORDER BY name;
SELECT name, key, config ->> 'rate' AS rate FROM ratelimit_override WHERE name = 'oc-cfg' ORDER BY key;
-- Without the owner's triggers the granted role's calls work: the
-- extension's own statement triggers, which tell every backend of the
-- change, are none of the owner's code.
DROP TRIGGER audit_definition ON ratelimit_definition;
DROP TRIGGER audit_override ON ratelimit_override;
SET ROLE oc_admin;
SELECT pg_temp.try($$ SELECT ratelimit_define('oc-cfg', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_override('oc-cfg', 'vip', '{"kind": "token bucket", "rate": 60, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('oc-cfg', 'vip') $$);
SELECT pg_temp.try($$ SELECT ratelimit_undefine('oc-cfg') $$);
RESET ROLE;
SELECT count(*) AS definitions_left FROM ratelimit_definition WHERE name LIKE 'oc-cfg%';
-- Other code of the owner's on the config tables, refused for the same
-- role: a column default, a CHECK, an index (the installed primary key is
-- none of these), a rule.
ALTER TABLE ratelimit_definition ADD COLUMN defined_by name DEFAULT current_user;
SET ROLE oc_admin;
SELECT pg_temp.try($$ SELECT ratelimit_define('oc-cfg', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
RESET ROLE;
ALTER TABLE ratelimit_definition DROP COLUMN defined_by;
ALTER TABLE ratelimit_override ADD CONSTRAINT rate_given CHECK (config ? 'rate');
SET ROLE oc_admin;
SELECT pg_temp.try($$ SELECT ratelimit_override('oc-cfg', 'vip', '{"kind": "token bucket", "rate": 60, "period": 60000}') $$);
RESET ROLE;
ALTER TABLE ratelimit_override DROP CONSTRAINT rate_given;
CREATE INDEX definition_kind ON ratelimit_definition ((config ->> 'kind'));
SET ROLE oc_admin;
SELECT pg_temp.try($$ SELECT ratelimit_define('oc-cfg', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
RESET ROLE;
DROP INDEX definition_kind;
CREATE RULE keep_overrides AS ON DELETE TO ratelimit_override DO INSTEAD NOTHING;
SELECT ratelimit_override('oc-cfg', 'vip', '{"kind": "token bucket", "rate": 60, "period": 60000}');
SET ROLE oc_admin;
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('oc-cfg', 'vip') $$);
RESET ROLE;
DROP RULE keep_overrides ON ratelimit_override;
SELECT ratelimit_unoverride('oc-cfg', 'vip');
SELECT tbl, name, by_role, count(*) FROM public.config_audit GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
DROP FUNCTION public.audit_config();
DROP TABLE public.config_audit;

-- A C function on the library that is not a member of the extension (only
-- a superuser can create one): it has no extension to find tables in.
CREATE FUNCTION public.stray_define(text, jsonb) RETURNS void AS 'ratelimit', 'ratelimit_define_invoker' LANGUAGE C;
SELECT pg_temp.try($$ SELECT public.stray_define('oc-stray', '{"kind": "token bucket", "rate": 6, "period": 60000}') $$);
DROP FUNCTION public.stray_define(text, jsonb);
-- Functions of the library declared otherwise than the extension declares
-- them (again only a superuser's doing): the definitions trigger function
-- called directly (39P01); ratelimit_simulate declared as returning one row,
-- where no set is accepted (0A000); ratelimit_limit made a member of the
-- extension but returning integer, not a row (42809), its decision not kept.
SELECT pg_temp.try($$ SELECT ratelimit_definitions_changed() $$);
CREATE FUNCTION public.stray_simulate(config jsonb, arrivals timestamptz[], counts float8[] DEFAULT NULL,
  OUT at timestamptz, OUT count float8, OUT ok boolean, OUT remaining float8, OUT retry_after float8)
  AS 'ratelimit', 'ratelimit_simulate' LANGUAGE C;
SELECT pg_temp.try($$ SELECT public.stray_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', ARRAY['2026-01-01 00:00:00+00'::timestamptz]) $$);
DROP FUNCTION public.stray_simulate(jsonb, timestamptz[], float8[]);
CREATE FUNCTION public.stray_limit(text, text, jsonb, float8, boolean, boolean) RETURNS integer
  AS 'ratelimit', 'ratelimit_limit' LANGUAGE C;
ALTER EXTENSION ratelimit ADD FUNCTION public.stray_limit(text, text, jsonb, float8, boolean, boolean);
SELECT pg_temp.try($$ SELECT public.stray_limit('oc-stray-limit', 'k', '{"kind": "token bucket", "rate": 6, "period": 60000}', 1, false, false) $$);
ALTER EXTENSION ratelimit DROP FUNCTION public.stray_limit(text, text, jsonb, float8, boolean, boolean);
DROP FUNCTION public.stray_limit(text, text, jsonb, float8, boolean, boolean);
SELECT count(*) AS stray_rows FROM ratelimit_state WHERE name LIKE 'oc-stray%';

-- An inheritance child holding a row of the same limit: a clear error
-- naming the cause (21000), nothing written.
CREATE TABLE public.state_child () INHERITS (ratelimit_state);
INSERT INTO public.state_child (name, key, shard, value, ts, prev)
  SELECT name, key, shard, value, ts, prev FROM ratelimit_state WHERE name = 'oc' AND key = 'existing';
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc', 'existing') $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('oc', 'existing') $$);
-- ... also when a config change locks the key's rows (where 1,025 such
-- rows once overran a fixed array and crashed the backend).
SELECT pg_temp.try($$ SELECT ratelimit_define('oc', '{"kind": "token bucket", "rate": 200, "period": "1 hour"}') $$);
DROP TABLE public.state_child;
SELECT ok FROM ratelimit_limit('oc', 'existing');

-- Row security the owner forces on the definition table would run as the
-- owner in a caller's definition lookup: refused (42501) for a role without
-- the owner's privileges; the owner's own call works.
ALTER TABLE ratelimit_definition ENABLE ROW LEVEL SECURITY;
ALTER TABLE ratelimit_definition FORCE ROW LEVEL SECURITY;
CREATE POLICY everything ON ratelimit_definition USING (true);
SELECT ratelimit_define('oc-rls', '{"kind": "token bucket", "rate": 5, "period": 60000}');
SET ROLE oc_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('oc-rls', 'k') $$);
RESET ROLE;
SELECT ok FROM ratelimit_limit('oc-rls', 'k');
DROP POLICY everything ON ratelimit_definition;
ALTER TABLE ratelimit_definition NO FORCE ROW LEVEL SECURITY;
ALTER TABLE ratelimit_definition DISABLE ROW LEVEL SECURITY;
SELECT ratelimit_undefine('oc-rls');

DROP FUNCTION public.audit_state();
DROP TABLE public.audit;
SELECT ratelimit_reset('oc-tz', 'k');
DROP OWNED BY oc_mallory, oc_app, oc_admin;
DROP ROLE oc_mallory;
DROP ROLE oc_app;
DROP ROLE oc_admin;
