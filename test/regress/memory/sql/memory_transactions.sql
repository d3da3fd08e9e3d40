-- A memory limit's grant is taken at once and given back, exactly once, by
-- a rollback: of the transaction (ROLLBACK, an error, throws => true), or
-- of a savepoint it was taken under; a commit keeps it; "on_rollback":
-- "keep" keeps it always; PREPARE TRANSACTION with a pending grant is 0A000
-- and gives it back.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '''{"kind": "token bucket", "rate": 5, "period": 60000, "storage": "memory"}'''
\set fw '''{"kind": "fixed window", "rate": 5, "period": 60000, "start": 0, "storage": "memory"}'''
\set sw '''{"kind": "sliding window", "rate": 5, "period": 60000, "start": 0, "storage": "memory"}'''
\set keep '''{"kind": "token bucket", "rate": 5, "period": 60000, "storage": "memory", "on_rollback": "keep"}'''

-- Rolled back: the tokens come back, on each kind.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'tb', :tb, 3);
SELECT ok, remaining FROM ratelimit_limit('mt', 'fw', :fw, 3);
SELECT ok, remaining FROM ratelimit_limit('mt', 'sw', :sw, 3);
-- Seen by this transaction (and every other session) at once.
SELECT value FROM ratelimit_value('mt', 'tb', :tb);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'tb', :tb);
SELECT value FROM ratelimit_value('mt', 'fw', :fw);
SELECT value FROM ratelimit_value('mt', 'sw', :sw);

-- A memory grant assigns no transaction id (writes no WAL); a table grant does.
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'xid', :tb, 1);
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
SELECT ok FROM ratelimit_limit('mt', 'xid-t', '{"kind": "token bucket", "rate": 5, "period": 60000}', 1);
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
ROLLBACK;

-- Committed: they stay consumed.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'tb', :tb, 3);
COMMIT;
SELECT value FROM ratelimit_value('mt', 'tb', :tb);

-- Given back once only: a later refund, grant or reset is not undone, and a
-- rollback never gives more than it took.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'tb', :tb, 1);
SELECT ok, remaining FROM ratelimit_limit('mt', 'tb', :tb, 1);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'tb', :tb);
-- (an implicit transaction, committed: nothing to give back)
SELECT ok, remaining FROM ratelimit_limit('mt', 'tb', :tb, 1);
SELECT value FROM ratelimit_value('mt', 'tb', :tb);

-- Autocommit statement failing after the grant: given back.
DO $$ DECLARE r record; BEGIN
  SELECT * INTO r FROM ratelimit_limit('mt', 'err', '{"kind": "token bucket", "rate": 5, "period": 60000, "storage": "memory"}', 2);
  RAISE NOTICE 'granted: %, remaining: %', r.ok, r.remaining;
  PERFORM 1 / (r.ok::int - 1);
END $$;
SELECT value FROM ratelimit_value('mt', 'err', :tb);

-- An error later in the transaction: given back.
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'err', :tb, 4);
SELECT 1 / 0;
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'err', :tb);

-- throws => true aborts the transaction: an earlier memory grant returns.
SELECT ok FROM ratelimit_limit('mt', 'scarce', :tb, 5);
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'plenty', :tb, 2);
SELECT ok FROM ratelimit_limit('mt', 'scarce', :tb, 1, throws => true);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'plenty', :tb);

-- A savepoint rolled back returns only what was taken after it; a
-- released savepoint's grants belong to the enclosing transaction.
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'sp', :tb, 1);
SAVEPOINT a;
SELECT ok FROM ratelimit_limit('mt', 'sp', :tb, 2);
ROLLBACK TO SAVEPOINT a;
SELECT value FROM ratelimit_value('mt', 'sp', :tb);
SAVEPOINT b;
SELECT ok FROM ratelimit_limit('mt', 'sp', :tb, 1);
SAVEPOINT c;
SELECT ok FROM ratelimit_limit('mt', 'sp', :tb, 1);
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT b;
SELECT value FROM ratelimit_value('mt', 'sp', :tb);
SAVEPOINT d;
SELECT ok FROM ratelimit_limit('mt', 'sp', :tb, 1);
RELEASE SAVEPOINT d;
COMMIT;
SELECT value FROM ratelimit_value('mt', 'sp', :tb);
-- A released savepoint, then the transaction rolls back: all of it returns.
BEGIN;
SAVEPOINT e;
SELECT ok FROM ratelimit_limit('mt', 'sp2', :tb, 2);
RELEASE SAVEPOINT e;
SELECT ok FROM ratelimit_limit('mt', 'sp2', :tb, 1);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'sp2', :tb);
-- A savepoint rolled back twice gives back once.
BEGIN;
SAVEPOINT f;
SELECT ok FROM ratelimit_limit('mt', 'sp3', :tb, 2);
ROLLBACK TO SAVEPOINT f;
ROLLBACK TO SAVEPOINT f;
COMMIT;
SELECT value FROM ratelimit_value('mt', 'sp3', :tb);
-- PL/pgSQL exception blocks are savepoints.
DO $$
BEGIN
  BEGIN
    PERFORM ratelimit_limit('mt', 'plpgsql', '{"kind": "token bucket", "rate": 5, "period": 60000, "storage": "memory"}', 4);
    RAISE EXCEPTION 'undo';
  EXCEPTION WHEN raise_exception THEN
    RAISE NOTICE 'value after the block: %', (SELECT value FROM ratelimit_value('mt', 'plpgsql', '{"kind": "token bucket", "rate": 5, "period": 60000, "storage": "memory"}'));
  END;
END $$;

-- Refund rules: capped at capacity (the bucket refilled meanwhile) ...
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'cap', :tb, 2);
SET ratelimit.now = '2026-01-01 00:10:00+00';
ROLLBACK;
SET ratelimit.now = '2026-01-01 00:10:00+00';
SELECT value FROM ratelimit_value('mt', 'cap', :tb);
-- ... and a window kind only into the window the grant was taken from: a
-- fixed window rolls unused tokens over (up to capacity 4, 2 a window), so
-- a grant given back into its old window would show in the new one.
\set fw4 '\'{"kind": "fixed window", "rate": 2, "capacity": 4, "period": 60000, "start": 0, "storage": "memory"}\''
SET ratelimit.now = '2026-01-01 00:11:00+00';
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'win', :fw4, 4);
SET ratelimit.now = '2026-01-01 00:12:00+00';
ROLLBACK;
SET ratelimit.now = '2026-01-01 00:12:00+00';
-- (the window of the grant is over: the new one has its 2 tokens only)
SELECT value, ts FROM ratelimit_value('mt', 'win', :fw4);
-- Within the window: given back, and rolled over.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'win-same', :fw4, 4);
SET ratelimit.now = '2026-01-01 00:12:59+00';
ROLLBACK;
SET ratelimit.now = '2026-01-01 00:13:00+00';
SELECT value, ts FROM ratelimit_value('mt', 'win-same', :fw4);
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'win2', :sw, 3);
SET ratelimit.now = '2026-01-01 00:14:00+00';
ROLLBACK;
SET ratelimit.now = '2026-01-01 00:14:00+00';
-- (a sliding window counts the last window's 3 in full at its end)
SELECT value, ts FROM ratelimit_value('mt', 'win2', :sw);
-- Within the window: given back.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'win3', :sw, 3);
SET ratelimit.now = '2026-01-01 00:14:30+00';
ROLLBACK;
SET ratelimit.now = '2026-01-01 00:14:30+00';
SELECT value, ts FROM ratelimit_value('mt', 'win3', :sw);
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- A reservation rolled back frees the reserved tokens.
\set res '''{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": 3, "storage": "memory"}'''
BEGIN;
SELECT ok, retry_after, remaining FROM ratelimit_limit('mt', 'res', :res, 3, reserve => true);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'res', :res);
-- A refusal takes nothing: its rollback gives nothing.
SELECT ok FROM ratelimit_limit('mt', 'ref', :fw, 5);
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'ref', :fw, 1);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'ref', :fw);
-- A shadow refusal takes nothing either.
\set shadow '''{"kind": "token bucket", "rate": 1, "period": 60000, "shadow": true, "storage": "memory"}'''
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'shadow', :shadow);
SELECT ok FROM ratelimit_limit('mt', 'shadow', :shadow);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'shadow', :shadow);
-- ratelimit_refund and ratelimit_reset are not undone by a rollback.
SELECT ok FROM ratelimit_limit('mt', 'rr', :tb, 5);
BEGIN;
SELECT remaining FROM ratelimit_refund('mt', 'rr', 2, :tb);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'rr', :tb);
BEGIN;
SELECT ratelimit_reset('mt', 'rr');
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'rr', :tb);
-- A grant, then a reset in the same transaction, then a rollback: the
-- entry is gone, and stays as full as it is.
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'rr', :tb, 2);
SELECT ratelimit_reset('mt', 'rr');
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'rr', :tb);
SELECT count(*) FROM ratelimit_status WHERE name = 'mt' AND key = 'rr';

-- ratelimit_limit_all: the memory elements of a rolled-back call return.
\set tbt '''{"kind": "token bucket", "rate": 5, "period": 60000}'''
BEGIN;
SELECT name, key, ok FROM ratelimit_limit_all(format('[{"name": "mt", "key": "all-m", "config": %s, "count": 2}, {"name": "mt", "key": "all-t", "config": %s, "count": 2}]', :tb, :tbt)::jsonb);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'all-m', :tb);
SELECT value FROM ratelimit_value('mt', 'all-t', :tbt);
BEGIN;
SELECT name, key, ok FROM ratelimit_limit_all(format('[{"name": "mt", "key": "all-m", "config": %s, "count": 2}, {"name": "mt", "key": "all-t", "config": %s, "count": 2}]', :tb, :tbt)::jsonb);
COMMIT;
SELECT value FROM ratelimit_value('mt', 'all-m', :tb);
SELECT value FROM ratelimit_value('mt', 'all-t', :tbt);

-- "on_rollback": "keep": the grant sticks though the transaction aborts.
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'keep', :keep, 2);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'keep', :keep);
BEGIN;
SAVEPOINT k;
SELECT ok, remaining FROM ratelimit_limit('mt', 'keep', :keep, 1);
ROLLBACK TO SAVEPOINT k;
SELECT ok FROM ratelimit_limit('mt', 'keep', :keep, 1);
SELECT 1 / 0;
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'keep', :keep);
-- ... through ratelimit_limit_all too, once the call succeeded.
BEGIN;
SELECT name, ok FROM ratelimit_limit_all(format('[{"name": "mt", "key": "keep", "config": %s}]', :keep)::jsonb);
ROLLBACK;
SELECT value FROM ratelimit_value('mt', 'keep', :keep);
-- ... and in a prepared transaction, which it does not stop.
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'keep-prep', :keep, 1);
PREPARE TRANSACTION 'mt_keep';
ROLLBACK PREPARED 'mt_keep';
SELECT value FROM ratelimit_value('mt', 'keep-prep', :keep);

-- PREPARE TRANSACTION with a pending memory grant: 0A000, and the grant is
-- given back (the transaction is rolled back).
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('mt', 'prep', :tb, 3);
PREPARE TRANSACTION 'mt_prep';
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT value FROM ratelimit_value('mt', 'prep', :tb);
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'mt_prep';
-- Also when the grant was taken under a released savepoint.
BEGIN;
SAVEPOINT p;
SELECT ok FROM ratelimit_limit('mt', 'prep', :tb, 3);
RELEASE SAVEPOINT p;
PREPARE TRANSACTION 'mt_prep';
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT value FROM ratelimit_value('mt', 'prep', :tb);
-- A grant given back by a savepoint's rollback leaves nothing pending.
BEGIN;
SAVEPOINT p;
SELECT ok FROM ratelimit_limit('mt', 'prep', :tb, 3);
ROLLBACK TO SAVEPOINT p;
PREPARE TRANSACTION 'mt_prep2';
COMMIT PREPARED 'mt_prep2';
SELECT value FROM ratelimit_value('mt', 'prep', :tb);
-- A refusal leaves nothing pending; a table limit's grant prepares as before.
SELECT ok FROM ratelimit_limit('mt', 'prep-full', :fw, 5);
BEGIN;
SELECT ok FROM ratelimit_limit('mt', 'prep-full', :fw);
SELECT ok FROM ratelimit_limit('mt', 'prep-t', :tbt, 2);
PREPARE TRANSACTION 'mt_prep3';
ROLLBACK PREPARED 'mt_prep3';
SELECT value FROM ratelimit_value('mt', 'prep-t', :tbt);

-- Nothing of this file is left pending: a last transaction rolls back
-- cleanly and changes nothing.
BEGIN;
ROLLBACK;
SELECT key, stored_value FROM ratelimit_status WHERE name = 'mt' ORDER BY key;
DELETE FROM ratelimit_state WHERE name = 'mt';
RESET ratelimit.now;
