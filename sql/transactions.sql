-- Limits commit and roll back with the caller's transaction.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set cfg '''{"kind": "token bucket", "rate": 5, "period": 60000}'''

-- Rolled back: the tokens come back.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('tx', 'a', :cfg, 3);
ROLLBACK;
SELECT value FROM ratelimit_value('tx', 'a', :cfg);
SELECT count(*) FROM ratelimit_state WHERE name = 'tx';

-- Committed: they stay consumed.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('tx', 'a', :cfg, 3);
COMMIT;
SELECT value FROM ratelimit_value('tx', 'a', :cfg);

-- Several calls in one transaction see each other; a rollback undoes all.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('tx', 'a', :cfg, 1);
SELECT ok, remaining FROM ratelimit_limit('tx', 'a', :cfg, 1);
SELECT ok, remaining FROM ratelimit_limit('tx', 'a', :cfg, 1);
ROLLBACK;
SELECT value FROM ratelimit_value('tx', 'a', :cfg);

-- A savepoint rolled back returns only what was consumed after it.
BEGIN;
SELECT ok FROM ratelimit_limit('tx', 'b', :cfg, 1);
SAVEPOINT s;
SELECT ok FROM ratelimit_limit('tx', 'b', :cfg, 2);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT value FROM ratelimit_value('tx', 'b', :cfg);

-- throws => true aborts the transaction: a limit consumed earlier in it is
-- rolled back too (the article's "several limits" answer).
SELECT ok FROM ratelimit_limit('tx', 'scarce', :cfg, 5);
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('tx', 'plenty', :cfg, 2);
SELECT ok FROM ratelimit_limit('tx', 'scarce', :cfg, 1, throws => true);
ROLLBACK;
SELECT value FROM ratelimit_value('tx', 'plenty', :cfg);

-- reset is transactional too.
BEGIN;
SELECT ratelimit_reset('tx', 'a');
SELECT value FROM ratelimit_value('tx', 'a', :cfg);
ROLLBACK;
SELECT value FROM ratelimit_value('tx', 'a', :cfg);

-- So are definitions.
BEGIN;
SELECT ratelimit_define('tx-named', :cfg);
SELECT ok, remaining FROM ratelimit_limit('tx-named');
ROLLBACK;
SELECT count(*) FROM ratelimit_definition WHERE name = 'tx-named';

-- A read-only transaction (and a standby) can check and read, but every
-- function that writes is 25006, on an existing row too, and writes nothing.
SELECT ok FROM ratelimit_limit('tx', 'ro', :cfg, 1);
SELECT ratelimit_define('tx-ro', :cfg);
BEGIN READ ONLY;
SELECT ok, remaining FROM ratelimit_check('tx', 'ro', :cfg, 1);
SELECT value FROM ratelimit_value('tx', 'ro', :cfg);
SELECT pg_temp.try($$ SELECT ratelimit_limit('tx', 'ro', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('tx', 'ro-new', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "tx-ro", "key": "ro"}]') $$);
SELECT pg_temp.try($$ SELECT ratelimit_refund('tx', 'ro', 1, '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_reset('tx', 'ro') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('tx-ro2', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_undefine('tx-ro') $$);
SELECT pg_temp.try($$ SELECT ratelimit_cleanup() $$);
COMMIT;
SELECT value FROM ratelimit_value('tx', 'ro', :cfg);
SELECT count(*) AS ro_rows FROM ratelimit_state WHERE name = 'tx' AND key LIKE 'ro%';
SELECT name FROM ratelimit_definition WHERE name LIKE 'tx-ro%';
SELECT ratelimit_undefine('tx-ro');
RESET ratelimit.now;
