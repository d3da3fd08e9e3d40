-- Benchmark schema and data, run once in a fresh database by bench/run.sh.
-- Every table used by a random-key workload holds the same 100,000 keys
-- ('n', 'k1' .. 'k100000'), so those workloads measure updates, not inserts.
\set ON_ERROR_STOP 1
-- The config of every granting ratelimit workload: a million tokens per
-- second, so no key (not even the hot one at 30,000 calls/s) ever runs dry.
\set cfg '\'{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}\''
-- The refused workloads: one token per ten years, already taken.
\set refused_cfg '\'{"kind": "token bucket", "rate": 1, "period": "3650 days"}\''

-- (bench/run.sh has created the extension in this database.)

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

-- Workload 4's table: the same shape and rows again.
CREATE TABLE pl_bucket (LIKE bench_plain INCLUDING ALL);
INSERT INTO pl_bucket SELECT * FROM bench_plain;

-- Sanity: the data the workloads expect.
DO $$
BEGIN
  IF (SELECT count(*) FROM ratelimit_state WHERE name = 'n') <> 100000
     OR (SELECT count(*) FROM ratelimit_state WHERE name = 'refused') <> 100000
     OR (SELECT count(*) FROM bench_plain) <> 100000
     OR (SELECT count(*) FROM pl_bucket) <> 100000 THEN
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
       pg_temp.bench_assert(pl_token_bucket('n', 'k42', 1000000, 1000, 1000000), 'PL/pgSQL keys must grant');

VACUUM ANALYZE bench_plain, pl_bucket, ratelimit_state, ratelimit_definition;
