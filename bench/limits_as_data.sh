#!/usr/bin/env bash
# What issue 12 (overrides, the owner rule, kind tags, shadow mode, stats)
# costs a call, side by side on two throwaway clusters with the same
# settings, running at once: one plain (for the baseline library: a backend
# cannot load two builds, and the preloaded one would be loaded first), one
# started with shared_preload_libraries = 'ratelimit' (so that stats count):
#
#   base     the library of BENCH_BASE_REF (default: the commit before
#            0.5.0), pinned, in a database created at VERSION '0.4.0', on
#            the plain cluster; the others are on the preloaded one
#   new      the installed library and 0.5.0, ratelimit.track_stats = off:
#            the override lookup and the owner rule, without counting
#   stats    the same with ratelimit.track_stats = on (the default)
#   vip      like stats, with one override on another key of the same name
#            (the name is in the override set; its other keys are not)
#
# Each cell is pgbench -T BENCH_SECONDS on 100,000 pre-populated random keys
# (workloads 5a inline config and 5c named config of bench/workloads),
# synchronous_commit = off, the databases run one after another in an order
# that rotates every round; the table shows the median of BENCH_ROUNDS
# rounds and each ratio to base (new/base: the lookup's cost; stats/new: the
# counters' cost). A shared 2-core VM is noisy: read the ratios with the
# spread of the rounds (printed too).
#
#   bench/limits_as_data.sh
#   BENCH_SECONDS=10 BENCH_ROUNDS=5 BENCH_CLIENTS="1 8" BENCH_BASE_REF=ba1c2d3
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_ROUNDS=${BENCH_ROUNDS:-5}
BENCH_CLIENTS=${BENCH_CLIENTS:-"1 8"}
BENCH_BASE_REF=${BENCH_BASE_REF:-ba1c2d3}
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh

WORK=$(mktemp -d /tmp/ratelimit-lad.XXXXXX)
chmod 755 "$WORK"
PLAIN_DIR=""
PRELOADED_DIR=""
cleanup() {
  for dir in "$PLAIN_DIR" "$PRELOADED_DIR"; do
    [ -n "$dir" ] || continue
    CLUSTER_DIR=$dir
    stop_cluster
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== building the baseline library of $BENCH_BASE_REF"
git archive "$BENCH_BASE_REF" | tar -x -C "$WORK"
make -C "$WORK" -s -j2 ratelimit.so >/dev/null
copy_stable_library "$WORK/ratelimit.so" "$WORK/pinned/ratelimit-base.so"
installed="$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"
md5_before=$(md5sum < "$installed")

start_cluster -c shared_buffers=256MB -c synchronous_commit=off
PLAIN_DIR=$CLUSTER_DIR
start_cluster -c shared_preload_libraries=ratelimit -c shared_buffers=256MB -c synchronous_commit=off
PRELOADED_DIR=$CLUSTER_DIR
declare -A host=([base]=$PLAIN_DIR [new]=$PRELOADED_DIR [stats]=$PRELOADED_DIR [vip]=$PRELOADED_DIR)
for db in base new stats vip; do "${PSQL[@]}" -h "${host[$db]}" -d postgres -c "CREATE DATABASE $db"; done
"${PSQL[@]}" -h "$PLAIN_DIR" -d base -c "SET check_function_bodies = off" -c "CREATE EXTENSION ratelimit VERSION '0.4.0'" \
  -c "UPDATE pg_catalog.pg_proc SET probin = '$WORK/pinned/ratelimit-base.so' WHERE probin = '\$libdir/ratelimit'"
for db in new stats vip; do "${PSQL[@]}" -h "$PRELOADED_DIR" -d "$db" -c "CREATE EXTENSION ratelimit"; done
"${PSQL[@]}" -h "$PRELOADED_DIR" -d new -c "ALTER DATABASE new SET ratelimit.track_stats = off"
config='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}'
for db in base new stats vip; do
  "${PSQL[@]}" -h "${host[$db]}" -d "$db" -c "SELECT ratelimit_define('n', '$config')" \
    -c "SELECT count(*) FROM generate_series(1, 100000) g, ratelimit_limit('n', 'k' || g)" >/dev/null
done
"${PSQL[@]}" -h "$PRELOADED_DIR" -d vip -c "SELECT ratelimit_override('n', 'vip', '{\"kind\": \"token bucket\", \"rate\": 5, \"period\": 1000}')"
# The defined name with the same config inline is the same limit (owner rule).
sed "s/'n', 'k' || :k, .*/'n', 'k' || :k, '$config');/" bench/workloads/w05a_inline_random.sql > "$WORK/5a.sql"
cp bench/workloads/w05c_named_random.sql "$WORK/5c.sql"
for db in base new stats vip; do "$PG_BINDIR/vacuumdb" -q -h "${host[$db]}" -d "$db"; done

run() {  # db workload clients -> tps
  local jobs=$(( $3 < 2 ? 1 : 2 ))
  "$PG_BINDIR/pgbench" -h "${host[$1]}" -n -M prepared -T "$BENCH_SECONDS" -c "$3" -j "$jobs" -f "$WORK/$2.sql" "$1" 2>/dev/null |
    awk '/^tps = / { printf "%.0f\n", $3 }'
}

dbs=(base new stats vip)
echo "workload,clients,db,round,tps" > "$WORK/runs.csv"
for ((round = 0; round < BENCH_ROUNDS; round++)); do
  for workload in 5a 5c; do
    for clients in $BENCH_CLIENTS; do
      for ((i = 0; i < 4; i++)); do
        db=${dbs[$(( (i + round) % 4 ))]}
        echo "$workload,$clients,$db,$round,$(run "$db" "$workload" "$clients")" >> "$WORK/runs.csv"
      done
    done
  done
done
[ "$(md5sum < "$installed")" = "$md5_before" ] || echo "WARNING: the installed library changed during the run"

echo
echo "Medians of $BENCH_ROUNDS rounds of ${BENCH_SECONDS} s, synchronous_commit = off, $(nproc) CPUs (tps; all rounds in brackets):"
echo
echo "| workload | clients | base (0.4.0) | new, stats off | stats on | name with an override | new/base | stats/new | vip/stats |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for workload in 5a 5c; do
  for clients in $BENCH_CLIENTS; do
    declare -A med=()
    declare -A all=()
    for db in "${dbs[@]}"; do
      values=$(awk -F, -v w="$workload" -v c="$clients" -v d="$db" '$1 == w && $2 == c && $3 == d { print $5 }' "$WORK/runs.csv" | sort -n)
      med[$db]=$(echo "$values" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
      all[$db]=$(echo "$values" | paste -sd' ')
    done
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
    echo "| $workload | $clients | ${med[base]} [${all[base]}] | ${med[new]} [${all[new]}] | ${med[stats]} [${all[stats]}] | ${med[vip]} [${all[vip]}] | $(ratio "${med[new]}" "${med[base]}") | $(ratio "${med[stats]}" "${med[new]}") | $(ratio "${med[vip]}" "${med[stats]}") |"
  done
done
