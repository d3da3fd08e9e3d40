-- ratelimit.error_format = postgrest through the router: set in the router
-- session (SET, SET LOCAL, set_config in a db-pre-request hook, or a role
-- setting, as PostgREST applies them), a refusal with throws => true raises
-- SQLSTATE PGRST whose message and detail are PostgREST's JSON, the same
-- error one node raises. The partitions' clocks are frozen at 2026-01-01
-- 00:00:00+00; the router database does not load the ratelimit library, so
-- the setting is a placeholder there.
\set cfg '{"kind": "token bucket", "rate": 2, "period": "1 minute"}'
SELECT ok AS emptied FROM ratelimit_limit('pgrst', 'u1', :'cfg', 2);

-- The same refusal on the key's partition, called there directly
-- (error_of of test/regress/router/api.sql, on the partition).
CREATE FUNCTION partition_error_of(name text, key text, statement text, error_format text)
RETURNS TABLE (state text, message text, detail text, hint text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ratelimit_hash(name, key);
    SELECT * FROM public.error_of(statement, error_format);
$$;
CREATE TABLE one_node AS
SELECT f.format, e.* FROM unnest(ARRAY['plain', 'postgrest']) AS f(format),
     LATERAL partition_error_of('pgrst', 'u1', format($$SELECT ratelimit_limit('pgrst', 'u1', %L, throws => true)$$, :'cfg'), f.format) AS e;
SELECT format, state FROM one_node ORDER BY format;
-- A PGRST error parsed as PostgREST parses it.
CREATE FUNCTION pg_temp.parsed(state text, message text, detail text)
RETURNS TABLE (state text, code text, message text, details jsonb, hint text, status text, headers jsonb)
LANGUAGE sql AS $$
    SELECT state, message::jsonb ->> 'code', message::jsonb ->> 'message', (message::jsonb ->> 'details')::jsonb,
           message::jsonb ->> 'hint', detail::jsonb ->> 'status', detail::jsonb -> 'headers'
$$;
\set call 'SELECT ratelimit_limit(''pgrst'', ''u1'', ''{"kind": "token bucket", "rate": 2, "period": "1 minute"}'', throws => true)'

-- Without a setting: PT429, as the partition raises it (detail JSON, no prefix).
SELECT e.state, e.message, e.detail::jsonb, e.hint, (e.state, e.message, e.detail, e.hint) = (o.state, o.message, o.detail, o.hint) AS same_as_one_node
FROM error_of(:'call') AS e, one_node AS o WHERE o.format = 'plain';

-- SET ratelimit.error_format = postgrest in the router session.
SET ratelimit.error_format = postgrest;
CREATE TABLE routed AS SELECT 'SET' AS how, e.* FROM error_of(:'call') AS e;
SELECT p.* FROM routed AS r, pg_temp.parsed(r.state, r.message, r.detail) AS p;
SELECT (r.state, r.message, r.detail, r.hint) = (o.state, o.message, o.detail, o.hint) AS same_as_one_node
FROM routed AS r, one_node AS o WHERE o.format = 'postgrest';
-- ratelimit_check and ratelimit_limit_all refuse the same way; a grant or
-- throws => false raises nothing.
SELECT state, message::jsonb ->> 'code' AS code, detail::jsonb ->> 'status' AS status
FROM error_of($$SELECT ratelimit_check('pgrst', 'u1', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', throws => true)$$);
SELECT state, message::jsonb ->> 'code' AS code, detail::jsonb ->> 'status' AS status
FROM error_of($$SELECT ratelimit_limit_all('[{"name": "pgrst", "key": "u1", "config": {"kind": "token bucket", "rate": 2, "period": "1 minute"}}]', throws => true)$$);
SELECT ok, retry_after FROM ratelimit_limit('pgrst', 'u1', :'cfg');
SELECT state FROM error_of($$SELECT ratelimit_limit('pgrst', 'u2', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', throws => true)$$);
-- Other errors come as the partition raised them too.
SELECT state, message, hint FROM error_of($$SELECT ratelimit_limit('pgrst', 'u1', '{"kind": "token bucket", "rate": 0, "period": 1000}', throws => true)$$);
RESET ratelimit.error_format;

-- SET LOCAL: that transaction only.
BEGIN;
SET LOCAL ratelimit.error_format = postgrest;
INSERT INTO routed SELECT 'SET LOCAL', e.* FROM error_of(:'call') AS e;
COMMIT;
SELECT state FROM error_of(:'call');
-- A db-pre-request hook as docs/integrations.md's: set_config(..., true), then limit_all.
CREATE FUNCTION pg_temp.limit_request(user_id text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('ratelimit.error_format', 'postgrest', true);
    PERFORM ratelimit_limit_all(jsonb_build_array(jsonb_build_object('name', 'pgrst', 'key', user_id,
        'config', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}'::jsonb)), throws => true);
END $$;
BEGIN;
INSERT INTO routed SELECT 'hook', e.* FROM error_of($$SELECT pg_temp.limit_request('u1')$$) AS e;
COMMIT;
SELECT state FROM error_of(:'call');

-- A role setting (ALTER ROLE ... SET), applied when the role logs in.
CREATE ROLE regress_rl_pgrst LOGIN;
GRANT USAGE ON FOREIGN SERVER ratelimit TO regress_rl_pgrst;
ALTER ROLE regress_rl_pgrst SET ratelimit.error_format = postgrest;
SELECT current_user AS tester \gset
CREATE TABLE role_errors AS SELECT * FROM error_of('SELECT 1') WITH NO DATA;
GRANT INSERT ON role_errors TO regress_rl_pgrst;
\c - regress_rl_pgrst
SHOW ratelimit.error_format;
INSERT INTO role_errors SELECT * FROM error_of('SELECT ratelimit_limit(''pgrst'', ''u1'', ''{"kind": "token bucket", "rate": 2, "period": "1 minute"}'', throws => true)');
\c - :tester
INSERT INTO routed SELECT 'role setting', * FROM role_errors;

-- Every way: the same PGRST error as one node's, message and detail JSON.
SELECT r.how, r.state, (r.state, r.message, r.detail, r.hint) = (o.state, o.message, o.detail, o.hint) AS same_as_one_node,
       r.message::jsonb ->> 'code' AS code, r.detail::jsonb -> 'headers' ->> 'Retry-After' AS retry_after
FROM routed AS r, one_node AS o WHERE o.format = 'postgrest' ORDER BY r.how;

DROP TABLE role_errors, routed, one_node;
REVOKE USAGE ON FOREIGN SERVER ratelimit FROM regress_rl_pgrst;
DROP ROLE regress_rl_pgrst;
DROP FUNCTION partition_error_of(text, text, text, text);
