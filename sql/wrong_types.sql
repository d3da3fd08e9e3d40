-- Wrong types where a C function reads a row or an array (issue 37): a
-- function reads a datum only as the type it checked it to be. SQL itself
-- gives a function only values of its declared types, so the rows and
-- arrays here are the ones an owner's ALTER TYPE or a superuser's binary
-- cast (CREATE CAST ... WITHOUT FUNCTION) can make; each case runs in a
-- transaction that is rolled back. The router's own functions
-- (ratelimit_proxy_result and the routed calls) are tested as a hostile
-- caller in test/regress/router/sql/hostile_callers.sql; docs/security.md lists
-- every C function PUBLIC can execute and how it checks what it reads.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set cfg '{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 10}'

-- ratelimit_headers reads its result's five live columns by position among
-- the live ones: a column the owner dropped and added again (now after a
-- dropped one) is still read as itself.
BEGIN;
ALTER TYPE ratelimit_result DROP ATTRIBUTE remaining, ADD ATTRIBUTE remaining double precision;
ALTER TYPE ratelimit_result DROP ATTRIBUTE reset_after, ADD ATTRIBUTE reset_after double precision;
SELECT ratelimit_headers('wt-headers', ROW(false, 39.5, '2026-01-01 00:01:00+00', 8.6, 1235.5)::ratelimit_result,
                         :'cfg', 'k') ->> 'RateLimit' AS state;
ROLLBACK;
SELECT ratelimit_headers('wt-headers', ROW(false, 39.5, '2026-01-01 00:01:00+00', 8.6, 1235.5)::ratelimit_result,
                         :'cfg', 'k') ->> 'RateLimit' AS state_as_installed;

-- A column of another type is never read as the decision's: 42804.
BEGIN;
ALTER TYPE ratelimit_result ALTER ATTRIBUTE remaining TYPE text;
SELECT pg_temp.try(format('SELECT ratelimit_headers(%L, ROW(true, NULL, NULL, %L, 1)::ratelimit_result, %L)',
                          'wt-headers', 'x', :'cfg')) AS text_remaining;
ROLLBACK;
BEGIN;
ALTER TYPE ratelimit_result ADD ATTRIBUTE extra integer;
SELECT pg_temp.try(format('SELECT ratelimit_headers(%L, ROW(true, NULL, NULL, 5, 1, 7)::ratelimit_result, %L)',
                          'wt-headers', :'cfg')) AS six_columns;
ROLLBACK;

-- ratelimit_simulate reads its arrays' elements only as the declared
-- element type. SQL cannot relabel an array (PostgreSQL refuses binary
-- casts between array types), but a superuser's LANGUAGE internal function
-- can return one whose elements are not of its declared type (array_cat
-- keeps its inputs' element type): 42804, whatever the elements' size
-- (bigint: 8 bytes; interval: 16; text: shorter, which an 8-byte read
-- would overrun).
CREATE FUNCTION pg_temp.bigints_as_float8s(bigint[], bigint[]) RETURNS double precision[]
LANGUAGE internal STRICT AS 'array_cat';
CREATE FUNCTION pg_temp.intervals_as_instants(interval[], interval[]) RETURNS timestamptz[]
LANGUAGE internal STRICT AS 'array_cat';
CREATE FUNCTION pg_temp.texts_as_instants(text[], text[]) RETURNS timestamptz[]
LANGUAGE internal STRICT AS 'array_cat';
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, %L, pg_temp.bigints_as_float8s(%L, %L))', :'cfg',
                          '{2026-01-01 00:00:00+00, 2026-01-01 00:00:01+00}', '{1}', '{2}')) AS bigint_counts;
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, pg_temp.intervals_as_instants(%L, %L))', :'cfg',
                          '{1 day}', '{}')) AS interval_arrivals;
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, pg_temp.texts_as_instants(%L, %L), NULL, %L, %L)',
                          :'cfg', '{a}', '{}', 'wt-sim', 'k')) AS text_arrivals;

-- Arrays of the right type are read whatever their lower bound, and as a
-- domain over the array type; more than one dimension, a NULL element and
-- more than 100000 elements are refused.
CREATE DOMAIN pg_temp.arrival_list AS timestamptz[];
SELECT at, count, ok, remaining FROM ratelimit_simulate(:'cfg', '[0:1]={"2026-01-01 00:00:00+00","2026-01-01 00:00:01+00"}',
                                                        '[5:6]={1.4,2.6}');
SELECT count(*) AS arrivals FROM ratelimit_simulate(:'cfg', '{"2026-01-01 00:00:00+00"}'::pg_temp.arrival_list);
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, %L)', :'cfg',
                          '{{"2026-01-01 00:00:00+00"},{"2026-01-01 00:00:01+00"}}')) AS two_dimensions;
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, %L)', :'cfg', '{"2026-01-01 00:00:00+00",NULL}')) AS null_arrival;
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, (SELECT array_agg(%L::timestamptz) FROM generate_series(1, 100001)))',
                          :'cfg', '2026-01-01 00:00:00+00')) AS too_many;
