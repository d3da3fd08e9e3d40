#!/bin/bash
# Where the time goes: instructions per transaction of each pgbench workload,
# counted by valgrind's callgrind in the backend that ran it. Instruction
# counts do not move with other load on a shared machine, so they show what a
# change saves where throughput numbers are too noisy to.
#
#   bench/profile.sh                     every random-key workload (about 2 min)
#   PROFILE_WORKLOADS="w05a_inline_random" bench/profile.sh
#   PROFILE_KEEP=1 bench/profile.sh      keep the callgrind files (for callgrind_annotate)
#   PROFILE_SO=./ratelimit.so bench/profile.sh
#                                        count this library (default: the installed one)
#   PROFILE_BASELINE_SO=/work/bench-baseline/ratelimit-b9cf5d2.so bench/profile.sh
#                                        also count an older build, side by side: every
#                                        ratelimit workload (w05*, p05*) runs again in a
#                                        second database (bench_base) whose functions load
#                                        this library, and the table adds its count and
#                                        this build / baseline
#   PROFILE_MEMORY_DURABILITY=off bench/profile.sh
#                                        the preloaded server's ratelimit.memory_durability
#                                        (default: the library's own default, wal)
#
# Prints the table and writes it, with the command and the libraries' md5s,
# to bench/profile-latest.md.
#
# The cluster: a fresh initdb with bench/run.sh's settings plus
# synchronous_commit=off (fsync waits are not instructions) and autovacuum
# off (so no worker runs during a count). The data is bench/setup.sql's.
# Each workload runs twice with pgbench -M prepared and one client: 500 and
# 2,500 transactions. The difference of the two backends' totals, divided by
# 2,000, is the cost of one transaction without the connection's start-up:
# parse/bind/execute, the call, the commit and the reply. Only the backend
# is counted, not pgbench or the kernel. The SQL scripts are the installed
# ones; the library is a pinned copy (bench/lib.sh), as in bench/run.sh.
# p05h_check_refused_random (profile only, not in run.sh) is ratelimit_check
# on the refused workload's keys: the same answer as a refusal.
# p05i_new_key_inline (profile only) is a grant on a key never used before
# (one of 10^12): the new row's insert. p05j/p05l are a 4-shard limit and
# p05k/p05m ratelimit_limit_all of one element, on keys mostly new (one of
# 100,000) and on 50 keys whose rows exist.
# w06a_memory_random and w06b_memory_hot (issue 19) are grants of a limit
# with "storage": "memory", over 100,000 keys (made before the counts) and on
# one key; w06e_memory_ok_random the same grant as `.ok`. w06n_noop_random
# and w06o_noop_ok_random (issue 38) call bench/noop_limit.c, a no-op with
# ratelimit_limit's signature returning a formed ratelimit_result row (built
# and created in each database by bench/lib.sh's create_noop_function), as
# the row and as `.ok`: the floor a memory grant is measured against. With
# any w06 workload in the list, the server preloads the pinned library
# (shared_preload_libraries, ratelimit.memory_max_keys = 200000), so every
# workload of that run is counted on the preloaded server (ratelimit_stats
# counts the table grants too). With PROFILE_BASELINE_SO as well, one server
# cannot preload both builds: the server runs under callgrind twice, first
# preloading this build (every workload counted in the first database), then
# the baseline (its 100,000 keys made again, and the ratelimit workloads,
# w05*, p05* and w06*, counted in the baseline's database), one right after
# the other in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PROFILE_WORKLOADS_GIVEN=${PROFILE_WORKLOADS:+1}
PROFILE_WORKLOADS=${PROFILE_WORKLOADS:-"w01_select1 w02_update_random w04a_plpgsql_random w04c_lean_random w04e_lean_plpgsql_random w05a_inline_random w05c_named_random w05e_check_random w05f_refused_random p05h_check_refused_random p05i_new_key_inline w06a_memory_random w06b_memory_hot"}
PROFILE_SO=${PROFILE_SO:-}
PROFILE_BASELINE_SO=${PROFILE_BASELINE_SO:-}
PROFILE_MEMORY_DURABILITY=${PROFILE_MEMORY_DURABILITY:-}
SMALL=500
LARGE=2500
OUT_MD=bench/profile-latest.md
DB=postgres
BASE_DB=bench_base
SO_FILE=${PROFILE_SO:-"$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"}
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ -f "$SO_FILE" ] || { echo "PROFILE_SO: no such file: $SO_FILE" >&2; exit 2; }
[ -z "$PROFILE_BASELINE_SO" ] || [ -f "$PROFILE_BASELINE_SO" ] ||
  { echo "PROFILE_BASELINE_SO: no such file: $PROFILE_BASELINE_SO" >&2; exit 2; }

MEMORY=0
[[ " $PROFILE_WORKLOADS " != *" w06"* ]] || MEMORY=1
NOOP=0
[[ " $PROFILE_WORKLOADS " != *" w06n"* && " $PROFILE_WORKLOADS " != *" w06o"* ]] || NOOP=1
case "$PROFILE_MEMORY_DURABILITY" in
  ""|off|wal) ;;
  *) echo "PROFILE_MEMORY_DURABILITY: off or wal, not: $PROFILE_MEMORY_DURABILITY" >&2; exit 2 ;;
esac
MEMORY_CFG='{"kind": "token bucket", "rate": 1000000, "period": 1000, "capacity": 1000000, "storage": "memory"}'

SERVER_SETTINGS=(-c shared_buffers=256MB -c synchronous_commit=off -c autovacuum=off)
start_cluster "${SERVER_SETTINGS[@]}"
OUT_DIR="$CLUSTER_DIR/callgrind"
VALGRIND_PID=""
cleanup() {
  if [ -n "$VALGRIND_PID" ] && [ -d "$CLUSTER_DIR/data" ]; then
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ "${PROFILE_KEEP:-0}" = 1 ] && [ -d "$OUT_DIR" ]; then
    KEPT=$(mktemp -d /tmp/ratelimit-profile.XXXXXX)
    cp -r "$OUT_DIR" "$KEPT/" && echo "== callgrind files kept in $KEPT/callgrind"
  fi
  stop_cluster
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
# The builds, pinned: each database's functions load a copy in the cluster
# directory (the baseline's in a directory of its own, under the same name).
PINNED_SO=$CLUSTER_DIR/ratelimit.so
copy_stable_library "$SO_FILE" "$PINNED_SO"
create_pinned_extension "$DB" "$PINNED_SO"
"${PSQL[@]}" -d "$DB" -f bench/setup.sql >/dev/null
[ "$NOOP" -eq 0 ] || create_noop_function "$DB"
"${PSQL[@]}" -d "$DB" -c 'VACUUM ANALYZE'
libraries="this build: $SO_FILE (md5 $(md5sum "$PINNED_SO" | cut -c1-12)…)"
if [ -n "$PROFILE_BASELINE_SO" ]; then
  BASE_PINNED_SO=$CLUSTER_DIR/baseline/ratelimit.so
  copy_stable_library "$PROFILE_BASELINE_SO" "$BASE_PINNED_SO"
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE $BASE_DB"
  create_pinned_extension "$BASE_DB" "$BASE_PINNED_SO"
  "${PSQL[@]}" -d "$BASE_DB" -f bench/setup.sql >/dev/null
  [ "$NOOP" -eq 0 ] || create_noop_function "$BASE_DB"
  "${PSQL[@]}" -d "$BASE_DB" -c 'VACUUM ANALYZE'
  libraries="$libraries; baseline build: $PROFILE_BASELINE_SO (md5 $(md5sum "$BASE_PINNED_SO" | cut -c1-12)…)"
fi
"${PSQL[@]}" -c 'CHECKPOINT'
# Memory workloads: the server under callgrind preloads a pinned copy
# (bench/run.sh explains why the extension is created before, and
# dynamic_library_path): this build's, then (with a baseline) the baseline's.
BASE_OPTS=$(cat "$CLUSTER_DIR/server.opts")
preload_options() {
  printf '%s %s\n' "$BASE_OPTS" "-c shared_preload_libraries=$1 \
-c dynamic_library_path=$(dirname "$1"):$("$PG_BINDIR/pg_config" --pkglibdir) -c ratelimit.memory_max_keys=200000\
${PROFILE_MEMORY_DURABILITY:+ -c ratelimit.memory_durability=$PROFILE_MEMORY_DURABILITY}"
}
if [ "$MEMORY" -eq 1 ]; then
  libraries="$libraries, each preloaded in its own count (shared_preload_libraries, ratelimit.memory_max_keys = 200000${PROFILE_MEMORY_DURABILITY:+, ratelimit.memory_durability = $PROFILE_MEMORY_DURABILITY})"
fi
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -w stop >/dev/null
mkdir -p "$OUT_DIR"
chown "$(cluster_os_user)" "$OUT_DIR"

# The server again, under callgrind (every forked backend writes its own
# file), preloading $1 for the memory workloads; the memory limit's 100,000
# keys made in database $2.
start_profiled_server() {
  local preload=$1 db=$2 files_before
  if [ "$MEMORY" -eq 1 ]; then preload_options "$preload" > "$CLUSTER_DIR/server.opts"; fi
  as_cluster_user valgrind --tool=callgrind --callgrind-out-file="$OUT_DIR/cg.%p" \
    "$PG_BINDIR/postgres" -D "$CLUSTER_DIR/data" $(cat "$CLUSTER_DIR/server.opts" | tr -d "'") \
    >>"$CLUSTER_DIR/valgrind.log" 2>&1 &
  VALGRIND_PID=$!
  for _ in $(seq 240); do "$PG_BINDIR/pg_isready" -q && break; sleep 0.5; done
  "$PG_BINDIR/pg_isready" -q || { echo "the server did not start under valgrind" >&2; exit 1; }
  [ "$MEMORY" -eq 1 ] || return 0
  echo "== the memory limit's 100,000 keys (w06a) in $db, under callgrind"
  files_before=$(ls "$OUT_DIR" | wc -l)
  "${PSQL[@]}" -d "$db" -At -c "SELECT count(*) FILTER (WHERE (ratelimit_limit('m', 'k' || g, '$MEMORY_CFG')).ok)
                                  FROM generate_series(1, 100000) g" | grep -qx 100000 ||
    { echo "FAIL: the memory limit's 100,000 keys were not all granted" >&2; exit 1; }
  # That backend's file, written as it exits, must not be taken for a run's.
  for _ in $(seq 120); do [ "$(ls "$OUT_DIR" | wc -l)" -gt "$files_before" ] && break; sleep 0.5; done
  sleep 2
}

stop_profiled_server() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  wait "$VALGRIND_PID" 2>/dev/null || true
  VALGRIND_PID=""
  sleep 2  # the last backends' files
}

# Total instructions of the backend that served one pgbench run in database
# $3. pgbench opens a second, short connection first; the busiest new file is
# the run's.
backend_instructions() {
  local workload=$1 transactions=$2 db=$3 before
  before=$(ls "$OUT_DIR" | sort)
  PGDATABASE=$db "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$transactions" -f "bench/workloads/$workload.sql" >/dev/null
  sleep 2  # the backend writes its file as it exits
  for file in $(comm -13 <(echo "$before") <(ls "$OUT_DIR" | sort)); do
    grep -m1 '^summary:' "$OUT_DIR/$file" | awk '{print $2}'
  done | sort -n | tail -1
}

# Instructions per transaction of workload $1 in database $2.
per_transaction() {
  local small large
  small=$(backend_instructions "$1" $SMALL "$2")
  large=$(backend_instructions "$1" $LARGE "$2")
  echo $(( (large - small) / (LARGE - SMALL) ))
}

# Whether workload $1 calls the extension (and so is counted in the baseline too).
calls_ratelimit() { [[ $1 == [wp]05* || $1 == w06* ]]; }

declare -A NEW OLD
start_profiled_server "$PINNED_SO" "$DB"
for workload in $PROFILE_WORKLOADS; do
  NEW[$workload]=$(per_transaction "$workload" "$DB")
  echo "   $workload: ${NEW[$workload]}"
  # Without memory workloads the baseline's database is counted on the same server.
  if [ -n "$PROFILE_BASELINE_SO" ] && [ "$MEMORY" -eq 0 ] && calls_ratelimit "$workload"; then
    OLD[$workload]=$(per_transaction "$workload" "$BASE_DB")
    echo "   $workload (baseline): ${OLD[$workload]}"
  fi
done
if [ -n "$PROFILE_BASELINE_SO" ] && [ "$MEMORY" -eq 1 ]; then
  stop_profiled_server
  start_profiled_server "$BASE_PINNED_SO" "$BASE_DB"
  for workload in $PROFILE_WORKLOADS; do
    calls_ratelimit "$workload" || continue
    OLD[$workload]=$(per_transaction "$workload" "$BASE_DB")
    echo "   $workload (baseline): ${OLD[$workload]}"
  done
fi

command="bench/profile.sh"
[ -z "$PROFILE_WORKLOADS_GIVEN" ] || command="PROFILE_WORKLOADS=\"$PROFILE_WORKLOADS\" $command"
[ -z "$PROFILE_SO" ] || command="PROFILE_SO=$PROFILE_SO $command"
[ -z "$PROFILE_BASELINE_SO" ] || command="PROFILE_BASELINE_SO=$PROFILE_BASELINE_SO $command"
[ -z "$PROFILE_MEMORY_DURABILITY" ] || command="PROFILE_MEMORY_DURABILITY=$PROFILE_MEMORY_DURABILITY $command"
{
  echo "# Instructions per transaction (bench/profile.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`$command\`; $($PG_BINDIR/postgres --version);"
  echo "$libraries. Backend instructions (callgrind) of ($LARGE − $SMALL) transactions / $((LARGE - SMALL))."
  echo
  if [ -n "$PROFILE_BASELINE_SO" ]; then
    echo "| workload | this build | baseline build | this / baseline |"
    echo "|---|---:|---:|---:|"
  else
    echo "| workload | instructions per transaction |"
    echo "|---|---:|"
  fi
} > "$CLUSTER_DIR/profile.md"
for workload in $PROFILE_WORKLOADS; do
  new=${NEW[$workload]}
  if [ -z "$PROFILE_BASELINE_SO" ]; then
    row="| $workload | $new |"
  elif [ -n "${OLD[$workload]:-}" ]; then
    old=${OLD[$workload]}
    row="| $workload | $new | $old | $(awk -v a="$new" -v b="$old" 'BEGIN {printf "%.3f", a / b}') |"
  else
    row="| $workload | $new | – | – |"
  fi
  echo "$row" >> "$CLUSTER_DIR/profile.md"
done
echo
cat "$CLUSTER_DIR/profile.md"
cp "$CLUSTER_DIR/profile.md" "$OUT_MD"
echo "== wrote $OUT_MD"
