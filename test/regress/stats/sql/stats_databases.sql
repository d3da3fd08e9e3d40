-- ratelimit_stats per database (scripts/stats-test.sh: preloaded,
-- ratelimit.stats_max_names = 3): two databases' limits of one name are
-- counted apart; a role reads only its own database's names and counts; a
-- superuser or pg_read_all_stats member reads every database's, summed per
-- name, and the overflow row (name NULL), which counts names of every
-- database.
SET ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ratelimit_stats_reset();
SELECT current_database() AS regress_db, current_user AS regress_user \gset
\set cfg '{"kind": "token bucket", "rate": 2, "period": "1 hour"}'
-- This database: 'shared' (one grant) and a name carrying a tenant's address.
SELECT ratelimit_define('shared', :'cfg');
SELECT ratelimit_define('tenant-a@example.com', :'cfg');
SELECT ok FROM ratelimit_limit('shared', 'k');
SELECT ok FROM ratelimit_limit('tenant-a@example.com', 'k');
CREATE ROLE stats_plain LOGIN;
CREATE ROLE stats_all LOGIN IN ROLE pg_read_all_stats;
CREATE DATABASE ratelimit_stats_other;
\c ratelimit_stats_other
SET ratelimit.now = '2026-01-01 00:00:00+00';
CREATE EXTENSION ratelimit;
-- The other database: its own 'shared' (two grants, one refusal), and a
-- name past the three slots, counted in the overflow row.
SELECT ratelimit_define('shared', :'cfg');
SELECT ratelimit_define('overflowed', :'cfg');
SELECT ok FROM ratelimit_limit('shared', 'k');
SELECT ok FROM ratelimit_limit('shared', 'k');
SELECT ok FROM ratelimit_limit('shared', 'k');
SELECT ok FROM ratelimit_limit('overflowed', 'k');
-- A role that is neither: this database's 'shared' alone, with its own
-- counts; not the first database's names, not the overflow row.
\c - stats_plain
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
-- A pg_read_all_stats member and a superuser: every database, summed per name.
\c - stats_all
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
\c - :regress_user
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
-- The plain role in the first database: that database's names only.
\c :regress_db stats_plain
SELECT name, granted, refused FROM ratelimit_stats ORDER BY name NULLS LAST;
\c :regress_db :regress_user
DROP DATABASE ratelimit_stats_other;
DROP ROLE stats_plain, stats_all;
SELECT ratelimit_undefine('shared'), ratelimit_undefine('tenant-a@example.com');
DELETE FROM ratelimit_state;
SELECT ratelimit_stats_reset();
