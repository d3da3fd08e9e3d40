-- A routed call answers exactly as one node, whatever the caller's and the
-- partitions' session settings (issue 37: arguments and rows crossed as
-- text written and read under each side's DateStyle, TimeZone and
-- extra_float_digits). The partitions get settings of their own for new
-- sessions (ALTER DATABASE there, through PL/Proxy; undone at the end), the
-- caller others, and every routed function's answer is compared with the
-- same call on one node: the ratelimit extension installed in this router
-- database in schema single, its clock frozen by ratelimit.now at the
-- instant the partitions' clocks are frozen at (2026-01-01 00:00:00+00,
-- scripts/plproxy-test.sh). Rows are compared bit for bit as record_send
-- gives them (each column's binary form: float8 bits, timestamptz
-- microseconds), jsonb and errors as equal values.
\set cfg '{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 10}'

-- The partitions' settings, unlike the caller's below, for the sessions the
-- router opens from now on.
CREATE FUNCTION pg_temp.partition_setting(setting text, value text) RETURNS SETOF text
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT public.set_database_setting(setting, value);
$$;
CREATE TEMP TABLE partition_settings (setting text, value text);
INSERT INTO partition_settings VALUES ('DateStyle', 'Postgres, DMY'), ('TimeZone', 'Pacific/Chatham'),
    ('IntervalStyle', 'iso_8601'), ('extra_float_digits', '-14'), ('lc_numeric', 'POSIX');
SELECT count(*) AS partition_settings_made
FROM partition_settings AS s, pg_temp.partition_setting(s.setting, s.value) AS db;

-- ratelimit_result's OID differs between the router and every partition
-- (a row type crosses in binary by its columns' types, never its own OID).
CREATE FUNCTION pg_temp.partition_result_oid() RETURNS SETOF oid
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT 'public.ratelimit_result'::pg_catalog.regtype::pg_catalog.oid;
$$;
SELECT count(*) AS partitions, bool_and(p <> 'public.ratelimit_result'::regtype::oid) AS other_oids
FROM pg_temp.partition_result_oid() AS p;

-- One node, in this database.
CREATE SCHEMA single;
CREATE EXTENSION ratelimit SCHEMA single;
SET ratelimit.now = '2026-01-01 00:00:00+00';

-- The caller's settings (output below shows none of their effects: only
-- comparisons, counts and settings-free text).
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Kolkata';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -15;
SET lc_numeric = 'C.utf8';
SET client_encoding = 'LATIN1';

-- ratelimit_limit: 12 calls of count 1.4 on a bucket of 10 tokens grant 7
-- through the router as on one node (at extra_float_digits -15 the count
-- crossed as 1, and the router granted 10), every row bit for bit.
CREATE TEMP TABLE limit_calls AS
SELECT g, ratelimit_limit('rs-limit', 'k', :'cfg', 1.4 + 0 * g) AS routed,
       single.ratelimit_limit('rs-limit', 'k', :'cfg', 1.4 + 0 * g) AS single
FROM generate_series(1, 12) AS g;
SELECT count(*) AS calls, count(*) FILTER (WHERE record_send(routed) = record_send(single)) AS bit_for_bit,
       count(*) FILTER (WHERE (routed).ok) AS routed_granted, count(*) FILTER (WHERE (single).ok) AS single_granted
FROM limit_calls;

-- ratelimit_check, ratelimit_value, ratelimit_refund (a count that is not a
-- whole number), ratelimit_limit with reserve.
SELECT record_send(ratelimit_check('rs-limit', 'k', :'cfg', 0.1))
       = record_send(single.ratelimit_check('rs-limit', 'k', :'cfg', 0.1)) AS check_same;
SELECT record_send(r) = record_send(s) AS value_same
FROM ratelimit_value('rs-limit', 'k', :'cfg') AS r, single.ratelimit_value('rs-limit', 'k', :'cfg') AS s;
SELECT record_send(ratelimit_refund('rs-limit', 'k', 0.7, :'cfg'))
       = record_send(single.ratelimit_refund('rs-limit', 'k', 0.7, :'cfg')) AS refund_same;
SELECT record_send(ratelimit_limit('rs-limit', 'k', :'cfg', 3.3, reserve => true))
       = record_send(single.ratelimit_limit('rs-limit', 'k', :'cfg', 3.3, reserve => true)) AS reserve_same;

-- ratelimit_headers: a result with a retry instant and a remaining that is
-- not a whole number (0.10.0 through the router: the instant misread under
-- the partition's DateStyle, 8.6 rounded to 9 by extra_float_digits).
SELECT ratelimit_headers('rs-limit', ROW(false, 1.4, '2026-01-02 10:00:00+00', 8.6, 1235.5)::ratelimit_result, :'cfg', 'k')
       = single.ratelimit_headers('rs-limit', ROW(false, 1.4, '2026-01-02 10:00:00+00', 8.6, 1235.5)::single.ratelimit_result,
                                  :'cfg', 'k') AS headers_same,
       ratelimit_headers('rs-limit', ROW(false, 1.4, '2026-01-02 10:00:00+00', 8.6, 1235.5)::ratelimit_result, :'cfg', 'k')
       ->> 'RateLimit' AS routed_state;
SELECT bool_and(ratelimit_headers('rs-limit', routed, :'cfg', 'k') = single.ratelimit_headers('rs-limit', single, :'cfg', 'k'))
       AS every_answer_headers_same
FROM limit_calls;

-- ratelimit_limit_all, its key not ASCII (and the caller's client_encoding
-- LATIN1): the rows bit for bit, the key as sent.
CREATE TEMP TABLE all_limits AS
SELECT jsonb_build_array(jsonb_build_object('name', 'rs-all', 'key', 'k' || chr(233), 'count', 2.6,
                                            'config', :'cfg'::jsonb)) AS limits;
CREATE TEMP TABLE routed_all AS SELECT r.* FROM all_limits, ratelimit_limit_all(limits) AS r;
CREATE TEMP TABLE single_all AS SELECT s.* FROM all_limits, single.ratelimit_limit_all(limits) AS s;
SELECT (SELECT array_agg(record_send(r)) FROM routed_all AS r) = (SELECT array_agg(record_send(s)) FROM single_all AS s)
       AS limit_all_same,
       (SELECT bool_and(convert_to(key, 'UTF8') = '\x6bc3a9'::bytea) FROM routed_all) AS key_as_sent;

-- ratelimit_simulate: arrivals on 2026-01-02 and 2026-01-03 10:00 UTC
-- (0.10.0 through the router: February 1 and March 1), arrivals that were
-- misread out of order, arrays with other lower bounds, counts through a
-- domain, a name and key; and the errors.
CREATE DOMAIN pg_temp.counts AS double precision[];
CREATE TEMP TABLE simulations (config jsonb, arrivals timestamptz[], counts double precision[], name text, key text);
INSERT INTO simulations VALUES
    (:'cfg', '{"2026-01-02 00:00:00+00","2026-01-03 10:00:00+00"}', '{1.4,2.6}', NULL, NULL),
    (:'cfg', '{"2026-01-03 00:00:00+00","2026-02-01 00:00:00+00"}', NULL, NULL, NULL),
    (:'cfg', '[0:1]={"2026-01-02 00:00:00+00","2026-01-03 10:00:00.000001+00"}', '[7:8]={0.1,9.9}', NULL, NULL),
    ('{"kind": "fixed window", "rate": 3, "period": "1 day 2 hours", "start": "2026-01-01 05:30:00+05:30"}',
     '{"2026-01-01 01:00:00+00","2026-01-01 02:00:00+00","2026-01-02 03:00:00+00"}', '{1.5,1.5,1.5}', 'rs-sim', 'k'),
    ('{"kind": "sliding window", "rate": 3, "period": "-1 day +25 hours"}',
     '{"2026-01-01 00:00:00+00","2026-01-01 00:30:00+00","2026-01-01 01:15:00+00"}', '{1.1,1.9,0.3}', 'rs-sim', NULL);
SELECT count(*) AS simulations,
       count(*) FILTER (WHERE (SELECT array_agg(record_send(r)) FROM ratelimit_simulate(m.config, m.arrivals, m.counts::pg_temp.counts, m.name, m.key) AS r)
                              = (SELECT array_agg(record_send(s)) FROM single.ratelimit_simulate(m.config, m.arrivals, m.counts, m.name, m.key) AS s))
           AS bit_for_bit
FROM simulations AS m;
SELECT array_agg(extract(epoch FROM r.at)::numeric ORDER BY r.at) AS routed_arrivals
FROM ratelimit_simulate(:'cfg', '{"2026-01-02 00:00:00+00","2026-01-03 10:00:00+00"}') AS r;
SELECT e.state, (r.state, r.message, r.detail, r.hint) IS NOT DISTINCT FROM (e.state, e.message, e.detail, e.hint) AS same_error
FROM (VALUES ('{{"2026-01-01 00:00:00+00"},{"2026-01-01 00:00:01+00"}}'), ('{"2026-01-01 00:00:00+00",NULL}'),
             ('{"2026-01-02 00:00:00+00","2026-01-01 00:00:00+00"}'), ('{infinity}')) AS a(arrivals),
     error_of(format('SELECT * FROM ratelimit_simulate(%L, %L)', :'cfg', a.arrivals)) AS r,
     error_of(format('SELECT * FROM single.ratelimit_simulate(%L, %L)', :'cfg', a.arrivals)) AS e;

-- A refusal with throws => true: the same error, DETAIL and HINT included
-- (written by the partition, with its settings), plain and for PostgREST.
SELECT f.format, r.state, (r.state, r.message, r.detail, r.hint) IS NOT DISTINCT FROM (e.state, e.message, e.detail, e.hint)
       AS same_error, r.detail
FROM (VALUES ('plain'), ('postgrest')) AS f(format),
     error_of(format('SELECT ratelimit_limit(%L, %L, %L, 1.4, throws => true)', 'rs-limit', 'k', :'cfg'), f.format) AS r,
     error_of(format('SELECT single.ratelimit_limit(%L, %L, %L, 1.4, throws => true)', 'rs-limit', 'k', :'cfg'), f.format) AS e;

-- Definitions and overrides whose durations and start are strings (read
-- with fixed settings on every node), then calls of them.
\set fixed '{"kind": "fixed window", "rate": 3, "period": "1 day 2 hours", "start": "2026-01-01 05:30:00+05:30"}'
\set vip '{"kind": "fixed window", "rate": 5, "period": "-1 day +50 hours", "start": "2026-01-01 05:30:00+05:30"}'
SELECT count(*) AS defined FROM ratelimit_define('rs-fixed', :'fixed') AS r, single.ratelimit_define('rs-fixed', :'fixed') AS s;
SELECT count(*) AS overridden
FROM ratelimit_override('rs-fixed', 'vip', :'vip') AS r, single.ratelimit_override('rs-fixed', 'vip', :'vip') AS s;
SELECT count(*) AS calls, count(*) FILTER (WHERE record_send(ratelimit_limit('rs-fixed', k, count => 1.25))
                                                 = record_send(single.ratelimit_limit('rs-fixed', k, count => 1.25))) AS bit_for_bit
FROM (VALUES ('vip'), ('vip'), ('vip'), ('vip'), ('other'), ('other'), ('other')) AS c(k);
SELECT ratelimit_unoverride('rs-fixed', 'vip') = single.ratelimit_unoverride('rs-fixed', 'vip') AS unoverridden;

-- ratelimit_status: every stored limit of these calls, bit for bit.
SELECT count(*) AS rows,
       (SELECT array_agg(record_send(ROW(name, key, shard, kind, value, ts, stored_value, idle_at, storage)) ORDER BY name, key)
        FROM ratelimit_status WHERE name LIKE 'rs-%')
       = (SELECT array_agg(record_send(ROW(name, key, shard, kind, value, ts, stored_value, idle_at, storage)) ORDER BY name, key)
          FROM single.ratelimit_status WHERE name LIKE 'rs-%') AS status_same
FROM ratelimit_status WHERE name LIKE 'rs-%';

-- ratelimit_stats: the router's row of a name is the partitions' (read
-- here through PL/Proxy, in binary): empty on PostgreSQL 15 and 16 without
-- shared_preload_libraries, as the partitions of one cluster are here.
CREATE FUNCTION pg_temp.partition_stats(name text) RETURNS SETOF bytea
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT pg_catalog.record_send(ROW(s.name, s.granted, s.refused, s.shadow_refused, s.tokens_granted, s.lock_waits,
                                      s.stats_reset, s.memory_full))
    FROM public.ratelimit_stats AS s WHERE s.name = $1;
$$;
SELECT (SELECT array_agg(DISTINCT p) FROM pg_temp.partition_stats('rs-limit') AS p)
       IS NOT DISTINCT FROM
       (SELECT array_agg(record_send(ROW(name, granted, refused, shadow_refused, tokens_granted, lock_waits, stats_reset,
                                         memory_full)))
        FROM ratelimit_stats WHERE name = 'rs-limit') AS stats_same;

SELECT ratelimit_reset('rs-limit', 'k') = single.ratelimit_reset('rs-limit', 'k') AS reset_same;
SELECT ratelimit_undefine('rs-fixed') = single.ratelimit_undefine('rs-fixed') AS undefined_same;

-- Back to the partitions' own settings and no state left; one node gone.
SELECT count(*) AS limits_reset
FROM (SELECT DISTINCT name, key FROM ratelimit_status WHERE name LIKE 'rs-%') AS s WHERE ratelimit_reset(s.name, s.key);
RESET client_encoding;
SELECT count(*) AS partition_settings_reset
FROM partition_settings AS s, pg_temp.partition_setting(s.setting, NULL) AS db;
DROP TABLE limit_calls;
DROP EXTENSION ratelimit;
DROP SCHEMA single;
