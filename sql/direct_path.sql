-- The direct read/lock/write path: several calls on the same rows in one
-- transaction; what the owner adds to the state table (an index, trigger,
-- column or CHECK) is maintained, fired and enforced by PostgreSQL's own
-- executor pieces on that path; and the fallback to SQL where rows cannot be
-- read or written directly (a rule, a changed column type), so nothing
-- anyone added to the table is bypassed.
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set cfg '''{"kind": "token bucket", "rate": 100, "period": "1 minute"}'''
\set sharded '''{"kind": "token bucket", "rate": 80, "period": "1 minute", "shards": 4}'''

-- One transaction: limit twice, refund, limit_all on the same row, sharded calls.
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
BEGIN;
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 2);
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 3);
SELECT ok, remaining FROM ratelimit_refund('dp', 'a', 1, :cfg);
SELECT ok, remaining FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'dp', 'key', 'a', 'config', :cfg::jsonb, 'count', 2),
  jsonb_build_object('name', 'dp', 'key', 'a', 'config', :cfg::jsonb, 'count', 1)));
SELECT ok FROM ratelimit_limit('dp', 'sh', :sharded, 2);
SELECT ok FROM ratelimit_limit('dp', 'sh', :sharded, 2);
SELECT ok FROM ratelimit_limit('dp', 'sh', :sharded, 3);
SELECT value FROM ratelimit_value('dp', 'sh', :sharded);
COMMIT;
SELECT value FROM ratelimit_value('dp', 'a', :cfg);
SELECT value FROM ratelimit_value('dp', 'sh', :sharded);
-- One row for 'a'; the sharded key has rows only for the shards the grants
-- locked (which ones is random), at most 4.
SELECT count(*) FILTER (WHERE key = 'a') AS rows_a, count(*) FILTER (WHERE key = 'sh') BETWEEN 1 AND 4 AS rows_sh_ok
FROM ratelimit_state WHERE name = 'dp';
CREATE TEMP TABLE dp_seen AS SELECT key, shard, value FROM ratelimit_state WHERE name = 'dp';
-- The indexes agree with the table after those non-HOT and HOT updates.
SET enable_seqscan = off;
SELECT key, shard, value FROM ratelimit_state WHERE name = 'dp' AND key = 'a';
SELECT count(*) = (SELECT count(*) FROM dp_seen WHERE key = 'sh') AS shards_via_index_agree
FROM ratelimit_state WHERE name = 'dp' AND key = 'sh';
RESET enable_seqscan;

-- Long names and keys (stored compressed) stay HOT like an SQL UPDATE: the
-- new version keeps the stored datums of name, key and shard.
BEGIN;
SELECT ok FROM ratelimit_limit(repeat('n', 1024), repeat('k', 1024), :cfg);
-- (The counters may include earlier transactions' not yet flushed counts:
-- compare before and after, in one transaction.)
SELECT n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM pg_stat_xact_user_tables
WHERE relid = 'ratelimit_state'::regclass \gset
SELECT ok FROM ratelimit_limit(repeat('n', 1024), repeat('k', 1024), :cfg);
SELECT ok FROM ratelimit_limit(repeat('n', 1024), repeat('k', 1024), :cfg);
SELECT n_tup_upd - :upd0 AS updates, n_tup_hot_upd - :hot0 AS hot_updates FROM pg_stat_xact_user_tables
WHERE relid = 'ratelimit_state'::regclass;
SELECT pg_column_compression(name) AS name_stored, pg_column_compression(key) AS key_stored
FROM ratelimit_state WHERE name = repeat('n', 1024);
COMMIT;
SELECT ratelimit_reset(repeat('n', 1024), repeat('k', 1024));

-- An added column (NOT NULL, with a default) keeps its value.
ALTER TABLE ratelimit_state ADD COLUMN note text NOT NULL DEFAULT 'kept';
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT ok FROM ratelimit_limit('dp', 'sh', :sharded, 1);
SELECT DISTINCT note FROM ratelimit_state WHERE name = 'dp';
ALTER TABLE ratelimit_state DROP COLUMN note;
-- A dropped column is no obstacle to the direct path.
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);

-- An added CHECK constraint is enforced.
ALTER TABLE ratelimit_state ADD CONSTRAINT dp_small CHECK (name <> 'dp' OR key <> 'a' OR value >= 50);
SELECT pg_temp.try($$ SELECT ratelimit_limit('dp', 'a', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}', 45) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "dp", "key": "a", "count": 45, "config": {"kind": "token bucket", "rate": 100, "period": "1 minute"}}]') $$);
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
ALTER TABLE ratelimit_state DROP CONSTRAINT dp_small;

-- The installed shard CHECK ("shard >= 0", judged by its shape) is prepared
-- once per change of the table; one replaced under its name is the one
-- enforced from the next call on, in the same session and transaction.
BEGIN;
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
ALTER TABLE ratelimit_state DROP CONSTRAINT ratelimit_state_shard_check;
ALTER TABLE ratelimit_state ADD CONSTRAINT ratelimit_state_shard_check
  CHECK (shard >= 0 AND (name <> 'dp' OR key <> 'a' OR value >= 50));
SELECT pg_temp.try($$ SELECT ratelimit_limit('dp', 'a', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}', 45) $$);
ROLLBACK;
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 45);
SELECT ok FROM ratelimit_refund('dp', 'a', 45, :cfg);

-- An added trigger fires on every write.
CREATE TABLE dp_log (op text, key text, value double precision);
CREATE FUNCTION dp_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.dp_log VALUES (TG_OP, NEW.key, NEW.value);  -- triggers run with the functions' search_path
  RETURN NEW;
END $$;
CREATE TRIGGER dp_log AFTER UPDATE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION dp_log_write();
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT ok FROM ratelimit_refund('dp', 'a', 1, :cfg);
SELECT op, key, value FROM dp_log;
DROP TRIGGER dp_log ON ratelimit_state;

-- Column and statement triggers fire as for an SQL UPDATE: UPDATE OF a
-- column the write sets (BEFORE and AFTER), and a statement-level trigger
-- with a transition table (such a table is written through SQL).
CREATE FUNCTION dp_log_column() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.dp_log VALUES (TG_WHEN || ' ' || TG_OP || ' OF value', NEW.key, NEW.value);
  RETURN NEW;
END $$;
CREATE FUNCTION dp_log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.dp_log SELECT 'STATEMENT ' || TG_OP, key, value FROM dp_new WHERE name = 'dp';
  RETURN NULL;
END $$;
CREATE TRIGGER dp_before_value BEFORE UPDATE OF value ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION dp_log_column();
CREATE TRIGGER dp_after_value AFTER UPDATE OF value ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION dp_log_column();
TRUNCATE dp_log;
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT op, key, value FROM dp_log ORDER BY op;
CREATE TRIGGER dp_statement AFTER UPDATE ON ratelimit_state REFERENCING NEW TABLE AS dp_new
  FOR EACH STATEMENT EXECUTE FUNCTION dp_log_statement();
TRUNCATE dp_log;
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT op, key, value FROM dp_log ORDER BY op;
DROP TRIGGER dp_statement ON ratelimit_state;
DROP TRIGGER dp_before_value ON ratelimit_state;
DROP TRIGGER dp_after_value ON ratelimit_state;
-- A BEFORE trigger that skips the write (returns NULL): the decision
-- cannot be stored, so the call fails (27000) instead of answering.
CREATE FUNCTION dp_skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER dp_skip BEFORE UPDATE ON ratelimit_state FOR EACH ROW EXECUTE FUNCTION dp_skip();
SELECT pg_temp.try($$ SELECT ratelimit_limit('dp', 'a', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}', 1) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_limit_all('[{"name": "dp", "key": "a", "config": {"kind": "token bucket", "rate": 100, "period": "1 minute"}}]') $$);
DROP TRIGGER dp_skip ON ratelimit_state;
DROP FUNCTION dp_skip();
SELECT value FROM ratelimit_value('dp', 'a', :cfg);

-- An added index is maintained (probed below with sequential scans off).
CREATE INDEX dp_by_value ON ratelimit_state (value) WHERE name = 'dp';
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT key, value FROM ratelimit_state WHERE name = 'dp' AND value = (SELECT value FROM ratelimit_state WHERE name = 'dp' AND key = 'a');
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX dp_by_value;

-- An added rule is applied.
CREATE RULE dp_log_rule AS ON UPDATE TO ratelimit_state DO ALSO INSERT INTO public.dp_log VALUES ('RULE', NEW.key, NEW.value);
SELECT ok FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT op, key, value FROM dp_log WHERE op = 'RULE';
DROP RULE dp_log_rule ON ratelimit_state;

-- A publication: the table's replica identity is FULL, so updates work;
-- without one, they are refused (55000) as an SQL UPDATE would be.
SET client_min_messages = error;  -- "wal_level is insufficient to publish"
CREATE PUBLICATION dp_pub FOR TABLE ratelimit_state;
RESET client_min_messages;
SELECT relreplident FROM pg_class WHERE oid = 'ratelimit_state'::regclass;
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
ALTER TABLE ratelimit_state REPLICA IDENTITY DEFAULT;
SELECT pg_temp.try($$ SELECT ratelimit_limit('dp', 'a', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}', 1) $$);
ALTER TABLE ratelimit_state REPLICA IDENTITY FULL;
DROP PUBLICATION dp_pub;

-- A column's type changed by the owner: datums of another type are never
-- read or written directly; every call goes through SQL, which converts.
ALTER TABLE ratelimit_state ALTER COLUMN value TYPE numeric;
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT ok FROM ratelimit_limit('dp', 'sh', :sharded, 1);
SELECT ok, remaining FROM ratelimit_check('dp', 'a', :cfg, 1);
SELECT ok, remaining FROM ratelimit_limit_all(jsonb_build_array(
  jsonb_build_object('name', 'dp', 'key', 'a', 'config', :cfg::jsonb, 'count', 1)));
SELECT value FROM ratelimit_value('dp', 'a', :cfg);
SELECT pg_typeof(value), value FROM ratelimit_state WHERE name = 'dp' AND key = 'a';
SELECT count(*) > 0 AS status_reads FROM ratelimit_status WHERE name = 'dp';
ALTER TABLE ratelimit_state ALTER COLUMN value TYPE double precision;

-- Back as installed: the direct path again, with the same answers.
SELECT ok, remaining FROM ratelimit_limit('dp', 'a', :cfg, 1);
SELECT value FROM ratelimit_value('dp', 'a', :cfg);
DROP TABLE dp_log;
DROP FUNCTION dp_log_write();
DROP FUNCTION dp_log_column();
DROP FUNCTION dp_log_statement();
SELECT ratelimit_reset('dp', 'a'), ratelimit_reset('dp', 'sh');
RESET ratelimit.now;

-- A session that has only reset limits (the direct delete: no SQL, no
-- config lookup) sees a rule added afterwards at its next call: the table's
-- shape is derived again, and the DELETE goes through SQL, where the rule
-- applies (DO INSTEAD NOTHING: the row stays).
SELECT ok FROM ratelimit_limit('dp_rule', 'k', :cfg, 1);
\c
SELECT ratelimit_reset('dp_rule', 'other');
CREATE RULE dp_keep AS ON DELETE TO ratelimit_state WHERE OLD.name = 'dp_rule' DO INSTEAD NOTHING;
SELECT ratelimit_reset('dp_rule', 'k');
SELECT count(*) AS rows_kept FROM ratelimit_state WHERE name = 'dp_rule';
DROP RULE dp_keep ON ratelimit_state;
SELECT ratelimit_reset('dp_rule', 'k');
SELECT count(*) AS rows_left FROM ratelimit_state WHERE name = 'dp_rule';
