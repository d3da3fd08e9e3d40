#!/usr/bin/env bash
# The ratelimit benchmark (issue 3): starts a throwaway cluster with fixed
# settings, runs pgbench over the workloads of bench/workloads/ with 1, 8 and
# 32 clients, synchronous_commit on and off side by side, then measures the
# state table's size per key and a backend's memory over a million calls.
# Prints the table and writes bench/results-latest.md (and .csv).
#
#   bench/run.sh [--build]
#
#   --build                     make -s && make -s install first (default:
#                               use the extension already installed)
#   BENCH_SECONDS=10            pgbench -T of each run (2: a quick smoke run)
#   BENCH_ROUNDS=1              repeat the pgbench matrix; the table shows medians
#   BENCH_CLIENTS="1 8 32"      the client counts of the matrix (a goal's cells
#                               at other counts then show "not measured")
#   BENCH_WORKLOADS=""          only these workload ids, e.g. "2 5a" (default: all)
#   BENCH_STORAGE_KEYS=1000000  distinct keys for the storage measurement
#   BENCH_MEMORY_CALLS=1000000  calls for the memory measurement
#   BENCH_NICE=""               e.g. -10: run the cluster and pgbench at this
#                               niceness (a shared machine: less CPU noise)
#   BENCH_HALT_POLL_NS=""       e.g. 200000: a KVM guest's idle vCPU polls this
#                               long before it halts (cpuidle-haltpoll's
#                               guest_halt_poll_ns, needs root; restored at exit),
#                               so 1-client runs do not measure vCPU wake-ups
#   BENCH_SO=""                 the ratelimit.so to measure, e.g. ./ratelimit.so
#                               of a build not installed (default: the installed
#                               one). The SQL scripts are always the installed ones.
#   BENCH_MEMORY_MAX_KEYS=200000 ratelimit.memory_max_keys when a memory
#                               workload (6a, 6b) runs: inline configs may take
#                               half, and 6a uses 100,000 keys
#   BENCH_BASELINE_SO=""        e.g. /work/bench-baseline/ratelimit-b9cf5d2.so:
#                               an older build to compare with, side by side.
#                               Every ratelimit workload (5a-5g) then also runs
#                               against a second database (bench_base) whose
#                               functions load this library, right before or
#                               after the same workload of BENCH_SO in the same
#                               cell (the order alternates), and so does the
#                               server-side cost. The report adds the baseline's
#                               rows, its goals, and new/baseline per cell. Both
#                               builds must fit the installed SQL scripts.
#
# Memory limits (issue 19): when workload 6a, 6b, 6c or 6e is selected, the server
# is restarted with shared_preload_libraries = the pinned library (a memory
# limit needs the preload on PostgreSQL 15) and ratelimit.memory_max_keys =
# BENCH_MEMORY_MAX_KEYS; every workload of that run then runs on the
# preloaded server (ratelimit_stats counts the table grants too, as it does
# on any preloaded server). The 100,000 keys of 6a are made before the runs.
# BENCH_BASELINE_SO cannot be combined with them (one backend cannot load
# two builds of a preloaded library): with it, the default leaves them out.
#
# Redis (issue 19): workloads r6a and r6b are bench/redis.sh's Lua token
# bucket, EVALSHA through redis-benchmark (no pipelining) on a private
# redis-server started for the run, over 100,000 random keys and on one hot
# key. They run in the same matrix as the pgbench workloads, right after
# them in each cell, so each ratio compares runs minutes apart at most. The
# synchronous_commit of a cell means nothing to Redis: it runs in both.
#
# The extension's shared library is pinned: a copy of BENCH_SO (or of the
# installed ratelimit.so), taken at the start, is what every database of the
# run loads (bench/lib.sh), so a concurrent `make install` cannot mix two
# builds into one table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

BUILD=0
for arg in "$@"; do
  case "$arg" in
    --build) BUILD=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_ROUNDS=${BENCH_ROUNDS:-1}
BENCH_WORKLOADS=${BENCH_WORKLOADS:-}
BENCH_STORAGE_KEYS=${BENCH_STORAGE_KEYS:-1000000}
BENCH_MEMORY_CALLS=${BENCH_MEMORY_CALLS:-1000000}
BENCH_NICE=${BENCH_NICE:-}
BENCH_HALT_POLL_NS=${BENCH_HALT_POLL_NS:-}
BENCH_SO=${BENCH_SO:-}
BENCH_BASELINE_SO=${BENCH_BASELINE_SO:-}
BENCH_MEMORY_MAX_KEYS=${BENCH_MEMORY_MAX_KEYS:-200000}
HALT_POLL_FILE=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALT_POLL_SAVED=""
read -r -a CLIENTS <<< "${BENCH_CLIENTS:-1 8 32}"
SYNCS=(on off)
THREADS=2  # pgbench -j; pgbench lowers it to the client count for 1 client

# Server settings: PostgreSQL 15's defaults except shared_buffers, so every
# table and index of the benchmark (about 150 MB at most) stays in memory.
# Nothing else is changed: max_connections (100) covers 32 clients; WAL,
# checkpoint, fsync and autovacuum settings stay default, so the durable
# numbers are what an untuned server gives. synchronous_commit is set per
# pgbench run (PGOPTIONS), not server-wide.
SERVER_SETTINGS=(-c shared_buffers=256MB)

# The workloads: id | pgbench script in bench/workloads/ | description.
WORKLOADS=(
  "1|w01_select1|SELECT 1 (round-trip ceiling)"
  "2|w02_update_random|UPDATE 1 row by primary key, random key"
  "2b|w02b_update_minimal_random|UPDATE 1 row by primary key, minimal table, random key"
  "3|w03_update_hot|UPDATE 1 row by primary key, one hot row"
  "4a|w04a_plpgsql_random|PL/pgSQL token bucket, random key"
  "4b|w04b_plpgsql_hot|PL/pgSQL token bucket, hot key"
  "4c|w04c_lean_random|lean token bucket (SQL upsert), random key"
  "4d|w04d_lean_hot|lean token bucket (SQL upsert), hot key"
  "4e|w04e_lean_plpgsql_random|lean PL/pgSQL token bucket (float8 ms), random key"
  "4f|w04f_lean_plpgsql_hot|lean PL/pgSQL token bucket (float8 ms), hot key"
  "5a|w05a_inline_random|ratelimit_limit inline config, random key"
  "5b|w05b_inline_hot|ratelimit_limit inline config, hot key"
  "5c|w05c_named_random|ratelimit_limit named limit, random key"
  "5d|w05d_named_hot|ratelimit_limit named limit, hot key"
  "5e|w05e_check_random|ratelimit_check, random key"
  "5f|w05f_refused_random|ratelimit_limit refused, random key"
  "5g|w05g_refused_hot|ratelimit_limit refused, hot key"
  "6a|w06a_memory_random|ratelimit_limit memory storage, inline config, random key"
  "6b|w06b_memory_hot|ratelimit_limit memory storage, inline config, hot key"
  "6c|w06c_memory_from_random|SELECT * FROM ratelimit_limit memory storage, random key"
  "6e|w06e_memory_ok_random|SELECT (ratelimit_limit(...)).ok memory storage, random key"
  "r6a|redis_random|Redis Lua token bucket (EVALSHA), random key"
  "r6b|redis_hot|Redis Lua token bucket (EVALSHA), hot key"
)
# The tables the workloads write (vacuumed before each run, and counted).
BENCH_TABLES="bench_plain, bench_minimal, pl_bucket, lean_bucket, ratelimit_state"
# The configs (also written in bench/setup.sql and bench/workloads/*.sql).
CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000}'
REFUSED_CFG='{"kind": "token bucket", "rate": 1, "period": "3650 days"}'
STORAGE_CFG='{"kind": "token bucket", "rate": 10, "period": "1 minute"}'
MEMORY_CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}'

BENCH_DIR=bench
OUT_MD=$BENCH_DIR/results-latest.md
OUT_CSV=$BENCH_DIR/results-latest.csv
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source "$BENCH_DIR/lib.sh"
DB=bench
BASE_DB=bench_base   # the baseline build's database (BENCH_BASELINE_SO)
SO_FILE=${BENCH_SO:-"$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"}
[ -f "$SO_FILE" ] || { echo "BENCH_SO: no such file: $SO_FILE" >&2; exit 2; }
[ -z "$BENCH_BASELINE_SO" ] || [ -f "$BENCH_BASELINE_SO" ] ||
  { echo "BENCH_BASELINE_SO: no such file: $BENCH_BASELINE_SO" >&2; exit 2; }

# Whether workload $1 runs. By default every one, except the memory
# workloads when a baseline build is given (they need the preload).
selected() {
  if [ -z "$BENCH_WORKLOADS" ]; then
    [ -z "$BENCH_BASELINE_SO" ] || [[ $1 != 6? ]]
    return
  fi
  [[ " $BENCH_WORKLOADS " == *" $1 "* ]]
}
# Whether the run needs the preloaded server (a memory workload), or Redis.
MEMORY=0
if selected 6a || selected 6b || selected 6c || selected 6e; then MEMORY=1; fi
REDIS=0
if selected r6a || selected r6b; then REDIS=1; fi
[ "$MEMORY" -eq 0 ] || [ -z "$BENCH_BASELINE_SO" ] ||
  { echo "BENCH_BASELINE_SO cannot be combined with the memory workloads 6a to 6e (the library is preloaded)" >&2; exit 2; }
source "$BENCH_DIR/redis.sh"

WORK_DIR=$(mktemp -d /tmp/ratelimit-bench.XXXXXX)
touch "$WORK_DIR/storage_schema.txt"
cleanup() {
  stop_redis
  stop_cluster
  [ -z "$HALT_POLL_SAVED" ] || echo "$HALT_POLL_SAVED" > "$HALT_POLL_FILE"
  rm -rf "$WORK_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s)
since() { echo "$(( $(date +%s) - started ))s"; }
if [ "$BUILD" -eq 1 ]; then
  [ -z "$BENCH_SO" ] || { echo "--build installs the build; BENCH_SO would measure another one" >&2; exit 2; }
  echo "== building and installing the extension (make -s && make -s install)"
  make -s && make -s install
fi
if [ -n "$BENCH_HALT_POLL_NS" ]; then
  [ -w "$HALT_POLL_FILE" ] || { echo "BENCH_HALT_POLL_NS: $HALT_POLL_FILE is not writable (not a KVM guest with cpuidle-haltpoll, or not root)" >&2; exit 2; }
  HALT_POLL_SAVED=$(cat "$HALT_POLL_FILE")
  echo "$BENCH_HALT_POLL_NS" > "$HALT_POLL_FILE"
  echo "== guest_halt_poll_ns: $HALT_POLL_SAVED -> $BENCH_HALT_POLL_NS (restored at exit)"
fi
if [ -n "$BENCH_NICE" ]; then
  renice -n "$BENCH_NICE" -p $$ >/dev/null   # inherited by the cluster and pgbench
fi

# ---------------------------------------------------------------- cluster
start_cluster "${SERVER_SETTINGS[@]}"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB"
export PGDATABASE=$DB
sql() { "${PSQL[@]}" -At -c "$1"; }

# Pins the build: copies the library into the cluster directory once it is
# stable (not being rewritten by a concurrent make install), and points the
# extension's functions at the copy in each database (bench/lib.sh). The
# baseline build gets a directory of its own: the copy keeps the file name
# ratelimit.so, which create_pinned_extension looks for in /proc/self/maps.
PINNED_SO=$CLUSTER_DIR/ratelimit.so
copy_stable_library "$SO_FILE" "$PINNED_SO"
so_md5=$(md5sum "$PINNED_SO" | cut -c1-12)
so_mtime=$(date -u -r "$SO_FILE" '+%Y-%m-%d %H:%M:%S UTC')
create_extension() { create_pinned_extension "$1" "$PINNED_SO"; }
BASE_PINNED_SO=""
if [ -n "$BENCH_BASELINE_SO" ]; then
  BASE_PINNED_SO=$CLUSTER_DIR/baseline/ratelimit.so
  copy_stable_library "$BENCH_BASELINE_SO" "$BASE_PINNED_SO"
  base_md5=$(md5sum "$BASE_PINNED_SO" | cut -c1-12)
  base_mtime=$(date -u -r "$BENCH_BASELINE_SO" '+%Y-%m-%d %H:%M:%S UTC')
  [ "$base_md5" != "$so_md5" ] || echo "WARNING: the baseline is the same file as the build measured (md5 $so_md5…)"
fi
POSTMASTER_PID=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")

# ---------------------------------------------------------------- machine
echo "== machine"
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
mem_gib=$(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
pg_version=$(sql "SHOW server_version")
fs=$(findmnt -n -o SOURCE,FSTYPE -T "$CLUSTER_DIR" | tr -s ' ' | sed 's/ / (/; s/$/)/')
# fdatasync of one 8 kB write (the WAL flush of a durable commit), on the
# cluster's file system.
fsync_ops=$("$PG_BINDIR/pg_test_fsync" -s 1 -f "$CLUSTER_DIR/fsync.test" 2>/dev/null |
  awk '/^[[:space:]]+fdatasync[[:space:]]/ {print int($2); exit}') || true
rm -f "$CLUSTER_DIR/fsync.test"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
machine="$(nproc) CPUs ($cpu_model), ${mem_gib} GiB RAM, PostgreSQL $pg_version, \
data directory on $fs, fdatasync of one 8 kB write ${fsync_ops:-?}/s (pg_test_fsync -s 1), \
$(uname -sr); a shared VM: other tenants share the CPUs and the disk"
echo "$machine"

# ---------------------------------------------------------------- data
echo "== setup: tables, PL/pgSQL functions, named limit, 100,000 keys per table (bench/setup.sql) (at $(since))"
create_extension "$DB"
"${PSQL[@]}" -f "$BENCH_DIR/setup.sql" >/dev/null
ext_version=$(sql "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")
# Memory workloads: the same server again, preloading the pinned copy. The
# functions' probin names that very file, so a backend finds it loaded; but
# CREATE EXTENSION loads $libdir/ratelimit to validate its C functions (even
# with check_function_bodies off), a second copy whose GUCs clash with the
# preloaded one's: so every database that needs the extension gets it
# before the restart (the storage measurement's too). dynamic_library_path
# puts the pinned copy's directory first, so that anything loading
# "ratelimit" by name loads the pinned copy too.
if [ "$MEMORY" -eq 1 ]; then
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE bench_storage"
  create_extension bench_storage
  PRELOAD_SETTINGS=(-c "shared_preload_libraries=$PINNED_SO" -c "dynamic_library_path=$CLUSTER_DIR:$("$PG_BINDIR/pg_config" --pkglibdir)"
                    -c "ratelimit.memory_max_keys=$BENCH_MEMORY_MAX_KEYS")
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  printf '%s %s\n' "$(cat "$CLUSTER_DIR/server.opts")" "${PRELOAD_SETTINGS[*]}" > "$CLUSTER_DIR/server.opts.new"
  mv "$CLUSTER_DIR/server.opts.new" "$CLUSTER_DIR/server.opts"
  start_cluster_server
  POSTMASTER_PID=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
  SERVER_SETTINGS+=("${PRELOAD_SETTINGS[@]}")
  echo "== restarted with ${PRELOAD_SETTINGS[*]}"
  loaded=$(sql "SELECT substring(pg_read_file('/proc/self/maps') from '/\S*ratelimit\.so')")
  [ "$loaded" = "$PINNED_SO" ] || { echo "FAIL: the preloaded server's backends map '$loaded', not $PINNED_SO" >&2; exit 1; }
  sleep 1
  ! grep -E 'attempt to redefine' "$CLUSTER_DIR/server.log" ||
    { echo "FAIL: a second copy of the library was loaded (see above)" >&2; exit 1; }
  echo "== setup: 100,000 keys of the memory limit 'm' (workload 6a) (at $(since))"
  sql "SELECT count(*) FILTER (WHERE (ratelimit_limit('m', 'k' || g, '$MEMORY_CFG')).ok) FROM generate_series(1, 100000) g" |
    grep -qx 100000 || { echo "FAIL: the memory limit's 100,000 keys were not all granted" >&2; exit 1; }
fi
if [ "$REDIS" -eq 1 ]; then
  ensure_redis
  start_redis
  echo "== redis-benchmark probe runs, to size each run to about ${BENCH_SECONDS}s (at $(since))"
  for clients in "${CLIENTS[@]}"; do
    for keys in random hot; do
      if [ "$keys" = random ]; then selected r6a || continue; else selected r6b || continue; fi
      redis_requests_for "$clients" "$keys" "$BENCH_SECONDS"
      echo "   $clients clients, $keys keys: $REDIS_REQUESTS requests per run"
    done
  done
fi
if [ -n "$BASE_PINNED_SO" ]; then
  echo "== setup of the baseline build's database $BASE_DB (the same bench/setup.sql) (at $(since))"
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE $BASE_DB"
  create_pinned_extension "$BASE_DB" "$BASE_PINNED_SO"
  "${PSQL[@]}" -d "$BASE_DB" -f "$BENCH_DIR/setup.sql" >/dev/null
fi
sql "CHECKPOINT"

# ---------------------------------------------------------------- pgbench
# The counters a run is judged by: WAL position, rows updated (and HOT) in
# the benchmark tables of database $1.
counters() {
  "${PSQL[@]}" -d "$1" -At -c "SELECT pg_current_wal_lsn(), coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0)
         FROM pg_stat_user_tables WHERE relname = ANY (string_to_array('$BENCH_TABLES', ', '))" | tr '|' ' '
}
# CPU accounting, in clock ticks: "total busy steal ours", where ours is the
# cluster's processes (the postmaster, its live children, and, through its
# cutime/cstime, the backends it has reaped) plus this script's reaped
# children (pgbench, redis-benchmark), plus the redis-server of r6a/r6b when
# running. busy - ours is what other processes on the VM used.
cpu_snapshot() {
  local total busy steal mine
  read -r total busy steal < <(awk '$1 == "cpu" {print $2+$3+$4+$5+$6+$7+$8+$9, $2+$3+$4+$7+$8, $9}' /proc/stat)
  mine=$({ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$POSTMASTER_PID" -v me="$$" -v rp="${REDIS_PID:-0}" '
      {
        pid = $1; line = $0; sub(/^.*\) /, "", line); split(line, f, " ")   # f[1] is field 3 (state)
        if (pid == pm) s += f[12] + f[13] + f[14] + f[15]
        else if (pid == rp) s += f[12] + f[13]
        else if (f[2] == pm) s += f[12] + f[13]
        else if (pid == me) s += f[14] + f[15]
      }
      END {print s + 0}')
  echo "$total $busy $steal $mine"
}
# The number of the postmaster's child processes.
postmaster_children() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$POSTMASTER_PID" '{sub(/^.*\) /, ""); if ($2 == pm) n++} END {print n + 0}'
}
# Waits until pgbench's backends have exited (so they flushed their stats)
# and the postmaster has reaped them (so their CPU time is in its cutime).
wait_for_backends() {
  local n
  for _ in $(seq 100); do
    n=$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    [ "$n" -eq 0 ] && [ "$(postmaster_children)" -le "$1" ] && return 0
    sleep 0.1
  done
}

# Whether workload $1 also runs against the baseline build: the ratelimit
# workloads (5a-5g), when BENCH_BASELINE_SO is set.
has_baseline() { [ -n "$BASE_PINNED_SO" ] && [[ $1 == 5* ]]; }

# One redis-benchmark run (bench/redis.sh) of $clients on keys $1 (random or
# hot), about BENCH_SECONDS long; writes its output and then, in pgbench's
# words, its rate, latency and calls to $2.
run_redis_load() {
  local keys=$1 log=$2 rc=0
  redis_requests_for "$clients" "$keys" "$BENCH_SECONDS"
  redis_benchmark "$clients" "$keys" "$REDIS_REQUESTS" "$log.csv" > "$log.out" || rc=$?
  cat "$log.csv" > "$log"
  [ "$rc" -eq 0 ] || return "$rc"
  awk -v n="$REDIS_REQUESTS" '{printf "tps = %s\nlatency average = %s ms\nnumber of transactions actually processed: %d\nnumber of failed transactions: 0\n", $1, $2, n}' \
    "$log.out" >> "$log"
}

# One pgbench run of the current workload ($id, $script, $desc) with $clients
# and $sync, in database $1 for build $2 (new or baseline); appends its line
# to runs.csv.
run_pgbench() {
  local db=$1 build=$2 label=$id log rc=0 children tps lat tx failed others steal wal
  local lsn0 upd0 hot0 lsn1 upd1 hot1 t0 b0 s0 m0 t1 b1 s1 m1
  [ "$build" = new ] || label="$id/base"
  run=$((run + 1))
  # Same starting point for every run: the last run's dead rows vacuumed,
  # dirty pages flushed (each run pays its own full-page writes, and no
  # checkpoint of an earlier run's pages).
  "${PSQL[@]}" -d "$db" -c "VACUUM $BENCH_TABLES" >/dev/null
  sql "CHECKPOINT"
  read -r lsn0 upd0 hot0 <<< "$(counters "$db")"
  log="$WORK_DIR/r$round-$script-$build-c$clients-$sync.log"
  children=$(postmaster_children)
  read -r t0 b0 s0 m0 <<< "$(cpu_snapshot)"
  if [[ $script == redis_* ]]; then
    run_redis_load "${script#redis_}" "$log" || rc=$?
  else
    PGDATABASE=$db PGOPTIONS="-c synchronous_commit=$sync" "$PG_BINDIR/pgbench" -n -M prepared -T "$BENCH_SECONDS" \
      -j "$THREADS" -c "$clients" -f "$BENCH_DIR/workloads/$script.sql" > "$log" 2>&1 || rc=$?
  fi
  wait_for_backends "$children"
  read -r t1 b1 s1 m1 <<< "$(cpu_snapshot)"
  read -r lsn1 upd1 hot1 <<< "$(counters "$db")"
  wal=$(sql "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
  tps=$(awk '/^tps = / {printf "%.0f", $3}' "$log")
  lat=$(awk '/^latency average = / {print $4}' "$log")
  tx=$(awk '/^number of transactions actually processed: / {print $6}' "$log")
  failed=$(awk '/^number of failed transactions: / {print $5}' "$log")
  others=$(awk -v t=$((t1 - t0)) -v b=$((b1 - b0)) -v m=$((m1 - m0)) \
    'BEGIN {o = (t > 0 ? 100 * (b - m) / t : 0); printf "%.0f", (o < 0 ? 0 : o)}')
  steal=$(awk -v t=$((t1 - t0)) -v s=$((s1 - s0)) 'BEGIN {printf "%.0f", (t > 0 ? 100 * s / t : 0)}')
  [ "$rc" -ne 0 ] && { echo "   pgbench exited with $rc:"; tail -5 "$log" | sed 's/^/   /'; }
  echo "$round,$id,$clients,$sync,${tps:-0},${lat:-0},${tx:-0},${failed:-0},$rc,$wal,$((upd1 - upd0)),$((hot1 - hot0)),$others,$steal,$build" >> "$WORK_DIR/runs.csv"
  printf '   [%3d/%d] %-7s %-50s %2s clients, sync %-3s %7s tps   (others %s%% CPU)\n' \
    "$run" "$runs" "$label" "$desc" "$clients" "$sync" "${tps:-ERR}" "$others"
}

echo "round,id,clients,synchronous_commit,tps,latency_ms,transactions,failed,pgbench_rc,wal_bytes,rows_updated,hot_updated,others_cpu_pct,steal_pct,build" > "$WORK_DIR/runs.csv"
nwl=0
for w in "${WORKLOADS[@]}"; do
  selected "${w%%|*}" && nwl=$((nwl + 1))
  selected "${w%%|*}" && has_baseline "${w%%|*}" && nwl=$((nwl + 1))
done
runs=$((BENCH_ROUNDS * nwl * ${#CLIENTS[@]} * ${#SYNCS[@]}))
echo "== pgbench: $runs runs of ${BENCH_SECONDS}s (-M prepared -j $THREADS), each after VACUUM and CHECKPOINT (at $(since))"
# Order: for each client count and synchronous_commit, every workload in
# turn, so the workloads compared with each other run minutes apart at most.
# A workload with a baseline runs twice in a row, once per build; which build
# goes first alternates from one such pair to the next.
run=0
pairs=0
for round in $(seq "$BENCH_ROUNDS"); do
  for clients in "${CLIENTS[@]}"; do
    for sync in "${SYNCS[@]}"; do
      for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r id script desc <<< "$w"
        selected "$id" || continue
        if ! has_baseline "$id"; then
          run_pgbench "$DB" new
        elif [ $((pairs++ % 2)) -eq 0 ]; then
          run_pgbench "$DB" new
          run_pgbench "$BASE_DB" baseline
        else
          run_pgbench "$BASE_DB" baseline
          run_pgbench "$DB" new
        fi
      done
    done
  done
done
crash_ok=1
check_server_log_for_crashes || crash_ok=0

# ---------------------------------------------------------------- server-side cost
# The CPU cost of one call inside the server, without the round trip and the
# commit that dominate pgbench's numbers on a noisy machine: 100,000 calls
# (one per existing key) in one statement, best of five, minus the same
# statement without the call. Every statement is its own transaction. With a
# baseline build, each of the five repetitions also runs the ratelimit cases
# in the baseline's database (labels "5a/base", ...), before or after the new
# build's, alternately.
echo "== server-side cost per call (at $(since))"
COST_CALLS=100000
COST_CASES=(
  "none|('k' || g) IS NOT NULL"
  "2|plain_update('k' || g)"
  "2b|minimal_update('k' || g)"
  "4a|pl_token_bucket('n', 'k' || g, 1000000, 1000, 1000000)"
  "4c|lean_token_bucket('n', 'k' || g, 1000000, 1000, 1000000)"
  "4e|lean_pl_token_bucket('n', 'k' || g, 1000000, 1000, 1000000)"
  "5a|(ratelimit_limit('n', 'k' || g, '$CFG')).ok"
  "5c|(ratelimit_limit('n', 'k' || g)).ok"
  "5e|(ratelimit_check('n', 'k' || g, '$CFG')).ok"
  "5f|(ratelimit_limit('refused', 'k' || g, '$REFUSED_CFG')).ok"
)
[ "$MEMORY" -eq 0 ] || COST_CASES+=("6a|(ratelimit_limit('m', 'k' || g, '$MEMORY_CFG')).ok")
# The statements of one repetition in database $1, labelled with suffix $2;
# in the baseline's database ($2 = /base) only the ratelimit cases.
cost_cases() {
  local db=$1 suffix=$2 c label expr
  echo '\timing off'
  echo "\\connect $db"
  echo 'SET synchronous_commit = off;'
  echo '\timing on'
  for c in "${COST_CASES[@]}"; do
    IFS='|' read -r label expr <<< "$c"
    [ -z "$suffix" ] || [[ $label == 5* ]] || continue
    echo "\\echo case $label$suffix"
    echo "SELECT count(*) FROM generate_series(1, $COST_CALLS) g WHERE $expr;"
  done
}
cost_script() {
  local rep
  for rep in 1 2 3 4 5; do
    if [ -z "$BASE_PINNED_SO" ]; then
      cost_cases "$DB" ""
    elif [ $((rep % 2)) -eq 1 ]; then
      cost_cases "$DB" ""; cost_cases "$BASE_DB" /base
    else
      cost_cases "$BASE_DB" /base; cost_cases "$DB" ""
    fi
  done
}
sql "VACUUM $BENCH_TABLES" >/dev/null
[ -z "$BASE_PINNED_SO" ] || "${PSQL[@]}" -d "$BASE_DB" -c "VACUUM $BENCH_TABLES" >/dev/null
cost_ok=1
cost_script | "${PSQL[@]}" -At > "$WORK_DIR/cost.out" 2> "$WORK_DIR/cost.err" || cost_ok=0
# label,microseconds per call (best of five, baseline subtracted)
awk -v n="$COST_CALLS" '
  /^case / {label = $2}
  /^Time: / {ms = $2 + 0; if (!(label in best) || ms < best[label]) best[label] = ms}
  END {for (l in best) if (l != "none") printf "%s,%.2f\n", l, (best[l] - best["none"]) * 1000 / n}
' "$WORK_DIR/cost.out" | sort > "$WORK_DIR/cost.csv"
[ "$cost_ok" -eq 1 ] || { echo "server-side cost measurement failed: $(head -3 "$WORK_DIR/cost.err")"; : > "$WORK_DIR/cost.csv"; }
cat "$WORK_DIR/cost.csv"

# ---------------------------------------------------------------- storage
# The state table's size after BENCH_STORAGE_KEYS distinct keys, in its own
# database: name 'n', keys 'k000000', 'k000001', ... (7 bytes), created by
# ratelimit_limit calls in chunks of 100,000 (one transaction each).
echo "== storage: $BENCH_STORAGE_KEYS distinct keys through ratelimit_limit (at $(since))"
ssql() { "${PSQL[@]}" -d bench_storage -At -c "$1"; }
storage_calls() {
  local lo hi
  for ((lo = 0; lo < BENCH_STORAGE_KEYS; lo += 100000)); do
    hi=$((lo + 100000 < BENCH_STORAGE_KEYS ? lo + 100000 - 1 : BENCH_STORAGE_KEYS - 1))
    ssql "SET synchronous_commit = off;
          SELECT count(*) FILTER (WHERE (ratelimit_limit('n', 'k' || lpad(g::text, 6, '0'), '$STORAGE_CFG')).ok)
            FROM generate_series($lo, $hi) g" >/dev/null
  done
}
# One CSV line: stage, rows, heap (main fork), heap+FSM+VM, indexes, total, bytes per key.
storage_row() {
  ssql "SELECT '$1', count(*), pg_relation_size('ratelimit_state'), pg_table_size('ratelimit_state'),
               pg_indexes_size('ratelimit_state'), pg_total_relation_size('ratelimit_state'),
               round(pg_total_relation_size('ratelimit_state')::numeric / $BENCH_STORAGE_KEYS, 1)
          FROM ratelimit_state" | tr '|' ','
}
storage() {
  if [ "$MEMORY" -eq 0 ]; then   # with the preload, made before the restart
    "${PSQL[@]}" -d postgres -c "CREATE DATABASE bench_storage"
    create_extension bench_storage
  fi
  ssql "SELECT 'columns: ' || string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
          FROM pg_attribute WHERE attrelid = 'ratelimit_state'::regclass AND attnum > 0 AND NOT attisdropped
        UNION ALL
        SELECT 'index: ' || indexdef FROM pg_indexes WHERE tablename = 'ratelimit_state'" > "$WORK_DIR/storage_schema.txt"
  storage_calls
  storage_row "after creating the keys"
  ssql "VACUUM ratelimit_state"
  storage_row "after VACUUM"
  storage_calls   # every key once more: an UPDATE of each row
  ssql "VACUUM ratelimit_state"
  storage_row "after one more call per key and VACUUM"
}
storage_ok=1
storage > "$WORK_DIR/storage.csv" 2> "$WORK_DIR/storage.err" || storage_ok=0
cat "$WORK_DIR/storage.csv" "$WORK_DIR/storage.err"

# ---------------------------------------------------------------- memory
# One session, BENCH_MEMORY_CALLS calls, each its own statement and
# transaction (psql \gexec), cycling through an inline grant (name 'mem':
# the first 100,000 insert, the rest update), a named grant, a check and a
# refusal. Sampled after a 10,000-call warm-up and then every fifth of the
# calls: memory contexts total and VmRSS/RssAnon of the backend.
echo "== memory: $BENCH_MEMORY_CALLS calls in one session (at $(since))"
memory_script() {
  sample() {
    echo "SELECT '$1', pg_backend_pid(), (SELECT sum(total_bytes) FROM pg_backend_memory_contexts),
      (SELECT count(*) FROM pg_backend_memory_contexts),
      substring(pg_read_file('/proc/self/status') from 'VmRSS:\s*(\d+)'),
      substring(pg_read_file('/proc/self/status') from 'RssAnon:\s*(\d+)'),
      substring(pg_read_file('/proc/self/status') from 'RssShmem:\s*(\d+)');"
  }
  calls() {
    echo '\o /dev/null'
    echo "SELECT CASE g % 4
        WHEN 0 THEN format('SELECT ratelimit_limit(%L, %L, %L)', 'mem', 'k' || (g / 4) % 100000, '$CFG')
        WHEN 1 THEN format('SELECT ratelimit_limit(%L, %L)', 'n', 'k' || 1 + (g / 4) % 100000)
        WHEN 2 THEN format('SELECT ratelimit_check(%L, %L, %L)', 'n', 'k' || 1 + (g / 4) % 100000, '$CFG')
        ELSE format('SELECT ratelimit_limit(%L, %L, %L)', 'refused', 'k' || 1 + (g / 4) % 100000, '$REFUSED_CFG')
      END FROM generate_series($1, $2) g \\gexec"
    echo '\o'
  }
  local warmup=10000 step=$((BENCH_MEMORY_CALLS / 5)) from i
  echo '\set ON_ERROR_STOP 1'
  echo '\pset format unaligned'
  echo '\pset tuples_only on'
  echo '\pset fieldsep ,'
  echo 'SET synchronous_commit = off;'   # durability is not what is measured here
  sample "connected"
  calls 1 "$warmup"
  sample "0"
  from=$((warmup + 1))
  for i in 1 2 3 4 5; do
    calls "$from" "$((from + step - 1))"
    sample "$((i * step))"
    from=$((from + step))
  done
}
memory_script > "$WORK_DIR/memory.sql"
memory_ok=1
"${PSQL[@]}" -f "$WORK_DIR/memory.sql" > "$WORK_DIR/memory.csv" 2> "$WORK_DIR/memory.err" || memory_ok=0
cat "$WORK_DIR/memory.csv" "$WORK_DIR/memory.err"
check_server_log_for_crashes || crash_ok=0
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
stop_cluster

# ---------------------------------------------------------------- report
if [ -n "$BENCH_SO" ]; then
  extension="ratelimit $ext_version (the installed SQL scripts); the library $SO_FILE of $so_mtime (md5 $so_md5…), pinned for the whole run"
else
  extension="ratelimit $ext_version; the build installed at $so_mtime (ratelimit.so md5 $so_md5…), pinned for the whole run"
fi
baseline=""
[ -z "$BASE_PINNED_SO" ] || baseline="the library $BENCH_BASELINE_SO of $base_mtime (md5 $base_md5…), pinned in database $BASE_DB with the same SQL scripts and data"
redis_note=""
[ "$REDIS" -eq 0 ] || redis_note="redis-server $REDIS_VERSION (Debian's) on a unix socket in a temp dir, no persistence (\`--save '' --appendonly no\`), started for this run; workloads r6a/r6b are \`redis-benchmark -s SOCKET -c CLIENTS -n N -r $REDIS_KEYS [--threads 2] EVALSHA <sha of bench/redis_bucket.lua> 1 b:__rand_int__ (or b:hot) $REDIS_RATE $REDIS_PERIOD_MS $REDIS_CAPACITY 1\`, one call per request, no pipelining; N = the calls/s of a probe run at the start × ${BENCH_SECONDS}s, so a run lasts about that long; --threads 2 (pgbench's -j 2) above one client"
elapsed=$(( $(date +%s) - started ))
command="BENCH_SECONDS=$BENCH_SECONDS"
[ "$BENCH_ROUNDS" = 1 ] || command="$command BENCH_ROUNDS=$BENCH_ROUNDS"
[ -z "$BENCH_WORKLOADS" ] || command="$command BENCH_WORKLOADS=\"$BENCH_WORKLOADS\""
[ "$BENCH_STORAGE_KEYS" = 1000000 ] || command="$command BENCH_STORAGE_KEYS=$BENCH_STORAGE_KEYS"
[ "$BENCH_MEMORY_CALLS" = 1000000 ] || command="$command BENCH_MEMORY_CALLS=$BENCH_MEMORY_CALLS"
[ -z "$BENCH_NICE" ] || command="$command BENCH_NICE=$BENCH_NICE"
[ -z "$BENCH_HALT_POLL_NS" ] || command="$command BENCH_HALT_POLL_NS=$BENCH_HALT_POLL_NS"
[ -z "$BENCH_SO" ] || command="$command BENCH_SO=$BENCH_SO"
[ -z "$BENCH_BASELINE_SO" ] || command="$command BENCH_BASELINE_SO=$BENCH_BASELINE_SO"
[ "$BENCH_MEMORY_MAX_KEYS" = 200000 ] || command="$command BENCH_MEMORY_MAX_KEYS=$BENCH_MEMORY_MAX_KEYS"
command="$command bench/run.sh"
[ "$BUILD" -eq 0 ] || command="$command --build"
# The report's rows: each workload, and after each one with a baseline the
# same workload on the baseline build (id "5a/base").
for w in "${WORKLOADS[@]}"; do
  echo "$w"
  IFS='|' read -r id script desc <<< "$w"
  ! has_baseline "$id" || echo "$id/base|$script|$desc (baseline build)"
done > "$WORK_DIR/workloads.txt"
[ "$storage_ok" -eq 1 ] || { echo "storage measurement failed: $(head -3 "$WORK_DIR/storage.err")" > "$WORK_DIR/storage.csv"; }
[ "$memory_ok" -eq 1 ] || { echo "memory measurement failed: $(head -3 "$WORK_DIR/memory.err")" >> "$WORK_DIR/memory.csv"; }
awk -F, -v seconds="$BENCH_SECONDS" -v rounds="$BENCH_ROUNDS" -v machine="$machine" -v command="$command" \
    -v date="$(date -u '+%Y-%m-%d %H:%M UTC')" -v extension="$extension" -v baseline="$baseline" \
    -v elapsed="$elapsed" -v load_start="$load_start" -v load_end="$load_end" \
    -v settings="${SERVER_SETTINGS[*]}" -v nice="$BENCH_NICE" -v halt_poll="$BENCH_HALT_POLL_NS" \
    -v storage_keys="$BENCH_STORAGE_KEYS" \
    -v memory_calls="$BENCH_MEMORY_CALLS" -v workloads_file="$WORK_DIR/workloads.txt" \
    -v storage_file="$WORK_DIR/storage.csv" -v memory_file="$WORK_DIR/memory.csv" \
    -v schema_file="$WORK_DIR/storage_schema.txt" -v cost_file="$WORK_DIR/cost.csv" -v redis="$redis_note" \
    -f "$BENCH_DIR/report.awk" "$WORK_DIR/runs.csv" > "$WORK_DIR/report.md"
# Both files at the end, together: an interrupted run leaves the last pair alone.
cp "$WORK_DIR/runs.csv" "$OUT_CSV"
cp "$WORK_DIR/report.md" "$OUT_MD"
# The terminal gets the main table; the file has everything.
echo
awk '/^## /{n++} n == 1' "$OUT_MD"
echo "== wrote $OUT_MD and $OUT_CSV (${elapsed}s)"
[ "$storage_ok" -eq 1 ] && [ "$memory_ok" -eq 1 ] && [ "$cost_ok" -eq 1 ] && [ "$crash_ok" -eq 1 ]
