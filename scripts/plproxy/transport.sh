# The router's own connections to the partitions (src/pg/route): kept,
# renewed, cancelled and timed out (run_transport), and what they do when a
# partition fails them (run_transport_failures).
# Sourced by scripts/plproxy-test.sh (after scripts/lib.sh); defines
# functions only, which use the driver's variables (SRC, WORK, MAIN_HOST,
# PARTITIONS, PART_DIRS, PART_HOSTS, API_VERSION, ROUTER_VERSION, failed).
# shellcheck shell=bash

# The router's own connections (ratelimit_proxy 0.9.0, src/pg/route), in
# router database "router" (its partitions in the main cluster, whose
# pg_stat_activity shows them as application ratelimit_proxy): USAGE on
# the server is needed; a session keeps its connections, and opens new
# ones when the server changes; a routed call cancelled (statement_timeout)
# or timed out (the server's query_timeout) while its partition waits for a
# row lock cancels the partition's statement, and the session's next call
# works.
# What both groups of router checks below share: a statement's outcome as
# text, and a bounded wait (60 seconds) for a session to appear or go.
ROUTED_HELPERS="
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS OR query_canceled THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END \$\$;
-- Waits (up to 60 s) until whether a session of application app runs a
-- statement like pattern is present.
CREATE FUNCTION pg_temp.wait_until(app text, pattern text, present boolean) RETURNS boolean
LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN present = EXISTS (SELECT FROM pg_stat_activity WHERE application_name = app AND query LIKE pattern);
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN true;
END \$\$;"
TRANSPORT_HELPERS="
SET client_min_messages = warning;
$ROUTED_HELPERS
CREATE FUNCTION pg_temp.routed() RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT string_agg(datname || ':' || pid, ',' ORDER BY datname, pid) FROM pg_stat_activity
          WHERE application_name = 'ratelimit_proxy');
END \$\$;
-- The routed connections once they are want (after up to 5 seconds: a
-- closed connection's backend exits on its own time).
CREATE FUNCTION pg_temp.settle(want text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..100 LOOP
    EXIT WHEN pg_temp.routed() IS NOT DISTINCT FROM want;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.routed();
END \$\$;
-- How many routed statements wait for a lock, once none does (or after 2 seconds).
CREATE FUNCTION pg_temp.waiting() RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE n bigint;
BEGIN
  FOR i IN 1..40 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity WHERE application_name = 'ratelimit_proxy' AND wait_event_type = 'Lock';
    EXIT WHEN n = 0;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN n;
END \$\$;
-- Waits (up to 60 seconds) until the holder holds its row (its sleep
-- runs), or until it is gone.
CREATE FUNCTION pg_temp.holder(holding boolean) RETURNS boolean LANGUAGE sql AS \$\$
  SELECT pg_temp.wait_until('ratelimit_holder', CASE WHEN holding THEN '%pg_sleep%' ELSE '%' END, holding)
\$\$;
"
run_transport() {
  local db=router config='{"kind": "token bucket", "rate": 1000, "period": 1000}' part out holder
  local call="SELECT ratelimit_limit('held', 'k', '$config')"
  part=$(psql_in -At -d "$db" -c "SELECT ratelimit_partition('held', 'k')")
  psql_in -d "$db" -c "DROP ROLE IF EXISTS rl_transport" -c "CREATE ROLE rl_transport"
  out=$(psql_in -At -F ' ' -d "$db" 2>&1 <<SQL
$TRANSPORT_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.routed() AS first \gset
SELECT 'connections', cardinality(string_to_array(:'first', ','));
SELECT count(*) FILTER (WHERE NOT (ratelimit_limit('kept', 'k' || g, '$config')).ok) FROM generate_series(1, 40) AS g;
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'kept:', pg_temp.settle(:'first') = :'first';
SET ROLE rl_transport;
SELECT 'no usage:', pg_temp.state_of(\$s\$$call\$s\$);
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER ratelimit TO rl_transport;
SET ROLE rl_transport;
SELECT 'usage:', pg_temp.state_of(\$s\$$call\$s\$);
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER ratelimit FROM rl_transport;
SELECT pg_temp.routed() AS first \gset
ALTER SERVER ratelimit OPTIONS (ADD connection_lifetime '3600');
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'server changed, new:', cardinality(string_to_array(pg_temp.routed(), ',')),
       NOT (string_to_array(pg_temp.settle('none'), ',') && string_to_array(:'first', ','));
ALTER SERVER ratelimit OPTIONS (DROP connection_lifetime);
-- A cluster the router cannot use (in a transaction rolled back: a wrapper
-- without PL/Proxy's validator lets a bad partition list through).
BEGIN;
ALTER SERVER ratelimit RENAME TO ratelimit_real;
SELECT 'no server:', pg_temp.state_of(\$s\$$call\$s\$);
CREATE FOREIGN DATA WRAPPER rl_no_validator;
CREATE SERVER ratelimit FOREIGN DATA WRAPPER rl_no_validator OPTIONS (p0 'dbname=rl_p0', p2 'dbname=rl_p2');
SELECT 'no user mapping:', left(pg_temp.state_of(\$s\$$call\$s\$), 32);
CREATE USER MAPPING FOR PUBLIC SERVER ratelimit;
SELECT 'missing partition:', pg_temp.state_of(\$s\$$call\$s\$);
ALTER SERVER ratelimit OPTIONS (ADD p1 'dbname=rl_p1');
SELECT 'three partitions:', pg_temp.state_of(\$s\$$call\$s\$);
ALTER SERVER ratelimit OPTIONS (ADD modular_mapping '1');
SELECT 'modular mapping:', pg_temp.state_of(\$s\$$call\$s\$);
ALTER SERVER ratelimit OPTIONS (DROP modular_mapping, DROP p2, ADD partition_2 'dbname=rl_p2');
SELECT 'partition_N:', pg_temp.state_of(\$s\$$call\$s\$);
ROLLBACK;
SELECT 'back:', pg_temp.state_of(\$s\$$call\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: one per partition, USAGE on the server needed, kept by the session, new ones after the server changed; an unusable cluster's errors (modular_mapping and partition_N refused: the SQL routes by the mask)" \
    "$(printf '%s\n' 'connections 4' 0 'kept: t' 'no usage: 42501 permission denied for foreign server ratelimit' \
         'usage: no error' 'server changed, new: 4 t' 'no server: 42704 ratelimit_proxy: there is no server "ratelimit"' \
         'no user mapping: 42704 user mapping not found for' \
         'missing partition: HV00D ratelimit_proxy: the partitions of server "ratelimit" are not valid: a number is missing or repeated' \
         'three partitions: HV00D ratelimit_proxy: the partitions of server "ratelimit" are not valid: their number is not a power of 2' \
         'modular mapping: 0A000 ratelimit_proxy: server "ratelimit" has option "modular_mapping", which ratelimit_proxy does not support' \
         'partition_N: 0A000 ratelimit_proxy: server "ratelimit" has option "partition_2", which ratelimit_proxy does not support' \
         'back: no error')" \
    "$(echo "$out" | grep -v '^t$')"

  # A row of the partition locked for 6 seconds by a transaction there
  # (application ratelimit_holder: the router's session waits until it
  # holds the row, and until it is gone, whatever the machine's speed).
  hold() {
    psql_in -h "$MAIN_HOST" -d "rl_p$part" -c "SET application_name = 'ratelimit_holder'" -c "BEGIN" -c "$call" \
      -c "SELECT pg_sleep(6)" -c "COMMIT" >/dev/null
  }
  local what
  for what in statement_timeout query_timeout; do
    hold &
    holder=$!
    out=$(psql_in -At -F ' ' -d "$db" 2>&1 <<SQL
$TRANSPORT_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.holder(true);
$(if [ $what = statement_timeout ]; then echo "SET statement_timeout = '300ms';";
  else echo "ALTER SERVER ratelimit OPTIONS (ADD query_timeout '1');"; fi)
SELECT 'call:', pg_temp.state_of(\$s\$$call\$s\$);
RESET statement_timeout;
SELECT 'waiting:', pg_temp.waiting();
$([ $what = query_timeout ] && echo "ALTER SERVER ratelimit OPTIONS (DROP query_timeout);")
SELECT pg_temp.holder(false);
SELECT 'next call:', pg_temp.state_of(\$s\$$call\$s\$);
SQL
    ) || { echo "$out"; out=failed; }
    wait "$holder"
    local expected='57014 canceling statement due to statement timeout'
    [ $what = query_timeout ] && expected="57014 public.ratelimit_limit(6): [rl_p$part] query timeout"
    check "router connections: a call stopped by $what while its partition waits cancels the partition's statement; the next call works" \
      "$(printf 'call: %s\nwaiting: 0\nnext call: no error' "$expected")" "$(echo "$out" | grep -v '^t$\|^$')"
  done
}

# What the router's own connections do when a partition fails them, in
# router database router_failures over partition databases rl_f0 and rl_f1
# of the main cluster (thrown away after: one of them is altered):
#   - connection_lifetime: a connection is kept while it is younger than the
#     server's connection_lifetime (every call begun within that many
#     seconds of the first one keeps its partition backend), and replaced
#     at the first call after it (that call begun that late), the old
#     backend gone;
#   - an idle connection the partition terminated is replaced at the next
#     call, without an error;
#   - a connection lost during a RUN ON ALL call (ratelimit_define, while
#     its statement waits for a row lock on the second partition, the
#     first one's answer already read): 08006 naming the partition, and
#     the next call works, one connection per partition left;
#   - a partition's notice and warning: passed to the client, in order,
#     before the answer, the connection kept;
#   - a partition that answers another row shape (its ratelimit_stats view
#     given one more column): 42804 naming it, the first partition's
#     answer already read; the next calls on both partitions work, on the
#     same partition backends;
#   - calls whose plan a function change in another session invalidates
#     while they run: every one answered;
#   - calls that time out on the second partition after the first one
#     answered: no libpq memory left behind (the resident size);
#   - a partition whose ratelimit_proxy_value answers two rows: the
#     router's one-row call routed there fails naming it (21000).
# Waits are for conditions (bounded, 60 seconds), never for a fixed time.
FAILURE_HELPERS="
SET client_min_messages = warning;
$ROUTED_HELPERS
-- The router's partition backends in database db, as 'pid,pid'.
CREATE FUNCTION pg_temp.pids(db text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
          WHERE application_name = 'ratelimit_proxy' AND datname = db);
END \$\$;
-- The router's partition backends in db once they are want (up to 60 s).
CREATE FUNCTION pg_temp.settle(db text, want text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN pg_temp.pids(db) IS NOT DISTINCT FROM want;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.pids(db);
END \$\$;
-- Whether the router has (after up to 60 s) one backend in db: the ones
-- it closed are gone.
CREATE FUNCTION pg_temp.one_left(db text) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN strpos(pg_temp.pids(db), ',') = 0;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN strpos(pg_temp.pids(db), ',') = 0;
END \$\$;
-- Waits (up to 60 s) until a session of application app runs a statement like pattern.
CREATE FUNCTION pg_temp.wait_for(app text, pattern text) RETURNS boolean LANGUAGE sql AS \$\$
  SELECT pg_temp.wait_until(app, pattern, true)
\$\$;
-- With connection_lifetime lifetime (seconds): routed calls on every
-- partition, 50 ms apart, until rl_f0's backend is replaced (up to 60 s):
-- whether any call begun less than lifetime after the first one (before
-- it began) kept the first backend, and whether the first call that found
-- another (every call before it kept the first) had begun at least
-- lifetime after.
CREATE FUNCTION pg_temp.lifetime(lifetime integer) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
  started timestamptz := clock_timestamp();
  first text;
  now_pids text;
  call_start timestamptz;
  kept integer := 0;
BEGIN
  PERFORM count(*) FROM ratelimit_proxy_stats();
  first := pg_temp.pids('rl_f0');
  FOR i IN 1..1200 LOOP
    PERFORM pg_sleep(0.05);
    call_start := clock_timestamp();
    PERFORM count(*) FROM ratelimit_proxy_stats();
    now_pids := pg_temp.pids('rl_f0');
    IF now_pids IS DISTINCT FROM first THEN
      RETURN format('kept before: %s, replaced after: %s', kept > 0,
                    call_start >= started + make_interval(secs => lifetime));
    END IF;
    IF call_start < started + make_interval(secs => lifetime) THEN kept := kept + 1; END IF;
  END LOOP;
  RETURN 'not replaced';
END \$\$;"
run_transport_failures() {
  local host=$MAIN_HOST config='{"kind": "token bucket", "rate": 10, "period": "1 hour"}' i out holder columns
  fresh_databases rl_f 2 router_failures
  psql_in -d router_failures -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=rl_f0 host=$host port=5432', p1 'dbname=rl_f1 host=$host port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" >/dev/null
  # Its key on each partition.
  local key0 key1
  key0=$(psql_in -At -d router_failures -c "SELECT 'k' || g FROM generate_series(1, 100) AS g WHERE ratelimit_partition('f', 'k' || g) = 0 LIMIT 1")
  key1=$(psql_in -At -d router_failures -c "SELECT 'k' || g FROM generate_series(1, 100) AS g WHERE ratelimit_partition('f', 'k' || g) = 1 LIMIT 1")
  local call0="SELECT ratelimit_limit('f', '$key0', '$config')" call1="SELECT ratelimit_limit('f', '$key1', '$config')"

  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
ALTER SERVER ratelimit OPTIONS (ADD connection_lifetime '3');
SELECT pg_temp.lifetime(3);
SELECT 'old one gone:', pg_temp.one_left('rl_f0');
ALTER SERVER ratelimit OPTIONS (DROP connection_lifetime);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: kept while younger than connection_lifetime, replaced at a call after it, the old backend gone" \
    "$(printf '%s\n' 'kept before: t, replaced after: t' 'old one gone: t')" "$(echo "$out" | grep -v '^$')"

  # The second partition's backend waits for a row lock its holder took
  # (redefining the same name), which terminates it once it waits.
  held() {
    psql_in -d rl_f1 -c "SET application_name = 'ratelimit_lost_holder'" -c "BEGIN" \
      -c "SELECT ratelimit_define('lost', '$config')" -f - -c "COMMIT" >/dev/null <<'SQL'
DO $$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE application_name = 'ratelimit_proxy' AND datname = 'rl_f1' AND wait_event_type = 'Lock';
    EXIT WHEN FOUND;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SQL
  }
  held &
  holder=$!
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.pids('rl_f1') AS idle \gset
SELECT pg_terminate_backend(:idle);
SELECT pg_temp.settle('rl_f1', NULL) IS NULL;
SELECT 'idle one terminated:', pg_temp.state_of(\$s\$SELECT count(*) FROM ratelimit_proxy_stats()\$s\$),
       pg_temp.pids('rl_f1') <> :'idle';
SELECT pg_temp.wait_for('ratelimit_lost_holder', 'DO%');
SELECT 'lost during the call:', pg_temp.state_of(\$s\$SELECT ratelimit_define('lost', '$config')\$s\$);
SELECT 'next call:', pg_temp.state_of(\$s\$SELECT ratelimit_define('lost', '$config')\$s\$);
SELECT 'connections:', pg_temp.one_left('rl_f0'), pg_temp.one_left('rl_f1');
SQL
  ) || { echo "$out"; out=failed; }
  wait "$holder" || { echo "the holder on rl_f1 failed"; out=failed; }
  # The first line of each answer (libpq's message goes on: the partition's
  # context, "server closed the connection unexpectedly").
  check "router connections: an idle one terminated is replaced at the next call; one lost during a RUN ON ALL call fails it naming the partition (08006), the next call works, one connection per partition" \
    "$(printf '%s\n' 'idle one terminated: no error t' \
         'lost during the call: 08006 public.ratelimit_proxy_define(2): [rl_f1] connection lost: FATAL:  terminating connection due to administrator command' \
         'next call: no error' 'connections: t t')" \
    "$(echo "$out" | grep '^[a-z ]*:' | grep -v '^CONTEXT:')"

  # A partition's notices and warnings reach the router's client as
  # PL/Proxy passes them (rl_f0's ratelimit_stats raises them at its first
  # call in a partition backend, while public.noise has a row), in order,
  # before the answer; the connection stays.
  psql_in -d rl_f0 -f - >/dev/null <<'SQL'
CREATE TABLE public.noise (level text);
INSERT INTO public.noise VALUES ('on');
CREATE FUNCTION public.noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM public.noise) AND current_setting('rl_test.noisy', true) IS NULL THEN
    PERFORM set_config('rl_test.noisy', 'done', false);
    RAISE NOTICE 'first from %', current_database() USING HINT = 'a hint';
    RAISE WARNING 'then from %', current_database();
  END IF;
  RETURN true;
END $$;
DO $$ BEGIN
  EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_stats AS SELECT s.* FROM (%s) AS s WHERE (SELECT public.noisy())',
                 rtrim(pg_get_viewdef('public.ratelimit_stats'::regclass), ';'));
END $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SET client_min_messages = notice;
SELECT 'answered:', count(*) >= 0 FROM ratelimit_proxy_stats();
SET client_min_messages = warning;
SELECT pg_temp.pids('rl_f0') AS p0 \gset
SELECT 'quiet after:', count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'same backend:', pg_temp.pids('rl_f0') = :'p0';
SQL
  ) || { echo "$out"; out=failed; }
  psql_in -d rl_f0 -c "DELETE FROM public.noise" >/dev/null
  check "router connections: a partition's notice and warning reach the client as PL/Proxy passes them, in order, before the answer; the connection stays" \
    "$(printf '%s\n' 'NOTICE:  public.ratelimit_proxy_stats(0): [rl_f0] REMOTE NOTICE: first from rl_f0' 'HINT:  Remote hint: a hint' \
         'WARNING:  public.ratelimit_proxy_stats(0): [rl_f0] REMOTE WARNING: then from rl_f0' 'answered: t' \
         'quiet after: t' 'same backend: t')" \
    "$(echo "$out" | grep -v '^t$\|^$\|^CONTEXT:\|^PL/pgSQL\|^SQL statement')"

  # rl_f1's ratelimit_stats with one column more than the router's
  # statement expects (the router's ratelimit_proxy_stats: the server, then
  # the view's columns).
  columns=$(psql_in -At -d rl_f1 -c "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.ratelimit_stats'::regclass AND attnum > 0 AND NOT attisdropped")
  psql_in -d rl_f1 -c "DO \$\$ BEGIN EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_stats AS SELECT s.*, 0 AS extra FROM (%s) AS s', rtrim(pg_get_viewdef('public.ratelimit_stats'::regclass), ';')); END \$\$"
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_status();
SELECT pg_temp.pids('rl_f0') AS p0, pg_temp.pids('rl_f1') AS p1 \gset
SELECT 'other shape:', pg_temp.state_of(\$s\$SELECT count(*) FROM ratelimit_stats\$s\$);
SELECT 'first partition:', pg_temp.state_of(\$s\$$call0\$s\$);
SELECT 'second partition:', pg_temp.state_of(\$s\$$call1\$s\$);
SELECT 'same backends:', pg_temp.pids('rl_f0') = :'p0', pg_temp.pids('rl_f1') = :'p1';
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering another row shape fails the call naming it (42804); the next calls work, on the same partition backends" \
    "$(printf '%s\n' "other shape: 42804 public.ratelimit_proxy_stats(0): [rl_f1] the partition answered $((columns + 2)) columns, not $((columns + 1))" \
         'first partition: no error' 'second partition: no error' 'same backends: t t')" \
    "$(echo "$out" | grep -v '^t$\|^$')"

  # A function changed in another session is seen by the router backend
  # whenever it next reads a catalog, in the middle of a call too: here
  # each call reads the cluster again (another role: its user mapping is
  # looked up), while another session commits a new definition of a
  # function, 3,000 times. Before 0.10.0 that freed the plan the call was
  # using: garbage in its statement, errors such as "(null)(-197131880):
  # [rl_f1] connection lost: number of parameters must be between 0 and
  # 65535", or a crash; now every call is answered.
  psql_in -d router_failures -c "GRANT USAGE ON FOREIGN SERVER ratelimit TO PUBLIC" \
    -c "DO \$\$ BEGIN FOR i IN 1..200 LOOP EXECUTE format('CREATE ROLE rl_churn%s', i); END LOOP; END \$\$" >/dev/null
  local churner
  ( echo "SET synchronous_commit = off;"
    for i in $(seq 1 3000); do
      echo "CREATE OR REPLACE FUNCTION public.rl_churn() RETURNS integer LANGUAGE sql AS 'SELECT $i';"
    done ) | psql_in -d router_failures >/dev/null &
  churner=$!
  out=$(for i in $(seq 1 200); do
          echo "SET ROLE rl_churn$i; SELECT ok FROM ratelimit_limit('churn', 'k$i', '$config'); RESET ROLE;"
        done | psql_in -At -v ON_ERROR_STOP=0 -d router_failures 2>&1 | sort | uniq -c | sed 's/^ *//') || out=failed
  wait "$churner" || { echo "the session changing a function failed"; out=failed; }
  psql_in -d router_failures -c "DO \$\$ BEGIN FOR i IN 1..200 LOOP EXECUTE format('DROP ROLE rl_churn%s', i); END LOOP; END \$\$" \
    -c "REVOKE USAGE ON FOREIGN SERVER ratelimit FROM PUBLIC" >/dev/null
  check "router connections: 200 calls, each reading the cluster again, while another session changes a function: every call answered" \
    "200 t" "$out"

  # libpq's memory is malloc'd: a PGresult left behind by an error is seen
  # only in the router backend's resident size. rl_f0 answers
  # ratelimit_proxy_status with 20,000 rows (about 6 MB in libpq), rl_f1
  # only after 5 seconds, past the server's query_timeout: each call fails
  # (57014) after rl_f0's answer was read (one that reached rl_f0's
  # deadline first would name rl_f0 and leak nothing). Before 0.10.0 each
  # failure left rl_f0's answer behind (the resident size grew by about 6
  # MB a failure); now it grows by less than 1 MB over all 10. The size is
  # the server's /proc/self/status: skipped in a root without /proc.
  psql_in -d rl_f0 -c "SELECT count(*) FROM generate_series(1, 20000) AS g, ratelimit_limit('big', 'key' || g, '$config')" >/dev/null
  psql_in -d rl_f1 -c "CREATE FUNCTION public.slow() RETURNS boolean LANGUAGE plpgsql AS \$\$BEGIN PERFORM pg_sleep(5); RETURN true; END\$\$" \
    -c "DO \$\$ BEGIN EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_status AS SELECT s.* FROM (%s) AS s WHERE (SELECT public.slow())', rtrim(pg_get_viewdef('public.ratelimit_status'::regclass), ';')); END \$\$" >/dev/null
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<'SQL'
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.rss() RETURNS bigint LANGUAGE sql AS $$
  SELECT substring(pg_read_file('/proc/self/status') FROM 'VmRSS:\s+(\d+)')::bigint $$;
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS OR query_canceled THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
SELECT (pg_stat_file('/proc/self/status', true)).size IS NOT NULL AS have_proc \gset
\if :have_proc
ALTER SERVER ratelimit OPTIONS (ADD query_timeout '2');
SELECT pg_temp.state_of('SELECT count(*) FROM ratelimit_proxy_status()') IS NOT NULL;
SELECT pg_temp.rss() AS before \gset
CREATE TEMP TABLE failures AS
SELECT pg_temp.state_of('SELECT count(*) FROM ratelimit_proxy_status() WHERE ' || g || ' > 0') AS failure
FROM generate_series(1, 10) AS g;
SELECT 'timed out:', count(*) FILTER (WHERE failure LIKE '57014 public.ratelimit_proxy_status(0): [rl_f_] query timeout') FROM failures;
SELECT 'resident size grew less than 1 MB a failure:', pg_temp.rss() - :before < 10 * 1024;
\echo note: of the 10 timeouts, on rl_f1 (after rl_f0 answered):
SELECT count(*) FILTER (WHERE failure LIKE '%[rl_f1]%') FROM failures;
ALTER SERVER ratelimit OPTIONS (DROP query_timeout);
\else
\echo note: skipped: the server has no /proc
\endif
SQL
  ) || { echo "$out"; out=failed; }
  echo "$out" | grep -A1 '^note:' | grep -v '^--$' | paste -d ' ' - - | sed 's/^/   /'
  if ! echo "$out" | grep -q 'note: skipped'; then
    check "router connections: a RUN ON ALL call that fails after a partition answered leaves no libpq memory behind (the router backend's resident size)" \
      "$(printf '%s\n' 'timed out: 10' 'resident size grew less than 1 MB a failure: t')" \
      "$(echo "$out" | grep -v '^t$\|^$\|^note:\|^[0-9]*$')"
  fi

  # rl_f1's ratelimit_proxy_value replaced by a set-returning function of
  # the same arguments that answers two rows (last: rl_f1 keeps it): the
  # router's one-row call routed there fails naming the function (21000);
  # the other partition's works.
  psql_in -d rl_f1 -f - >/dev/null <<'SQL'
ALTER EXTENSION ratelimit DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
CREATE FUNCTION public.ratelimit_proxy_value(name text, key text, config jsonb, OUT value double precision,
    OUT ts timestamp with time zone, OUT error_state text, OUT error_message text, OUT error_detail text,
    OUT error_hint text)
RETURNS SETOF record LANGUAGE sql
AS $$ VALUES (1::float8, now(), NULL::text, NULL::text, NULL::text, NULL::text), (2, now(), NULL, NULL, NULL, NULL) $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT 'two rows:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key1', '$config')\$s\$);
SELECT 'other partition:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key0', '$config')\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering two rows to a one-row call fails it naming the function (21000); the other partition's call works" \
    "$(printf '%s\n' 'two rows: 21000 public.ratelimit_proxy_value: the partition answered 2 rows, not one' 'other partition: no error')" \
    "$(echo "$out" | grep '^[a-z ]*:' | grep -v '^CONTEXT:')"

  # rl_f0's ratelimit_proxy_value answering its value as numeric (the same
  # columns, one of another type): the call fails naming the partition and
  # the column (42804), before any value is read.
  psql_in -d rl_f0 -f - >/dev/null <<'SQL'
ALTER EXTENSION ratelimit DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
CREATE FUNCTION public.ratelimit_proxy_value(name text, key text, config jsonb, OUT value numeric,
    OUT ts timestamp with time zone, OUT error_state text, OUT error_message text, OUT error_detail text,
    OUT error_hint text)
LANGUAGE sql AS $$ VALUES (1.5::numeric, now(), NULL::text, NULL::text, NULL::text, NULL::text) $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT 'other type:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key0', '$config')\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering a column of another type fails the call naming it and the column (42804)" \
    'other type: 42804 public.ratelimit_proxy_value(4): [rl_f0] the partition answered column 1 as type 1700, not 701 (double precision)' \
    "$(echo "$out" | grep '^other type:')"
}
