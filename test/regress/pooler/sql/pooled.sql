-- Through pgbouncer in transaction pooling mode (scripts/pgbouncer-test.sh):
-- each transaction may run on another server connection, so this file sets
-- the extension's settings only with SET LOCAL, inside transactions, as a
-- pooled app must. The clock is frozen per transaction (ratelimit.now).
\set cfg '''{"kind": "token bucket", "rate": 1, "period": "1 hour"}'''
\set cfg2 '''{"kind": "token bucket", "rate": 2, "period": "1 hour"}'''

-- SET LOCAL ratelimit.error_format holds for its transaction only.
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SET LOCAL ratelimit.error_format = 'postgrest';
SELECT ok FROM ratelimit_limit('pooled-format', 'k', :cfg);
SELECT ok FROM ratelimit_limit('pooled-format', 'k', :cfg, throws => true);
ROLLBACK;
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ok FROM ratelimit_limit('pooled-format', 'k', :cfg);
SELECT ok FROM ratelimit_limit('pooled-format', 'k', :cfg, throws => true);
ROLLBACK;
SELECT current_setting('ratelimit.error_format') AS error_format_after;

-- throws => true aborts the caller's transaction: its own work and every
-- limit it consumed earlier are rolled back.
CREATE TABLE pooled_work (id int);
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ok FROM ratelimit_limit('pooled-abort', 'k', :cfg2);
INSERT INTO pooled_work VALUES (1);
SELECT ok FROM ratelimit_limit('pooled-abort', 'k', :cfg2, 2, throws => true);
COMMIT;
SELECT count(*) AS work_rows FROM pooled_work;
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT value AS tokens_back FROM ratelimit_value('pooled-abort', 'k', :cfg2);
-- A committed grant stays.
SELECT ok FROM ratelimit_limit('pooled-abort', 'k', :cfg2);
COMMIT;
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT value AS tokens_left FROM ratelimit_value('pooled-abort', 'k', :cfg2);
COMMIT;

-- A named limit redefined: the next call uses the new definition (backends'
-- config caches are invalidated by the definition's change, never trusted).
SELECT ratelimit_define('pooled-named', :cfg);
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT ok, remaining FROM ratelimit_limit('pooled-named', 'k');
COMMIT;
SELECT ratelimit_define('pooled-named', :cfg2);
BEGIN;
SET LOCAL ratelimit.now = '2026-01-01 00:00:00+00';
SELECT value AS new_key_under_new_definition FROM ratelimit_value('pooled-named', 'fresh');
COMMIT;

SELECT ratelimit_reset('pooled-format', 'k') AS format_row, ratelimit_reset('pooled-abort', 'k') AS abort_row,
       ratelimit_reset('pooled-named', 'k') AS named_row;
SELECT ratelimit_undefine('pooled-named');
DROP TABLE pooled_work;
