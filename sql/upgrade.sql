-- ALTER EXTENSION ratelimit UPDATE from 0.1.0 to 0.2.0 to 0.3.0 to 0.4.0 to
-- the default version (through 0.5.0, 0.6.0, 0.7.0, 0.8.0, 0.9.0 and 0.10.0), and from 0.2.0
-- straight to it:
-- state and definitions survive, the new objects appear, and the result
-- matches a fresh install.
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
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
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
-- The upgraded schema matches a fresh install. (A SQL function's body is
-- parsed when called, so this listing does not depend on the extension.)
CREATE FUNCTION pg_temp.extension_objects() RETURNS SETOF text LANGUAGE sql AS $$
SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') -> ' || pg_get_function_result(p.oid)
       || ' secdef=' || p.prosecdef || ' config=' || coalesce(p.proconfig::text, '')
       || ' public=' || has_function_privilege('public', p.oid, 'EXECUTE')
       || ' commented=' || (obj_description(p.oid, 'pg_proc') IS NOT NULL)
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ratelimit'
UNION ALL
SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relname IN ('ratelimit_state', 'ratelimit_definition', 'ratelimit_status', 'ratelimit_override', 'ratelimit_stats')
  AND c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT c.relname || ' relkind=' || c.relkind::text || ' replident=' || c.relreplident::text || ' public_select=' || has_table_privilege('public', c.oid, 'SELECT')
       || ' commented=' || (obj_description(c.oid, 'pg_class') IS NOT NULL)
FROM pg_class c WHERE c.relname IN ('ratelimit_state', 'ratelimit_definition', 'ratelimit_status', 'ratelimit_override', 'ratelimit_stats')
  AND c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT i.indexrelid::regclass::text || ' ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid AND c.relname IN ('ratelimit_state', 'ratelimit_definition', 'ratelimit_override')
UNION ALL
SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text || ' commented=' || (obj_description(t.oid, 'pg_trigger') IS NOT NULL)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid AND c.relname IN ('ratelimit_state', 'ratelimit_definition', 'ratelimit_override')
WHERE NOT t.tgisinternal
UNION ALL
SELECT 'dumped ' || unnest(e.extconfig)::regclass::text FROM pg_extension e WHERE e.extname = 'ratelimit'
$$;
CREATE TEMP TABLE upgraded AS SELECT object FROM pg_temp.extension_objects() AS object;
SELECT object FROM upgraded ORDER BY 1;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
-- Both differences must be empty.
SELECT 'only upgraded' AS side, object FROM (SELECT object FROM upgraded EXCEPT SELECT pg_temp.extension_objects() AS object) d
UNION ALL
SELECT 'only fresh', object FROM (SELECT pg_temp.extension_objects() AS object EXCEPT SELECT object FROM upgraded) d;
-- A fresh 0.2.0 updated straight to the default version matches too.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.2.0';
ALTER EXTENSION ratelimit UPDATE;
SELECT 'only updated' AS side, object FROM (SELECT pg_temp.extension_objects() AS object EXCEPT SELECT object FROM upgraded) d
UNION ALL
SELECT 'only fresh', object FROM (SELECT object FROM upgraded EXCEPT SELECT pg_temp.extension_objects() AS object) d;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
RESET ratelimit.now;
