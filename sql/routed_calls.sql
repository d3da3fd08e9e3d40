-- The calls a ratelimit_proxy 0.7.0 router sends to a partition (0.8.0: all
-- of its routed calls, at the end):
-- ratelimit_proxy_limit, _check and _limit_all (0.8.0: _simulate) make the
-- call of ratelimit_limit, _check and _limit_all (_simulate) and return an error it raises as
-- data (error_state, error_message, error_detail, error_hint), the same
-- error, with nothing of the failed call kept; the router raises it.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '{"kind": "token bucket", "rate": 2, "period": "1 minute"}'
-- The error a statement raises, as a row (the same columns as the routed calls').
CREATE FUNCTION pg_temp.raised(statement text, OUT error_state text, OUT error_message text,
                               OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT;
    error_detail := NULLIF(error_detail, '');
    error_hint := NULLIF(error_hint, '');
END $$;

-- A grant and a refusal are ratelimit_limit's rows, with no error.
SELECT * FROM ratelimit_proxy_limit('routed', 'k', :'tb', 1, false, false, NULL);
SELECT * FROM ratelimit_proxy_limit('routed', 'k', :'tb', 2, false, false, NULL);
SELECT * FROM ratelimit_proxy_check('routed', 'k', :'tb', 1, false, false, NULL);
SELECT * FROM ratelimit_proxy_limit_all('[{"name": "routed", "key": "k", "config": {"kind": "token bucket", "rate": 2, "period": "1 minute"}}]', false, NULL);
SELECT value FROM ratelimit_value('routed', 'k', :'tb');

-- A refusal with throws => true: PT429 as data, the very error
-- ratelimit_limit raises; nothing taken, no error raised.
SELECT ok, error_state, error_message, error_detail, error_hint
FROM ratelimit_proxy_limit('routed', 'k', :'tb', 2, false, true, NULL);
SELECT (r.error_state, r.error_message, r.error_detail, r.error_hint)
       IS NOT DISTINCT FROM (e.error_state, e.error_message, e.error_detail, e.error_hint) AS same_error
FROM ratelimit_proxy_limit('routed', 'k', :'tb', 2, false, true, NULL) AS r,
     pg_temp.raised($$SELECT ratelimit_limit('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 2, throws => true)$$) AS e;
SELECT error_state, error_message FROM ratelimit_proxy_check('routed', 'k', :'tb', 2, false, true, NULL);
SELECT name, key, ok, error_state, error_message
FROM ratelimit_proxy_limit_all('[{"name": "routed", "key": "k", "count": 2, "config": {"kind": "token bucket", "rate": 2, "period": "1 minute"}}]', true, NULL);
SELECT value FROM ratelimit_value('routed', 'k', :'tb');

-- error_format: the router session's ratelimit.error_format, for this
-- statement's transaction only: postgrest gives PGRST with PostgREST's JSON,
-- as one node does; an invalid one is SET's 22023, as data.
SELECT error_state, error_message::jsonb ->> 'code' AS code, error_detail::jsonb ->> 'status' AS status
FROM ratelimit_proxy_limit('routed', 'k', :'tb', 2, false, true, 'postgrest');
SELECT (r.error_state, r.error_message, r.error_detail, r.error_hint)
       IS NOT DISTINCT FROM (e.error_state, e.error_message, e.error_detail, e.error_hint) AS same_error
FROM ratelimit_proxy_limit('routed', 'k', :'tb', 2, false, true, 'postgrest') AS r,
     pg_temp.raised($$SELECT set_config('ratelimit.error_format', 'postgrest', true), ratelimit_limit('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 2, throws => true)$$) AS e;
SHOW ratelimit.error_format;
SELECT error_state, error_message, error_hint FROM ratelimit_proxy_limit('routed', 'k', :'tb', 1, false, false, 'bogus');

-- Bad input: each error as ratelimit_limit raises it.
CREATE TEMP TABLE bad (what text, routed text, single text);
INSERT INTO bad VALUES
  ('null name', $$SELECT * FROM ratelimit_proxy_limit(NULL, 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}', 1, false, false, NULL)$$,
                $$SELECT ratelimit_limit(NULL, 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}')$$),
  ('null throws', $$SELECT * FROM ratelimit_proxy_check('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}', 1, false, NULL, NULL)$$,
                  $$SELECT ratelimit_check('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}', 1, false, NULL)$$),
  ('bad config', $$SELECT * FROM ratelimit_proxy_limit('routed', 'k', '{"kind": "token bucket", "rate": 0, "period": 60000}', 1, false, false, NULL)$$,
                 $$SELECT ratelimit_limit('routed', 'k', '{"kind": "token bucket", "rate": 0, "period": 60000}')$$),
  ('count never fits', $$SELECT * FROM ratelimit_proxy_limit('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}', 3, false, false, NULL)$$,
                       $$SELECT ratelimit_limit('routed', 'k', '{"kind": "token bucket", "rate": 2, "period": 60000}', 3)$$),
  ('not defined', $$SELECT * FROM ratelimit_proxy_limit('routed undefined', 'k', NULL, 1, false, false, NULL)$$,
                  $$SELECT ratelimit_limit('routed undefined', 'k')$$),
  ('limit_all not an array', $$SELECT * FROM ratelimit_proxy_limit_all('{"name": "routed"}', false, NULL)$$,
                             $$SELECT ratelimit_limit_all('{"name": "routed"}')$$),
  ('limit_all null limits', $$SELECT * FROM ratelimit_proxy_limit_all(NULL, false, NULL)$$,
                            $$SELECT ratelimit_limit_all(NULL)$$),
  ('simulate out of order', $$SELECT * FROM ratelimit_proxy_simulate('{"kind": "token bucket", "rate": 2, "period": 60000}', '{2026-01-02, 2026-01-01}', NULL, NULL, NULL)$$,
                            $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 60000}', '{2026-01-02, 2026-01-01}')$$),
  ('simulate bad config', $$SELECT * FROM ratelimit_proxy_simulate('{"kind": "token bucket", "rate": 0, "period": 60000}', '{2026-01-01}', NULL, NULL, NULL)$$,
                          $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 0, "period": 60000}', '{2026-01-01}')$$),
  ('simulate null arrivals', $$SELECT * FROM ratelimit_proxy_simulate('{"kind": "token bucket", "rate": 2, "period": 60000}', NULL, NULL, NULL, NULL)$$,
                             $$SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 60000}', NULL)$$);
CREATE FUNCTION pg_temp.answered(statement text, OUT error_state text, OUT error_message text,
                                 OUT error_detail text, OUT error_hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT error_state, error_message, error_detail, error_hint FROM (%s) AS r', statement)
        INTO error_state, error_message, error_detail, error_hint;
END $$;
SELECT b.what, r.error_state, r.error_message,
       (r.error_state, r.error_message, r.error_detail, r.error_hint)
       IS NOT DISTINCT FROM (e.error_state, e.error_message, e.error_detail, e.error_hint) AS same_error
FROM bad AS b, pg_temp.answered(b.routed) AS r, pg_temp.raised(b.single) AS e ORDER BY b.what;

-- ratelimit_proxy_simulate: ratelimit_simulate's rows, with no error;
-- none for no arrivals.
SELECT * FROM ratelimit_proxy_simulate(:'tb', '{2026-01-01, 2026-01-01, 2026-01-01, 2026-01-01 00:00:30}', '{1, 1, 1, 1}', 'routed', 'k');
SELECT (SELECT array_agg(ROW(at, count, ok, remaining, retry_after)::text) FROM ratelimit_proxy_simulate(:'tb', '{2026-01-01, 2026-01-01, 2026-01-01}', NULL, NULL, NULL))
     = (SELECT array_agg(s::text) FROM ratelimit_simulate(:'tb', '{2026-01-01, 2026-01-01, 2026-01-01}') AS s) AS same_rows;
SELECT count(*) FROM ratelimit_proxy_simulate(:'tb', '{}', NULL, NULL, NULL);

-- A read-only transaction: ratelimit_limit's 25006, as data; the caller's
-- transaction goes on.
BEGIN READ ONLY;
SELECT error_state, error_message FROM ratelimit_proxy_limit('routed', 'k2', :'tb', 1, false, false, NULL);
SELECT 'still usable' AS transaction;
COMMIT;

-- A call that errors leaves nothing: no row for a key first seen in it.
SELECT error_state FROM ratelimit_proxy_limit('routed', 'fresh', :'tb', 3, false, false, NULL);
SELECT count(*) AS rows_of_fresh FROM ratelimit_state WHERE name = 'routed' AND key = 'fresh';
-- A grant is the caller's transaction's, as ratelimit_limit's: its rollback
-- gives the token back.
BEGIN;
SELECT ok, remaining, error_state FROM ratelimit_proxy_limit('routed', 'tx', :'tb', 1, false, false, NULL);
ROLLBACK;
SELECT value FROM ratelimit_value('routed', 'tx', :'tb');

-- 0.8.0: every other call the router sends returns its error as data too,
-- the error the function of the same name raises, and nothing of it kept.
CREATE TEMP TABLE bad_other (what text, routed text, single text);
INSERT INTO bad_other VALUES
  ('value bad config', $$SELECT * FROM ratelimit_proxy_value('routed', 'k', '{"kind": "token bucket", "rate": 0, "period": 60000}')$$,
                       $$SELECT ratelimit_value('routed', 'k', '{"kind": "token bucket", "rate": 0, "period": 60000}')$$),
  ('value not defined', $$SELECT * FROM ratelimit_proxy_value('routed undefined', 'k', NULL)$$,
                        $$SELECT ratelimit_value('routed undefined', 'k')$$),
  ('reset null name', $$SELECT * FROM ratelimit_proxy_reset(NULL, 'k')$$, $$SELECT ratelimit_reset(NULL, 'k')$$),
  ('refund negative count', $$SELECT * FROM ratelimit_proxy_refund('routed', 'k', -1, '{"kind": "token bucket", "rate": 2, "period": 60000}')$$,
                            $$SELECT ratelimit_refund('routed', 'k', -1, '{"kind": "token bucket", "rate": 2, "period": 60000}')$$),
  ('headers not defined', $$SELECT * FROM ratelimit_proxy_headers('routed undefined', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, NULL, 'k')$$,
                          $$SELECT ratelimit_headers('routed undefined', ROW(true, NULL, NULL, 1, 0)::ratelimit_result, NULL, 'k')$$),
  ('override bad config', $$SELECT * FROM ratelimit_proxy_override('routed', 'k', '{"kind": "token bucket", "rate": -1, "period": 60000}')$$,
                          $$SELECT ratelimit_override('routed', 'k', '{"kind": "token bucket", "rate": -1, "period": 60000}')$$),
  ('unoverride null key', $$SELECT * FROM ratelimit_proxy_unoverride('routed', NULL)$$, $$SELECT ratelimit_unoverride('routed', NULL)$$),
  ('define bad config', $$SELECT * FROM ratelimit_proxy_define('routed def', '{"kind": "token bucket", "rate": 1, "peroid": 60000}')$$,
                        $$SELECT ratelimit_define('routed def', '{"kind": "token bucket", "rate": 1, "peroid": 60000}')$$),
  ('undefine null name', $$SELECT * FROM ratelimit_proxy_undefine(NULL)$$, $$SELECT ratelimit_undefine(NULL)$$);
SELECT b.what, r.error_state, r.error_message,
       (r.error_state, r.error_message, r.error_detail, r.error_hint)
       IS NOT DISTINCT FROM (e.error_state, e.error_message, e.error_detail, e.error_hint) AS same_error
FROM bad_other AS b, pg_temp.answered(b.routed) AS r, pg_temp.raised(b.single) AS e ORDER BY b.what;
-- Their answers when nothing fails: the function's, with NULL error columns.
SELECT * FROM ratelimit_proxy_define('routed def', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}');
SELECT * FROM ratelimit_proxy_override('routed def', 'vip', '{"kind": "token bucket", "rate": 9, "period": "1 minute"}');
SELECT ok, remaining FROM ratelimit_limit('routed def', 'vip');
SELECT * FROM ratelimit_proxy_value('routed def', 'vip', NULL);
SELECT ok, remaining, error_state FROM ratelimit_proxy_refund('routed def', 'vip', 1, NULL);
SELECT headers ->> 'RateLimit-Policy' AS policy, error_state
FROM ratelimit_proxy_headers('routed def', ROW(true, NULL, NULL, 9, 0)::ratelimit_result, NULL, 'vip');
SELECT * FROM ratelimit_proxy_unoverride('routed def', 'vip');
SELECT * FROM ratelimit_proxy_reset('routed def', 'vip');
SELECT deleted >= 0 AS counted, error_state FROM ratelimit_proxy_cleanup();
SELECT * FROM ratelimit_proxy_stats_reset();
SELECT * FROM ratelimit_proxy_undefine('routed def');
-- A call that errors leaves nothing: the bad definition was not stored.
SELECT count(*) AS bad_definitions FROM ratelimit_definition WHERE name = 'routed def';
-- PUBLIC may call them when it may call the functions they run.
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute, p.prosecdef
FROM pg_proc AS p WHERE p.proname LIKE 'ratelimit\_proxy\_%' ORDER BY 1;

-- The router's side (ratelimit_proxy 0.8.0 loads these from this library):
-- ratelimit_proxy_result returns a routed call's row without its error
-- columns, or raises the error they carry, as the partition raised it;
-- ratelimit_proxy_raise raises one (nothing when state is NULL).
CREATE FUNCTION pg_temp.result_of(answer record) RETURNS ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_result' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.raise(state text, message text, detail text, hint text) RETURNS void
AS '$libdir/ratelimit', 'ratelimit_proxy_raise' LANGUAGE C;
SELECT * FROM pg_temp.result_of(ratelimit_proxy_limit('routed', 'res', :'tb', 1, false, false, NULL));
SELECT (r.error_state, r.error_message, r.error_detail, r.error_hint)
       IS NOT DISTINCT FROM (e.error_state, e.error_message, e.error_detail, e.error_hint) AS same_error
FROM pg_temp.raised($$SELECT pg_temp.result_of(ratelimit_proxy_limit('routed', 'res', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 2, false, true, NULL))$$) AS r,
     pg_temp.raised($$SELECT ratelimit_limit('routed', 'res', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 2, throws => true)$$) AS e;
SELECT * FROM pg_temp.raised($$SELECT pg_temp.result_of(ratelimit_proxy_limit('routed', 'res', '{"kind": "token bucket", "rate": 0, "period": 60000}', 1, false, false, NULL))$$);
SELECT pg_temp.raise(NULL, NULL, NULL, NULL) AS nothing_raised;
SELECT * FROM pg_temp.raised($$SELECT pg_temp.raise('PT429', 'm', NULL, 'h')$$);
SELECT * FROM pg_temp.raised($$SELECT pg_temp.raise('22023', 'm', 'd', NULL)$$);
-- Not an answer it knows: an invalid SQLSTATE, a row of other columns.
SELECT error_state, error_message FROM pg_temp.raised($$SELECT pg_temp.raise('2202', 'm', NULL, NULL)$$);
SELECT error_state, error_message FROM pg_temp.raised($$SELECT pg_temp.raise('pt429', 'm', NULL, NULL)$$);
SELECT error_state, error_message FROM pg_temp.raised($$SELECT pg_temp.result_of(ROW(true, 1, 2))$$);
SELECT error_state, error_message
FROM pg_temp.raised($$SELECT pg_temp.result_of(ROW(1, NULL::float8, NULL::timestamptz, 1::float8, 0::float8, NULL::text, NULL::text, NULL::text, NULL::text))$$);
-- Every column is checked before any is read, the error columns too (an
-- integer error_state was read as text: a SIGSEGV, issue 37).
SELECT error_state, error_message
FROM pg_temp.raised($$SELECT pg_temp.result_of(ROW(true, 1::float8, now(), 1::float8, 1::float8, 12345, 'm'::text, NULL::text, NULL::text))$$);
SELECT error_state, error_message
FROM pg_temp.raised($$SELECT pg_temp.result_of(ROW(true, 1::float8, now(), 1::float8, 1::float8, 'PT429'::text, 'm'::text, 7, NULL::text))$$);
-- The partition's rows are checked against their declared types before
-- anything is stored in them: after an owner's ALTER TYPE of
-- ratelimit_proxy_answer or ratelimit_proxy_entry a call is 42804 (ok
-- changed to text made the boolean a pointer: a SIGSEGV; only the number
-- of columns was checked), dropped columns are skipped (one added and
-- dropped again made every call fail).
BEGIN;
ALTER TYPE ratelimit_proxy_answer ALTER ATTRIBUTE ok TYPE text;
ALTER TYPE ratelimit_proxy_entry ALTER ATTRIBUTE ok TYPE text;
SELECT error_state, error_message, error_detail
FROM pg_temp.raised($$SELECT ratelimit_proxy_limit('routed', 'shape', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 1, false, false, NULL)$$);
SELECT error_state, error_message
FROM pg_temp.raised($$SELECT ratelimit_proxy_check('routed', 'shape', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 1, false, false, NULL)$$);
SELECT error_state, error_message, error_detail
FROM pg_temp.raised($$SELECT * FROM ratelimit_proxy_limit_all('[{"name": "routed", "key": "shape", "config": {"kind": "token bucket", "rate": 2, "period": "1 minute"}}]', false, NULL)$$);
ROLLBACK;
BEGIN;
ALTER TYPE ratelimit_proxy_answer ADD ATTRIBUTE extra integer;
SELECT error_state, error_message
FROM pg_temp.raised($$SELECT ratelimit_proxy_limit('routed', 'shape', '{"kind": "token bucket", "rate": 2, "period": "1 minute"}', 1, false, false, NULL)$$);
ALTER TYPE ratelimit_proxy_answer DROP ATTRIBUTE extra;
ALTER TYPE ratelimit_proxy_entry DROP ATTRIBUTE error_hint, ADD ATTRIBUTE error_hint text;
SELECT * FROM ratelimit_proxy_limit('routed', 'shape', :'tb', 1, false, false, NULL);
SELECT * FROM ratelimit_proxy_limit_all('[{"name": "routed", "key": "shape", "config": {"kind": "token bucket", "rate": 2, "period": "1 minute"}}]', false, NULL);
ROLLBACK;
DELETE FROM ratelimit_state WHERE name = 'routed';
RESET ratelimit.now;
