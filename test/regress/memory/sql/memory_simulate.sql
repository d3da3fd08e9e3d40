-- ratelimit_simulate against memory limits: pseudo-random arrivals of
-- every kind, simulated, then replayed through ratelimit_limit on a memory
-- limit with ratelimit.now set to each arrival: every row equal (the
-- regression suite, sql/simulate.sql, does the same for table limits).
\i test/sql_support/setup.sql
SELECT setseed(0.28);
CREATE TEMP TABLE sim_case (name text PRIMARY KEY, config jsonb, choices float8[]);
INSERT INTO sim_case VALUES
  ('mem-tb', '{"kind": "token bucket", "rate": 4, "period": 1000, "capacity": 2, "storage": "memory"}', '{1,1,2,0,0.5}'),
  ('mem-fw', '{"kind": "fixed window", "rate": 3, "period": "1 second", "storage": "memory"}', '{1,1,2,3}'),
  ('mem-sw', '{"kind": "sliding window", "rate": 5, "period": 2000, "storage": "memory", "shards": 4}', '{1,1,2,0}'),
  ('mem-shadow', '{"kind": "token bucket", "rate": 2, "period": 1000, "storage": "memory", "shadow": true}', '{1,1,3}');
-- n arrivals about as fast as the rate; one in eight at the instant before,
-- one in thirty after ten idle periods.
CREATE TEMP TABLE sim_input AS
SELECT name, config, arrivals, counts FROM (
  SELECT c.name, c.config,
         ARRAY(SELECT at FROM (
            SELECT i, '2026-01-01 00:00:00+00'::timestamptz
                      + sum(CASE WHEN d < 0.125 THEN interval '0' WHEN d < 0.16 THEN p * 10 ELSE p / r * 2 * random() END)
                          OVER (ORDER BY i) AS at
            FROM (SELECT i, random() AS d FROM generate_series(1, 300) i) x) y ORDER BY i) AS arrivals,
         ARRAY(SELECT c.choices[1 + floor(random() * array_length(c.choices, 1))::int] FROM generate_series(1, 300)) AS counts
  FROM sim_case c,
       LATERAL (SELECT CASE WHEN jsonb_typeof(c.config->'period') = 'number' THEN (c.config->>'period') || ' milliseconds'
                            ELSE c.config->>'period' END::interval AS p,
                       (c.config->>'rate')::float8 AS r) pr
  ORDER BY c.name) z;
CREATE FUNCTION pg_temp.limit_at(at timestamptz, name text, key text, config jsonb, count float8)
RETURNS ratelimit_result LANGUAGE plpgsql AS $$
DECLARE r ratelimit_result;
BEGIN
  PERFORM set_config('ratelimit.now', date_trunc('microseconds', at)::text, false);
  r := ratelimit_limit(name, key, config, count);
  PERFORM set_config('ratelimit.now', '', false);
  RETURN r;
END $$;
SELECT c.name, count(*) AS arrivals,
       count(*) FILTER (WHERE ((l).ok, (l).remaining, (l).retry_after) IS DISTINCT FROM (s.ok, s.remaining, s.retry_after)) AS mismatches,
       count(*) FILTER (WHERE NOT s.ok) >= 20 OR c.name = 'mem-shadow' AS refusals_or_shadow
FROM sim_input c,
     LATERAL (SELECT s.*, pg_temp.limit_at(s.at, c.name, 'k', c.config, s.count) AS l
              FROM ratelimit_simulate(c.config, c.arrivals, c.counts, c.name, 'k') AS s) s
GROUP BY c.name ORDER BY c.name;
-- They were memory limits (entries in shared memory, no table row).
SELECT count(*) AS table_rows FROM ratelimit_state WHERE name LIKE 'mem-%';
-- Their memory entries are given back.
SELECT count(*) FROM (SELECT ratelimit_reset(name, 'k') FROM sim_case) AS r;
