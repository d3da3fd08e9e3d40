-- ALTER EXTENSION ratelimit UPDATE from 0.1.0 to 0.2.0 to 0.3.0 to 0.4.0 to
-- the default version (through every later release): state and definitions
-- survive, the new objects appear and work. Then the catalog: a fresh
-- install (the default version's complete script) is, object by object,
-- the install updated from every release, and the comparison is shown to
-- see each kind of difference it claims to.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT ratelimit_define('up', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_limit('up', 'u', count => 4);
ALTER EXTENSION ratelimit UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
-- The state written by 0.1.0 is still there and still used.
SELECT value FROM ratelimit_value('up', 'u');
SELECT ok, remaining FROM ratelimit_limit('up', 'u', count => 6);
SELECT ok FROM ratelimit_limit('up', 'u');
-- The same session now writes idle_at (its statements were re-prepared).
SELECT idle_at IS NOT NULL AS idle_at_written FROM ratelimit_state WHERE name = 'up';
SELECT * FROM ratelimit_refund('up', 'u', 2);
SELECT name, ok FROM ratelimit_limit_all('[{"name": "up", "key": "u"}]');
SELECT ratelimit_cleanup();
-- 0.2.0 -> 0.3.0: headers and the status view.
ALTER EXTENSION ratelimit UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT ratelimit_headers('up', r) ->> 'RateLimit-Policy' AS policy FROM ratelimit_check('up', 'u') r;
SELECT name, key, shard, kind, value FROM ratelimit_status WHERE name = 'up';
-- 0.3.0 -> 0.4.0: SECURITY INVOKER functions.
ALTER EXTENSION ratelimit UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT ok, remaining FROM ratelimit_limit('up', 'u', count => 2);
SELECT ok FROM ratelimit_limit('up', 'new key');
SELECT name, key, shard, kind, value FROM ratelimit_status WHERE name = 'up' ORDER BY key;
-- Rows of 0.4.0 that the update to 0.5.0 marks with their kind: a defined
-- fixed window's, and an inline-only limit's (token bucket or fixed window:
-- either, as before).
SELECT ratelimit_define('up-fw', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
SELECT ok, remaining FROM ratelimit_limit('up-fw', 'u', count => 2);
SELECT ok, remaining FROM ratelimit_limit('up-inline', 'u', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}', count => 3);
SELECT ok, remaining FROM ratelimit_limit('up-sw', 'u', '{"kind": "sliding window", "rate": 5, "period": "1 hour"}', count => 1);
SELECT ok, remaining FROM ratelimit_limit('up-tb', 'u', '{"kind": "token bucket", "rate": 5, "period": "1 hour"}', count => 4);
-- The new library on the 0.4.0 schema reads an inline fixed window's
-- unmarked row as its own (no override table yet).
SELECT ok, remaining FROM ratelimit_limit('up-inline', 'u', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
-- 0.4.0 -> the default version: overrides, shadow mode, stats (0.5.0).
ALTER EXTENSION ratelimit UPDATE;
SELECT e.extversion = a.default_version AS at_default_version
FROM pg_extension AS e JOIN pg_available_extensions AS a ON a.name = e.extname WHERE e.extname = 'ratelimit';
SELECT name, key, value, prev FROM ratelimit_state WHERE name LIKE 'up%' ORDER BY name, key;
-- Each keeps its state under its own kind.
SELECT ok, remaining FROM ratelimit_limit('up', 'u');
SELECT ok, remaining FROM ratelimit_limit('up-fw', 'u');
SELECT ok, remaining FROM ratelimit_limit('up-inline', 'u', '{"kind": "fixed window", "rate": 5, "period": "1 hour"}');
SELECT ok, remaining FROM ratelimit_limit('up-sw', 'u', '{"kind": "sliding window", "rate": 5, "period": "1 hour"}');
SELECT ok, remaining FROM ratelimit_limit('up-tb', 'u', '{"kind": "token bucket", "rate": 5, "period": "1 hour"}');
SELECT name, key, value, prev FROM ratelimit_state WHERE name LIKE 'up%' ORDER BY name, key;
-- The new objects work on the updated schema.
SELECT ratelimit_override('up', 'u', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 1}');
SELECT ok FROM ratelimit_limit('up', 'u');
SELECT ratelimit_unoverride('up', 'u');
SELECT count(*) >= 0 AS stats_readable FROM ratelimit_stats;
SELECT ratelimit_headers('up', r, key => 'u') ->> 'X-RateLimit-Limit' AS limit FROM ratelimit_check('up', 'u') r;
-- 0.6.0 -> 0.7.0: the router's calls, which return errors as data.
SELECT ok, error_state FROM ratelimit_proxy_check('up', 'u', NULL, 1, false, false, NULL);
SELECT error_state, error_message FROM ratelimit_proxy_check('up', 'u', NULL, 100, false, false, NULL);
-- 0.7.0 -> 0.8.0: the router's other calls return errors as data too.
SELECT floor(value) AS value, error_state FROM ratelimit_proxy_value('up', 'u', NULL);
SELECT error_state, error_message FROM ratelimit_proxy_refund('up', 'u', -1, NULL);
SELECT error_state FROM ratelimit_proxy_define('up', '{"kind": "token bucket", "rate": 0, "period": 1}');
-- 0.7.0 -> 0.8.0: the simulator.
SELECT ok, remaining, retry_after FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, 2026-01-01}');
-- The catalog (test/sql_support/extension_catalog.sql): the install updated
-- above, with its state, is saved as a snapshot; then the extension is
-- installed fresh and from every release PostgreSQL offers, and each is
-- compared with the fresh one object by object. What PostgreSQL offers is
-- first checked against the tree: its sql/ratelimit--*.sql files and its
-- control file, and the default version must have a complete script.
\i test/sql_support/extension_catalog.sql
\set release_files `cd sql && md5sum ratelimit--*.sql`
\set control_file `cat ratelimit.control`
SELECT * FROM pg_temp.release_files_problems('ratelimit', :'release_files', :'control_file');
SELECT pg_temp.take_snapshot('ratelimit', 'updated above');
-- Every difference between a fresh install and one updated from a release:
-- none.
SELECT * FROM pg_temp.fresh_vs_upgraded('ratelimit');
SELECT * FROM pg_temp.snapshot_differences('updated above', 'fresh');
-- Every member of the extension has its COMMENT ON.
SELECT * FROM pg_temp.members_without_comment('ratelimit');
-- Every starting point was compared (a version, or an update script its
-- version's path to the default one skips), and the snapshots are not empty.
SELECT (SELECT count(*) FROM pg_temp.starting_points('ratelimit')) =
       (SELECT count(DISTINCT snapshot) FROM pg_temp.catalog_snapshots WHERE snapshot LIKE 'from %') AS every_release,
       (SELECT count(*) FROM pg_temp.starting_points('ratelimit')) >= 9 AS nine_or_more,
       (SELECT min(n) FROM (SELECT count(*) AS n FROM pg_temp.catalog_snapshots GROUP BY snapshot) AS s) > 1000 AS whole_catalogs;
-- The comparison sees what it compares: each change below, planted in the
-- fresh install (in a subtransaction, rolled back), makes the named
-- property of the named object differ from the fresh snapshot.
SELECT p.plant, pg_temp.planted_difference_found('ratelimit', p.statement, p.object, p.property) AS found
FROM (VALUES
    ('comment', 'COMMENT ON FUNCTION ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS ''planted''',
     'function ratelimit_limit(text,text,jsonb,double precision,boolean,boolean)', 'comment'),
    ('column comment', 'COMMENT ON COLUMN ratelimit_state.idle_at IS NULL', 'column idle_at of table ratelimit_state', 'comment'),
    ('type comment', 'COMMENT ON TYPE ratelimit_result IS NULL', 'type ratelimit_result', 'comment'),
    ('trigger comment', 'COMMENT ON TRIGGER ratelimit_overrides_changed ON ratelimit_override IS NULL',
     'trigger ratelimit_overrides_changed on table ratelimit_override', 'comment'),
    ('function privileges', 'GRANT EXECUTE ON FUNCTION ratelimit_reset(text, text) TO PUBLIC', 'function ratelimit_reset(text,text)', 'privileges'),
    ('view privileges', 'REVOKE SELECT ON ratelimit_stats FROM PUBLIC', 'view ratelimit_stats', 'privileges'),
    ('column privileges', 'GRANT SELECT (name) ON ratelimit_state TO PUBLIC', 'column name of table ratelimit_state', 'privileges'),
    ('type privileges', 'REVOKE USAGE ON TYPE ratelimit_result FROM PUBLIC', 'type ratelimit_result', 'privileges'),
    ('schema privileges', 'GRANT CREATE ON SCHEMA public TO PUBLIC', 'schema public', 'privileges'),
    ('initial privileges', 'DELETE FROM pg_init_privs WHERE objoid = ''ratelimit_state''::regclass AND classoid = ''pg_class''::regclass',
     'table ratelimit_state', 'initial privileges'),
    ('default privileges', 'CREATE ROLE regress_ratelimit_planted; ALTER DEFAULT PRIVILEGES FOR ROLE regress_ratelimit_planted REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC',
     'default privileges on f of role regress_ratelimit_planted in every schema', 'privileges'),
    ('owner', 'CREATE ROLE regress_ratelimit_planted; ALTER TYPE ratelimit_result OWNER TO regress_ratelimit_planted', 'type ratelimit_result', 'owner'),
    ('search_path', 'ALTER FUNCTION ratelimit_cleanup() SET search_path = public', 'function ratelimit_cleanup()', 'settings'),
    ('security definer', 'ALTER FUNCTION ratelimit_cleanup() SECURITY DEFINER', 'function ratelimit_cleanup()', 'security definer'),
    ('volatility', 'ALTER FUNCTION ratelimit_cleanup() STABLE', 'function ratelimit_cleanup()', 'volatility'),
    ('parallel', 'ALTER FUNCTION ratelimit_cleanup() PARALLEL RESTRICTED', 'function ratelimit_cleanup()', 'parallel'),
    ('strict', 'ALTER FUNCTION ratelimit_cleanup() STRICT', 'function ratelimit_cleanup()', 'strict'),
    ('leakproof', 'ALTER FUNCTION ratelimit_cleanup() LEAKPROOF', 'function ratelimit_cleanup()', 'leakproof'),
    ('cost', 'ALTER FUNCTION ratelimit_cleanup() COST 2', 'function ratelimit_cleanup()', 'cost'),
    ('rows', 'ALTER FUNCTION ratelimit_value(text, text, jsonb) ROWS 2', 'function ratelimit_value(text,text,jsonb)', 'rows'),
    ('function definition', 'ALTER FUNCTION ratelimit_cleanup() SECURITY DEFINER', 'function ratelimit_cleanup()', 'definition'),
    ('entry point', 'CREATE OR REPLACE FUNCTION ratelimit_cleanup() RETURNS bigint AS ''$libdir/ratelimit'', ''ratelimit_cleanup'' LANGUAGE C',
     'function ratelimit_cleanup()', 'source'),
    ('argument default', 'CREATE OR REPLACE FUNCTION ratelimit_reset(name text, key text DEFAULT ''planted'') RETURNS boolean AS ''$libdir/ratelimit'', ''ratelimit_reset_invoker'' LANGUAGE C',
     'function ratelimit_reset(text,text)', 'argument defaults'),
    ('plpgsql body', 'CREATE OR REPLACE FUNCTION ratelimit_proxy_define(name text, config jsonb) RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text) LANGUAGE plpgsql ROWS 1 AS $$ BEGIN RETURN NEXT; END $$',
     'function ratelimit_proxy_define(text,jsonb)', 'source'),
    ('column default', 'ALTER TABLE ratelimit_state ALTER COLUMN shard SET DEFAULT 1', 'column shard of table ratelimit_state', 'default'),
    ('not null', 'ALTER TABLE ratelimit_state ALTER COLUMN prev SET NOT NULL', 'column prev of table ratelimit_state', 'not null'),
    ('column type', 'ALTER TABLE ratelimit_override ALTER COLUMN config TYPE json', 'column config of table ratelimit_override', 'type'),
    ('collation', 'ALTER TABLE ratelimit_definition ALTER COLUMN name TYPE text COLLATE "POSIX"',
     'column name of table ratelimit_definition', 'collation'),
    ('identity', 'ALTER TABLE ratelimit_state ALTER COLUMN shard DROP DEFAULT, ALTER COLUMN shard ADD GENERATED BY DEFAULT AS IDENTITY',
     'column shard of table ratelimit_state', 'identity'),
    ('generated column', 'ALTER TABLE ratelimit_state ADD COLUMN planted integer GENERATED ALWAYS AS (1) STORED',
     'column planted of table ratelimit_state', 'generated'),
    ('constraint', 'ALTER TABLE ratelimit_state DROP CONSTRAINT ratelimit_state_shard_check, ADD CONSTRAINT ratelimit_state_shard_check CHECK (shard >= 1)',
     'constraint ratelimit_state_shard_check on table ratelimit_state', 'definition'),
    ('index', 'CREATE INDEX planted ON ratelimit_state (ts)', 'index planted', 'index definition'),
    ('index options', 'ALTER INDEX ratelimit_state_global SET (fillfactor = 50)', 'index ratelimit_state_global', 'options'),
    ('trigger', 'CREATE TRIGGER planted AFTER DELETE ON ratelimit_state FOR EACH STATEMENT EXECUTE FUNCTION ratelimit_definitions_changed()',
     'trigger planted on table ratelimit_state', 'definition'),
    ('trigger enabled', 'ALTER TABLE ratelimit_definition DISABLE TRIGGER ratelimit_definitions_changed',
     'trigger ratelimit_definitions_changed on table ratelimit_definition', 'enabled'),
    ('view definition', 'DO $$ BEGIN EXECUTE format(''CREATE OR REPLACE VIEW ratelimit_stats AS %s LIMIT ALL'', rtrim(pg_get_viewdef(''ratelimit_stats''), '';'')); END $$',
     'view ratelimit_stats', 'view definition'),
    ('view options', 'ALTER VIEW ratelimit_status SET (security_barrier = true)', 'view ratelimit_status', 'options'),
    ('type attribute', 'ALTER TYPE ratelimit_result ADD ATTRIBUTE planted integer', 'column planted of composite type ratelimit_result', 'type'),
    ('policy', 'CREATE POLICY planted ON ratelimit_state USING (true)', 'policy planted on table ratelimit_state', 'definition'),
    ('row security', 'ALTER TABLE ratelimit_state ENABLE ROW LEVEL SECURITY', 'table ratelimit_state', 'row security'),
    ('replica identity', 'ALTER TABLE ratelimit_state REPLICA IDENTITY DEFAULT', 'table ratelimit_state', 'replica identity'),
    ('table options', 'ALTER TABLE ratelimit_state SET (fillfactor = 50)', 'table ratelimit_state', 'options'),
    ('member added', 'CREATE SEQUENCE planted; ALTER EXTENSION ratelimit ADD SEQUENCE planted', 'sequence planted', 'member of the extension'),
    ('sequence', 'CREATE SEQUENCE planted; ALTER EXTENSION ratelimit ADD SEQUENCE planted; ALTER SEQUENCE planted INCREMENT 2',
     'sequence planted', 'sequence'),
    ('member dropped', 'ALTER EXTENSION ratelimit DROP FUNCTION ratelimit_cleanup()', 'function ratelimit_cleanup()', 'member of the extension'),
    ('dependency', 'ALTER FUNCTION ratelimit_cleanup() DEPENDS ON EXTENSION plpgsql', 'function ratelimit_cleanup()', 'depends on'),
    ('dump condition', 'UPDATE pg_extension SET extcondition = array_fill(''WHERE true''::text, ARRAY[cardinality(extconfig)]) WHERE extname = ''ratelimit''',
     'extension ratelimit', 'configuration conditions'),
    ('dumped tables', 'UPDATE pg_extension SET extconfig = (SELECT array_agg(extconfig[i] ORDER BY i DESC) FROM generate_subscripts(extconfig, 1) AS i) WHERE extname = ''ratelimit''',
     'extension ratelimit', 'configuration tables')
) AS p (plant, statement, object, property);
RESET ratelimit.now;
