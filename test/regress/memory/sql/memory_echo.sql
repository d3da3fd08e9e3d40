-- The errors of memory limits quote the limit's name cut by the one echo
-- helper (EchoLength, errors.h): at most 64 bytes, on a character boundary,
-- so a client in another encoding receives the error itself (54000, 53200),
-- never 22021 (invalid byte sequence) from half a character. The name is
-- 'x' and 40 two-byte characters: 64 bytes end inside one. The database is
-- UTF8 (a cluster's default may be SQL_ASCII, which converts nothing); run
-- after memory_full, on scripts/memory-test.sh's ratelimit.memory_max_keys = 40.
SELECT current_database() AS regress_db \gset
CREATE DATABASE memory_echo_utf8 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
\c memory_echo_utf8
\i test/sql_support/setup.sql
CREATE EXTENSION ratelimit;
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set inline '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory"}'
SELECT ratelimit_define('x' || repeat(chr(233), 40), '{"kind": "token bucket", "rate": 1, "period": "1 hour", "storage": "memory", "memoryKeys": 1}');
SELECT ok FROM ratelimit_limit('x' || repeat(chr(233), 40), 'k1');
-- Inline configs fill their share of the entries (how many it takes
-- depends on what other tests left live: not shown).
SELECT count(*) FILTER (WHERE pg_temp.try(format('SELECT ratelimit_limit(%L, %L, %L)', 'mecho', 'k' || i, :'inline')) = 'ok') > 0 AS filled
FROM generate_series(1, 40) i;
SET client_encoding = 'LATIN1';
\set VERBOSITY sqlstate
-- 54000: the name and key take more than 236 bytes (KeyOf's detail).
SELECT ratelimit_limit('x' || repeat(chr(233), 40), repeat('k', 200));
-- 53200: the limit's memoryKeys entries are in use.
SELECT ratelimit_limit('x' || repeat(chr(233), 40), 'k2');
-- 53200: ratelimit.memory_max_keys entries (the inline share) are in use.
SELECT ratelimit_limit('y' || repeat(chr(233), 40), 'k', :'inline');
\set VERBOSITY default
RESET client_encoding;
-- The errors in the database's encoding: the name cut at 63 bytes.
SELECT ratelimit_limit('x' || repeat(chr(233), 40), repeat('k', 200));
SELECT ratelimit_limit('x' || repeat(chr(233), 40), 'k2');
SELECT ratelimit_limit('y' || repeat(chr(233), 40), 'k', :'inline');
-- Far in the future every entry is idle: cleaned before the database goes.
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() > 0 AS cleaned;
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
\c :regress_db
DROP DATABASE memory_echo_utf8;
