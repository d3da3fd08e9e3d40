-- The bound on distinct names with memory entries, where a small cluster
-- reaches it: on scripts/memory-test.sh's ratelimit.memory_max_keys = 40
-- the names bound and the long bound are 40 too (1 % of memory_max_keys,
-- at least 10,000 or all of it), of which inline configs may take half.
-- A name's slot is of the share of the entry that made it: 20 names made
-- by inline calls that then keep only an entry of the owner's definition
-- fill the inline half of the names with no inline entry left, and the
-- next inline call of a new name is 53200 naming the names' bound (counted
-- in memory_full), while a new defined name still has room. (The owner's
-- variant of this error, and the long bound's, need more entries than
-- names: scripts/memory-test.sh's part_bounds_hold checks them whole on a
-- 20,000-key cluster.)
\i test/sql_support/setup.sql
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
-- (an entry left by an earlier test would show here)
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
SELECT ratelimit_stats_reset();
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '{"kind": "token bucket", "rate": 10, "period": "1 day", "storage": "memory"}'
-- Each name: made by an inline call, then defined, called by the
-- definition, and its inline entry reset.
SELECT count(*) FILTER (WHERE (ratelimit_limit('mb-n' || i, 'inline', :'tb')).ok) AS inline_granted
FROM generate_series(1, 20) i;
SELECT count(*) AS defined FROM generate_series(1, 20) i, ratelimit_define('mb-n' || i, :'tb');
SELECT count(*) FILTER (WHERE (ratelimit_limit('mb-n' || i, 'owner')).ok) AS owner_granted
FROM generate_series(1, 20) i;
SELECT count(*) FILTER (WHERE r) AS inline_reset FROM generate_series(1, 20) i, ratelimit_reset('mb-n' || i, 'inline') r;
SELECT count(*) AS memory_entries, count(DISTINCT name) AS names
FROM ratelimit_status WHERE storage = 'memory';
-- 20 entries of 40, none inline, but the inline half of the names is taken.
SELECT ratelimit_limit('mb-new', 'k', :'tb');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- Nothing was written.
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
-- A key of a name the inline calls made is no new name; a defined new name has room.
SELECT ok FROM ratelimit_limit('mb-n1', 'inline', :'tb');
SELECT ratelimit_define('mb-def', :'tb');
SELECT ok FROM ratelimit_limit('mb-def', 'k');
SELECT name, memory_full FROM ratelimit_stats WHERE memory_full > 0 ORDER BY name;
-- Once a name has no entry its slot is free: an inline new name fits again.
SELECT ratelimit_reset('mb-n1', 'inline'), ratelimit_reset('mb-n1', 'owner');
SELECT ok FROM ratelimit_limit('mb-new', 'k', :'tb');
-- Leave nothing behind.
SELECT count(*) FILTER (WHERE r) AS reset
FROM (SELECT ratelimit_reset(name, key) r FROM ratelimit_status WHERE storage = 'memory') s;
SELECT count(*) AS undefined FROM generate_series(1, 20) i, ratelimit_undefine('mb-n' || i);
SELECT ratelimit_undefine('mb-def');
SELECT count(*) AS memory_entries FROM ratelimit_status WHERE storage = 'memory';
