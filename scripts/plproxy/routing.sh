# Calls routed over the partitions, beyond pg_regress: the hot-key exact
# bound through the router, two partition databases of one server counted
# once, and a stopped partition.
# Sourced by scripts/plproxy-test.sh (after scripts/lib.sh); defines
# functions only, which use the driver's variables (SRC, WORK, MAIN_HOST,
# PARTITIONS, PART_DIRS, PART_HOSTS, API_VERSION, ROUTER_VERSION, failed).
# shellcheck shell=bash

# The hot-key exact bound through router database $1, whose partitions are
# at the socket dirs given as the other arguments.
run_hot_key() {
  local db=$1 capacity=200 clients=16 per_client=25
  shift
  local hosts=("$@")
  local config="{\"kind\": \"token bucket\", \"rate\": 250, \"period\": \"36500 days\", \"capacity\": $capacity}"
  psql_in -d "$db" -c "CREATE TABLE hot_calls (ok boolean NOT NULL)"
  echo "INSERT INTO hot_calls SELECT r.ok FROM ratelimit_limit('hot', 'key', '$config') AS r;" >"$WORK/hot.sql"
  if ! run_pg_client "$PG_BINDIR/pgbench" -n -c $clients -j 2 -t $per_client -f "$(server_path "$WORK")/hot.sql" "$db" \
    >"$WORK/pgbench.log" 2>&1; then
    cat "$WORK/pgbench.log"
    check "pgbench through the router ($db)" "exit 0" "failed"
    return
  fi
  local calls granted owner
  calls=$(psql_in -At -d "$db" -c "SELECT count(*) FROM hot_calls")
  granted=$(psql_in -At -d "$db" -c "SELECT count(*) FILTER (WHERE ok) FROM hot_calls")
  owner=$(psql_in -At -d "$db" -c "SELECT ratelimit_partition('hot', 'key')")
  check "hot key: $((clients * per_client)) calls made" $((clients * per_client)) "$calls"
  check "hot key: $capacity granted, exactly the capacity" $capacity "$granted"
  # Per partition: the owner holds one row of the key with less than one
  # token (200 taken), the others none.
  local i rows
  for i in "${!hosts[@]}"; do
    rows=$(psql_in -At -h "${hosts[$i]}" -d "rl_p$i" \
      -c "SELECT count(*) || ' ' || coalesce(bool_and(value < 1 AND value >= 0), false) FROM ratelimit_state WHERE name = 'hot'")
    if [ "$i" = "$owner" ]; then
      check "hot key: partition $i (its owner) holds its emptied row" "1 true" "$rows"
    else
      check "hot key: partition $i holds no row of it" "0 false" "$rows"
    fi
  done
}

# Two partitions that are databases of one server (partition 0's cluster,
# whose shared memory holds the counters of ratelimit_stats and the memory
# limits of both): the router's ratelimit_stats counts its calls once, and
# its ratelimit_status shows each memory entry once.
run_same_server() {
  local host=${PART_HOSTS[0]} i
  local table_config='{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 5}'
  local memory_config='{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 5, "storage": "memory"}'
  for i in 0 1; do
    psql_in -h "$host" -d postgres -c "DROP DATABASE IF EXISTS rl_s$i" -c "CREATE DATABASE rl_s$i"
    psql_in -h "$host" -d "rl_s$i" -c "CREATE EXTENSION ratelimit VERSION '$API_VERSION'"
  done
  psql_in -d postgres -c "DROP DATABASE IF EXISTS router_same" -c "CREATE DATABASE router_same"
  psql_in -d router_same -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=rl_s0 host=$host port=5432', p1 'dbname=rl_s1 host=$host port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" >/dev/null
  local out
  out=$(psql_in -At -d router_same 2>&1 <<SQL
SELECT ratelimit_stats_reset();
SELECT concat_ws(' ',
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 20) AS g, ratelimit_limit('same', 'k' || g, '$table_config') AS r),
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 20) AS g, ratelimit_limit('same_memory', 'k' || g, '$memory_config') AS r),
  (SELECT count(DISTINCT ratelimit_partition('same', 'k' || g)) FROM generate_series(1, 20) AS g),
  (SELECT granted FROM ratelimit_stats WHERE name = 'same'),
  (SELECT granted FROM ratelimit_stats WHERE name = 'same_memory'),
  (SELECT count(*) FROM ratelimit_status WHERE name = 'same' AND storage = 'table'),
  (SELECT count(*) FROM ratelimit_status WHERE name = 'same_memory' AND storage = 'memory'));
SQL
  ) || { echo "$out"; out=failed; }
  check "one server, 2 partition databases: grants, partitions used, stats and status count the server once" \
    "$(printf '\n20 20 2 20 20 20 20')" "$out"
}

# Stops partition $1 of the separate clusters and checks that only its
# keys fail, with a connection error naming it, in a router session whose
# connections were open and in a new one; then restarts it.
run_stopped_partition() {
  local down=$1 db=router_clusters
  # psql runs pg_ctl (\!) where the servers run, as their OS user.
  local dir=${PART_HOSTS[$down]}
  local ctl="$PG_BINDIR/pg_ctl -D $dir/data -l $dir/server.log -w"
  [ "$(id -u)" -eq 0 ] && ctl="runuser -u postgres -- $ctl"
  local config='{"kind": "token bucket", "rate": 1000, "period": 1000}'
  # One pass: each of 40 keys once; prints the verdict and one message.
  local pass="
TRUNCATE outcomes RESTART IDENTITY;
DO \$\$
DECLARE k text;
BEGIN
  FOR g IN 1..40 LOOP
    k := 'k' || g;
    BEGIN
      PERFORM ratelimit_limit('down', k, '$config');
      INSERT INTO outcomes (key, partition) VALUES (k, ratelimit_partition('down', k));
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO outcomes (key, partition, error) VALUES (k, ratelimit_partition('down', k), SQLSTATE || ': ' || SQLERRM);
    END;
  END LOOP;
END \$\$;
SELECT 'verdict', count(*) FILTER (WHERE partition = $down),
       count(*) FILTER (WHERE partition = $down AND error LIKE '%[rl_p$down]%'),
       count(*) FILTER (WHERE partition <> $down),
       count(*) FILTER (WHERE partition <> $down AND error IS NULL)
FROM outcomes;
SELECT 'message', error FROM outcomes WHERE partition = $down ORDER BY id LIMIT 1;
SELECT 'states', string_agg(DISTINCT left(error, 5) || CASE WHEN error LIKE '%] could not connect: %' THEN ' could not connect' ELSE '' END, ',')
FROM outcomes WHERE partition = $down;"
  local out
  out=$(psql_in -At -F '|' -d "$db" 2>&1 <<SQL
SET client_min_messages = warning;
CREATE TEMP TABLE outcomes (id serial, key text, partition integer, error text);
SELECT 'warm', count(*) FROM generate_series(1, 40) AS g, ratelimit_limit('down', 'k' || g, '$config') AS r WHERE r.ok;
\! $ctl -m fast stop >/dev/null
$pass
$pass
DO \$\$
BEGIN
  PERFORM ratelimit_define('down', '$config');
  RAISE NOTICE 'defined';
EXCEPTION WHEN OTHERS THEN
  INSERT INTO outcomes (key, error) VALUES ('define', SQLERRM);
END \$\$;
SELECT 'define', error LIKE '%[rl_p$down]%' FROM outcomes WHERE key = 'define';
\! $ctl start -o "-c listen_addresses='' -k $dir -p 5432 -c shared_preload_libraries=ratelimit" >/dev/null
$pass
SQL
  ) || { echo "$out"; check "stopped partition session" "exit 0" "failed"; return; }
  local verdicts
  verdicts=$(echo "$out" | awk -F'|' '$1 == "verdict" { print $2 " " $3 " " $4 " " $5 }')
  echo "$out" | awk -F'|' '$1 == "message" { print "     partition '"$down"' down: " $2 }' | head -2
  local owned others
  owned=$(echo "$verdicts" | head -1 | cut -d' ' -f1)
  others=$(echo "$verdicts" | head -1 | cut -d' ' -f3)
  check "warm session before the stop: all 40 granted" "warm|40" "$(echo "$out" | grep '^warm')"
  check "stopped partition $down: both passes' errors are connection errors" 2 \
    "$(echo "$out" | grep -c '^message|.*connection')"
  check "stopped partition $down, session with open connections: its $owned keys fail naming it, the other $others work" \
    "$owned $owned $others $others" "$(echo "$verdicts" | sed -n 1p)"
  check "stopped partition $down, next attempt (reconnecting): the same" \
    "$owned $owned $others $others" "$(echo "$verdicts" | sed -n 2p)"
  check "stopped partition $down, next attempt: every error is 08001, could not connect" \
    "states|08001 could not connect" "$(echo "$out" | grep '^states|' | sed -n 2p)"
  check "stopped partition $down: ratelimit_define (on every partition) fails naming it" \
    "define|t" "$(echo "$out" | grep '^define')"
  check "partition $down restarted: every key works again in the same session" \
    "$owned 0 $others $others" "$(echo "$verdicts" | sed -n 3p)"
}
