#!/usr/bin/env bash
# Throughput through the PL/Proxy router (ratelimit_proxy) with 1, 2 and 4
# partitions, side by side with calling one node directly, in one run:
# pgbench with 1, 8 and 32 clients, synchronous_commit on and off on the
# partitions, every call a grant on one of 100,000 existing keys, measured
# after a warm-up in which the router backends connect to the partitions.
# Then the same grid for a key with an override (a defined limit, each of
# 10,000 keys overridden) and for a memory limit ("storage": "memory",
# defined, 10,000 keys), direct and through the router with 1 partition;
# where the router's cost goes at 1 client (the call as the partition
# receives it from PL/Proxy, the PL/Proxy function without the router's
# wrapper, and the routed call); and the cost of a refusal, direct and
# through the router, with throws => false and with throws => true, with
# the partition sessions each refusal loop opened, and of a bad argument
# (SQLSTATE 22023) to ratelimit_limit and to ratelimit_value. Beside the
# throughput, the CPU time each call costs the router backend and the
# partition backend (read from /proc: on a shared machine other work slows
# the calls down, but does not add to their CPU time as much).
#
#   bench/plproxy.sh            # uses the extensions already installed
#   bench/plproxy.sh --build    # builds and installs them first
#   BENCH_SECONDS=10 BENCH_ROUNDS=1 BENCH_WARMUP=3 bench/plproxy.sh
#   BENCH_GRID=router bench/plproxy.sh   # only 1 client, direct and 1 partition,
#                                        # the cost breakdown and the refusals
#
#   BENCH_SECONDS   seconds measured per pgbench run (after the warm-up)
#   BENCH_ROUNDS    runs per cell, interleaved across the targets; the median
#   BENCH_WARMUP    seconds of each run not measured: every router backend
#                   opens one connection per partition it calls, so 32
#                   clients on 4 partitions start 128 partition backends
#   BENCH_GRID      full (the default) or router (written to
#                   bench/plproxy-router-latest.md instead)
#
# One throwaway cluster holds everything: the database `direct` (CREATE
# EXTENSION ratelimit), partitions p1..p3 like it, and three router
# databases r1, r2, r4 whose server ratelimit lists `direct` (as partition 0)
# and then p1.., so "1 partition" is the same database as "direct". The
# cluster preloads ratelimit (memory limits need it on PostgreSQL 15), so
# ratelimit_stats counts every call, direct and routed alike; its memory
# limits are the server's, shared by direct and p1..p3. On one
# machine the router, the partitions and pgbench share its CPUs: more
# partitions add no CPU, only more backends. Prints markdown tables and
# writes them to bench/plproxy-latest.md (BENCH_GRID=router:
# bench/plproxy-router-latest.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

SECONDS_PER_RUN=${BENCH_SECONDS:-10}
WARMUP=${BENCH_WARMUP:-3}
ROUNDS=${BENCH_ROUNDS:-1}
KEYS=${BENCH_KEYS:-100000}
REFUSALS=2000
GRID=${BENCH_GRID:-full}
OUT=bench/plproxy-latest.md
[ "$GRID" = router ] && OUT=bench/plproxy-router-latest.md
case "$GRID" in full | router) ;; *) echo "BENCH_GRID must be full or router" >&2; exit 2 ;; esac
if [ "${1:-}" = "--build" ]; then ensure_packages; build_and_install_extension; fi
RATELIMIT_PACKAGES=("postgresql-$PG_MAJOR-plproxy")
ensure_packages
API_VERSION=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit.control)
ROUTER_VERSION=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit_proxy.control)
OVERRIDDEN=10000

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
trap stop_cluster EXIT
start_cluster -c shared_buffers=256MB -c max_connections=300 -c shared_preload_libraries=ratelimit \
  -c ratelimit.memory_max_keys=100000
WORK=$(mktemp -d /tmp/ratelimit-plproxy-bench.XXXXXX)
chmod 755 "$WORK"
psql_in() { PGOPTIONS="-c client_min_messages=warning" "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }

CONFIG='{"kind": "token bucket", "rate": 1e9, "period": 1000}'
REFUSED_CONFIG='{"kind": "token bucket", "rate": 1, "period": "3650 days"}'
OVERRIDE_CONFIG='{"kind": "token bucket", "rate": 2e9, "period": 1000}'
MEMORY_CONFIG='{"kind": "token bucket", "rate": 1e9, "period": 1000, "storage": "memory"}'
for db in direct p1 p2 p3; do
  psql_in -d postgres -c "CREATE DATABASE $db"
  # Every key exists in every partition (a routed call only uses its own),
  # and one empty bucket to refuse.
  psql_in -d $db -c "CREATE EXTENSION ratelimit VERSION '$API_VERSION'" \
    -c "SELECT count(ratelimit_limit('n', 'k' || g, '$CONFIG', 0)) FROM generate_series(1, $KEYS) AS g" \
    -c "SELECT ratelimit_limit('refused', 'k', '$REFUSED_CONFIG')" \
    -c "SELECT ratelimit_define('o', '$CONFIG')" \
    -c "SELECT count(ratelimit_override('o', 'k' || g, '$OVERRIDE_CONFIG')) FROM generate_series(1, $OVERRIDDEN) AS g" \
    -c "SELECT count(ratelimit_limit('o', 'k' || g, count => 0)) FROM generate_series(1, $OVERRIDDEN) AS g" \
    -c "SELECT ratelimit_define('m', '$MEMORY_CONFIG')" -c "VACUUM ANALYZE" >/dev/null
done
partition_dbs=(direct p1 p2 p3)
for n in 1 2 4; do
  options=""
  for i in $(seq 0 $((n - 1))); do
    options+="${options:+, }p$i 'dbname=${partition_dbs[$i]} host=$CLUSTER_DIR port=5432'"
  done
  psql_in -d postgres -c "CREATE DATABASE r$n"
  psql_in -d "r$n" -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS ($options)" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')"
done
# A PL/Proxy call of a statement that does nothing, routed like a limit.
psql_in -d r1 -c "CREATE FUNCTION bench_noop(hash integer) RETURNS integer LANGUAGE plproxy AS \$\$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT 1;
\$\$"
# The previous releases' routers (ratelimit_proxy 0.8.0, the last over
# PL/Proxy's call handler, and 0.6.0, which let the partition raise) over
# the same partition, which serves them too: the same run's baselines.
for old in 0.8.0 0.6.0; do
  psql_in -d postgres -c "CREATE DATABASE r1_${old//./}"
  psql_in -d "r1_${old//./}" -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$old'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=direct host=$CLUSTER_DIR port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')"
done
# The partition backend of a router session, for the CPU times: PL/Proxy's
# connection, and (0.9.0) the router's own, which the partition's
# pg_stat_activity shows as application ratelimit_proxy (the only one
# open when the CPU times are taken: every pgbench session has ended).
for db in r1 r1_080; do
  psql_in -d "$db" -c "CREATE FUNCTION bench_partition_pid() RETURNS integer LANGUAGE plproxy AS \$\$
    CLUSTER 'ratelimit';
    RUN ON 0;
    SELECT pg_backend_pid();
\$\$"
done
psql_in -d r1 -c "CREATE FUNCTION bench_routed_pid() RETURNS integer LANGUAGE sql AS \$\$
    SELECT pid FROM pg_catalog.pg_stat_activity WHERE application_name = 'ratelimit_proxy' AND datname = 'direct'
    ORDER BY backend_start DESC LIMIT 1;
\$\$"

cat >"$WORK/grant.sql" <<SQL
\set k random(1, $KEYS)
SELECT ok FROM ratelimit_limit('n', 'k' || :k, '$CONFIG');
SQL
# A key with an override, of a defined limit: the override is looked up.
cat >"$WORK/override.sql" <<SQL
\set k random(1, $OVERRIDDEN)
SELECT ok FROM ratelimit_limit('o', 'k' || :k);
SQL
# A defined memory limit.
cat >"$WORK/memory.sql" <<SQL
\set k random(1, $OVERRIDDEN)
SELECT ok FROM ratelimit_limit('m', 'k' || :k);
SQL
# Where the router's cost goes (1 client): the statement PL/Proxy sends the
# partition (its shape: the arguments as typed parameters, parsed and
# planned at every call, as -M extended's unnamed statement is), run
# directly; the PL/Proxy function without the router's PL/pgSQL
# wrapper; and a PL/Proxy call of a statement that does nothing.
cat >"$WORK/partition_statement.sql" <<SQL
\set k random(1, $KEYS)
SELECT * FROM public.ratelimit_proxy_limit('n'::text, ('k' || :k)::text, '$CONFIG'::jsonb,
                                           1::double precision, false::boolean, false::boolean, 'plain'::text);
SQL
cat >"$WORK/proxy.sql" <<SQL
\set k random(1, $KEYS)
SELECT ok FROM ratelimit_proxy_limit(ratelimit_hash('n', 'k' || :k), 'n', 'k' || :k, '$CONFIG', 1, false, false, 'plain');
SQL
cat >"$WORK/noop.sql" <<SQL
\set k random(1, $KEYS)
SELECT bench_noop(ratelimit_hash('n', 'k' || :k));
SQL

# Runs one pgbench load ($3: grant, override or memory) against database $1
# with $2 clients; prints its
# transactions per second in steady state: the mean of pgbench's per-second
# progress reports after the first $WARMUP seconds, in which each router
# backend opens its connections to the partitions (each a new backend
# there). 0, and pgbench's errors on stderr, if it failed.
run_load() {
  local db=$1 clients=$2 workload=${3:-grant} mode=${4:-prepared} tps
  "$PG_BINDIR/pgbench" -n -M "$mode" -T $((SECONDS_PER_RUN + WARMUP)) -P 1 -j 2 -c "$clients" \
    -f "$WORK/$workload.sql" "$db" >"$WORK/pgbench.log" 2>&1 || true
  tps=$(awk -v warmup="$WARMUP" '/^progress: / && $2 + 0 > warmup { sum += $4; n++ }
                                 END { if (n) printf "%.0f", sum / n }' "$WORK/pgbench.log")
  [ -n "$tps" ] || { grep -m 3 -i error "$WORK/pgbench.log" >&2; tps=0; }
  echo "$tps"
}

# The median of the numbers given as arguments.
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# CPU µs per call of the backend of a psql session on database $1 and, for
# a router database ($4 = routed), of its partition backend: $2 prepared
# once (statement p, or nothing), then $CPU_CALLS statements $3 (a printf
# template given the key number), each its own transaction, after 200 of
# them to warm up. Prints "<backend µs> <partition µs>" (the partition's 0
# when not routed). Clock ticks of /proc/<pid>/stat (10 ms each): 3000
# calls of 100 µs are 30 ticks, so about ±3%.
CPU_CALLS=3000
# shellcheck disable=SC2059 # the templates are printf formats
cpu_micros() {
  local db=$1 prepare=$2 template=$3 routed=${4:-} i part="0"
  [ "$routed" = plproxy ] && part="bench_partition_pid()"
  [ "$routed" = routed ] && part="bench_routed_pid()"
  local ticks="(SELECT (s[12])::bigint + (s[13])::bigint FROM (SELECT regexp_split_to_array(split_part(
                  pg_read_file('/proc/' || %s || '/stat'), ') ', 2), ' ') AS s) AS x)"
  {
    echo "$prepare"
    for i in $(seq 200); do printf "$template\n" $((i % KEYS + 1)); done
    echo "SELECT pg_backend_pid() AS pid, $part AS ppid \\gset"
    echo "SELECT $(printf "$ticks" :pid) AS t0, CASE WHEN :ppid = 0 THEN 0 ELSE $(printf "$ticks" :ppid) END AS p0 \\gset"
    for i in $(seq "$CPU_CALLS"); do printf "$template\n" $((i * 7919 % KEYS + 1)); done
    echo "SELECT round(($(printf "$ticks" :pid) - :t0) * 1e6 / $(getconf CLK_TCK) / $CPU_CALLS),
                 CASE WHEN :ppid = 0 THEN 0 ELSE round(($(printf "$ticks" :ppid) - :p0) * 1e6 / $(getconf CLK_TCK) / $CPU_CALLS) END;"
  } >"$WORK/cpu.sql"
  psql_in -At -F ' ' -d "$db" -f "$WORK/cpu.sql" | tail -1
}

# Microseconds per call of $3 calls of statement $4 in one session of
# database $1, each raising SQLSTATE $2 (caught in the loop), and the
# sessions the partition database `direct` gained meanwhile.
error_micros() {
  local db=$1 state=$2 calls=$3 statement=$4 before after micros
  before=$(direct_sessions)
  micros=$(psql_in -At -d "$db" <<SQL | tail -1
CREATE TEMP TABLE t AS SELECT clock_timestamp() AS t0;
DO \$\$
BEGIN
  FOR i IN 1..$calls LOOP
    BEGIN
      $statement;
    EXCEPTION WHEN SQLSTATE '$state' THEN NULL;
    END;
  END LOOP;
END \$\$;
SELECT round(extract(epoch FROM clock_timestamp() - t0) * 1e6 / $calls) FROM t;
SQL
  )
  after=$(direct_sessions)
  echo "$micros $((after - before))"
}

# Microseconds per call of $2 calls of statement $3 (i: the call's number)
# in one session of database $1, in a PL/pgSQL loop that commits after each
# call, after 200 calls to warm up: a routed call's cost without pgbench's
# wake-ups, in one session at synchronous_commit = off.
loop_micros() {
  local db=$1 calls=$2 statement=$3
  psql_in -At -d "$db" <<SQL | tail -1
SET synchronous_commit = off;
DO \$\$ BEGIN FOR i IN 1..200 LOOP $statement; END LOOP; END \$\$;
SELECT set_config('bench.t0', clock_timestamp()::text, false) IS NOT NULL;
DO \$\$ BEGIN FOR i IN 1..$calls LOOP $statement; COMMIT; END LOOP; END \$\$;
SELECT round(extract(epoch FROM clock_timestamp() - current_setting('bench.t0')::timestamptz) * 1e6 / $calls);
SQL
}

# Microseconds per refused call of $3 calls in one session of database $1,
# with throws => $2 (errors caught in the loop), and the sessions the
# partition database `direct` gained meanwhile (the router session's own
# connection is 1; PL/Proxy's reconnects after remote errors add the rest).
refusal_micros() {
  local db=$1 throws=$2 calls=$3 before after micros
  before=$(direct_sessions)
  micros=$(psql_in -At -d "$db" <<SQL | tail -1
DO \$\$ BEGIN PERFORM ratelimit_limit('refused', 'k', '$REFUSED_CONFIG'); END \$\$;
CREATE TEMP TABLE t AS SELECT clock_timestamp() AS t0;
DO \$\$
BEGIN
  FOR i IN 1..$calls LOOP
    BEGIN
      PERFORM ratelimit_limit('refused', 'k', '$REFUSED_CONFIG', throws => $throws);
    EXCEPTION WHEN SQLSTATE 'PT429' THEN NULL;
    END;
  END LOOP;
END \$\$;
SELECT round(extract(epoch FROM clock_timestamp() - t0) * 1e6 / $calls) FROM t;
SQL
  )
  after=$(direct_sessions)
  echo "$micros $((after - before))"
}

# Sessions of database direct so far (pg_stat_database), once the backends
# of the sessions that ended have exited and flushed their counts.
direct_sessions() {
  sleep 1
  psql_in -At -d postgres -c "SELECT pg_stat_clear_snapshot()" -c "SELECT sessions FROM pg_stat_database WHERE datname = 'direct'" | tail -1
}

# Each cell's rounds are interleaved with the other targets' (direct, r1,
# r2, r4, direct, r1, ...), so a change in the machine's load hits them alike.
declare -A tps runs cpu cpu_part
CLIENTS="1 8 32"
TARGETS="direct r1 r2 r4"
WORKLOADS="override memory"
if [ "$GRID" = router ]; then CLIENTS=1; TARGETS=""; WORKLOADS=""; fi
# The breakdown at 1 client: target, database, workload, pgbench mode.
BREAKDOWN=("direct direct grant prepared" "partition_statement direct partition_statement extended"
           "noop r1 noop prepared" "proxy r1 proxy prepared" "routed r1 grant prepared"
           "routed_080 r1_080 grant prepared")
# The same targets' CPU time per call: database, statement prepared, the
# statement run (%s: the key number), routed or not.
CFG_SQL="'$CONFIG'"
declare -A CPU_SPECS=(
  [direct]="direct|PREPARE p(text) AS SELECT ok FROM ratelimit_limit('n', \$1, $CFG_SQL);|EXECUTE p('k%s');|"
  [partition_statement]="direct||SELECT * FROM public.ratelimit_proxy_limit('n'::text, 'k%s'::text, $CFG_SQL::jsonb, 1::double precision, false::boolean, false::boolean, 'plain'::text);|"
  [noop]="r1|PREPARE p(text) AS SELECT bench_noop(ratelimit_hash('n', \$1));|EXECUTE p('k%s');|plproxy"
  [proxy]="r1|PREPARE p(text) AS SELECT ok FROM ratelimit_proxy_limit(ratelimit_hash('n', \$1), 'n', \$1, $CFG_SQL, 1, false, false, 'plain');|EXECUTE p('k%s');|routed"
  [routed]="r1|PREPARE p(text) AS SELECT ok FROM ratelimit_limit('n', \$1, $CFG_SQL);|EXECUTE p('k%s');|routed"
  [routed_080]="r1_080|PREPARE p(text) AS SELECT ok FROM ratelimit_limit('n', \$1, $CFG_SQL);|EXECUTE p('k%s');|plproxy"
)
CPU_TARGETS="direct partition_statement noop proxy routed routed_080"
for sync in on off; do
  psql_in -d postgres -c "ALTER SYSTEM SET synchronous_commit = $sync" -c "SELECT pg_reload_conf()" >/dev/null
  for clients in $CLIENTS; do
    for _ in $(seq "$ROUNDS"); do
      for target in $TARGETS; do
        runs[$sync,$clients,$target]+="$(run_load $target $clients) "
      done
    done
    for target in $TARGETS; do
      # shellcheck disable=SC2086 # the runs are a list of numbers
      tps[$sync,$clients,$target]=$(median ${runs[$sync,$clients,$target]})
      echo "synchronous_commit=$sync clients=$clients $target: ${tps[$sync,$clients,$target]} tps (${runs[$sync,$clients,$target]% })"
    done
    # Overrides and memory limits: direct and through 1 partition.
    for workload in $WORKLOADS; do
      for _ in $(seq "$ROUNDS"); do
        for target in direct r1; do
          runs[$workload,$sync,$clients,$target]+="$(run_load $target $clients $workload) "
        done
      done
      for target in direct r1; do
        # shellcheck disable=SC2086 # the runs are a list of numbers
        tps[$workload,$sync,$clients,$target]=$(median ${runs[$workload,$sync,$clients,$target]})
        echo "$workload synchronous_commit=$sync clients=$clients $target: ${tps[$workload,$sync,$clients,$target]} tps"
      done
    done
  done
  # Where the router's cost goes, 1 client, interleaved.
  for _ in $(seq "$ROUNDS"); do
    for spec in "${BREAKDOWN[@]}"; do
      read -r name db workload mode <<<"$spec"
      runs[breakdown,$sync,$name]+="$(run_load "$db" 1 "$workload" "$mode") "
    done
  done
  for spec in "${BREAKDOWN[@]}"; do
    read -r name _ <<<"$spec"
    # shellcheck disable=SC2086 # the runs are a list of numbers
    tps[breakdown,$sync,$name]=$(median ${runs[breakdown,$sync,$name]})
    echo "breakdown synchronous_commit=$sync $name: ${tps[breakdown,$sync,$name]} tps (${runs[breakdown,$sync,$name]% })"
  done
  # CPU time per call, interleaved likewise; the median of each side.
  for _ in $(seq "$ROUNDS"); do
    for name in $CPU_TARGETS; do
      IFS='|' read -r db prepare template routed <<<"${CPU_SPECS[$name]}"
      read -r own part <<<"$(cpu_micros "$db" "$prepare" "$template" "$routed")"
      runs[cpu,$sync,$name]+="$own "
      runs[cpu_part,$sync,$name]+="$part "
    done
  done
  for name in $CPU_TARGETS; do
    # shellcheck disable=SC2086 # the runs are a list of numbers
    cpu[$sync,$name]=$(median ${runs[cpu,$sync,$name]})
    # shellcheck disable=SC2086
    cpu_part[$sync,$name]=$(median ${runs[cpu_part,$sync,$name]})
    echo "cpu synchronous_commit=$sync $name: ${cpu[$sync,$name]} + ${cpu_part[$sync,$name]} µs (${runs[cpu,$sync,$name]% }/ ${runs[cpu_part,$sync,$name]% })"
  done
done
psql_in -d postgres -c "ALTER SYSTEM RESET synchronous_commit" -c "SELECT pg_reload_conf()" >/dev/null
# The same grants in an in-session loop, each target's rounds interleaved.
GRANT_LOOP="PERFORM ratelimit_limit('n', 'k' || (i % $KEYS + 1), '$CONFIG')"
NOOP_LOOP="PERFORM bench_noop(ratelimit_hash('n', 'k' || (i % $KEYS + 1)))"
declare -A loop_runs loop
LOOP_CALLS=3000
psql_in -d postgres -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq "$ROUNDS"); do
  loop_runs[direct]+="$(loop_micros direct $LOOP_CALLS "$GRANT_LOOP") "
  loop_runs[routed]+="$(loop_micros r1 $LOOP_CALLS "$GRANT_LOOP") "
  loop_runs[routed_080]+="$(loop_micros r1_080 $LOOP_CALLS "$GRANT_LOOP") "
  loop_runs[noop]+="$(loop_micros r1 $LOOP_CALLS "$NOOP_LOOP") "
done
for name in direct routed routed_080 noop; do
  # shellcheck disable=SC2086 # the runs are a list of numbers
  loop[$name]=$(median ${loop_runs[$name]})
  echo "loop $name: ${loop[$name]} µs (${loop_runs[$name]% })"
done

# Each: "<µs per call> <partition sessions opened>", all with the same count.
read -r refused_direct sessions_direct <<<"$(refusal_micros direct false $REFUSALS)"
read -r refused_direct_throws sessions_direct_throws <<<"$(refusal_micros direct true $REFUSALS)"
read -r refused_r1 sessions_r1 <<<"$(refusal_micros r1 false $REFUSALS)"
read -r refused_r1_throws sessions_r1_throws <<<"$(refusal_micros r1 true $REFUSALS)"
# The 0.6.0 router reconnects after each refusal with throws: fewer calls.
read -r refused_060 sessions_060 <<<"$(refusal_micros r1_060 false $REFUSALS)"
read -r refused_060_throws sessions_060_throws <<<"$(refusal_micros r1_060 true $((REFUSALS / 10)))"
# A bad argument (22023): a config with rate 0, to ratelimit_limit (errors
# as data since 0.7.0) and to ratelimit_value (since 0.8.0).
BAD_CONFIG='{"kind": "token bucket", "rate": 0, "period": 1000}'
BAD_LIMIT="PERFORM ratelimit_limit('n', 'k1', '$BAD_CONFIG')"
BAD_VALUE="PERFORM * FROM ratelimit_value('n', 'k1', '$BAD_CONFIG')"
declare -A bad bad_sessions
for db in direct r1 r1_080; do
  for what in limit value; do
    statement=$BAD_LIMIT
    [ "$what" = value ] && statement=$BAD_VALUE
    calls=$REFUSALS
    read -r "bad[$db,$what]" "bad_sessions[$db,$what]" <<<"$(error_micros "$db" 22023 "$calls" "$statement")"
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
micros() { awk -v t="$1" 'BEGIN { if (t + 0 == 0) print "n/a"; else printf "%.0f", 1e6 / t }'; }
# µs per call of breakdown target $2 minus $3's, at synchronous_commit $1.
added() { awk -v a="${tps[breakdown,$1,$2]}" -v b="${tps[breakdown,$1,$3]}" 'BEGIN { if (a + 0 == 0 || b + 0 == 0) print "n/a"; else printf "%.0f", 1e6 / a - 1e6 / b }'; }
{
  echo "# Through the PL/Proxy router"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`BENCH_GRID=$GRID BENCH_SECONDS=$SECONDS_PER_RUN BENCH_ROUNDS=$ROUNDS bench/plproxy.sh\`:"
  echo "pgbench \`-n -M prepared -T $((SECONDS_PER_RUN + WARMUP)) -P 1 -j 2\`, calls/s of the last $SECONDS_PER_RUN seconds (after each router backend"
  echo "has connected to its partitions), median of $ROUNDS interleaved round(s); $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB,"
  echo "load average at the start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg),"
  echo "$("$PG_BINDIR/postgres" --version), PL/Proxy $(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-plproxy"), ratelimit $API_VERSION,"
  echo "ratelimit_proxy $ROUTER_VERSION (library md5 $(md5sum < "$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so" | cut -c1-12)). One cluster, shared_buffers=256MB,"
  echo "shared_preload_libraries=ratelimit (ratelimit_stats counts every call);"
  echo "every call \`ratelimit_limit('n', <one of $KEYS existing keys>, cfg)\`, granted."
  echo "Router, partitions and pgbench share the same CPUs: the partitions add backends, not CPU."
  if [ "$GRID" = full ]; then
    echo
    echo "| synchronous_commit | clients | direct (calls/s) | router, 1 partition | 2 partitions | 4 partitions | router / direct (1 partition) |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for sync in on off; do
      for clients in 1 8 32; do
        d=${tps[$sync,$clients,direct]}
        echo "| $sync | $clients | $d | ${tps[$sync,$clients,r1]} | ${tps[$sync,$clients,r2]} | ${tps[$sync,$clients,r4]} | $(ratio "${tps[$sync,$clients,r1]}" "$d") |"
      done
    done
    echo
    echo "Overrides and memory limits, side by side in the same run (1 partition): \`ratelimit_limit('o', <one of"
    echo "$OVERRIDDEN keys, each overridden>)\` of a defined limit, and \`ratelimit_limit('m', <one of $OVERRIDDEN keys>)\` of a"
    echo "defined limit with \"storage\": \"memory\" (in the server's shared memory, no table row, no WAL):"
    echo
    echo "| workload | synchronous_commit | clients | direct (calls/s) | router, 1 partition | router / direct |"
    echo "|---|---|---:|---:|---:|---:|"
    for workload in override memory; do
      for sync in on off; do
        for clients in 1 8 32; do
          d=${tps[$workload,$sync,$clients,direct]}
          r=${tps[$workload,$sync,$clients,r1]}
          echo "| $workload | $sync | $clients | $d | $r | $(ratio "$r" "$d") |"
        done
      done
    done
  fi
  echo
  echo "The router's own cost per call at 1 client, 1 partition (the database \`direct\` behind it), and where it"
  echo "goes: µs per call = 1/throughput, so round trips, backends and the partition's call together. \"the"
  echo "partition's statement\" is the statement a routed call runs there, run directly with \`-M extended\` (parsed and"
  echo "planned at every call, as PL/Proxy sent it until 0.8.0; the router prepares it once per connection since 0.9.0);"
  echo "\"routed function\" is \`ratelimit_proxy_limit\` (ratelimit_proxy_route over the router's own connection) called"
  echo "on the router without the \`ratelimit_limit\` wrapper; \"PL/Proxy, empty statement\" routes \`SELECT 1\` through"
  echo "PL/Proxy (its floor); \"0.8.0 router\" is a \`ratelimit_proxy\` 0.8.0 router database (PL/Proxy's call handler)"
  echo "over the same partition."
  echo
  echo "| synchronous_commit | direct | the partition's statement | PL/Proxy, empty statement | routed function | routed \`ratelimit_limit\` | the router adds | routed / direct | 0.8.0 router | it added |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for sync in on off; do
    echo "| $sync | $(micros "${tps[breakdown,$sync,direct]}") | $(micros "${tps[breakdown,$sync,partition_statement]}") | $(micros "${tps[breakdown,$sync,noop]}") | $(micros "${tps[breakdown,$sync,proxy]}") | $(micros "${tps[breakdown,$sync,routed]}") | $(added "$sync" routed direct) | $(ratio "${tps[breakdown,$sync,direct]}" "${tps[breakdown,$sync,routed]}") | $(micros "${tps[breakdown,$sync,routed_080]}") | $(added "$sync" routed_080 direct) |"
  done
  echo
  echo "The same calls' CPU time (µs per call, each its own statement and transaction, $CPU_CALLS calls, median"
  echo "of $ROUNDS): the session's backend (for a routed call the router backend) + the partition backend"
  echo "(psql and the kernel's scheduling aside). \"the partition's statement\" is sent unprepared, as PL/Proxy"
  echo "sent it; the others are prepared, as pgbench's are:"
  echo
  echo "| synchronous_commit | direct | the partition's statement | PL/Proxy, empty statement | routed function | routed \`ratelimit_limit\` | 0.8.0 router |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for sync in on off; do
    row="| $sync |"
    for name in $CPU_TARGETS; do
      if [ "${cpu_part[$sync,$name]:-0}" = 0 ]; then row+=" ${cpu[$sync,$name]} |"; else row+=" ${cpu[$sync,$name]} + ${cpu_part[$sync,$name]} |"; fi
    done
    echo "$row"
  done
  echo
  echo "The router's added µs split: the routed function (the router backend, its connection and the second round"
  echo "trip, the partition's prepared statement and the call's subtransaction: routed function − direct); what"
  echo "\`ratelimit_limit\` adds to it (routed − routed function: since 0.9.0 both are \`ratelimit_proxy_route\`, the"
  echo "first computing the hash itself, so this is the noise of the run). For scale: what parsing and planning the"
  echo "statement at every call would cost (statement − direct), and PL/Proxy's floor (empty statement − direct):"
  echo
  echo "| synchronous_commit | routed function − direct | routed − routed function | total | (statement − direct) | (PL/Proxy floor) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for sync in on off; do
    echo "| $sync | $(added "$sync" proxy direct) | $(added "$sync" routed proxy) | $(added "$sync" routed direct) | $(added "$sync" partition_statement direct) | $(added "$sync" noop direct) |"
  done
  echo
  echo "A grant in an in-session loop ($LOOP_CALLS calls in a PL/pgSQL loop that commits after each, median of"
  echo "$ROUNDS interleaved rounds, \`synchronous_commit = off\`, µs per call; no pgbench, so none of its"
  echo "process wake-ups): the router's added cost per call, against the direct call in the same run:"
  echo
  echo "| direct | routed \`ratelimit_limit\` | the router adds | 0.8.0 router (PL/Proxy) | it added | PL/Proxy, empty statement |"
  echo "|---:|---:|---:|---:|---:|---:|"
  echo "| ${loop[direct]} | ${loop[routed]} | $((loop[routed] - loop[direct])) | ${loop[routed_080]} | $((loop[routed_080] - loop[direct])) | ${loop[noop]} |"
  echo
  echo "A refused call ($REFUSALS in one session each, in a PL/pgSQL loop that catches PT429), and the"
  echo "sessions the partition database gained during each loop (the router session's own connection is 1):"
  echo
  echo "| | throws => false (µs/call) | throws => true (µs/call) | true / false | partition sessions (false, true) |"
  echo "|---|---:|---:|---:|---|"
  echo "| direct | $refused_direct | $refused_direct_throws | $(ratio "$refused_direct_throws" "$refused_direct") | $sessions_direct, $sessions_direct_throws |"
  echo "| through the router | $refused_r1 | $refused_r1_throws | $(ratio "$refused_r1_throws" "$refused_r1") | $sessions_r1, $sessions_r1_throws |"
  echo "| through the 0.6.0 router ($((REFUSALS / 10)) with throws) | $refused_060 | $refused_060_throws | $(ratio "$refused_060_throws" "$refused_060") | $sessions_060, $sessions_060_throws |"
  echo
  echo "A bad argument (SQLSTATE 22023: a config with rate 0), in the same kind of loop, and the partition sessions"
  echo "it opened:"
  echo
  echo "| | \`ratelimit_limit\` (µs/call) | \`ratelimit_value\` (µs/call) | partition sessions (limit, value) |"
  echo "|---|---:|---:|---|"
  echo "| direct | ${bad[direct,limit]} | ${bad[direct,value]} | ${bad_sessions[direct,limit]}, ${bad_sessions[direct,value]} |"
  echo "| through the router | ${bad[r1,limit]} | ${bad[r1,value]} | ${bad_sessions[r1,limit]}, ${bad_sessions[r1,value]} |"
  echo "| through the 0.8.0 router (PL/Proxy's call handler) | ${bad[r1_080,limit]} | ${bad[r1_080,value]} | ${bad_sessions[r1_080,limit]}, ${bad_sessions[r1_080,value]} |"
} >"$OUT"
rm -rf "$WORK"
cat "$OUT"
