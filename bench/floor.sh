#!/usr/bin/env bash
# A memory grant against its floor (issue 38), side by side in one run:
# SELECT 1, a no-op C function with ratelimit_limit's signature that returns
# a formed ratelimit_result row (bench/noop_limit.c), and the memory grant,
# each as the row and as `.ok`, with ratelimit.memory_durability = off and
# = wal; and the Redis Lua bucket (bench/redis.sh) without persistence and
# with Redis's own durability (appendonly yes, appendfsync everysec).
#
#   bench/floor.sh
#   FLOOR_ROUNDS=3 FLOOR_SECONDS=8 FLOOR_WARMUP=8    (the defaults)
#   FLOOR_CELLS="8:on 8:off 32:on 32:off"            clients:synchronous_commit
#   FLOOR_DURABILITY="off wal"                       the memory_durability settings measured
#   FLOOR_REDIS="none aof"                           Redis runs: no persistence, AOF everysec
#                                                    ("" for none)
#   FLOOR_SO=./ratelimit.so                          the library (default: the installed one)
#   FLOOR_BASELINE_SO=/path/old/ratelimit.so         also an older build's memory grants, with the
#                                                    first durability setting, in the same cells
#   BENCH_NICE=-10 BENCH_HALT_POLL_NS=200000         as bench/run.sh (need root)
#   FLOOR_HUGE_PAGES=220                             reserve this many more huge pages
#                                                    (vm.nr_hugepages, restored at exit; needs root)
#                                                    and run the server with huge_pages = on
#
# One preloaded cluster (shared_buffers = 256MB, memory_max_keys = 200000,
# the pinned library as bench/lib.sh pins it, bench_noop_limit created by
# create_noop_function). In each round, for each cell, for each durability
# setting: the server restarts with that setting (a PGC_POSTMASTER
# parameter), the memory limit 'm' gets its 100,000 keys, and pgbench -n
# -M prepared -j 2 -T FLOOR_WARMUP + FLOOR_SECONDS -P 1 runs every workload
# (the calls per second counted are those of its last FLOOR_SECONDS, from
# pgbench's progress lines: see "Warm-up" below): with the first
# setting SELECT 1 (w01), the no-op as the row and as .ok (w06n, w06o) and
# the memory grant as the row and as .ok (w06a, w06e); with the others the
# two memory workloads only; with FLOOR_BASELINE_SO, the server then
# restarts once more on that library (the pinned file swapped, as
# bench/builds.sh swaps it) with the first setting, and the two memory
# workloads run on it ("base-<setting>"). Then the Redis runs of that cell (r6a's
# random keys; each Redis server fresh for its run). So every ratio below
# compares runs of one cell made minutes apart at most. For each memory
# run pg_stat_wal's wal_bytes and wal_records before and after (after the
# backends exited and flushed their statistics) give WAL bytes and records
# per decision and WAL bytes per second.
#
# Prints each run and writes bench/floor-latest.md: the median calls per
# second of each workload and cell, and the ratios the issue's goals name,
# each as the median of the rounds' own ratios (two runs of one round and
# cell ran seconds apart) with the rounds' spread (min-max).
#
# Warm-up. A new backend takes a page fault the first time it touches each
# page of shared memory it maps; a workload that writes WAL touches every
# page of wal_buffers (8 MB here) in turn, so each of 32 fresh backends
# faults about 2,000 times before it runs at its speed, and on this VM
# that takes seconds (measured: a memory grant with wal at 32 clients went
# from 8,600 to 25,000-32,000 calls per second over its first 15 s; with
# off, from 13,900 to 27,000 within 6 s). An application's pooled
# connections pay that once; an 8-second run from fresh connections
# measures mostly that. So every run, SELECT 1 and the no-op alike, counts
# only its calls after FLOOR_WARMUP seconds on the same connections, and
# each Redis server first serves FLOOR_WARMUP seconds of calls (making its
# 100,000 keys) before its counted run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

FLOOR_ROUNDS=${FLOOR_ROUNDS:-3}
FLOOR_SECONDS=${FLOOR_SECONDS:-8}
FLOOR_WARMUP=${FLOOR_WARMUP:-8}
FLOOR_CELLS=${FLOOR_CELLS:-"8:on 8:off 32:on 32:off"}
FLOOR_DURABILITY=${FLOOR_DURABILITY:-"off wal"}
FLOOR_REDIS=${FLOOR_REDIS-"none aof"}
FLOOR_SO=${FLOOR_SO:-"$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"}
FLOOR_BASELINE_SO=${FLOOR_BASELINE_SO:-}
BENCH_NICE=${BENCH_NICE:-}
FLOOR_HUGE_PAGES=${FLOOR_HUGE_PAGES:-}
HUGE_PAGES_FILE=/proc/sys/vm/nr_hugepages
HUGE_PAGES_SAVED=""
BENCH_HALT_POLL_NS=${BENCH_HALT_POLL_NS:-}
HALT_POLL_FILE=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALT_POLL_SAVED=""
FIRST_WORKLOADS="w01_select1 w06n_noop_random w06o_noop_ok_random w06a_memory_random w06e_memory_ok_random"
OTHER_WORKLOADS="w06a_memory_random w06e_memory_ok_random"

[ -f "$FLOOR_SO" ] || { echo "FLOOR_SO: no such file: $FLOOR_SO" >&2; exit 2; }
[ -z "$FLOOR_BASELINE_SO" ] || [ -f "$FLOOR_BASELINE_SO" ] ||
  { echo "FLOOR_BASELINE_SO: no such file: $FLOOR_BASELINE_SO" >&2; exit 2; }
[[ $FLOOR_ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "FLOOR_ROUNDS: not a positive number: $FLOOR_ROUNDS" >&2; exit 2; }
[[ $FLOOR_SECONDS =~ ^[1-9][0-9]*$ ]] || { echo "FLOOR_SECONDS: not a positive number: $FLOOR_SECONDS" >&2; exit 2; }
[[ $FLOOR_WARMUP =~ ^[0-9]+$ ]] || { echo "FLOOR_WARMUP: not a number of seconds: $FLOOR_WARMUP" >&2; exit 2; }
for cell in $FLOOR_CELLS; do
  [[ $cell =~ ^[1-9][0-9]*:(on|off)$ ]] || { echo "FLOOR_CELLS: not clients:on|off: $cell" >&2; exit 2; }
done
for d in $FLOOR_DURABILITY; do
  [[ $d =~ ^(off|wal)$ ]] || { echo "FLOOR_DURABILITY: off or wal, not: $d" >&2; exit 2; }
done
read -r -a DURABILITIES <<<"$FLOOR_DURABILITY"
[ ${#DURABILITIES[@]} -gt 0 ] || { echo "FLOOR_DURABILITY: none given" >&2; exit 2; }
# What runs in a cell, in order: "label durability library" (the first
# runs every workload, the others the memory ones).
VARIANTS=()
for d in "${DURABILITIES[@]}"; do VARIANTS+=("$d $d new"); done
[ -z "$FLOOR_BASELINE_SO" ] || VARIANTS+=("base-${DURABILITIES[0]} ${DURABILITIES[0]} base")
for r in $FLOOR_REDIS; do
  [[ $r =~ ^(none|aof)$ ]] || { echo "FLOOR_REDIS: none or aof, not: $r" >&2; exit 2; }
done

PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
source bench/redis.sh
work_dir_removed_on_exit floor
trap 'stop_redis; stop_cluster; [ -z "$HALT_POLL_SAVED" ] || echo "$HALT_POLL_SAVED" > "$HALT_POLL_FILE";
      [ -z "$HUGE_PAGES_SAVED" ] || echo "$HUGE_PAGES_SAVED" > "$HUGE_PAGES_FILE"; rm -rf "$WORK_DIR"' EXIT

if [ -n "$BENCH_HALT_POLL_NS" ]; then
  [ -w "$HALT_POLL_FILE" ] || { echo "BENCH_HALT_POLL_NS: $HALT_POLL_FILE is not writable" >&2; exit 2; }
  HALT_POLL_SAVED=$(cat "$HALT_POLL_FILE")
  echo "$BENCH_HALT_POLL_NS" > "$HALT_POLL_FILE"
fi
[ -z "$BENCH_NICE" ] || renice -n "$BENCH_NICE" -p $$ >/dev/null   # inherited by the cluster, pgbench, Redis
HUGE_SETTINGS=()
if [ -n "$FLOOR_HUGE_PAGES" ]; then
  [[ $FLOOR_HUGE_PAGES =~ ^[1-9][0-9]*$ ]] || { echo "FLOOR_HUGE_PAGES: not a positive number: $FLOOR_HUGE_PAGES" >&2; exit 2; }
  [ -w "$HUGE_PAGES_FILE" ] || { echo "FLOOR_HUGE_PAGES: $HUGE_PAGES_FILE is not writable (root only)" >&2; exit 2; }
  HUGE_PAGES_SAVED=$(cat "$HUGE_PAGES_FILE")
  echo $((HUGE_PAGES_SAVED + FLOOR_HUGE_PAGES)) > "$HUGE_PAGES_FILE"
  HUGE_SETTINGS=(-c huge_pages=on)
fi
[ -z "$FLOOR_REDIS" ] || ensure_redis

MEMORY_CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}'
start_cluster -c shared_buffers=256MB -c max_connections=100 "${HUGE_SETTINGS[@]}" >/dev/null
PINNED_SO=$CLUSTER_DIR/lib/ratelimit.so
copy_stable_library "$FLOOR_SO" "$WORK_DIR/new.so"
[ -z "$FLOOR_BASELINE_SO" ] || copy_stable_library "$FLOOR_BASELINE_SO" "$WORK_DIR/base.so"
mkdir -p "$(dirname "$PINNED_SO")"
cp "$WORK_DIR/new.so" "$PINNED_SO"
chmod 755 "$(dirname "$PINNED_SO")" "$PINNED_SO"
create_pinned_extension postgres "$PINNED_SO"
create_noop_function postgres
BASE_OPTS="$(cat "$CLUSTER_DIR/server.opts") -c shared_preload_libraries=$PINNED_SO \
-c dynamic_library_path=$(dirname "$PINNED_SO"):$("$PG_BINDIR/pg_config" --pkglibdir) -c ratelimit.memory_max_keys=200000"
so_md5=$(md5sum < "$WORK_DIR/new.so" | cut -c1-12)
base_md5=""
[ -z "$FLOOR_BASELINE_SO" ] || base_md5=$(md5sum < "$WORK_DIR/base.so" | cut -c1-12)
echo "== throwaway cluster in $CLUSTER_DIR; library $FLOOR_SO (md5 $so_md5…)${base_md5:+, baseline $FLOOR_BASELINE_SO (md5 $base_md5…)}"

# Runs the server on library $2 (new or base) with
# ratelimit.memory_durability = $1 and gives the memory limit its 100,000
# keys (a write waits until the worker logged every entry). The saved state
# is removed: one build never reads the other's.
restart_with() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  cp "$WORK_DIR/$2.so" "$PINNED_SO"
  rm -f "$CLUSTER_DIR/data/ratelimit_memory.state" "$CLUSTER_DIR/data/ratelimit_memory.base"
  echo "$BASE_OPTS -c ratelimit.memory_durability=$1" > "$CLUSTER_DIR/server.opts"
  start_cluster_server
  "${PSQL[@]}" -At -c "SELECT count(*) FILTER (WHERE (ratelimit_limit('m', 'k' || g, '$MEMORY_CFG')).ok)
                        FROM generate_series(1, 100000) g" | grep -qx 100000 ||
    { echo "FAIL: the memory limit's 100,000 keys were not all granted" >&2; exit 1; }
  [ "$("${PSQL[@]}" -At -c "SHOW ratelimit.memory_durability")" = "$1" ] ||
    { echo "FAIL: ratelimit.memory_durability is not $1" >&2; exit 1; }
}
# pg_stat_wal's "wal_bytes wal_records", once no client backend is left
# (each flushes its statistics as it exits).
wal_counters() {
  local _
  for _ in $(seq 100); do
    [ "$("${PSQL[@]}" -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && break
    sleep 0.1
  done
  "${PSQL[@]}" -At -F ' ' -c "SELECT wal_bytes, wal_records FROM pg_stat_wal"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }
spread() { tr ' ' '\n' | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%s-%s", lo, hi}'; }

declare -A TPS WAL
# One pgbench run: workload $1, cell $2, durability $3, round $4.
run_pgbench() {
  local w=$1 cell=$2 d=$3 round=$4 clients=${2%%:*} sync=${2##*:} tps calls before after b0 r0 b1 r1
  before=$(wal_counters)
  # The tps of the progress lines after the warm-up (one a second), averaged;
  # calls: every transaction of the run, as the WAL counted is the whole run's.
  read -r tps calls < <(PGOPTIONS="-c synchronous_commit=$sync" "$PG_BINDIR/pgbench" -n -M prepared \
    -T "$((FLOOR_WARMUP + FLOOR_SECONDS))" -P 1 -c "$clients" -j 2 -f "bench/workloads/$w.sql" postgres 2>&1 |
    awk -v warm="$FLOOR_WARMUP" '/^progress: / && $2 + 0 > warm {sum += $4; k++}
      /^number of transactions actually processed/ {n = $NF} END {printf "%d %d\n", k ? sum / k : 0, n}')
  [ "${tps:-0}" -gt 0 ] || { echo "FAIL: pgbench of $w ($cell, durability $d) gave no tps" >&2; exit 1; }
  after=$(wal_counters)
  TPS["$w $cell $d $round"]=$tps
  read -r b0 r0 <<<"$before"
  read -r b1 r1 <<<"$after"
  WAL["$w $cell $d $round"]="$((b1 - b0)) $((r1 - r0)) $calls"
  printf '   round %d %-8s %-24s durability %-3s %8d tps  %12d WAL bytes\n' "$round" "$cell" "$w" "$d" "$tps" "$((b1 - b0))"
}
# One Redis run (bench/redis.sh), random keys: persistence $1, cell $2, round $3.
run_redis() {
  local persistence=$1 cell=$2 round=$3 clients=${2%%:*} rps
  REDIS_PERSISTENCE=$persistence start_redis >/dev/null
  if [ "$FLOOR_WARMUP" -gt 0 ]; then
    redis_requests_for "$clients" random "$FLOOR_WARMUP"
    redis_benchmark "$clients" random "$REDIS_REQUESTS" "$WORK_DIR/redis-warmup.log" >/dev/null ||
      { echo "FAIL: redis-benchmark (warm-up): $(tail -3 "$WORK_DIR/redis-warmup.log")" >&2; exit 1; }
  fi
  redis_requests_for "$clients" random "$FLOOR_SECONDS"
  read -r rps _ < <(redis_benchmark "$clients" random "$REDIS_REQUESTS" "$WORK_DIR/redis.log") ||
    { echo "FAIL: redis-benchmark: $(tail -3 "$WORK_DIR/redis.log")" >&2; exit 1; }
  stop_redis
  REDIS_PROBE_RPS=()
  TPS["redis_$persistence $cell - $round"]=${rps%.*}
  printf '   round %d %-8s %-24s %8d calls/s\n' "$round" "$cell" "redis ($persistence)" "${rps%.*}"
}

started=$(date +%s)
for round in $(seq "$FLOOR_ROUNDS"); do
  for cell in $FLOOR_CELLS; do
    first=1
    for variant in "${VARIANTS[@]}"; do
      read -r label d lib <<<"$variant"
      restart_with "$d" "$lib"
      workloads=$OTHER_WORKLOADS
      [ "$first" = 0 ] || workloads=$FIRST_WORKLOADS
      for w in $workloads; do run_pgbench "$w" "$cell" "$label" "$round"; done
      first=0
    done
    for r in $FLOOR_REDIS; do run_redis "$r" "$cell" "$round"; done
  done
done
elapsed=$(( $(date +%s) - started ))

# The rounds' own ratios a / b of a cell ("a-key b-key" as in TPS without the round).
ratios() {
  local a=$1 b=$2 round out=""
  for round in $(seq "$FLOOR_ROUNDS"); do
    local x=${TPS["$a $round"]:-} y=${TPS["$b $round"]:-}
    [ -n "$x" ] && [ -n "$y" ] && out="$out $(awk -v x="$x" -v y="$y" 'BEGIN {printf "%.2f", x / y}')"
  done
  echo "$out"
}
ratio_cell() { local r; r=$(ratios "$1" "$2"); [ -n "$r" ] && echo "$(echo "$r" | median) ($(echo "$r" | spread))" || echo "–"; }

d0=${DURABILITIES[0]}
out=bench/floor-latest.md
{
  echo "# A memory grant against its floor (bench/floor.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') ($((elapsed / 60)) min); $("$PG_BINDIR/postgres" --version); $(nproc) CPUs; $FLOOR_ROUNDS rounds,"
  echo "$FLOOR_SECONDS s counted per run after a warm-up of $FLOOR_WARMUP s on the same connections, pgbench -n -M prepared -j 2 -P 1; library $FLOOR_SO (md5 $so_md5…)${base_md5:+; baseline (base-*) $FLOOR_BASELINE_SO (md5 $base_md5…)};"
  echo "BENCH_NICE=${BENCH_NICE:-unset}, BENCH_HALT_POLL_NS=${BENCH_HALT_POLL_NS:-unset}, huge_pages = $([ -n "$FLOOR_HUGE_PAGES" ] && echo "on ($FLOOR_HUGE_PAGES pages reserved)" || echo "try (the default; no huge pages reserved: 4 kB pages)"); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "Calls per second, median of the rounds (durability: ratelimit.memory_durability of the server it ran on):"
  echo
  echo "| workload | durability |$(for c in $FLOOR_CELLS; do printf ' %s clients, sync %s |' "${c%%:*}" "${c##*:}"; done)"
  echo "|---|---|$(for _ in $FLOOR_CELLS; do printf -- '---:|'; done)"
  for w in $FIRST_WORKLOADS; do
    for variant in "${VARIANTS[@]}"; do
      read -r d _ <<<"$variant"
      [ "$d" = "$d0" ] || [[ " $OTHER_WORKLOADS " == *" $w "* ]] || continue
      printf '| %s | %s |' "$w" "$d"
      for c in $FLOOR_CELLS; do
        printf ' %s |' "$(for r in $(seq "$FLOOR_ROUNDS"); do echo "${TPS["$w $c $d $r"]:-}"; done | median)"
      done
      echo
    done
  done
  for r in $FLOOR_REDIS; do
    printf '| Redis Lua bucket, 100,000 keys, persistence %s | – |' "$r"
    for c in $FLOOR_CELLS; do
      printf ' %s |' "$(for k in $(seq "$FLOOR_ROUNDS"); do echo "${TPS["redis_$r $c - $k"]:-}"; done | median)"
    done
    echo
  done
  echo
  echo "Ratios: the median of the rounds' own ratios (min-max over the rounds):"
  echo
  echo "| ratio | goal |$(for c in $FLOOR_CELLS; do printf ' %s, %s |' "${c%%:*}" "${c##*:}"; done)"
  echo "|---|---|$(for _ in $FLOOR_CELLS; do printf -- '---|'; done)"
  row() {
    printf '| %s | %s |' "$1" "$2"
    for c in $FLOOR_CELLS; do printf ' %s |' "$(ratio_cell "${3//CELL/$c}" "${4//CELL/$c}")"; done
    echo
  }
  row "no-op row ÷ SELECT 1" "–" "w06n_noop_random CELL $d0" "w01_select1 CELL $d0"
  for d in "${DURABILITIES[@]}"; do
    row "memory grant ($d) ÷ no-op, the row" "≥ 0.9 (off)" "w06a_memory_random CELL $d" "w06n_noop_random CELL $d0"
    row "memory grant ($d) ÷ no-op, \`.ok\`" "≥ 0.9 (off)" "w06e_memory_ok_random CELL $d" "w06o_noop_ok_random CELL $d0"
  done
  for d in "${DURABILITIES[@]:1}"; do
    row "memory grant, $d ÷ $d0, the row" "≥ 0.9" "w06a_memory_random CELL $d" "w06a_memory_random CELL $d0"
    row "memory grant, $d ÷ $d0, \`.ok\`" "≥ 0.9" "w06e_memory_ok_random CELL $d" "w06e_memory_ok_random CELL $d0"
  done
  if [ -n "$FLOOR_BASELINE_SO" ]; then
    row "baseline memory grant ($d0) ÷ no-op, the row" "–" "w06a_memory_random CELL base-$d0" "w06n_noop_random CELL $d0"
    row "baseline memory grant ($d0) ÷ no-op, \`.ok\`" "–" "w06e_memory_ok_random CELL base-$d0" "w06o_noop_ok_random CELL $d0"
    row "memory grant ($d0), this build ÷ baseline, the row" "–" "w06a_memory_random CELL $d0" "w06a_memory_random CELL base-$d0"
    row "memory grant ($d0), this build ÷ baseline, \`.ok\`" "–" "w06e_memory_ok_random CELL $d0" "w06e_memory_ok_random CELL base-$d0"
  fi
  for r in $FLOOR_REDIS; do
    for d in "${DURABILITIES[@]}"; do
      row "memory grant ($d) ÷ Redis ($r), the row" "$([ "$r" = aof ] && [ "$d" = wal ] && echo '≥ 1.2' || echo '–')" \
        "w06a_memory_random CELL $d" "redis_$r CELL -"
      row "memory grant ($d) ÷ Redis ($r), \`.ok\`" "$([ "$r" = aof ] && [ "$d" = wal ] && echo '≥ 1.2' || echo '–')" \
        "w06e_memory_ok_random CELL $d" "redis_$r CELL -"
    done
  done
  echo
  echo "WAL of the memory runs (pg_stat_wal; median of the rounds): bytes and records per decision, bytes per second:"
  echo
  echo "| workload | durability |$(for c in $FLOOR_CELLS; do printf ' %s, %s |' "${c%%:*}" "${c##*:}"; done)"
  echo "|---|---|$(for _ in $FLOOR_CELLS; do printf -- '---|'; done)"
  for w in $OTHER_WORKLOADS; do
    for variant in "${VARIANTS[@]}"; do
      read -r d _ <<<"$variant"
      printf '| %s | %s |' "$w" "$d"
      for c in $FLOOR_CELLS; do
        per=""; recs=""; rate=""
        for r in $(seq "$FLOOR_ROUNDS"); do
          read -r bytes records calls <<<"${WAL["$w $c $d $r"]:-0 0 0}"
          [ "$calls" -gt 0 ] || continue
          per="$per $(awk -v b="$bytes" -v n="$calls" 'BEGIN {printf "%.1f", b / n}')"
          recs="$recs $(awk -v b="$records" -v n="$calls" 'BEGIN {printf "%.2f", b / n}')"
          rate="$rate $(awk -v b="$bytes" -v s="$((FLOOR_WARMUP + FLOOR_SECONDS))" 'BEGIN {printf "%.0f", b / s}')"
        done
        printf ' %s B, %s rec; %s kB/s |' "$(echo "$per" | median)" "$(echo "$recs" | median)" \
          "$(awk -v b="$(echo "$rate" | median)" 'BEGIN {printf "%.0f", b / 1000}')"
      done
      echo
    done
  done
} > "$out"
echo
cat "$out"
echo "== wrote $out"
