-- Benchmark schema and data, run once in each fresh database of bench/run.sh and bench/profile.sh.
-- Every table used by a random-key workload holds the same 100,000 keys
-- ('n', 'k1' .. 'k100000'), so those workloads measure updates, not inserts.
\set ON_ERROR_STOP 1
-- The config of every granting ratelimit workload: a million tokens per
-- second, so no key (not even the hot one at 30,000 calls/s) ever runs dry.
\set cfg '\'{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}\''
-- The refused workloads: one token per ten years, already taken.
\set refused_cfg '\'{"kind": "token bucket", "rate": 1, "period": "3650 days"}\''

-- (The script has created the extension in this database, pinned to a build.)

-- Workload 4: the token bucket a user would write in PL/pgSQL from the
-- article: lock the row (SELECT ... FOR UPDATE), insert it if missing,
-- refill with clock_timestamp(), and UPDATE it when granted. (Its table,
-- pl_bucket, is created below.)
CREATE FUNCTION pl_token_bucket(p_name text, p_key text, p_rate float8, p_period_ms float8,
                                p_capacity float8, p_count float8 DEFAULT 1)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_value float8;
  v_ts    timestamptz;
  v_now   timestamptz;
BEGIN
  SELECT value, ts INTO v_value, v_ts FROM pl_bucket
   WHERE name = p_name AND key = p_key AND shard = 0 FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO pl_bucket (name, key, shard, value, ts)
    VALUES (p_name, p_key, 0, p_capacity, clock_timestamp())
    ON CONFLICT (name, key, shard) DO NOTHING;
    SELECT value, ts INTO v_value, v_ts FROM pl_bucket
     WHERE name = p_name AND key = p_key AND shard = 0 FOR UPDATE;
  END IF;
  v_now := greatest(clock_timestamp(), v_ts);
  v_value := least(p_capacity,
                   v_value + extract(epoch FROM v_now - v_ts) * 1000 * p_rate / p_period_ms);
  IF v_value < p_count THEN
    RETURN false;
  END IF;
  UPDATE pl_bucket SET value = v_value - p_count, ts = v_now
   WHERE name = p_name AND key = p_key AND shard = 0;
  RETURN true;
END
$$;

-- Workloads 4c and 4d: the leanest correct token bucket a user would write
-- by hand, one SQL statement (bench/workloads/w04c_lean_random.sql):
--
--   INSERT INTO lean_bucket AS b VALUES (name, key, capacity - 1, now_ms)
--   ON CONFLICT (name, key) DO UPDATE
--      SET value = least(capacity, b.value + (greatest(excluded.ts, b.ts) - b.ts) * rate / period) - 1,
--          ts = greatest(excluded.ts, b.ts)
--    WHERE least(capacity, b.value + (greatest(excluded.ts, b.ts) - b.ts) * rate / period) >= 1
--
-- Granted when it inserts or updates a row ("INSERT 0 1"), refused when not
-- ("INSERT 0 0"). Why it is correct under concurrency: ON CONFLICT DO UPDATE
-- locks the existing row (waiting for a transaction that holds it) and
-- evaluates WHERE and SET on the latest committed version, with the lock
-- held, so two callers never spend the same token; a missing key is
-- inserted, and a racing insert turns into the update. The clock is read
-- once, before the lock (excluded.ts); greatest() keeps ts monotonic, so a
-- caller that waited gets no refill for the wait (it can only under-admit).
-- Under REPEATABLE READ it fails with 40001, as ratelimit_limit does.
-- Its ts is float8 milliseconds (no timestamptz arithmetic), its key two
-- columns with the "C" collation of the state table (so the index compares
-- bytes, as ratelimit_state's does; the database default would be dearer),
-- and the config is constants in the statement.
-- What it lacks compared with ratelimit_limit: a refusal locks the row too
-- (the ON CONFLICT lock comes before WHERE), so it assigns a transaction id,
-- writes a Heap/LOCK WAL record and queues behind the row lock, where a
-- ratelimit refusal reads without a lock and writes nothing; the answer is
-- only granted or not (no remaining, retry_after, reset); the clock is read
-- before the lock, not after; no reservations or refunds, no shards for hot
-- keys, no other algorithms, no named limits, no NULL (global) key, no idle
-- rows cleanup, no validation of the config or count, and the table is open
-- to whoever may write it.
CREATE TABLE lean_bucket (
  name  text COLLATE "C",
  key   text COLLATE "C",
  value float8 NOT NULL,
  ts    float8 NOT NULL,   -- ms since the epoch
  PRIMARY KEY (name, key)
);

-- The server-side cost measurement (bench/run.sh): workload 4c's statement
-- as a function, so it can be called once per row of one statement (as
-- plain_update is for workload 2). NULL when refused.
CREATE FUNCTION lean_token_bucket(p_name text, p_key text, p_rate float8, p_period_ms float8,
                                  p_capacity float8, p_count float8 DEFAULT 1)
RETURNS boolean LANGUAGE sql AS $$
  INSERT INTO lean_bucket AS b (name, key, value, ts)
  VALUES (p_name, p_key, p_capacity - p_count, date_part('epoch', clock_timestamp()) * 1000)
  ON CONFLICT (name, key) DO UPDATE
     SET value = least(p_capacity, b.value + (greatest(excluded.ts, b.ts) - b.ts) * p_rate / p_period_ms) - p_count,
         ts = greatest(excluded.ts, b.ts)
   WHERE least(p_capacity, b.value + (greatest(excluded.ts, b.ts) - b.ts) * p_rate / p_period_ms) >= p_count
  RETURNING true
$$;

-- Workloads 4e and 4f: the leanest PL/pgSQL token bucket a user would write:
-- workload 4a's function (lock the row, insert it if missing, refill,
-- UPDATE when granted) on workload 4c's table, so ts is float8 milliseconds
-- (float8 arithmetic instead of timestamptz - timestamptz and extract(epoch
-- FROM interval)) and the key is two columns. The clock is read after the
-- lock, as in 4a and ratelimit_limit. It shares lean_bucket's rows with 4c:
-- two ways to write the same bucket over the same table. It lacks what 4c
-- lacks (see above), except that it reads the clock after the lock.
CREATE FUNCTION lean_pl_token_bucket(p_name text, p_key text, p_rate float8, p_period_ms float8,
                                     p_capacity float8, p_count float8 DEFAULT 1)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_value float8;
  v_ts    float8;
  v_now   float8;
BEGIN
  SELECT value, ts INTO v_value, v_ts FROM lean_bucket
   WHERE name = p_name AND key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO lean_bucket (name, key, value, ts)
    VALUES (p_name, p_key, p_capacity, date_part('epoch', clock_timestamp()) * 1000)
    ON CONFLICT (name, key) DO NOTHING;
    SELECT value, ts INTO v_value, v_ts FROM lean_bucket
     WHERE name = p_name AND key = p_key FOR UPDATE;
  END IF;
  v_now := greatest(date_part('epoch', clock_timestamp()) * 1000, v_ts);
  v_value := least(p_capacity, v_value + (v_now - v_ts) * p_rate / p_period_ms);
  IF v_value < p_count THEN
    RETURN false;
  END IF;
  UPDATE lean_bucket SET value = v_value - p_count, ts = v_now
   WHERE name = p_name AND key = p_key;
  RETURN true;
END
$$;

-- Workload 5: the named limit 'n' has the same config as the inline one, so
-- the inline, named and check workloads share the state rows of 'n'.
SELECT ratelimit_define('n', :cfg);

-- State rows for the 100,000 keys of 'n' (created through ratelimit_limit),
-- and 100,000 empty buckets of 'refused' (each call takes its only token).
SELECT count(*) FILTER (WHERE (ratelimit_limit('n', 'k' || g, :cfg)).ok) AS n_granted
  FROM generate_series(1, 100000) g;
SELECT count(*) FILTER (WHERE (ratelimit_limit('refused', 'k' || g, :refused_cfg)).ok) AS refused_granted
  FROM generate_series(1, 100000) g;

-- Workloads 2 and 3: a plain table LIKE the state table (the same columns,
-- types, collations, defaults, checks, unique index on (name, key, shard) and
-- partial index), holding a copy of the state rows of 'n': the UPDATE writes
-- the same physical row as ratelimit_limit does, looked up by the same key.
CREATE TABLE bench_plain (LIKE ratelimit_state INCLUDING ALL);
INSERT INTO bench_plain SELECT * FROM ratelimit_state WHERE name = 'n';

-- The server-side cost measurement (bench/run.sh): workload 2's UPDATE as a
-- function, so it can be called once per row of one statement.
CREATE FUNCTION plain_update(p_key text) RETURNS boolean LANGUAGE sql AS $$
  UPDATE bench_plain SET value = value - 1, ts = clock_timestamp()
   WHERE name = 'n' AND key = p_key AND shard = 0
  RETURNING true
$$;

-- Workload 2b (issue 27): the primary-key UPDATE of the minimal table a
-- user would write for a bucket, as the issue gives it: no shard column,
-- no check, no partial index, the database's default collation. The same
-- 100,000 keys of 'n'. Workload 2 (the state table's shape) and 2b are both
-- comparators for the table grant.
CREATE TABLE bench_minimal (name text, key text, v float8, ts timestamptz, PRIMARY KEY (name, key));
INSERT INTO bench_minimal SELECT name, key, value, ts FROM ratelimit_state WHERE name = 'n';

-- The server-side cost measurement (bench/run.sh): workload 2b's UPDATE as a
-- function (as plain_update is workload 2's).
CREATE FUNCTION minimal_update(p_key text) RETURNS boolean LANGUAGE sql AS $$
  UPDATE bench_minimal SET v = v - 1, ts = now()
   WHERE name = 'n' AND key = p_key
  RETURNING true
$$;

-- Workload 4's table: the same shape and rows again.
CREATE TABLE pl_bucket (LIKE bench_plain INCLUDING ALL);
INSERT INTO pl_bucket SELECT * FROM bench_plain;

-- Workloads 4c and 4e's table: the state rows of 'n' again, ts in milliseconds.
INSERT INTO lean_bucket
SELECT name, key, value, date_part('epoch', ts) * 1000 FROM ratelimit_state WHERE name = 'n';

-- Sanity: the data the workloads expect.
DO $$
BEGIN
  IF (SELECT count(*) FROM ratelimit_state WHERE name = 'n') <> 100000
     OR (SELECT count(*) FROM ratelimit_state WHERE name = 'refused') <> 100000
     OR (SELECT count(*) FROM bench_plain) <> 100000
     OR (SELECT count(*) FROM bench_minimal) <> 100000
     OR (SELECT count(*) FROM pl_bucket) <> 100000
     OR (SELECT count(*) FROM lean_bucket) <> 100000 THEN
    RAISE EXCEPTION 'bench setup: unexpected row counts';
  END IF;
END
$$;
CREATE FUNCTION pg_temp.bench_assert(ok boolean, what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN RAISE EXCEPTION 'bench setup: %', what; END IF;
END
$$;
SELECT pg_temp.bench_assert(NOT (ratelimit_check('refused', 'k42', :refused_cfg)).ok, 'refused keys must be empty'),
       pg_temp.bench_assert((ratelimit_check('n', 'k42', :cfg)).ok, 'inline keys must grant'),
       pg_temp.bench_assert((ratelimit_check('n', 'k42')).ok, 'named keys must grant'),
       pg_temp.bench_assert(pl_token_bucket('n', 'k42', 1000000, 1000, 1000000), 'PL/pgSQL keys must grant'),
       pg_temp.bench_assert(lean_token_bucket('n', 'k42', 1000000, 1000, 1000000), 'lean keys must grant'),
       pg_temp.bench_assert(lean_pl_token_bucket('n', 'k42', 1000000, 1000, 1000000), 'lean PL/pgSQL keys must grant');

VACUUM ANALYZE bench_plain, bench_minimal, pl_bucket, lean_bucket, ratelimit_state, ratelimit_definition;
