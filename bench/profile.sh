#!/bin/bash
# Where the time goes: instructions per transaction of each pgbench workload,
# counted by valgrind's callgrind in the backend that ran it. Instruction
# counts do not move with other load on a shared machine, so they show what a
# change saves where throughput numbers are too noisy to.
#
#   bench/profile.sh                     every random-key workload (about 2 min)
#   PROFILE_WORKLOADS="w05a_inline_random" bench/profile.sh
#   PROFILE_KEEP=1 bench/profile.sh      keep the callgrind files (for callgrind_annotate)
#
# The cluster: a fresh initdb with bench/run.sh's settings plus
# synchronous_commit=off (fsync waits are not instructions) and autovacuum
# off (so no worker runs during a count). The data is bench/setup.sql's.
# Each workload runs twice with pgbench -M prepared and one client: 500 and
# 2,500 transactions. The difference of the two backends' totals, divided by
# 2,000, is the cost of one transaction without the connection's start-up:
# parse/bind/execute, the call, the commit and the reply. Only the backend
# is counted, not pgbench or the kernel. Uses the extension already installed.
# p05h_check_refused_random (profile only, not in run.sh) is ratelimit_check
# on the refused workload's keys: the same answer as a refusal.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PROFILE_WORKLOADS=${PROFILE_WORKLOADS:-"w01_select1 w02_update_random w04a_plpgsql_random w05a_inline_random w05c_named_random w05e_check_random w05f_refused_random p05h_check_refused_random"}
SMALL=500
LARGE=2500
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }

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
"${PSQL[@]}" -c 'CREATE EXTENSION ratelimit' -f bench/setup.sql >/dev/null
"${PSQL[@]}" -c 'VACUUM ANALYZE' -c 'CHECKPOINT'

# The same server again, under callgrind (every forked backend writes its own file).
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -w stop >/dev/null
mkdir -p "$OUT_DIR"
chown "$(cluster_os_user)" "$OUT_DIR"
as_cluster_user valgrind --tool=callgrind --callgrind-out-file="$OUT_DIR/cg.%p" \
  "$PG_BINDIR/postgres" -D "$CLUSTER_DIR/data" $(cat "$CLUSTER_DIR/server.opts" | tr -d "'") \
  >"$CLUSTER_DIR/valgrind.log" 2>&1 &
VALGRIND_PID=$!
for _ in $(seq 240); do "$PG_BINDIR/pg_isready" -q && break; sleep 0.5; done
"$PG_BINDIR/pg_isready" -q || { echo "the server did not start under valgrind" >&2; exit 1; }

# Total instructions of the backend that served one pgbench run. pgbench
# opens a second, short connection first; the busiest new file is the run's.
backend_instructions() {
  local workload=$1 transactions=$2 before
  before=$(ls "$OUT_DIR" | sort)
  "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$transactions" -f "bench/workloads/$workload.sql" >/dev/null
  sleep 2  # the backend writes its file as it exits
  for file in $(comm -13 <(echo "$before") <(ls "$OUT_DIR" | sort)); do
    grep -m1 '^summary:' "$OUT_DIR/$file" | awk '{print $2}'
  done | sort -n | tail -1
}

echo
echo "| workload | instructions per transaction |"
echo "|---|---:|"
for workload in $PROFILE_WORKLOADS; do
  small=$(backend_instructions "$workload" $SMALL)
  large=$(backend_instructions "$workload" $LARGE)
  echo "| $workload | $(( (large - small) / (LARGE - SMALL) )) |"
done
