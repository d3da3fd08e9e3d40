#!/usr/bin/env bash
# Two builds of the library side by side in one preloaded cluster: pgbench
# runs of the same workloads on each build in turn, the library swapped and
# the server restarted between them, so that a change measured against the
# build before it is the only difference (the machine's drift spreads over
# both). For changes that only show under concurrency, where bench/run.sh's
# one build per run cannot compare (a preloaded server has one library).
#
#   BUILDS_OLD=/path/old/ratelimit.so BUILDS_NEW=./ratelimit.so bench/builds.sh
#   BUILDS_ROUNDS=3 BUILDS_SECONDS=8                        (the defaults)
#   BUILDS_CELLS="32:off 8:on 8:off 32:on"                   clients:synchronous_commit
#   BUILDS_WORKLOADS="w05a_inline_random w06a_memory_random w01_select1"   (bench/workloads)
#   BUILDS_ORDER="old new"                                   which build runs first in a round
#
# Each round runs every build in BUILDS_ORDER; for each build the server
# stops, the pinned library file is replaced by that build's, the saved
# memory state is removed (a build never reads the other's) and the server
# starts, preloading it (ratelimit.memory_max_keys = 200000). Then the
# memory limit 'm' gets its 100,000 keys again and, for each cell and
# workload, pgbench -n -M prepared -j 2 runs BUILDS_SECONDS (niced -10 when
# root). The table limit 'n' gets its 100,000 rows once, before the first
# round. The extension's SQL is the installed one; both builds must accept
# it. Prints each run and writes the medians per build, and new ÷ old, to
# bench/builds-latest.md. Run it on a quiet machine, under
# flock /tmp/ratelimit-bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

BUILDS_OLD=${BUILDS_OLD:-}
BUILDS_NEW=${BUILDS_NEW:-"$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"}
BUILDS_ROUNDS=${BUILDS_ROUNDS:-3}
BUILDS_SECONDS=${BUILDS_SECONDS:-8}
BUILDS_CELLS=${BUILDS_CELLS:-"32:off 8:on 8:off 32:on"}
BUILDS_WORKLOADS=${BUILDS_WORKLOADS:-"w05a_inline_random w06a_memory_random w01_select1"}
BUILDS_ORDER=${BUILDS_ORDER:-"old new"}

[ -n "$BUILDS_OLD" ] || { echo "BUILDS_OLD: the older build's ratelimit.so is required" >&2; exit 2; }
for so in "$BUILDS_OLD" "$BUILDS_NEW"; do [ -f "$so" ] || { echo "no such library: $so" >&2; exit 2; }; done
[[ $BUILDS_ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "BUILDS_ROUNDS: not a positive number: $BUILDS_ROUNDS" >&2; exit 2; }
[[ $BUILDS_SECONDS =~ ^[1-9][0-9]*$ ]] || { echo "BUILDS_SECONDS: not a positive number: $BUILDS_SECONDS" >&2; exit 2; }
for cell in $BUILDS_CELLS; do
  [[ $cell =~ ^[1-9][0-9]*:(on|off)$ ]] || { echo "BUILDS_CELLS: not clients:on|off: $cell" >&2; exit 2; }
done
for w in $BUILDS_WORKLOADS; do
  [ -f "bench/workloads/$w.sql" ] || { echo "BUILDS_WORKLOADS: no bench/workloads/$w.sql" >&2; exit 2; }
done
read -r -a order <<<"$BUILDS_ORDER"
if [ "${order[*]}" != "old new" ] && [ "${order[*]}" != "new old" ]; then
  echo "BUILDS_ORDER: \"old new\" or \"new old\", not: $BUILDS_ORDER" >&2
  exit 2
fi

PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
work_dir_removed_on_exit builds

NICE=()
[ "$(id -u)" != 0 ] || NICE=(nice -n -10)
TABLE_CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}'
MEMORY_CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}'

start_cluster -c shared_buffers=256MB -c max_connections=100 >/dev/null
PINNED_SO=$CLUSTER_DIR/lib/ratelimit.so
copy_stable_library "$BUILDS_OLD" "$WORK_DIR/old.so"
copy_stable_library "$BUILDS_NEW" "$WORK_DIR/new.so"
mkdir -p "$(dirname "$PINNED_SO")"
cp "$WORK_DIR/old.so" "$PINNED_SO"
chmod 755 "$(dirname "$PINNED_SO")" "$PINNED_SO"
create_pinned_extension postgres "$PINNED_SO"
echo "== throwaway cluster in $CLUSTER_DIR; old: $BUILDS_OLD (md5 $(md5sum < "$WORK_DIR/old.so" | cut -c1-12)…), new: $BUILDS_NEW (md5 $(md5sum < "$WORK_DIR/new.so" | cut -c1-12)…)"
echo "$(cat "$CLUSTER_DIR/server.opts") -c shared_preload_libraries=$PINNED_SO \
-c dynamic_library_path=$(dirname "$PINNED_SO"):$("$PG_BINDIR/pg_config" --pkglibdir) \
-c ratelimit.memory_max_keys=200000" > "$CLUSTER_DIR/server.opts"

# Runs the server on build $1 (old or new): stopped, the library replaced,
# the saved memory state removed, started.
switch_to() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  cp "$WORK_DIR/$1.so" "$PINNED_SO"
  rm -f "$CLUSTER_DIR/data/ratelimit_memory.state"
  start_cluster_server
}
# $1 calls of limit $2 with config $3 on keys 'k1'.. in one statement.
warm() {
  "${PSQL[@]}" -At -c "SELECT count(ratelimit_limit('$2', 'k' || g, '$3')) FROM generate_series(1, $1) g" >/dev/null
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A RUNS
first=1
for round in $(seq "$BUILDS_ROUNDS"); do
  for build in "${order[@]}"; do
    switch_to "$build"
    if [ "$first" = 1 ]; then warm 100000 n "$TABLE_CFG"; first=0; fi
    warm 100000 m "$MEMORY_CFG"
    for cell in $BUILDS_CELLS; do
      clients=${cell%%:*} sync=${cell##*:}
      for w in $BUILDS_WORKLOADS; do
        tps=$(PGOPTIONS="-c synchronous_commit=$sync" "${NICE[@]}" "$PG_BINDIR/pgbench" -n -M prepared \
          -T "$BUILDS_SECONDS" -c "$clients" -j 2 -f "bench/workloads/$w.sql" postgres 2>&1 |
          awk '/^tps/ {printf "%d", $3}')
        [ -n "$tps" ] || { echo "FAIL: pgbench of $w ($clients clients, sync $sync) on the $build build gave no tps" >&2; exit 1; }
        RUNS["$w $cell $build"]="${RUNS["$w $cell $build"]:-} $tps"
        printf '   round %d %-3s %-28s %3d clients, sync %-3s %8d tps\n' "$round" "$build" "$w" "$clients" "$sync" "$tps"
      done
    done
  done
done

out=bench/builds-latest.md
{
  echo "# Two builds side by side (bench/builds.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'); $("$PG_BINDIR/postgres" --version); $BUILDS_ROUNDS rounds ($BUILDS_ORDER), $BUILDS_SECONDS s per run, pgbench -M prepared -j 2."
  echo "old: $BUILDS_OLD (md5 $(md5sum < "$WORK_DIR/old.so" | cut -c1-12)…); new: $BUILDS_NEW (md5 $(md5sum < "$WORK_DIR/new.so" | cut -c1-12)…)."
  echo
  echo "| workload | clients | sync | old (runs) | new (runs) | old median | new median | new ÷ old |"
  echo "|---|---:|---|---|---|---:|---:|---:|"
  for cell in $BUILDS_CELLS; do
    for w in $BUILDS_WORKLOADS; do
      o=${RUNS["$w $cell old"]} n=${RUNS["$w $cell new"]}
      om=$(echo "$o" | median) nm=$(echo "$n" | median)
      echo "| $w | ${cell%%:*} | ${cell##*:} |$o |$n | $om | $nm | $(awk -v a="$om" -v b="$nm" 'BEGIN {printf "%.2f", b / a}') |"
    done
  done
} > "$out"
cat "$out"
echo "== wrote $out"
