-- A table of an extension table's name that is not the extension's. A
-- 0.4.0 schema (the new library keeps working there until ALTER EXTENSION
-- UPDATE) has no ratelimit_override yet; where PUBLIC may create in the
-- extension's schema (every cluster upgraded from PostgreSQL 14 or older),
-- any role can create one. The library finds its tables as members of the
-- extension, owned by its owner, in its schema: the planted table is
-- ignored. (In a scratch database: it needs its own extension.)
SELECT current_database() AS regress_database \gset
CREATE DATABASE ratelimit_planted;
\c ratelimit_planted
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
GRANT CREATE ON SCHEMA public TO PUBLIC;
CREATE EXTENSION ratelimit VERSION '0.4.0';
SELECT ratelimit_define('planted', '{"kind": "token bucket", "rate": 2, "period": "1 hour"}');
CREATE ROLE pt_mallory;
SET ROLE pt_mallory;
CREATE TABLE public.ratelimit_override (
    name   text COLLATE "C" NOT NULL,
    key    text COLLATE "C" NOT NULL,
    config jsonb NOT NULL,
    PRIMARY KEY (name, key)
);
INSERT INTO public.ratelimit_override VALUES
  ('planted', 'mallory', '{"kind": "token bucket", "rate": 1000000, "period": "1 hour"}'),
  ('planted', 'victim', '{"kind": "token bucket", "rate": 1, "period": "1000 hours", "capacity": 1}');
GRANT SELECT ON public.ratelimit_override TO PUBLIC;
-- Mallory's key gets the definition's 2 per hour, not 1,000; the victim
-- keeps its 2.
SELECT count(*) FILTER (WHERE ok) AS mallory_granted
  FROM generate_series(1, 1000) g, ratelimit_limit('planted', 'mallory', count => g * 0 + 1);
SELECT count(*) FILTER (WHERE ok) AS victim_granted
  FROM generate_series(1, 3) g, ratelimit_limit('planted', 'victim', count => g * 0 + 1);
RESET ROLE;
SELECT key, kind, value FROM ratelimit_status WHERE name = 'planted' ORDER BY key;
-- The update creates the extension's own ratelimit_override, which the
-- planted one's name blocks: it fails on that name, trusting nothing of
-- the planted table; once the table is gone (here, its owner drops it) the
-- update works and the extension's own table is used.
SELECT pg_temp.try($$ ALTER EXTENSION ratelimit UPDATE $$);
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SET ROLE pt_mallory;
DROP TABLE public.ratelimit_override;
RESET ROLE;
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'ratelimit') AS updated
FROM pg_extension WHERE extname = 'ratelimit';
SELECT ratelimit_override('planted', 'vip', '{"kind": "token bucket", "rate": 5, "period": "1 hour"}');
SELECT count(*) FILTER (WHERE ok) AS vip_granted
  FROM generate_series(1, 10) g, ratelimit_limit('planted', 'vip', count => g * 0 + 1);
-- A table the extension no longer has as its member (the owner's ALTER
-- EXTENSION ... DROP TABLE) is not its table: 42P01, never a guess by name.
-- (ALTER EXTENSION sends no invalidation: a session looks at membership
-- when it finds the table, after any invalidation of it, or here anew.)
ALTER EXTENSION ratelimit DROP TABLE ratelimit_definition;
\c ratelimit_planted
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
SELECT pg_temp.try($$ SELECT ratelimit_limit('planted', 'k') $$);
ALTER EXTENSION ratelimit ADD TABLE ratelimit_definition;
\c ratelimit_planted
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
SELECT ok FROM ratelimit_limit('planted', 'k');
-- The same for ratelimit_override: setting or removing an override is
-- refused with 42P01 naming the table (not an internal error), and nothing
-- is written; a call without overrides works.
ALTER EXTENSION ratelimit DROP TABLE ratelimit_override;
\c ratelimit_planted
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-03-01 12:00:00+00';
SELECT pg_temp.try($$ SELECT ratelimit_override('planted', 'vip2', '{"kind": "token bucket", "rate": 7, "period": "1 hour"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_unoverride('planted', 'vip') $$);
SELECT ok FROM ratelimit_limit('planted', 'k2');
ALTER EXTENSION ratelimit ADD TABLE ratelimit_override;
SELECT name, key FROM ratelimit_override ORDER BY key;
-- ... nor is a member table another role owns.
ALTER TABLE ratelimit_definition OWNER TO pt_mallory;
SELECT pg_temp.try($$ SELECT ratelimit_limit('planted', 'k') $$);
ALTER TABLE ratelimit_definition OWNER TO CURRENT_USER;
SELECT ok FROM ratelimit_limit('planted', 'k');
\c :regress_database
DROP DATABASE ratelimit_planted;
DROP ROLE pt_mallory;
