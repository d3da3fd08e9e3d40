-- A role with no privileges but USAGE on the server calls every C function
-- of ratelimit_proxy that PUBLIC may execute with what a hostile caller
-- would pass: rows of other column types, too few or too many columns,
-- dropped columns, domains over the right types, a temporary type
-- shadowing ratelimit_result, NULLs, arrays of other dimensions and lower
-- bounds, and a huge one. Each gets an answer or a clear error; none may
-- read a datum as a type it was not checked to be (issue 37: an integer
-- read as text by ratelimit_proxy_result made the router's server restart
-- every backend). docs/security.md lists these functions and what each
-- checks. The partitions' clocks are frozen at 2026-01-01 00:00:00+00.
\set cfg '{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 10}'
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rl_hostile') THEN
        CREATE ROLE rl_hostile;
    END IF;
END $$;
GRANT USAGE ON FOREIGN SERVER ratelimit TO rl_hostile;
SET ROLE rl_hostile;

-- ratelimit_proxy_result(record): every column checked before any is read.
-- The first is the crash of issue 37.
CREATE TEMP TABLE answers (label text, answer text);
INSERT INTO answers VALUES
    ('integer error_state', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, 12345, 'm'::text, NULL::text, NULL::text)$$),
    ('integer error_message', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, 'PT429'::text, 12345, NULL::text, NULL::text)$$),
    ('bigint error_detail', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, 'PT429'::text, 'm'::text, 12345::bigint, NULL::text)$$),
    ('float8 error_hint', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, 'PT429'::text, 'm'::text, NULL::text, 1.5::float8)$$),
    ('integer ok', $$ROW(1, 1::float8, now(), 1::float8, 1::float8, NULL::text, NULL::text, NULL::text, NULL::text)$$),
    ('text retry_at', $$ROW(true, 1::float8, 'x'::text, 1::float8, 1::float8, NULL::text, NULL::text, NULL::text, NULL::text)$$),
    ('numeric remaining', $$ROW(true, 1::float8, now(), 1::numeric, 1::float8, NULL::text, NULL::text, NULL::text, NULL::text)$$),
    ('eight columns', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, NULL::text, NULL::text, NULL::text)$$),
    ('ten columns', $$ROW(true, 1::float8, now(), 1::float8, 1::float8, NULL::text, NULL::text, NULL::text, NULL::text, 1)$$),
    ('one column', $$ROW(1)$$);
SELECT a.label, e.state, e.message FROM answers AS a, error_of(format('SELECT ratelimit_proxy_result(%s)', a.answer)) AS e;

-- A domain over a column's type, or a temporary row type named like
-- ratelimit_result whose columns are other types, is refused as well.
CREATE DOMAIN pg_temp.seconds AS double precision;
CREATE DOMAIN pg_temp.message AS text;
CREATE TYPE pg_temp.ratelimit_result AS (ok integer, retry_after text, retry_at text, remaining text, reset_after text,
                                         error_state integer, error_message integer, error_detail integer, error_hint integer);
SET search_path = pg_temp, public;
SELECT e.state, e.message
FROM (VALUES ($$ROW(true, 1::pg_temp.seconds, now(), 1::float8, 1::float8, NULL::text, NULL::text, NULL::text, NULL::text)$$),
             ($$ROW(true, 1::float8, now(), 1::float8, 1::float8, 'PT429'::pg_temp.message, 'm'::text, NULL::text, NULL::text)$$),
             ($$ROW(1, 'a', 'b', 'c', 'd', 1, 2, 3, 4)::ratelimit_result$$)) AS a(answer),
     error_of(format('SELECT public.ratelimit_proxy_result(%s)', a.answer)) AS e;
RESET search_path;

-- Rows of the right types: the result, or the error they carry (with a
-- valid SQLSTATE); a row type with dropped columns is read by its live
-- ones; NULL gives NULL.
CREATE TEMP TABLE answer_rows (ok boolean, gone integer, retry_after float8, retry_at timestamptz, remaining float8,
                               reset_after float8, error_state text, error_message text, error_detail text,
                               error_hint text);
ALTER TABLE answer_rows DROP COLUMN gone;
INSERT INTO answer_rows VALUES (true, NULL, NULL, 4.5, 0.25, NULL, NULL, NULL, NULL),
                               (false, NULL, NULL, 0, 0, 'PT429', 'refused', 'd', 'h'),
                               (false, NULL, NULL, 0, 0, 'zz', 'bad state', NULL, NULL);
SELECT r.* FROM answer_rows AS a, ratelimit_proxy_result(a) AS r WHERE a.error_state IS NULL;
SELECT e.* FROM answer_rows AS a, error_of(format('SELECT ratelimit_proxy_result(a) FROM answer_rows AS a WHERE a.error_state = %L',
                                                   a.error_state)) AS e
WHERE a.error_state IS NOT NULL;
SELECT ratelimit_proxy_result(NULL::record) IS NULL AS null_answer;

-- ratelimit_proxy_raise(text, text, text, text): any text; nothing to raise
-- for a NULL state.
SELECT count(*) AS nothing_raised FROM ratelimit_proxy_raise(NULL, 'm', 'd', 'h');
SELECT e.* FROM (VALUES ('PT429'), ('pt429'), (repeat('9', 6)), ('')) AS s(state),
     error_of(format('SELECT ratelimit_proxy_raise(%L, %L, NULL, NULL)', s.state, 'raised')) AS e;

-- The routed functions (ratelimit_proxy_route): the hash must not be NULL;
-- every other argument crosses as one node would read it, and a bad one
-- is the partition's error, returned as data. The temporary type named
-- ratelimit_result (above) is still there: this session's own SQL must
-- name public.ratelimit_result, the router's statements always do.
SELECT e.state, e.message
FROM error_of(format('SELECT ratelimit_proxy_limit(NULL, %L, %L, %L, 1, false, false, NULL)', 'rh', 'k', :'cfg')) AS e;
SELECT error_state, error_message FROM ratelimit_proxy_limit(1, NULL, 'k', :'cfg', 1, false, false, NULL);
SELECT error_state, error_message FROM ratelimit_proxy_limit(1, 'rh', 'k', :'cfg', 'NaN', false, false, NULL);
SELECT error_state, error_message FROM ratelimit_proxy_check(1, 'rh', 'k', :'cfg', NULL, false, false, 'bogus');
SELECT error_state, error_message
FROM ratelimit_proxy_headers(1, 'rh', ROW(NULL, NULL, NULL, NULL, NULL)::public.ratelimit_result, :'cfg', 'k');
SELECT error_state, error_message
FROM ratelimit_proxy_headers(1, 'rh', ROW(true, 'Infinity', 'infinity', 'NaN', 1)::public.ratelimit_result, :'cfg', 'k');
SELECT headers ->> 'RateLimit' AS state
FROM ratelimit_proxy_headers(1, 'rh', ROW(false, 1.5, '-infinity', 8.6, 2.5)::public.ratelimit_result, :'cfg', 'k');

-- ratelimit_proxy_simulate: arrays of two dimensions, with NULLs, past the
-- limit of 100000 elements, of other lower bounds, and through domains.
CREATE DOMAIN pg_temp.instants AS timestamptz[];
SELECT s.label, r.error_state, r.error_message, count(r) AS rows
FROM (VALUES ('two dimensions', '{{"2026-01-01 00:00:00+00"},{"2026-01-01 00:00:01+00"}}'::timestamptz[], NULL::float8[]),
             ('null arrival', '{"2026-01-01 00:00:00+00",NULL}', NULL),
             ('null count', '{"2026-01-01 00:00:00+00"}', '{NULL}'),
             ('counts of two dimensions', '{"2026-01-01 00:00:00+00"}', '{{1}}'),
             ('too many', (SELECT array_agg('2026-01-01 00:00:00+00'::timestamptz) FROM generate_series(1, 100001)), NULL),
             ('lower bounds', '[-3:-2]={"2026-01-01 00:00:00+00","2026-01-01 00:00:01+00"}', '[100:101]={1.5,2.5}'),
             ('empty', '{}', '{}')) AS s(label, arrivals, counts)
     LEFT JOIN LATERAL ratelimit_proxy_simulate(:'cfg', s.arrivals::pg_temp.instants, s.counts, NULL, NULL) AS r ON true
GROUP BY s.label, r.error_state, r.error_message ORDER BY s.label;

-- ratelimit_limit itself (ratelimit_proxy_route by name and key).
SELECT e.state, e.message FROM error_of(format('SELECT ratelimit_limit(NULL, %L, %L)', 'k', :'cfg')) AS e;
SELECT e.state, e.message FROM error_of(format('SELECT ratelimit_limit(%L, %L, %L, %s)', 'rh', 'k', :'cfg', '-1')) AS e;

-- What the caller may not do stays refused: the owner's functions.
SELECT e.state, e.message FROM error_of($$SELECT ratelimit_proxy_reset(1, 'rh', 'k')$$) AS e;

RESET ROLE;
-- The owner's ALTER TYPE of ratelimit_result to a column type that cannot
-- cross exactly: 42804 when the plan is made (was an XX000 elog), for a
-- result and for an argument.
BEGIN;
ALTER TYPE public.ratelimit_result ADD ATTRIBUTE z numeric;
SELECT e.state, e.message FROM error_of(format('SELECT * FROM ratelimit_limit(%L, %L, %L)', 'rh', 'shape', :'cfg')) AS e;
ROLLBACK;
BEGIN;
ALTER TYPE public.ratelimit_result ADD ATTRIBUTE z text;
SELECT e.state, e.message
FROM error_of(format('SELECT * FROM ratelimit_proxy_headers(1, %L, ROW(true, 1, now(), 1, 1, %L)::public.ratelimit_result, %L, %L)',
                     'rh', 'z', :'cfg', 'k')) AS e;
ROLLBACK;
-- The owner's ALTER TYPE of ratelimit_result (its columns moved, in a
-- transaction rolled back): each routed call reads the partition's row
-- into the type's columns as they are at that call (in order of its live
-- columns, as one node fills them: inside the transaction the partition's
-- remaining lands in reset_after), never by a shape a plan kept from
-- before (the row type's columns change without a pg_type invalidation).
SELECT * FROM ratelimit_limit('rh', 'shape', :'cfg', 1.4);
BEGIN;
ALTER TYPE public.ratelimit_result DROP ATTRIBUTE remaining, ADD ATTRIBUTE remaining double precision;
SELECT * FROM ratelimit_limit('rh', 'shape', :'cfg', 1.4);
ROLLBACK;
SELECT * FROM ratelimit_limit('rh', 'shape', :'cfg', 1.4);
SELECT count(*) AS limits_reset
FROM (SELECT DISTINCT name, key FROM ratelimit_status WHERE name = 'rh') AS s WHERE ratelimit_reset(s.name, s.key);
REVOKE USAGE ON FOREIGN SERVER ratelimit FROM rl_hostile;
DROP OWNED BY rl_hostile;
DROP ROLE rl_hostile;
