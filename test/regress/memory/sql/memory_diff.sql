-- The differential test: the same random sequence of calls (every kind,
-- counts, reservations, refunds, resets, checks, values, ratelimit_limit_all
-- (one element, or two on the same limit),
-- rolled-back savepoints, time moving on) run against a table limit and a
-- memory limit whose configs differ only in "storage" must give the same
-- answers, call by call; every difference is listed, and none is expected.
-- Both limits have the same name and key (a reset resets both; the window
-- origin, derived from them when a config has no "start", is the same).
-- Counts and times are multiples of 1/4 token and 125 ms and rates and
-- periods powers of two, so that a rolled-back grant given back to a memory
-- limit (arithmetic) lands on exactly the value the table's rollback
-- restores (the row as it was). Rollbacks never cross a window boundary:
-- there the table and memory differ by design (memory gives back only into
-- the window a grant was taken from).
\i test/sql_support/setup.sql
SELECT setseed(0.19);
CREATE TEMP TABLE configs (id int PRIMARY KEY, config jsonb);
INSERT INTO configs VALUES
  (1, '{"kind": "token bucket", "rate": 4, "period": 1000, "capacity": 6, "maxReserved": 4}'),
  (2, '{"kind": "token bucket", "rate": 2, "period": 2000}'),
  (3, '{"kind": "fixed window", "rate": 4, "period": 1000, "capacity": 8, "maxReserved": 2, "start": 0}'),
  (4, '{"kind": "fixed window", "rate": 2, "period": 4000}'),
  (5, '{"kind": "sliding window", "rate": 4, "period": 1000, "start": 0}'),
  (6, '{"kind": "sliding window", "rate": 8, "period": 2000}'),
  (7, '{"kind": "token bucket", "rate": 2, "period": 1000, "shadow": true}'),
  (8, '{"kind": "fixed window", "rate": 1, "period": 500, "capacity": 0, "maxReserved": 3, "start": 125}');
CREATE TEMP TABLE differences (step int, op text, config int, table_answer text, memory_answer text);
CREATE TEMP TABLE ops (op text, answers int DEFAULT 0, granted int DEFAULT 0, refused int DEFAULT 0, errors int DEFAULT 0);

-- A statement's answer as text ('ERROR <sqlstate>: <message>' for an error).
CREATE FUNCTION pg_temp.answer(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
BEGIN
  EXECUTE query INTO result;
  RETURN coalesce(result, '<null>');
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;

-- A random multiple of 1/4 from 0 to bound.
CREATE FUNCTION pg_temp.quarter(bound int) RETURNS float8 LANGUAGE sql AS $$
  SELECT floor(random() * (bound * 4 + 1)) / 4 $$;

DO $$
DECLARE
  now_ms bigint := 1767225600000;  -- 2026-01-01 00:00:00 UTC
  c int;
  tcfg jsonb;
  mcfg jsonb;
  k text;
  op_name text;
  p float8;
  q text;
  t_answer text;
  m_answer text;
BEGIN
  FOR step IN 1..4000 LOOP
    -- The clock: mostly still or one small step, sometimes periods on.
    p := random();
    IF p < 0.97 THEN
      now_ms := now_ms + 125 * (p >= 0.8)::int;
    ELSE
      now_ms := now_ms + 125 * floor(random() * 30)::int;
    END IF;
    PERFORM set_config('ratelimit.now', to_char(to_timestamp(now_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || '+00', false);
    -- Runs of calls on one limit, so that they run out and refuse.
    IF c IS NULL OR random() < 0.25 THEN
      c := 1 + floor(random() * 8)::int;
      k := 'c' || c || '-' || floor(random() * 2)::int;
    END IF;
    tcfg := (SELECT config FROM configs WHERE id = c);
    mcfg := tcfg || '{"storage": "memory"}';
    p := random();
    op_name := CASE WHEN p < 0.40 THEN 'limit' WHEN p < 0.52 THEN 'reserve' WHEN p < 0.60 THEN 'check'
               WHEN p < 0.68 THEN 'value' WHEN p < 0.76 THEN 'refund' WHEN p < 0.79 THEN 'reset'
               WHEN p < 0.88 THEN 'limit_all' ELSE 'rollback' END;
    IF op_name = 'reset' THEN
      -- One call resets both storages.
      t_answer := pg_temp.answer(format('SELECT ratelimit_reset(%L, %L)::text', 'mdiff', k));
      m_answer := t_answer;
    ELSIF op_name = 'rollback' THEN
      -- Taken under a savepoint (a PL/pgSQL block) that rolls back; the
      -- clock stays in the window of the grant.
      q := format('SELECT ratelimit_limit(%L, %L, %L, %s)::text', 'mdiff', k, '%s', pg_temp.quarter(3));
      BEGIN
        t_answer := pg_temp.answer(format(q, tcfg));
        m_answer := pg_temp.answer(format(q, mcfg));
        RAISE EXCEPTION 'roll back';
      EXCEPTION WHEN raise_exception THEN
        NULL;
      END;
      IF t_answer IS DISTINCT FROM m_answer THEN
        INSERT INTO differences VALUES (step, op_name || ' (the grant)', c, t_answer, m_answer);
      END IF;
      q := format('SELECT row(v.*)::text FROM ratelimit_value(%L, %L, %L) v', 'mdiff', k, '%s');
      t_answer := pg_temp.answer(format(q, tcfg));
      m_answer := pg_temp.answer(format(q, mcfg));
    ELSE
      q := CASE op_name
        WHEN 'limit' THEN format('SELECT row(r.*)::text FROM ratelimit_limit(%L, %L, %L, %s) r', 'mdiff', k, '%s', pg_temp.quarter(3))
        WHEN 'reserve' THEN format('SELECT row(r.*)::text FROM ratelimit_limit(%L, %L, %L, %s, reserve => true) r', 'mdiff', k, '%s', pg_temp.quarter(5))
        WHEN 'check' THEN format('SELECT row(r.*)::text FROM ratelimit_check(%L, %L, %L, %s, reserve => %L) r', 'mdiff', k, '%s', pg_temp.quarter(3), random() < 0.3)
        WHEN 'value' THEN format('SELECT row(v.*)::text FROM ratelimit_value(%L, %L, %L) v', 'mdiff', k, '%s')
        WHEN 'refund' THEN format('SELECT row(r.*)::text FROM ratelimit_refund(%L, %L, %s, %L) r', 'mdiff', k, pg_temp.quarter(3), '%s')
        -- One element, or two on the same limit (decided one after the other).
        WHEN 'limit_all' THEN format('SELECT string_agg(row(a.*)::text, %L) FROM ratelimit_limit_all(jsonb_build_array(jsonb_build_object(%L, %L, %L, %L, %L, %s, %L, %L::jsonb)) || CASE WHEN %L THEN jsonb_build_array(jsonb_build_object(%L, %L, %L, %L, %L, %s, %L, %L::jsonb)) ELSE %L END) a',
                                     ' ', 'name', 'mdiff', 'key', k, 'count', pg_temp.quarter(2), 'config', '%1$s',
                                     random() < 0.5, 'name', 'mdiff', 'key', k, 'count', pg_temp.quarter(2), 'config', '%1$s', '[]')
      END;
      t_answer := pg_temp.answer(format(q, tcfg));
      m_answer := pg_temp.answer(format(q, mcfg));
    END IF;
    INSERT INTO ops (op) SELECT op_name WHERE NOT EXISTS (SELECT FROM ops WHERE ops.op = op_name);
    UPDATE ops SET answers = answers + 1,
                   granted = granted + (t_answer ~ '^\((mdiff,c[0-9]-[0-9],)?t,')::int,
                   refused = refused + (t_answer ~ '^\((mdiff,c[0-9]-[0-9],)?f,')::int,
                   errors = errors + (t_answer LIKE 'ERROR%')::int
    WHERE ops.op = op_name;
    IF t_answer IS DISTINCT FROM m_answer THEN
      INSERT INTO differences VALUES (step, op_name, c, t_answer, m_answer);
    END IF;
  END LOOP;
END $$;
-- Every kind of call ran; the deciding ones granted and refused.
SELECT op, answers > 50 AS ran,
       CASE WHEN op IN ('limit', 'reserve', 'check', 'limit_all') THEN granted > 0 AND refused > 0 END AS granted_and_refused,
       errors > 0 AS some_errors
FROM ops ORDER BY op;
SELECT count(*) AS differences FROM differences;
SELECT * FROM differences ORDER BY step LIMIT 20;
-- Both storages hold the limits the sequence used.
SELECT storage, count(*) AS limits FROM ratelimit_status WHERE name = 'mdiff' GROUP BY storage ORDER BY storage;
DELETE FROM ratelimit_state WHERE name = 'mdiff';
SET ratelimit.now = '2100-01-01 00:00:00+00';
SELECT ratelimit_cleanup() >= 0 AS cleaned;
RESET ratelimit.now;
