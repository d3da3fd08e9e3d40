-- Answers the documentation promises, where a caller, a config change or cleanup
-- could once make them differ: reservations bounded on owners' limits, one
-- config per limit in limit_all, shadow mode never throwing for a count,
-- cleanup never changing an answer, the override precedence, and error
-- messages cut at a character boundary.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
CREATE ROLE exact_app;

-- 1. No caller can lock out a defined limit by reserving: a definition
-- without maxReserved lets a call go at most `rate` below zero (one
-- period's refill), so a huge reservation can never succeed (22023,
-- nothing written) and repeated ones stop one period deep.
SELECT ratelimit_define('lockout', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SET ROLE exact_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('lockout', 'alice', count => 8.7e6, reserve => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('lockout', NULL, count => 8.7e6, reserve => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('lockout', 'alice', count => 8.7e6, reserve => true) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "lockout", "key": "alice", "count": 8.7e6, "reserve": true}]') $$);
SELECT g, ok, retry_after, retry_at
FROM generate_series(1, 4) g, ratelimit_limit('lockout', 'alice', count => g * 0 + 10, reserve => true);
SELECT value FROM ratelimit_value('lockout', 'alice');
RESET ROLE;
-- A large capacity does not deepen the bound: 1 per hour, capacity 100,
-- may be reserved 1 below zero (not 100 hours of lockout).
SELECT ratelimit_define('lockout-burst', '{"kind": "token bucket", "rate": 1, "period": "1 hour", "capacity": 100}');
SET ROLE exact_app;
SELECT pg_temp.try($$ SELECT ratelimit_limit('lockout-burst', 'victim', count => 200, reserve => true) $$);
SELECT ok, retry_after FROM ratelimit_limit('lockout-burst', 'victim', count => 101, reserve => true);
RESET ROLE;
-- A deficit a caller reserved under an inline config before the owner
-- defined the name is read within the owner's bound once it is defined.
SELECT ok FROM ratelimit_limit('lockout-early', 'alice',
  '{"kind": "token bucket", "rate": 10, "period": "1 hour"}', count => 876000, reserve => true);
SELECT value FROM ratelimit_value('lockout-early', 'alice', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SELECT ratelimit_define('lockout-early', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SELECT value FROM ratelimit_value('lockout-early', 'alice');
-- The same limit defined with an explicit maxReserved keeps it.
SELECT ratelimit_define('lockout-deep', '{"kind": "token bucket", "rate": 10, "period": "1 hour", "maxReserved": 100}');
SELECT ok, retry_after FROM ratelimit_limit('lockout-deep', 'alice', count => 110, reserve => true);
-- A name without a definition is the caller's own: its inline config
-- reserves as deep as it says (up to the 100-year horizon), as before.
SELECT ok, retry_at FROM ratelimit_limit('inline-deep', 'alice',
  '{"kind": "token bucket", "rate": 10, "period": "1 hour"}', count => 1000, reserve => true);

-- 2. ratelimit_limit_all: one limit has one config in a call. The same
-- (name, key) under two configs is 22023 and nothing is consumed; under
-- the same config (written differently) it is one limit taken twice.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[
  {"name": "dup", "key": "k", "config": {"kind": "token bucket", "rate": 5, "period": 60000}},
  {"name": "dup", "key": "k", "config": {"kind": "fixed window", "rate": 5, "period": 60000}}]') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[
  {"name": "other", "key": "k", "config": {"kind": "token bucket", "rate": 5, "period": 60000}},
  {"name": "dup", "key": "k", "config": {"kind": "token bucket", "rate": 5, "period": 60000}},
  {"name": "dup", "key": "k", "config": {"kind": "token bucket", "rate": 6, "period": 60000}}]') $$);
SELECT count(*) FROM ratelimit_state WHERE name IN ('dup', 'other');
SELECT name, key, ok, remaining FROM ratelimit_limit_all('[
  {"name": "dup", "key": "k", "config": {"kind": "token bucket", "rate": 5, "period": 60000}},
  {"name": "dup", "key": "k", "config": {"kind": "token bucket", "rate": 5, "period": "1 minute"}},
  {"name": "dup", "key": "j", "config": {"kind": "fixed window", "rate": 5, "period": 60000}}]');

-- 3. Shadow mode never throws for a count: one above capacity is a shadow
-- refusal (answered ok), in limit, check and limit_all, sharded and
-- sliding windows too. Input that is wrong in any mode still is an error.
SELECT ok, retry_after, remaining FROM ratelimit_limit('shadow-big', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute", "shadow": true}', count => 1500);
SELECT ok, retry_after, remaining FROM ratelimit_check('shadow-big', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute", "shadow": true}', count => 1500);
-- (A reservation that can be granted is one: shadow mode consumes grants.)
SELECT ok, remaining FROM ratelimit_limit('shadow-big', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute", "shadow": true}', count => 5000, reserve => true);
SELECT ok, remaining FROM ratelimit_limit('shadow-big-sharded', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute", "shards": 4, "shadow": true}', count => 600);
SELECT ok, remaining FROM ratelimit_limit('shadow-big-sliding', 'k',
  '{"kind": "sliding window", "rate": 10, "period": "1 minute", "shadow": true}', count => 11);
SELECT name, ok, retry_after FROM ratelimit_limit_all('[
  {"name": "shadow-big", "key": "k", "count": 1500,
   "config": {"kind": "token bucket", "rate": 1000, "period": "1 minute", "shadow": true}},
  {"name": "enforced", "key": "k", "config": {"kind": "token bucket", "rate": 10, "period": "1 minute"}}]');
SELECT count(*) FROM ratelimit_state WHERE name LIKE 'shadow-big%';
SELECT pg_temp.try($$ SELECT ratelimit_limit('shadow-big', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute"}', count => 1500) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('shadow-big', 'k',
  '{"kind": "token bucket", "rate": 1000, "period": "1 minute", "shadow": true}', count => -1) $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('shadow-big-sliding', 'k',
  '{"kind": "sliding window", "rate": 10, "period": "1 minute", "shadow": true}', count => 11, reserve => true) $$);

-- 4. Cleanup never changes an answer, even after a config change (a row
-- past its idle_at answers as no row, so deleting it changes nothing).
-- Two keys full at 50; cleanup deletes one key's row; the capacity goes
-- to 500: both keys have 500.
SELECT ratelimit_define('cl-cap', '{"kind": "token bucket", "rate": 50, "period": "1 hour"}');
SELECT ok FROM ratelimit_limit('cl-cap', 'a', count => 50);
SET ratelimit.now = '2026-03-01 12:30:00+00';
SELECT ok FROM ratelimit_limit('cl-cap', 'b', count => 50);
SET ratelimit.now = '2026-03-01 13:00:00+00';
SELECT ratelimit_cleanup() > 0 AS cleaned;
SELECT key FROM ratelimit_state WHERE name = 'cl-cap' ORDER BY key;
SET ratelimit.now = '2026-03-01 14:00:00+00';
SELECT ratelimit_define('cl-cap', '{"kind": "token bucket", "rate": 50, "period": "1 hour", "capacity": 500}');
SELECT (SELECT value FROM ratelimit_value('cl-cap', 'a')) AS a, (SELECT value FROM ratelimit_value('cl-cap', 'b')) AS b;
-- With a frozen clock: 90 of 100 granted, a stricter override (10),
-- cleanup (or not), the override removed, then more: the same total either way.
SELECT ratelimit_define('cl-ov', '{"kind": "token bucket", "rate": 100, "period": "1 hour"}');
SELECT key, count(*) FILTER (WHERE ok) AS granted
FROM (VALUES ('cleaned'), ('kept')) k(key), generate_series(1, 90) g, ratelimit_limit('cl-ov', k.key, count => g * 0 + 1)
GROUP BY key ORDER BY key;
SELECT ratelimit_override('cl-ov', 'cleaned', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SELECT ratelimit_override('cl-ov', 'kept', '{"kind": "token bucket", "rate": 10, "period": "1 hour"}');
SELECT ratelimit_cleanup() > 0 AS cleaned;
SELECT ratelimit_unoverride('cl-ov', 'cleaned'), ratelimit_unoverride('cl-ov', 'kept');
SELECT key, count(*) FILTER (WHERE ok) AS granted_after
FROM (VALUES ('cleaned'), ('kept')) k(key), generate_series(1, 200) g, ratelimit_limit('cl-ov', k.key, count => g * 0 + 1)
GROUP BY key ORDER BY key;

-- 5. Which config applies: the key's override, else inline, else the
-- definition. An inline config equal to the key's override (the one
-- applied) is accepted, as is the definition's; any other is 22023.
SELECT ratelimit_define('prec', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');
SELECT ratelimit_override('prec', 'vip', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}');
SELECT remaining FROM ratelimit_limit('prec', 'vip', '{"kind": "token bucket", "rate": 100, "period": 60000}');
SELECT remaining FROM ratelimit_limit('prec', 'vip', '{"kind": "token bucket", "rate": 10, "period": 60000}');
SELECT remaining FROM ratelimit_limit('prec', 'vip');
SELECT pg_temp.try($$ SELECT ratelimit_limit('prec', 'vip', '{"kind": "token bucket", "rate": 50, "period": 60000}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('prec', 'plain', '{"kind": "token bucket", "rate": 100, "period": 60000}') $$);
SELECT remaining FROM ratelimit_limit('prec', 'plain', '{"kind": "token bucket", "rate": 10, "period": 60000}');
SELECT name, key, remaining FROM ratelimit_limit_all('[{"name": "prec", "key": "vip",
  "config": {"kind": "token bucket", "rate": 100, "period": 60000}}]');

-- 6. An error message quoting a caller's string cuts it at 64 bytes on a
-- character boundary: valid in the database encoding, so any client
-- encoding can receive it (22023, never 22021).
SELECT current_database() AS regress_db \gset
CREATE DATABASE ratelimit_utf8 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
\c ratelimit_utf8
CREATE EXTENSION ratelimit;
CREATE FUNCTION pg_temp.message_of(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLERRM;
END $$;
-- 'a' and 40 two-byte characters: 64 bytes would end inside one.
SELECT octet_length(m) AS bytes, length(convert(convert_to(m, 'UTF8'), 'UTF8', 'LATIN1')) AS latin1_chars
FROM pg_temp.message_of($$ SELECT ratelimit_limit('x', 'k', ('{"a' || repeat(chr(233), 40) || '": 1}')::jsonb) $$) m;
SELECT octet_length(m) AS bytes
FROM pg_temp.message_of($$ SELECT * FROM ratelimit_limit_all(('[{"name": "x", "a' || repeat(chr(233), 40) || '": 1}]')::jsonb) $$) m;
SELECT octet_length(m) AS bytes
FROM pg_temp.message_of($$ SELECT ratelimit_limit('x', 'k', ('{"kind": "a' || repeat(chr(233), 40) || '", "rate": 1, "period": 1}')::jsonb) $$) m;
SELECT ratelimit_define('a' || repeat(chr(233), 40), '{"kind": "token bucket", "rate": 1, "period": 1000}');
SELECT octet_length(m) AS bytes
FROM pg_temp.message_of($$ SELECT ratelimit_limit('a' || repeat(chr(233), 40), 'k', '{"kind": "token bucket", "rate": 2, "period": 1000}') $$) m;
SET client_encoding = 'LATIN1';
\set VERBOSITY sqlstate
SELECT ratelimit_limit('x', 'k', ('{"a' || repeat(chr(233), 40) || '": 1}')::jsonb);
\set VERBOSITY default
RESET client_encoding;
\c :regress_db
DROP DATABASE ratelimit_utf8;

SELECT ratelimit_unoverride('prec', 'vip');

-- 7. A zone abbreviation in "start" means what the default set says in
-- every session, whatever timezone_abbreviations the session loaded: all
-- sessions align the limit's windows alike.
SET ratelimit.now = '2026-03-01 14:00:00+00';
SELECT ratelimit_define('tz-abbrev', '{"kind": "fixed window", "rate": 5, "period": 7000, "start": "2025-01-01 00:00 EST"}');
SELECT ts AS owner_window FROM ratelimit_value('tz-abbrev', 'x') \gset
\c :regress_db
SET ratelimit.now = '2026-03-01 14:00:00+00';
SET timezone_abbreviations = 'Australia';
SELECT ts = :'owner_window' AS same_window FROM ratelimit_value('tz-abbrev', 'x');
RESET timezone_abbreviations;
SELECT ratelimit_undefine(name) FROM (VALUES ('lockout'), ('lockout-deep'), ('lockout-burst'), ('lockout-early'), ('tz-abbrev'), ('cl-cap'), ('cl-ov'), ('prec')) n(name);
DROP ROLE exact_app;

-- An owner's ALTER TYPE of ratelimit_result: a call answers 42804 instead of
-- forming a row of another shape (nothing is consumed); a dropped column is
-- no obstacle.
\i test/sql_support/setup.sql
ALTER TYPE ratelimit_result ADD ATTRIBUTE extra integer;
SELECT pg_temp.try($$ SELECT ratelimit_limit('ea-type', 'k', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
SELECT count(*) AS rows_written FROM ratelimit_state WHERE name = 'ea-type';
ALTER TYPE ratelimit_result DROP ATTRIBUTE extra;
SELECT ok, remaining FROM ratelimit_limit('ea-type', 'k', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');
ALTER TYPE ratelimit_result ALTER ATTRIBUTE ok TYPE text;
SELECT pg_temp.try($$ SELECT ratelimit_check('ea-type', 'k', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
ALTER TYPE ratelimit_result ALTER ATTRIBUTE ok TYPE boolean;
SELECT ok, remaining FROM ratelimit_check('ea-type', 'k', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');
SELECT ratelimit_reset('ea-type', 'k');

-- docs/api.md's calling forms: a single field and a subquery's row are one
-- call each; (ratelimit_limit(...)).* is one call per column (five tokens).
SELECT (ratelimit_limit('ea-forms', 'one-field', '{"kind": "fixed window", "rate": 100, "period": "3650 days"}')).ok;
SELECT (r).ok, (r).remaining FROM (SELECT ratelimit_limit('ea-forms', 'subquery', '{"kind": "fixed window", "rate": 100, "period": "3650 days"}') AS r) s;
SELECT ok, remaining FROM ratelimit_limit('ea-forms', 'from', '{"kind": "fixed window", "rate": 100, "period": "3650 days"}');
SELECT ok, remaining FROM (SELECT (ratelimit_limit('ea-forms', 'star', '{"kind": "fixed window", "rate": 100, "period": "3650 days"}')).*) s;
SELECT key, 100 - remaining AS tokens_taken
FROM unnest(ARRAY['one-field', 'subquery', 'from', 'star']) key,
     ratelimit_check('ea-forms', key, '{"kind": "fixed window", "rate": 100, "period": "3650 days"}', 0)
ORDER BY key;
SELECT ratelimit_reset('ea-forms', k) FROM unnest(ARRAY['one-field', 'subquery', 'from', 'star']) k;
