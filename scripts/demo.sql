-- A short tour of ratelimit: the source articles' examples, then the three
-- algorithms side by side, limits as data (a definition, a key's override,
-- shadow mode), the stats view, and a memory limit in a read-only
-- transaction. scripts/demo.sh runs it on a cluster started with
-- shared_preload_libraries = 'ratelimit'; scripts/demo-test.sh checks its
-- output. Each step: a line of prose (\echo), the SQL (ECHO queries), its
-- answer. Statements whose answer is nothing (void functions) send it to
-- /dev/null (\g /dev/null).
\pset format aligned
\pset pager off
\pset footer off
\pset null '(null)'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS ratelimit;
SET timezone = 'UTC';
\set ECHO queries

\echo '\n━━ 1. The articles'' examples\n'
\echo '== Sending messages: 10 per minute per user, bursts up to 20 (a token bucket with a capacity)'
WITH calls AS MATERIALIZED (
  SELECT n, ratelimit_limit('sendMessage', 'user-42',
           '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}', count => 1 + 0 * n) AS r
  FROM generate_series(1, 22) AS n)
SELECT n AS call, (r).ok, round((r).remaining::numeric, 2) AS remaining,
       round((r).retry_after::numeric, 2) AS retry_after
FROM calls WHERE n IN (1, 2, 19, 20, 21, 22) ORDER BY n;

\echo '\n== Global sign-up limit: 100 per hour for the whole app (the NULL key), defined once by name'
SELECT ratelimit_define('freeTrialSignUp', '{"kind": "token bucket", "rate": 100, "period": "1 hour"}') \g /dev/null
SELECT count(*) FILTER (WHERE ok) AS granted, count(*) FILTER (WHERE NOT ok) AS refused
FROM (SELECT (ratelimit_limit('freeTrialSignUp')).ok FROM generate_series(1, 105)) AS calls;

\echo '\n== Failed logins: 3 per hour; the 4th raises SQLSTATE PT429 (throws => true); a successful login resets'
SELECT ratelimit_define('failedLogins', '{"kind": "token bucket", "rate": 3, "period": "1 hour"}') \g /dev/null
SELECT round((ratelimit_limit('failedLogins', 'alice')).remaining::numeric, 2) AS attempts_left FROM generate_series(1, 3);
\set ON_ERROR_STOP 0
SELECT ratelimit_check('failedLogins', 'alice', throws => true);
\set ON_ERROR_STOP 1
SELECT ratelimit_reset('failedLogins', 'alice') AS reset_after_successful_login;

\echo '\n== LLM tokens with reserve: 40k tokens a minute; big requests are scheduled, not starved'
SELECT ratelimit_define('chatCompletion', '{"kind": "token bucket", "rate": 40000, "period": "1 minute", "maxReserved": 60000}') \g /dev/null
SELECT n AS request, (r).ok, round((r).retry_after::numeric, 1) AS run_in_seconds, round((r).remaining::numeric) AS remaining
FROM generate_series(1, 4) AS n, LATERAL ratelimit_limit('chatCompletion', count => 30000 + 0 * n, reserve => true) AS r;

\echo '\n== Transactions: a rolled-back transaction gets its tokens back'
BEGIN;
SELECT (ratelimit_limit('sendMessage', 'user-7', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}', count => 10)).remaining AS inside_transaction;
ROLLBACK;
SELECT round(value::numeric, 2) AS after_rollback FROM ratelimit_value('sendMessage', 'user-7', '{"kind": "token bucket", "rate": 10, "period": "1 minute"}');

\echo '\n== A third-party API allowing 5 calls per window: a fixed window, its start derived from the key'
SELECT n AS call, (r).ok, (r).retry_at IS NOT NULL AS told_when
FROM generate_series(1, 6) AS n,
     LATERAL ratelimit_limit('thirdParty', 'tenant-1', '{"kind": "fixed window", "rate": 5, "period": "1 minute"}', count => 1 + 0 * n) AS r;

\echo '\n== Sliding window: 3 per second, smoothed across the window boundary'
SELECT n AS call, (r).ok, (r).remaining
FROM generate_series(1, 4) AS n,
     LATERAL ratelimit_limit('search', 'ip-10.0.0.1', '{"kind": "sliding window", "rate": 3, "period": 1000}', count => 1 + 0 * n) AS r;

\echo '\n== The state: two numbers per limit'
SELECT name, key, round(value::numeric, 2) AS value, ts FROM ratelimit_state ORDER BY name, key;

\echo '\n== HTTP: the response headers of a refusal (ratelimit_headers)'
SELECT jsonb_pretty(ratelimit_headers('thirdParty', r, '{"kind": "fixed window", "rate": 5, "period": "1 minute"}')) AS headers
FROM ratelimit_limit('thirdParty', 'tenant-1', '{"kind": "fixed window", "rate": 5, "period": "1 minute"}') AS r;

\echo '\n== The operator view: every stored row, its kind and its value now'
SELECT name, key, shard, kind, round(value::numeric, 2) AS value, round(stored_value::numeric, 2) AS stored_value
FROM ratelimit_status ORDER BY name, key NULLS FIRST, shard;

\echo '\n━━ 2. One burst, three algorithms (the smudge.ai article''s picture)\n'
\echo 'The same traffic against 5 requests per 10 seconds: a burst of one request every half second'
\echo 'for 5 seconds across a window''s edge (t = 10 s), then one every 2 seconds. ratelimit_simulate'
\echo 'answers each arrival as ratelimit_limit would for a new key with the clock at that arrival,'
\echo 'and stores nothing:'
\set ECHO none
-- The burst: seconds after t0, a window edge (the window configs' "start").
CREATE TEMP TABLE burst AS
SELECT '2026-01-01 00:00:00+00'::timestamptz + make_interval(secs => s) AS at
FROM unnest(ARRAY(SELECT 7.5 + i * 0.5 FROM generate_series(0, 10) AS i)
            || ARRAY(SELECT 16 + i * 2 FROM generate_series(0, 6) AS i)) AS s;
\set ECHO queries
CREATE TEMP TABLE picture AS
SELECT pos, algorithm, config, s.at, s.ok
FROM (VALUES (1, 'token bucket', '{"kind": "token bucket", "rate": 5, "period": "10 seconds"}'::jsonb),
             (2, 'fixed window', '{"kind": "fixed window", "rate": 5, "period": "10 seconds", "start": "2026-01-01"}'),
             (3, 'sliding window', '{"kind": "sliding window", "rate": 5, "period": "10 seconds", "start": "2026-01-01"}'))
       AS algorithms (pos, algorithm, config),
     LATERAL ratelimit_simulate(config, ARRAY(SELECT at FROM burst ORDER BY at)) AS s;
\echo
\set ECHO none
\pset format unaligned
\pset tuples_only on
-- One column per half second over 30 s; a window's edge (every 10 s) is a
-- column of its own: '|' on the axis and in the fixed window's row.
WITH slots AS (
  SELECT s, '2026-01-01 00:00:00+00'::timestamptz + make_interval(secs => s * 0.5) AS at FROM generate_series(0, 59) AS s),
rows AS (
  SELECT 0 AS pos, '' AS label,
         string_agg(CASE WHEN s % 20 = 0 THEN rpad(((s / 2)::text || ' s'), 21) ELSE '' END, '' ORDER BY s) || '30 s' AS line
  FROM slots
  UNION ALL
  SELECT 1, '', string_agg(CASE WHEN s % 20 = 0 THEN '|' ELSE '' END || CASE WHEN s % 2 = 0 THEN '·' ELSE ' ' END, '' ORDER BY s) || '|'
  FROM slots
  UNION ALL
  SELECT 10 + a.pos, a.algorithm,
         string_agg(CASE WHEN s % 20 = 0 THEN CASE WHEN a.algorithm = 'fixed window' THEN '|' ELSE ' ' END ELSE '' END
                    || CASE WHEN p.ok THEN '●' WHEN NOT p.ok THEN '○' ELSE ' ' END, '' ORDER BY s)
         || CASE WHEN a.algorithm = 'fixed window' THEN '|' ELSE ' ' END
  FROM (SELECT DISTINCT pos, algorithm FROM picture) AS a CROSS JOIN slots
       LEFT JOIN picture AS p ON p.pos = a.pos AND p.at = slots.at
  GROUP BY a.pos, a.algorithm)
SELECT '  ' || rpad(label, 16) || line FROM rows ORDER BY pos;
\echo '                  ● allowed  ○ blocked  · a second  | a fixed window''s edge\n'
\pset tuples_only off
\pset format aligned
\echo 'The fixed window lets 10 requests through in 5 seconds around its edge, twice the limit, then'
\echo 'blocks until its next window; the token bucket spends its 5 tokens, then refills one every 2'
\echo 'seconds; the sliding window weighs the previous window''s 5 as it slides out, so past the edge it'
\echo 'lets through about one every 2 seconds too.'
SELECT algorithm, count(*) FILTER (WHERE ok) AS allowed, count(*) FILTER (WHERE NOT ok) AS blocked,
       (SELECT max((SELECT count(*) FROM picture AS w
                    WHERE w.pos = p.pos AND w.ok AND w.at >= s.at AND w.at < s.at + interval '5 seconds'))
        FROM picture AS s WHERE s.pos = p.pos) AS "most in any 5 s",
       (SELECT max((SELECT count(*) FROM picture AS w
                    WHERE w.pos = p.pos AND w.ok AND w.at >= s.at AND w.at < s.at + interval '10 seconds'))
        FROM picture AS s WHERE s.pos = p.pos) AS "most in any 10 s"
FROM picture AS p GROUP BY pos, algorithm ORDER BY pos;
-- Each arrival again through ratelimit_limit itself, with the test clock
-- (ratelimit.now) at the arrival, for a name used nowhere else (reset after,
-- not counted in the stats).
CREATE FUNCTION pg_temp.limit_at(name text, config jsonb, arrivals timestamptz[])
RETURNS TABLE (at timestamptz, ok boolean) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('ratelimit.track_stats', 'off', true);
  FOREACH at IN ARRAY arrivals LOOP
    PERFORM set_config('ratelimit.now', at::text, true);
    ok := (ratelimit_limit(name, NULL, config)).ok;
    RETURN NEXT;
  END LOOP;
  PERFORM ratelimit_reset(name);
  PERFORM set_config('ratelimit.now', '', true);
  PERFORM set_config('ratelimit.track_stats', 'on', true);
END $$;
\echo '\nThe real limit agrees: each request again through ratelimit_limit, the test clock'
\echo '(ratelimit.now) set to its arrival:'
SELECT p.algorithm, count(*) AS requests, count(*) FILTER (WHERE p.ok = l.ok) AS same_answer
FROM (SELECT DISTINCT pos, algorithm, config FROM picture) AS a,
     LATERAL pg_temp.limit_at('demo: ' || a.algorithm, a.config, ARRAY(SELECT at FROM burst ORDER BY at)) AS l,
     picture AS p
WHERE p.pos = a.pos AND p.at = l.at
GROUP BY a.pos, p.algorithm ORDER BY a.pos;
\set ECHO queries

\echo '\n━━ 3. Limits as data: a definition, a key''s override, shadow mode\n'
\echo '== The operator defines the API''s limit, 5 requests a minute per customer, in shadow mode first:'
\echo '   it decides as usual but refuses nobody, and counts what it would have refused.'
SELECT ratelimit_define('api', '{"kind": "token bucket", "rate": 5, "period": "1 minute", "shadow": true}') \g /dev/null
\echo '\n== customer-42 is a big account: an override gives that one key 100 a minute'
SELECT ratelimit_override('api', 'customer-42', '{"kind": "token bucket", "rate": 100, "period": "1 minute"}') \g /dev/null
SELECT name, key, config FROM ratelimit_override;
\echo '\n== 8 requests from each of two customers: in shadow mode every one is answered ok'
SELECT key AS customer, count(*) FILTER (WHERE (r).ok) AS answered_ok, count(*) FILTER (WHERE NOT (r).ok) AS refused
FROM (SELECT key, ratelimit_limit('api', key) AS r
      FROM (VALUES ('customer-7'), ('customer-42')) AS customers (key), generate_series(1, 8)) AS calls
GROUP BY key ORDER BY key;
\echo '\n== ... and ratelimit_stats shows what enforcing would refuse: 3 of customer-7''s requests'
SELECT name, granted, refused, shadow_refused FROM ratelimit_stats WHERE name = 'api';
\echo '\n== Enforce it (the same definition without "shadow"): customer-7 is refused now, customer-42 keeps its 100'
SELECT ratelimit_define('api', '{"kind": "token bucket", "rate": 5, "period": "1 minute"}') \g /dev/null
SELECT key AS customer, (r).ok, round((r).remaining::numeric, 2) AS remaining, round((r).retry_after::numeric) AS retry_after
FROM (VALUES ('customer-7'), ('customer-42')) AS customers (key), LATERAL ratelimit_limit('api', key) AS r;

\echo '\n━━ 4. The stats view: every limit''s decisions since the server started (ratelimit_stats)\n'
SELECT name, granted, refused, shadow_refused, tokens_granted FROM ratelimit_stats ORDER BY name NULLS LAST;

\echo '\n━━ 5. A limit in shared memory: it decides inside a READ ONLY transaction\n'
\echo '== 5 login attempts per 15 minutes, kept in shared memory ("storage": "memory"): no row, no WAL'
SELECT ratelimit_define('login', '{"kind": "token bucket", "rate": 5, "period": "15 minutes", "storage": "memory"}') \g /dev/null
\echo '\n== A READ ONLY transaction (a GET, a standby) takes 3 attempts ...'
BEGIN READ ONLY;
SELECT n AS attempt, (r).ok, round((r).remaining::numeric, 2) AS remaining
FROM generate_series(1, 3) AS n, LATERAL ratelimit_limit('login', 'alice@example.com', count => 1 + 0 * n) AS r;
\echo '\n== ... which a table limit could not do here: it would have to write a row'
SAVEPOINT table_limit;
\set ON_ERROR_STOP 0
SELECT ratelimit_limit('sendMessage', 'user-42', '{"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20}');
\set ON_ERROR_STOP 1
ROLLBACK TO SAVEPOINT table_limit;
SELECT round(value::numeric, 2) AS left_inside_transaction FROM ratelimit_value('login', 'alice@example.com');
\echo '\n== The transaction rolls back, and the memory limit gets its 3 attempts back'
ROLLBACK;
SELECT round(value::numeric, 2) AS left_after_rollback FROM ratelimit_value('login', 'alice@example.com');

\echo '\nTo play with the three algorithms in a browser, against this extension: the example HTTP'
\echo 'service''s playground, GET /playground (examples/http-api/README.md).'
