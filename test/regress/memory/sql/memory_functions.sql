-- Every function and kind with "storage": "memory" (scripts/memory-test.sh
-- runs this with shared_preload_libraries = 'ratelimit'): the same answers a
-- table limit gives, kept in shared memory (ratelimit_status.storage).
\i test/sql_support/setup.sql
SET ratelimit.now = '2026-01-01 00:00:00+00';
\set tb '''{"kind": "token bucket", "rate": 2, "period": 60000, "capacity": 3, "storage": "memory"}'''
\set fw '''{"kind": "fixed window", "rate": 2, "period": 60000, "start": 0, "storage": "memory"}'''
\set sw '''{"kind": "sliding window", "rate": 2, "period": 60000, "start": 0, "storage": "memory"}'''
\set tbt '''{"kind": "token bucket", "rate": 2, "period": 60000, "capacity": 3}'''

-- ratelimit_limit, ratelimit_check and ratelimit_value on each kind.
SELECT * FROM ratelimit_limit('mf', 'tb', :tb);
SELECT * FROM ratelimit_limit('mf', 'tb', :tb, 2);
SELECT * FROM ratelimit_limit('mf', 'tb', :tb);
SELECT * FROM ratelimit_check('mf', 'tb', :tb);
SELECT * FROM ratelimit_value('mf', 'tb', :tb);
SELECT * FROM ratelimit_limit('mf', 'fw', :fw);
SELECT * FROM ratelimit_limit('mf', 'fw', :fw);
SELECT * FROM ratelimit_limit('mf', 'fw', :fw);
SELECT * FROM ratelimit_value('mf', 'fw', :fw);
SELECT * FROM ratelimit_limit('mf', 'sw', :sw, 2);
SELECT * FROM ratelimit_limit('mf', 'sw', :sw);
SELECT * FROM ratelimit_check('mf', 'sw', :sw);
-- No table row was written: the limits are memory's.
SELECT count(*) AS table_rows FROM ratelimit_state WHERE name = 'mf';
SELECT name, key, shard, kind, value, ts, stored_value, idle_at, storage FROM ratelimit_status
WHERE name = 'mf' ORDER BY key;
-- The NULL key is a limit of its own.
SELECT ok, remaining FROM ratelimit_limit('mf', NULL, :tb, 3);
SELECT ok, remaining FROM ratelimit_limit('mf', NULL, :tb);
SELECT key IS NULL AS null_key, stored_value FROM ratelimit_status WHERE name = 'mf' AND key IS NULL;

-- Time refills them, as in a table.
SET ratelimit.now = '2026-01-01 00:01:00+00';
SELECT ok, remaining FROM ratelimit_limit('mf', 'tb', :tb);
SELECT ok, remaining FROM ratelimit_limit('mf', 'fw', :fw);
SELECT ok, remaining FROM ratelimit_limit('mf', 'sw', :sw);
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- ratelimit_refund: capped at capacity; a never-used limit writes nothing.
SELECT ok, remaining FROM ratelimit_refund('mf', 'tb', 1, :tb);
SELECT ok, remaining FROM ratelimit_refund('mf', 'tb', 100, :tb);
SELECT ok, remaining FROM ratelimit_refund('mf', 'never', 1, :tb);
SELECT count(*) AS never_rows FROM ratelimit_status WHERE name = 'mf' AND key = 'never';
SELECT pg_temp.try($$ SELECT ratelimit_refund('mf', 'tb', -1, '{"kind": "token bucket", "rate": 2, "period": 60000, "capacity": 3, "storage": "memory"}') $$);

-- ratelimit_reset: true once, then false; the limit is full again.
SELECT ratelimit_reset('mf', 'fw');
SELECT ratelimit_reset('mf', 'fw');
SELECT value FROM ratelimit_value('mf', 'fw', :fw);

-- Reservations and maxReserved.
\set res '''{"kind": "token bucket", "rate": 1, "period": 1000, "maxReserved": 2, "storage": "memory"}'''
SELECT * FROM ratelimit_limit('mf', 'res', :res, 2, reserve => true);
SELECT * FROM ratelimit_limit('mf', 'res', :res, 1, reserve => true);
SELECT * FROM ratelimit_limit('mf', 'res', :res, 1, reserve => true);
SELECT * FROM ratelimit_value('mf', 'res', :res);
-- A count that can never fit (over capacity + maxReserved) is refused.
SELECT ok FROM ratelimit_limit('mf', 'res2', :res, 4, reserve => true);

-- throws: PT429, and nothing consumed.
SELECT ok FROM ratelimit_limit('mf', 'thr', :fw, 2);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'thr', '{"kind": "fixed window", "rate": 2, "period": 60000, "start": 0, "storage": "memory"}', throws => true) $$);
SELECT pg_temp.try($$ SELECT ratelimit_check('mf', 'thr', '{"kind": "fixed window", "rate": 2, "period": 60000, "start": 0, "storage": "memory"}', throws => true) $$);
SET ratelimit.error_format = 'postgrest';
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'thr', '{"kind": "fixed window", "rate": 2, "period": 60000, "start": 0, "storage": "memory"}', throws => true) $$);
RESET ratelimit.error_format;

-- ratelimit_headers of a memory limit's answer.
SELECT ratelimit_headers('mf', r, :fw) FROM ratelimit_limit('mf', 'thr', :fw) r;
SELECT ratelimit_headers('mf', r, :tb) FROM ratelimit_limit('mf', 'hdr', :tb) r;

-- Defined names: calls omit the config; an inline config must be the same
-- limit (storage included); ratelimit_status shows kind and value.
SELECT ratelimit_define('mf-def', :tb);
SELECT ok, remaining FROM ratelimit_limit('mf-def', 'u1');
SELECT ok, remaining FROM ratelimit_limit('mf-def', 'u1', :tb);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf-def', 'u1', '{"kind": "token bucket", "rate": 2, "period": 60000, "capacity": 3}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf-def', 'u1', '{"kind": "token bucket", "rate": 2, "period": 60000, "capacity": 3, "storage": "memory", "on_rollback": "keep"}') $$);
SELECT name, key, kind, value, stored_value, storage FROM ratelimit_status WHERE name = 'mf-def';
SELECT value FROM ratelimit_value('mf-def', 'u1');
SELECT ok, remaining FROM ratelimit_refund('mf-def', 'u1', 1);

-- Overrides: a key may be moved to memory (or a memory key to the table).
SELECT ratelimit_define('mf-ovr', :tbt);
SELECT ok, remaining FROM ratelimit_limit('mf-ovr', 'table-key');
SELECT ratelimit_override('mf-ovr', 'mem-key', '{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "storage": "memory"}');
SELECT ok, remaining FROM ratelimit_limit('mf-ovr', 'mem-key');
SELECT ok, remaining FROM ratelimit_limit('mf-ovr', 'mem-key');
SELECT name, key, kind, value, storage FROM ratelimit_status WHERE name = 'mf-ovr' ORDER BY key;
SELECT ratelimit_unoverride('mf-ovr', 'mem-key');
-- Back to the table's config: the key starts afresh in the table.
SELECT ok, remaining FROM ratelimit_limit('mf-ovr', 'mem-key');
SELECT key, storage FROM ratelimit_status WHERE name = 'mf-ovr' ORDER BY key, storage;

-- Shadow mode: refusals are answered ok and consume nothing.
\set shadow '''{"kind": "token bucket", "rate": 1, "period": 60000, "shadow": true, "storage": "memory"}'''
SELECT ok, remaining FROM ratelimit_limit('mf', 'shadow', :shadow);
SELECT ok, retry_after, remaining FROM ratelimit_limit('mf', 'shadow', :shadow);
SELECT ok FROM ratelimit_limit('mf', 'shadow', :shadow, throws => true);
SELECT value FROM ratelimit_value('mf', 'shadow', :shadow);

-- Shards are accepted and ignored: one exact entry, shard 0.
\set sh '''{"kind": "token bucket", "rate": 4, "period": 60000, "shards": 4, "storage": "memory"}'''
SELECT i, (ratelimit_limit('mf', 'sharded', :sh)).ok FROM generate_series(1, 5) i;
SELECT shard, stored_value, storage FROM ratelimit_status WHERE name = 'mf' AND key = 'sharded';

-- ratelimit_limit_all: memory and table limits mixed, all or nothing.
\set fw1 '''{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "storage": "memory"}'''
SELECT name, key, ok, remaining FROM ratelimit_limit_all(format('[{"name": "mf-all", "key": "m", "config": %s}, {"name": "mf-all", "key": "t", "config": %s}]', :fw1, :tbt)::jsonb);
-- The memory element is spent now: the call refuses, the table's is not taken.
SELECT name, key, ok, remaining FROM ratelimit_limit_all(format('[{"name": "mf-all", "key": "m", "config": %s}, {"name": "mf-all", "key": "t", "config": %s}]', :fw1, :tbt)::jsonb);
SELECT value FROM ratelimit_value('mf-all', 't', :tbt);
-- A table element refusing: the memory element is not taken.
SELECT ok FROM ratelimit_limit('mf-all', 't', :tbt, 2);
SELECT name, key, ok FROM ratelimit_limit_all(format('[{"name": "mf-all", "key": "m2", "config": %s}, {"name": "mf-all", "key": "t", "config": %s}]', :fw1, :tbt)::jsonb);
SELECT value FROM ratelimit_value('mf-all', 'm2', :fw1);
-- Two memory elements, the second refusing: the first is given back.
SELECT name, key, ok FROM ratelimit_limit_all(format('[{"name": "mf-all", "key": "m3", "config": %s}, {"name": "mf-all", "key": "m", "config": %s}]', :fw1, :fw1)::jsonb);
SELECT value FROM ratelimit_value('mf-all', 'm3', :fw1);
-- ... under "on_rollback": "keep" too (all or nothing within the call).
\set fwkeep '''{"kind": "fixed window", "rate": 1, "period": 60000, "start": 0, "storage": "memory", "on_rollback": "keep"}'''
SELECT name, key, ok FROM ratelimit_limit_all(format('[{"name": "mf-all", "key": "k1", "config": %s}, {"name": "mf-all", "key": "m", "config": %s}]', :fwkeep, :fw1)::jsonb);
SELECT value FROM ratelimit_value('mf-all', 'k1', :fwkeep);
-- throws: PT429.
SELECT pg_temp.try(format($$ SELECT * FROM ratelimit_limit_all('[{"name": "mf-all", "key": "m", "config": %s}]', throws => true) $$, :fw1));
-- Elements of one limit under two configs (memory and table): 22023.
SELECT pg_temp.try(format($$ SELECT * FROM ratelimit_limit_all('[{"name": "mf-all", "key": "x", "config": %s}, {"name": "mf-all", "key": "x", "config": %s}]') $$, :fw1, :tbt));

-- Config errors (22023), each naming the field.
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "disk"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": 1}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "memory", "on_rollback": "undo"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'e', '{"kind": "token bucket", "rate": 1, "period": 1000, "on_rollback": "keep"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_limit('mf', 'e', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": "table", "on_rollback": "keep"}') $$);
SELECT pg_temp.try($$ SELECT ratelimit_define('mf-e', '{"kind": "token bucket", "rate": 1, "period": 1000, "on_rollback": "keep"}') $$);
-- JSON null is the default: the table, refunded.
SELECT ok FROM ratelimit_limit('mf', 'nulls', '{"kind": "token bucket", "rate": 1, "period": 1000, "storage": null, "on_rollback": null}');
SELECT storage FROM ratelimit_status WHERE name = 'mf' AND key = 'nulls';

-- The name and key of a memory limit take at most 236 bytes together (54000).
SELECT ok FROM ratelimit_limit(repeat('n', 40), repeat('k', 196), :tb);
SELECT pg_temp.try(format($$ SELECT ratelimit_limit(%L, %L, %L) $$, repeat('n', 40), repeat('k', 197), :tb));
SELECT pg_temp.try(format($$ SELECT ratelimit_check(%L, %L, %L) $$, repeat('n', 237), NULL, :tb));
SELECT pg_temp.try(format($$ SELECT * FROM ratelimit_value(%L, %L, %L) $$, repeat('n', 237), NULL, :tb));
SELECT pg_temp.try(format($$ SELECT ratelimit_refund(%L, %L, 1, %L) $$, repeat('é', 119), NULL, :tb));
-- (multibyte: bytes, not characters, count)
SELECT ok FROM ratelimit_limit(repeat('é', 118), NULL, :tb);
-- The table has no such bound; a reset of a long identity finds nothing in memory.
SELECT ok FROM ratelimit_limit(repeat('n', 237), NULL, :tbt);
SELECT ratelimit_reset(repeat('n', 237));

-- ratelimit_cleanup deletes memory entries back in their initial state.
SET ratelimit.now = '2026-01-02 00:00:00+00';
SELECT count(*) > 0 AS some_memory FROM ratelimit_status WHERE storage = 'memory';
SELECT ratelimit_cleanup() > 0 AS cleaned;
SELECT count(*) AS memory_left FROM ratelimit_status WHERE storage = 'memory' AND name <> 'mf-def';
-- (mf-def's reservation-free bucket is full too; its definition stays)
SELECT count(*) AS mf_def_left FROM ratelimit_status WHERE name = 'mf-def';

-- ratelimit_status and ratelimit_reset are the owner's; the rows are listed
-- with the table's (name, key, storage).
CREATE ROLE mf_app;
SET ROLE mf_app;
SELECT pg_temp.try($$ SELECT count(*) FROM ratelimit_status $$);
SELECT pg_temp.try($$ SELECT ratelimit_reset('mf', 'tb') $$);
SELECT ok FROM ratelimit_limit('mf-def', 'app');
RESET ROLE;
DROP ROLE mf_app;
SELECT ratelimit_undefine('mf-def');
SELECT ratelimit_undefine('mf-ovr');
DELETE FROM ratelimit_state WHERE name LIKE 'mf%' OR name LIKE 'nnnn%';
RESET ratelimit.now;
