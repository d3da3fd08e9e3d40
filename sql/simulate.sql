-- ratelimit_simulate: the answers ratelimit_limit gives a key never used,
-- with the clock at each arrival, computed without storage. Proven by
-- difference: for every kind and its options, pseudo-random arrivals and
-- counts are simulated, then replayed through ratelimit_limit with
-- ratelimit.now set to each arrival, and every row must be equal.
\i test/sql_support/setup.sql

-- Arrivals from `first`: n of them, each gap a random fraction of up to
-- two `gap`s, one in eight repeating the instant before, one in thirty
-- after ten idle periods (a row that became the same as none).
CREATE FUNCTION pg_temp.arrivals(n int, gap interval, period interval, first timestamptz) RETURNS timestamptz[]
LANGUAGE plpgsql AS $$
DECLARE
  at timestamptz := first;
  out timestamptz[] := '{}';
  dice float8;
BEGIN
  FOR i IN 1..n LOOP
    dice := random();
    IF dice < 0.125 AND i > 1 THEN NULL;
    ELSIF dice < 0.16 THEN at := at + period * 10;
    ELSE at := at + gap * (2 * random());
    END IF;
    -- whole microseconds, as the clock has them
    at := date_trunc('microseconds', at);
    out := out || at;
  END LOOP;
  RETURN out;
END $$;

-- n counts drawn from `choices`.
CREATE FUNCTION pg_temp.counts(n int, choices float8[]) RETURNS float8[] LANGUAGE sql AS $$
SELECT array_agg(choices[1 + floor(random() * array_length(choices, 1))::int] ORDER BY i)
FROM generate_series(1, n) i
$$;

-- ratelimit_limit with the clock at `at`.
CREATE FUNCTION pg_temp.limit_at(at timestamptz, name text, key text, config jsonb, count float8)
RETURNS ratelimit_result LANGUAGE plpgsql AS $$
DECLARE r ratelimit_result;
BEGIN
  PERFORM set_config('ratelimit.now', at::text, false);
  r := ratelimit_limit(name, key, config, count);
  PERFORM set_config('ratelimit.now', '', false);
  RETURN r;
END $$;

-- Replays a simulation (of ratelimit_limit(name, key, config), or with
-- named false of no name) through ratelimit_limit(name, key, limit_config):
-- one row per arrival compared on ok, remaining and retry_after (exactly;
-- NULL retry_after equal to NULL). Returns how many arrivals and
-- mismatches; the first mismatches are shown as notices.
CREATE FUNCTION pg_temp.replay(config jsonb, arrivals timestamptz[], counts float8[], name text, key text,
                               limit_config jsonb DEFAULT NULL, named boolean DEFAULT true)
RETURNS TABLE (n int, mismatches int) LANGUAGE plpgsql AS $$
DECLARE
  s record;
  r ratelimit_result;
BEGIN
  n := 0; mismatches := 0;
  FOR s IN SELECT * FROM ratelimit_simulate(config, arrivals, counts,
                                              CASE WHEN named THEN name END, CASE WHEN named THEN key END)
           WITH ORDINALITY AS t(at, count, ok, remaining, retry_after, i) LOOP
    n := n + 1;
    r := pg_temp.limit_at(s.at, name, key, coalesce(limit_config, config), s.count);
    IF (r.ok, r.remaining, r.retry_after) IS DISTINCT FROM (s.ok, s.remaining, s.retry_after)
       OR s.at <> arrivals[s.i] OR s.count <> coalesce(counts[s.i], 1) OR s.i <> n THEN
      mismatches := mismatches + 1;
      IF mismatches <= 3 THEN
        RAISE NOTICE '% arrival % at % count %: simulated (%, %, %), ratelimit_limit (%, %, %)', name, s.i, s.at,
          s.count, s.ok, s.remaining, s.retry_after, r.ok, r.remaining, r.retry_after;
      END IF;
    END IF;
  END LOOP;
  RETURN NEXT;
END $$;

-- The configs: every kind, with and without capacity, start, maxReserved,
-- shadow and fractional rates; the arrivals come about as fast as the rate.
-- A shadow limit is also sent counts that can never fit (answered, not
-- raised).
CREATE TEMP TABLE sim_case (name text PRIMARY KEY, config jsonb, period interval, choices float8[]);
INSERT INTO sim_case VALUES
  ('tb',          '{"kind": "token bucket", "rate": 5, "period": "1 second"}', '1 second', '{1,1,1,2,0,0.5}'),
  ('tb-capacity', '{"kind": "token bucket", "rate": 3, "period": 2000, "capacity": 10}', '2 seconds', '{1,1,2,3,10,0}'),
  ('tb-fraction', '{"kind": "token bucket", "rate": 2.5, "period": 1500}', '1.5 seconds', '{0.25,1,1,2.5,0.1}'),
  ('tb-reserved', '{"kind": "token bucket", "rate": 4, "period": "1 minute", "maxReserved": 4}', '1 minute', '{1,1,2,4}'),
  ('tb-shadow',   '{"kind": "token bucket", "rate": 2, "period": "1 second", "shadow": true}', '1 second', '{1,1,2}'),
  ('tb-shadow-never', '{"kind": "token bucket", "rate": 2, "period": "1 second", "shadow": true}', '1 second', '{1,1,2,3,5}'),
  ('fw',          '{"kind": "fixed window", "rate": 5, "period": "1 second"}', '1 second', '{1,1,1,2,0,0.5}'),
  ('fw-start',    '{"kind": "fixed window", "rate": 4, "period": 2500, "start": "2026-01-01 00:00:00.125+00"}', '2.5 seconds', '{1,1,2,4}'),
  ('fw-capacity', '{"kind": "fixed window", "rate": 3, "period": "1 second", "capacity": 7}', '1 second', '{1,1,2,7,0}'),
  ('fw-reserved', '{"kind": "fixed window", "rate": 3, "period": "1 hour", "maxReserved": 3}', '1 hour', '{1,1,3}'),
  ('fw-shadow',   '{"kind": "fixed window", "rate": 2, "period": "1 second", "shadow": true}', '1 second', '{1,1,2}'),
  ('fw-shadow-never', '{"kind": "fixed window", "rate": 2, "period": "1 second", "shadow": true}', '1 second', '{1,1,2,4}'),
  ('sw',          '{"kind": "sliding window", "rate": 5, "period": "1 second"}', '1 second', '{1,1,1,2,0}'),
  ('sw-start',    '{"kind": "sliding window", "rate": 7, "period": 3000, "start": "2000-01-01 00:00:01+00"}', '3 seconds', '{1,1,2,3,7}'),
  ('sw-fraction', '{"kind": "sliding window", "rate": 10, "period": "1 minute"}', '1 minute', '{0.5,1,1,2.5}'),
  ('sw-shadow',   '{"kind": "sliding window", "rate": 3, "period": "1 second", "shadow": true}', '1 second', '{1,1,2}'),
  ('sw-shadow-never', '{"kind": "sliding window", "rate": 3, "period": "1 second", "shadow": true}', '1 second', '{1,1,2,9}');

SELECT setseed(0.2826);
CREATE TEMP TABLE sim_input AS
SELECT name, config,
       pg_temp.arrivals(400, period / (config->>'rate')::float8, period, '2026-01-01 00:00:00+00') AS arrivals,
       pg_temp.counts(400, choices) AS counts
FROM sim_case ORDER BY name;

-- Every arrival equal; and (but where counts can never fit) the same
-- limit without shadow grants and refuses often: the arrivals test both.
SELECT c.name, r.n, r.mismatches,
       CASE WHEN c.name NOT LIKE '%-never' THEN
         (SELECT count(*) FILTER (WHERE ok) >= 20 AND count(*) FILTER (WHERE NOT ok) >= 20
          FROM ratelimit_simulate(c.config - 'shadow', c.arrivals, c.counts)) END AS grants_and_refusals
FROM sim_input c, pg_temp.replay(c.config, c.arrivals, c.counts, 'sim-' || c.name, 'k') r ORDER BY c.name;

-- The same with the default counts (1 each), and the global (NULL) key.
SELECT c.name, r.n, r.mismatches
FROM sim_input c, pg_temp.replay(c.config, c.arrivals, NULL, 'sim-ones-' || c.name, NULL) r ORDER BY c.name;

-- Without a name, windows are aligned on whole periods from the Unix
-- epoch: as ratelimit_limit aligns them with "start" at the epoch.
SELECT c.name, r.n, r.mismatches
FROM sim_input c,
     pg_temp.replay(c.config, c.arrivals, c.counts, 'sim-epoch-' || c.name, 'k',
                    c.config || '{"start": "1970-01-01 00:00:00+00"}', named => false) r
WHERE c.config->>'kind' <> 'token bucket' AND NOT c.config ? 'start' ORDER BY c.name;

-- Jitter adds a random delay to a call's refusal: the simulation answers
-- the earliest retry, and a call's retry_after is within one jitter of it.
SELECT setseed(0.5);
SELECT count(*) AS arrivals,
       count(*) FILTER (WHERE NOT s.ok) > 20 AS some_refusals,
       count(*) FILTER (WHERE (l).ok <> s.ok OR (l).remaining <> s.remaining) AS other_mismatches,
       count(*) FILTER (WHERE NOT s.ok AND NOT ((l).retry_after >= s.retry_after
                                                AND (l).retry_after < s.retry_after + 0.25)) AS retry_out_of_bounds,
       count(DISTINCT (l).retry_after - s.retry_after) > 10 AS jittered
FROM (SELECT s.*, pg_temp.limit_at(s.at, 'sim-jitter', 'k', '{"kind": "fixed window", "rate": 3, "period": "1 second", "jitter": 250}', s.count) AS l
      FROM ratelimit_simulate('{"kind": "fixed window", "rate": 3, "period": "1 second", "jitter": 250}',
                              pg_temp.arrivals(200, '0.2 seconds', '1 second', '2026-02-01 00:00:00+00'),
                              counts => NULL, name => 'sim-jitter', key => 'k') s) s;

-- A picture: a fixed window of 3 per minute, a request every 10 seconds.
SELECT * FROM ratelimit_simulate('{"kind": "fixed window", "rate": 3, "period": "1 minute"}',
  ARRAY(SELECT '2026-01-01 00:00:00+00'::timestamptz + i * interval '10 seconds' FROM generate_series(0, 8) i));
-- Counts: 0 takes nothing and is granted, even from an empty limit; a
-- count up to capacity is granted when it fits.
SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 4, "period": "1 second"}',
  '{2026-01-01 00:00:00+00, 2026-01-01 00:00:00+00, 2026-01-01 00:00:00+00, 2026-01-01 00:00:00.5+00}',
  '{4, 0, 1, 2}');
-- Empty arrays: no rows.
SELECT count(*) FROM ratelimit_simulate('{"kind": "token bucket", "rate": 4, "period": "1 second"}', '{}');
SELECT count(*) FROM ratelimit_simulate('{"kind": "token bucket", "rate": 4, "period": "1 second"}', '{}', '{}');
-- Equal arrivals are in order; any array lower bound is read in order.
SELECT count(*) FROM ratelimit_simulate('{"kind": "token bucket", "rate": 4, "period": "1 second"}',
  '[0:2]={2026-01-01 00:00:00+00, 2026-01-01 00:00:00+00, 2026-01-01 00:00:01+00}');
-- A shadow limit answers a count that can never fit, as ratelimit_limit does.
SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": "1 second", "shadow": true}',
  '{2026-01-01 00:00:00+00}', '{5}');
-- A memory limit (one entry, shards ignored as calls ignore them) answers
-- as the table does; it needs no shared memory to be simulated.
SELECT (SELECT array_agg(s ORDER BY s.at) FROM ratelimit_simulate('{"kind": "sliding window", "rate": 3, "period": "1 second", "storage": "memory", "shards": 4}',
          ARRAY(SELECT '2026-01-01 00:00:00+00'::timestamptz + i * interval '0.2 seconds' FROM generate_series(0, 20) i)) s)
     = (SELECT array_agg(s ORDER BY s.at) FROM ratelimit_simulate('{"kind": "sliding window", "rate": 3, "period": "1 second"}',
          ARRAY(SELECT '2026-01-01 00:00:00+00'::timestamptz + i * interval '0.2 seconds' FROM generate_series(0, 20) i)) s)
       AS memory_answers_as_table;
-- The most arrivals a simulation takes.
SELECT count(*) FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1000, "period": "1 second"}',
  ARRAY(SELECT '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 millisecond' FROM generate_series(1, 100000) i));

-- Errors: 22004 for NULLs, 22023 for everything else; the config's errors
-- are ratelimit_limit's own.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate(NULL, '{2026-01-01}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', NULL) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, NULL}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01}', '{NULL}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01}', NULL, NULL, 'k') $$);
-- Out of order, lengths, dimensions, range and size.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01 00:00:01, 2026-01-01 00:00:00}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, 2026-01-02}', '{1}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01}', '{1, 1}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{}', '{1}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{{2026-01-01}, {2026-01-02}}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, 2026-01-02}', '{{1}, {1}}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{-infinity, 2026-01-01}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, infinity}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{0001-01-01 00:00:00+00 BC}') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1000, "period": 1000}',
  array_fill('2026-01-01'::timestamptz, ARRAY[100001])) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1000, "period": 1000}',
  '{2026-01-01}', array_fill(1::float8, ARRAY[100001])) $$);
-- Counts, each error as ratelimit_limit raises it for the same count.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 1000}', '{2026-01-01, 2026-01-02}', '{1, 3}') $$),
       pg_temp.try($$ SELECT ratelimit_limit('sim-err', 'k', '{"kind": "token bucket", "rate": 2, "period": 1000}', 3) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 1000}', '{2026-01-01}', '{-1}') $$),
       pg_temp.try($$ SELECT ratelimit_limit('sim-err', 'k', '{"kind": "token bucket", "rate": 2, "period": 1000}', -1) $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 2, "period": 1000}', '{2026-01-01}', '{NaN}') $$),
       pg_temp.try($$ SELECT ratelimit_limit('sim-err', 'k', '{"kind": "token bucket", "rate": 2, "period": 1000}', 'NaN') $$);
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "sliding window", "rate": 2, "period": 1000, "storage": "memory", "shards": 2}', '{2026-01-01}', '{3}') $$);
-- The whole error: which arrival.
SELECT * FROM ratelimit_simulate('{"kind": "fixed window", "rate": 2, "period": 1000}', '{2026-01-01 00:00:00, 2026-01-01 00:00:01, 2026-01-01 00:00:00.5}');
SELECT * FROM ratelimit_simulate('{"kind": "fixed window", "rate": 2, "period": 1000}', '{2026-01-01, 2026-01-01}', '{0, 2.5}');
-- The config, each error as ratelimit_limit raises it for the same config.
CREATE TEMP TABLE bad_config (config text);
INSERT INTO bad_config VALUES
  ('{"kind": "token bucket", "period": 1000}'),
  ('{"kind": "leaky bucket", "rate": 1, "period": 1000}'),
  ('{"kind": "token bucket", "rate": -1, "period": 1000}'),
  ('{"kind": "token bucket", "rate": 1, "period": "1 month"}'),
  ('{"kind": "token bucket", "rate": 1, "period": 1000, "start": "2026-01-01"}'),
  ('{"kind": "fixed window", "rate": 1, "period": 1000, "start": "yesterday-ish"}'),
  ('{"kind": "sliding window", "rate": 1, "period": 1000, "capacity": 5}'),
  ('{"kind": "token bucket", "rate": 1, "period": 1000, "colour": "red"}'),
  ('[1, 2]'),
  ('{"kind": "token bucket", "rate": 1, "period": 1000, "shards": 0}');
SELECT b.config,
       pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, ''{2026-01-01}'')', b.config)) AS simulate,
       pg_temp.try(format('SELECT * FROM ratelimit_simulate(%L, ''{2026-01-01}'')', b.config))
         = pg_temp.try(format('SELECT ratelimit_limit(''sim-err'', ''k'', %L)', b.config)) AS as_ratelimit_limit
FROM bad_config b;
-- Only the simulator's own: a sharded table limit picks shards at random.
SELECT pg_temp.try($$ SELECT * FROM ratelimit_simulate('{"kind": "token bucket", "rate": 8, "period": 1000, "shards": 4}', '{2026-01-01}') $$);
-- name and key as ratelimit_limit checks them.
SELECT pg_temp.try(format('SELECT * FROM ratelimit_simulate(''{"kind": "fixed window", "rate": 1, "period": 1000}'', ''{2026-01-01}'', NULL, name => %L)', repeat('n', 1025)));
-- A simulation writes nothing.
SELECT count(*) FROM ratelimit_simulate('{"kind": "fixed window", "rate": 1, "period": 1000}', '{2026-01-01, 2026-01-01}', NULL, 'sim-unwritten');
SELECT count(*) AS rows_written FROM ratelimit_state WHERE name = 'sim-unwritten';

-- PUBLIC may call it; it is IMMUTABLE and PARALLEL SAFE, and runs in a
-- parallel worker.
-- The session's settings do not change the answers: a start without a
-- UTC offset is UTC, an abbreviation the default set's, as for calls.
CREATE FUNCTION pg_temp.answers(config jsonb) RETURNS text LANGUAGE sql AS $$
SELECT string_agg(concat_ws(' ', extract(epoch FROM at), ok, remaining, retry_after), ', ' ORDER BY at, ok DESC)
FROM ratelimit_simulate(config, ARRAY['2026-03-01 00:00:00+00'::timestamptz, '2026-03-01 00:00:04+00', '2026-03-01 00:00:05+00', '2026-03-01 00:00:06+00'])
$$;
CREATE TEMP TABLE answers_in (settings text, answers text);
INSERT INTO answers_in SELECT 'UTC', pg_temp.answers('{"kind": "fixed window", "rate": 1, "period": "7 seconds", "start": "2026-01-01 00:00:05"}')
  || ' / ' || pg_temp.answers('{"kind": "fixed window", "rate": 1, "period": "7 seconds", "start": "2026-01-01 00:00:05 EST"}');
SET timezone = 'Asia/Kolkata';
SET timezone_abbreviations = 'India';
SET datestyle = 'SQL, DMY';
INSERT INTO answers_in SELECT 'Kolkata', pg_temp.answers('{"kind": "fixed window", "rate": 1, "period": "7 seconds", "start": "2026-01-01 00:00:05"}')
  || ' / ' || pg_temp.answers('{"kind": "fixed window", "rate": 1, "period": "7 seconds", "start": "2026-01-01 00:00:05 EST"}');
RESET timezone_abbreviations;
RESET datestyle;
SET timezone = 'UTC';
SELECT count(DISTINCT answers) AS distinct_answers, min(answers) FROM answers_in;

CREATE ROLE ratelimit_sim_app;
SET ROLE ratelimit_sim_app;
SELECT ok, remaining FROM ratelimit_simulate('{"kind": "token bucket", "rate": 1, "period": 1000}', '{2026-01-01, 2026-01-01}');
RESET ROLE;
DROP ROLE ratelimit_sim_app;
SELECT oid::regprocedure AS function, provolatile, proparallel, proisstrict, prosecdef,
       obj_description(oid, 'pg_proc') IS NOT NULL AS commented
FROM pg_proc WHERE proname = 'ratelimit_simulate' ORDER BY pronargs;
-- The three-argument signature is the function's identity; PUBLIC may call both.
SELECT has_function_privilege('public', 'ratelimit_simulate(jsonb, timestamptz[], float8[])', 'EXECUTE') AS three,
       has_function_privilege('public', 'ratelimit_simulate(jsonb, timestamptz[], float8[], text, text)', 'EXECUTE') AS five;
DO $$ BEGIN
  PERFORM set_config(CASE WHEN current_setting('server_version_num')::int >= 160000 THEN 'debug_parallel_query'
                          ELSE 'force_parallel_mode' END, 'on', false);
END $$;
SELECT g, count(*) FILTER (WHERE s.ok) AS granted
FROM generate_series(1, 4) g,
     ratelimit_simulate(format('{"kind": "fixed window", "rate": %s, "period": "1 minute", "start": "2026-01-01 00:00:07"}', g)::jsonb,
                        ARRAY['2026-01-01 00:00:00+00'::timestamptz, '2026-01-01 00:00:06+00', '2026-01-01 00:00:07+00']) s
GROUP BY g ORDER BY g;
DO $$ BEGIN
  PERFORM set_config(CASE WHEN current_setting('server_version_num')::int >= 160000 THEN 'debug_parallel_query'
                          ELSE 'force_parallel_mode' END, 'off', false);
END $$;
