-- Identities at the bounds of memory entries: a name and key of up to 56
-- bytes together take a compact entry, longer ones (up to 236) a long
-- entry, past 236 is 54000. Each is answered exactly (a second call sees
-- the first; identities that differ only past byte 56, or only in where
-- the name ends, are apart), listed, refunded and reset; the restart of
-- these entries is scripts/memory-test.sh's identity_bounds_survive_restart.
-- Run on scripts/memory-test.sh's ratelimit.memory_max_keys = 40.
\i test/sql_support/setup.sql
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '{"kind": "token bucket", "rate": 10, "period": "1 day", "storage": "memory"}'
CREATE TEMP TABLE ids(label text, name text, key text);
INSERT INTO ids VALUES
  ('56: 16 + 40', repeat('n', 16), repeat('k', 40)),
  ('57: 16 + 41', repeat('n', 16), repeat('k', 41)),
  ('57: 16 + 40 + x', repeat('n', 16), repeat('k', 40) || 'x'),
  ('56: 15 + 41', repeat('n', 15), 'n' || repeat('k', 40)),
  ('56: 56 + NULL', repeat('m', 56), NULL),
  ('57: 57 + NULL', repeat('m', 57), NULL),
  ('56: 56 + empty', repeat('m', 56), ''),
  ('236: 16 + 220', repeat('n', 16), repeat('k', 220)),
  ('236: 236 + NULL', repeat('m', 236), NULL),
  ('236: 200 + 36', repeat('m', 200), repeat('k', 36));
SELECT label, octet_length(name) + coalesce(octet_length(key), 0) AS bytes,
       (ratelimit_limit(name, key, :'tb', 3)).remaining
FROM ids ORDER BY label;
-- A second call sees the first, on every entry alone.
SELECT label, (ratelimit_limit(name, key, :'tb', 2)).remaining FROM ids ORDER BY label;
SELECT label, round(v.value::numeric, 2) AS value FROM ids, ratelimit_value(name, key, :'tb') v ORDER BY label;
-- ratelimit_status lists each once, with its name and key whole.
SELECT octet_length(s.name) AS name_bytes, octet_length(s.key) AS key_bytes, s.key IS NULL AS null_key,
       right(s.key, 1) AS key_ends, s.stored_value
FROM ratelimit_status s
WHERE s.storage = 'memory' AND (s.name, s.key) IN (SELECT name, key FROM ids) OR
      (s.storage = 'memory' AND s.key IS NULL AND s.name IN (SELECT name FROM ids WHERE key IS NULL))
ORDER BY s.name, s.key NULLS FIRST;
-- A refund goes back to its own entry, of either size.
SELECT label, (ratelimit_refund(name, key, 1, :'tb')).remaining FROM ids
WHERE label IN ('56: 16 + 40', '57: 16 + 41') ORDER BY label;
SELECT label, (ratelimit_limit(name, key, :'tb', 0)).remaining FROM ids
WHERE label IN ('56: 16 + 40', '57: 16 + 41', '57: 16 + 40 + x') ORDER BY label;
-- A reset removes one entry of either size, and no other.
SELECT ratelimit_reset(repeat('n', 16), repeat('k', 41)) AS reset_57,
       ratelimit_reset(repeat('n', 16), repeat('k', 40)) AS reset_56;
SELECT label, (ratelimit_limit(name, key, :'tb', 0)).remaining FROM ids
WHERE label LIKE '5%' ORDER BY label;
-- Past 236 bytes together: 54000, nothing stored.
\set VERBOSITY sqlstate
SELECT ratelimit_limit(repeat('n', 16), repeat('k', 221), :'tb');
SELECT ratelimit_limit(repeat('m', 237), NULL, :'tb');
\set VERBOSITY default
SELECT count(*) AS past_bound FROM ratelimit_status
WHERE storage = 'memory' AND octet_length(name) + coalesce(octet_length(key), 0) > 236;
-- Leave the entries to the tests that follow: none.
SELECT count(*) FILTER (WHERE ratelimit_reset(name, key)) AS removed FROM ids;
SELECT count(*) AS left_over FROM ratelimit_status s, ids
WHERE s.storage = 'memory' AND s.name = ids.name AND s.key IS NOT DISTINCT FROM ids.key;
