#!/usr/bin/env bash
# Fault tests of memory limits ("storage": "memory") across restarts, on a
# preloaded cluster of their own (shared_preload_libraries = 'ratelimit',
# ratelimit.memory_durability = off: the state file alone, as 0.10.0 kept
# memory limits; with durability, scripts/memory-durability-test.sh):
# a clean shutdown writes $PGDATA/ratelimit_memory.state, the next start
# reads it back before the first connection, a crash writes nothing, and a
# bad file is dropped with one LOG line.
#
#   a. A fast stop with 40 sessions idle in a transaction that took a token:
#      their rollbacks are in what the next start reads (the limit is full).
#   b. A fast stop while pgbench runs 32 clients that take a token and insert
#      a row in one transaction (some roll back): after the start, the tokens
#      taken equal the rows committed, three rounds.
#   c. 200,000 exhausted keys, a clean stop, a start without waiting and at
#      once a call of every key: none is granted (the file is read before
#      the first connection).
#   d. The file a clean stop writes is format 4 (scripts/memory_state_file.py
#      reads it); a crafted one is loaded, and so is one of format 3 (as
#      0.8.0 and 0.9.0 wrote); a truncated one, a flipped bit, another format
#      or major, a record whose lengths wrap, a NaN value, an empty file,
#      random bytes and a wrong checksum (found only after every record made
#      its entry) are each dropped with one LOG line: the server stays up,
#      every memory limit is full, no file is left.
#   e. A backend killed with SIGKILL and pg_ctl stop -m immediate leave no
#      file and every memory limit full; a clean stop after a crash saves
#      the state after it.
#   f. A clean stop that cannot create its file (a directory in its way)
#      logs why and writes nothing; the next start is full, and once the
#      way is clear a clean stop saves again.
#   g. A start whose load cannot rename the file (a directory named
#      ratelimit_memory.state.loading in its way, left alone) logs that
#      rename's failure, starts every memory limit afresh, answers calls
#      and keeps the file; its clean stop writes this run's limits over it,
#      and once the way is clear the next start reads those back.
#   h. A clean stop whose fsync of the data directory after the rename
#      fails (test/fault/fsync_fault.c, LD_PRELOADed for that run only)
#      logs that the limits were written but not made durable, never that
#      they start afresh; the next start reads them back.
#
# Needs the extension installed (make install), pgbench and python3. With
# RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's
# enter_major), the cluster, psql and pgbench are another major's, in its
# root; python3 runs on the host. Prints "ok - ..." or "FAIL: ..." per check.
# Cases d, f, g and h (the state file's faults) are in
# scripts/memory-restart/state_file_faults.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/memory-restart/state_file_faults.sh
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR):
# this script stops only clusters it started.
CLUSTER_DIR=""
require_program python3 "crafting state files" || exit 1
require_server_program "$PG_BINDIR/pgbench" "the load of test b" || exit 1
MAJOR=$(in_server_root "$PG_BINDIR/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
STATE_FILE=ratelimit_memory.state
STATE_TOOL=scripts/memory_state_file.py
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

# psql against the cluster: one value (-At), stopping on any error.
psql_value() {
  run_pg_client "$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1 "$@"
}

# Defines the memory limit $1: a token bucket of 10 tokens a year.
define_yearly() {
  psql_value -c "SELECT ratelimit_define('$1', '{\"kind\": \"token bucket\", \"rate\": 10, \"period\": \"365 days\",
                   \"storage\": \"memory\"}')" >/dev/null
}

# A defined memory limit's value ($1: name, $2: key as SQL), rounded to 2 decimals.
value_of() {
  psql_value -c "SELECT round(value::numeric, 2) FROM ratelimit_value('$1', $2)"
}

# How many memory entries ratelimit_status lists.
memory_entries() {
  psql_value -c "SELECT count(*) FROM ratelimit_status WHERE storage = 'memory'"
}

DATA=""  # the data directory as the server sees it
server_log_size() { stat -c %s "$CLUSTER_DIR/server.log"; }
# The server log from byte $1 on.
log_since() { tail -c +"$(($1 + 1))" "$CLUSTER_DIR/server.log"; }

# Stops the server with pg_ctl stop -m fast (a clean shutdown).
stop_fast() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 120 stop >/dev/null
}

# Starts the server again unless it is running (after a test that failed
# midway), so that the next test has one.
ensure_running() {
  cluster_server_running && return 0
  echo "# the server is down: starting it again" >&2
  as_cluster_user rm -f "$DATA/$STATE_FILE" "$DATA/$STATE_FILE.loading"
  start_cluster_server
}

# Fails (naming $1) if the server log from byte $2 on shows a server process
# ended by a signal or an abnormal exit.
log_free_of_crashes() {
  local crash="terminated by signal|was terminated|PANIC|exited with exit code"
  crash+="|terminating any other active server processes|all server processes terminated; reinitializing"
  if log_since "$2" | grep -E "$crash" >&2; then
    fail "$1: the server log shows a crash"
    return 1
  fi
}

# Fails (naming $1) if the state file or its .loading copy is in the data directory.
no_state_file() {
  local f
  for f in "$STATE_FILE" "$STATE_FILE.loading"; do
    if [ -e "$CLUSTER_DIR/data/$f" ]; then
      fail "$1: $f is in the data directory"
      return 1
    fi
  done
}

# Background psql sessions of test a, each reading from a fifo this shell
# holds open: closing the fifo ends the session. Ended on exit too.
SESSION_PIDS=()
SESSION_FDS=()
end_sessions() {
  local fd pid
  for fd in "${SESSION_FDS[@]}"; do exec {fd}>&-; done
  SESSION_FDS=()
  for pid in "${SESSION_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  SESSION_PIDS=()
}

# Opens session $1: psql in the background reading $CLUSTER_DIR/session.$1.
open_session() {
  local fifo=$CLUSTER_DIR/session.$1 fd
  mkfifo "$fifo"
  # Without the other sessions' fifos, so that closing one ends its session.
  (
    for fd in "${SESSION_FDS[@]}"; do exec {fd}>&-; done
    psql_value -q <"$fifo" >"$CLUSTER_DIR/session.$1.out" 2>&1
  ) &
  SESSION_PIDS+=("$!")
  exec {fd}>"$fifo"
  SESSION_FDS+=("$fd")
}

# a. A fast stop with 40 sessions idle in a transaction that took one token
# each: the shutdown ends them, their rollbacks give the tokens back, and
# the next start reads the limit full.
fast_stop_with_open_transactions() {
  local i value _
  psql_value -c "SELECT ratelimit_define('open', '{\"kind\": \"token bucket\", \"rate\": 1000, \"period\": \"365 days\",
                   \"capacity\": 1000, \"storage\": \"memory\"}')" >/dev/null
  for i in $(seq 1 40); do
    open_session "$i"
    echo "BEGIN; SELECT (ratelimit_limit('open', 'k', NULL, 1)).ok;" >&"${SESSION_FDS[-1]}"
  done
  for _ in $(seq 1 600); do
    value=$(value_of open "'k'")
    [ "$value" = 960.00 ] && break
    sleep 0.1
  done
  if [ "$value" != 960.00 ]; then
    fail "a: the 40 sessions did not all take their token: the value is $value, not 960.00"
    end_sessions
    return 1
  fi
  stop_fast
  end_sessions
  start_cluster_server
  value=$(value_of open "'k'")
  if [ "$value" != 1000.00 ]; then
    fail "a: after a fast stop with 40 open transactions that took a token each, the value is $value, not 1000.00"
    return 1
  fi
  echo "ok - a: a fast stop with 40 open transactions gives their tokens back (1000.00 after the start)"
}

# b. pgbench's script: one token and a row in one transaction, then 5 ms
# of the client's own work (most clients are in a transaction that holds a
# grant when the stop comes); a quarter of them roll back. ('load' refills 20,000 of its 1,000,000 a year: not a
# token during the test.)
LOAD_SCRIPT="BEGIN;
INSERT INTO granted SELECT 1 FROM ratelimit_limit('load', 'k', NULL, 1) r WHERE r.ok;
\\sleep 5 ms
\\if random(1, 4) = 1
ROLLBACK;
\\else
COMMIT;
\\endif"

# The tokens taken of 'load' (capacity - value, rounded) and the rows in granted.
taken_and_rows() {
  psql_value -c "SELECT round(1000000 - value::numeric) || ' ' || (SELECT count(*) FROM granted)
                 FROM ratelimit_value('load', 'k')"
}

# b. A fast stop under load (32 pgbench clients), three rounds: after each
# start the tokens taken equal the rows committed.
fast_stop_under_load() {
  local round pid rows=0 counts rc=0
  psql_value -c "CREATE TABLE granted (n int)" \
    -c "SELECT ratelimit_define('load', '{\"kind\": \"token bucket\", \"rate\": 20000, \"period\": \"365 days\",
          \"capacity\": 1000000, \"storage\": \"memory\"}')" >/dev/null
  printf '%s\n' "$LOAD_SCRIPT" >"$CLUSTER_DIR/load.sql"
  for round in 1 2 3; do
    run_pg_client "$PG_BINDIR/pgbench" -n -c 32 -j 2 -T 60 -f "$(server_path "$CLUSTER_DIR/load.sql")" \
      >"$CLUSTER_DIR/pgbench.$round.out" 2>&1 &
    pid=$!
    LOAD_PID=$pid
    # Until the load has committed rows, at least 3 seconds.
    sleep 3
    for _ in $(seq 1 100); do
      [ "$(psql_value -c "SELECT count(*) > $rows FROM granted")" = t ] && break
      sleep 0.1
    done
    stop_fast
    wait "$pid" 2>/dev/null || true
    LOAD_PID=""
    start_cluster_server
    counts=$(taken_and_rows)
    if ! [[ $counts =~ ^[0-9]+\ [0-9]+$ ]]; then
      fail "b: round $round: no count of tokens taken and rows: $counts"
      return 1
    elif [ "${counts% *}" != "${counts#* }" ]; then
      fail "b: round $round: after a fast stop under load $counts (tokens taken, rows committed) differ"
      rc=1
    elif [ "${counts#* }" -le "$rows" ]; then
      fail "b: round $round: pgbench committed no row: $(tail -3 "$CLUSTER_DIR/pgbench.$round.out")"
      rc=1
    fi
    rows=${counts#* }
  done
  [ $rc -eq 0 ] && echo "ok - b: after fast stops under load (32 clients, 3 rounds) the tokens taken equal the rows committed ($rows)"
  return $rc
}

# c. 200,000 keys exhausted, a clean stop, a start without -w, and at once
# (as soon as a connection is accepted) a call of every key: none granted.
calls_racing_the_load() {
  local granted out rc _
  psql_value -c "SELECT ratelimit_define('race', '{\"kind\": \"token bucket\", \"rate\": 1, \"period\": \"365 days\",
                   \"storage\": \"memory\"}')" >/dev/null
  granted=$(psql_value -c "SELECT count(*) FROM generate_series(1, 200000) i, ratelimit_limit('race', i::text, NULL, 1) r WHERE r.ok")
  [ "$granted" = 200000 ] || { fail "c: exhausting 200,000 keys granted $granted"; return 1; }
  stop_fast
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$DATA" -l "$(server_path "$CLUSTER_DIR")/server.log" -W start \
    -o "$(cat "$CLUSTER_DIR/server.opts")" >/dev/null
  # psql exits 2 while the server accepts no connection; any other failure is the test's.
  for _ in $(seq 1 3000); do
    rc=0
    out=$(psql_value -c "SELECT count(*) FROM generate_series(1, 200000) i, ratelimit_limit('race', i::text, NULL, 1) r
                          WHERE r.ok" 2>&1) || rc=$?
    [ $rc -eq 2 ] || break
    sleep 0.02
  done
  if [ $rc -ne 0 ]; then
    fail "c: calling the keys right after the start failed ($rc): $out"
    return 1
  fi
  if [ "$out" != 0 ]; then
    fail "c: calls of 200,000 exhausted keys racing the start granted $out, not 0"
    return 1
  fi
  echo "ok - c: calls of 200,000 exhausted keys right after a start without -w: 0 granted"
}

# Takes $1 tokens of 'crash'.
take_crash() {
  [ "$(psql_value -c "SELECT (ratelimit_limit('crash', 'k', NULL, $1)).ok")" = t ] || { fail "e: taking $1 of 'crash' failed"; return 1; }
}

# Fails unless 'crash' reads $2 (naming $1).
crash_value_is() {
  local value
  value=$(value_of crash "'k'")
  [ "$value" = "$2" ] || { fail "e: $1: 'crash' is $value, not $2"; return 1; }
}

# e. A crash never leaves a snapshot.
crash_leaves_no_snapshot() {
  local offset rc=0
  define_yearly crash
  # A snapshot that a later start must not read again.
  take_crash 3 && stop_fast && start_cluster_server && crash_value_is "after a clean restart" 7.00 || rc=1
  take_crash 2 || rc=1
  offset=$(server_log_size)
  kill_a_backend || rc=1
  crash_value_is "after a backend killed with SIGKILL" 10.00 || rc=1
  no_state_file "e: after a backend killed with SIGKILL" || rc=1
  if log_since "$offset" | grep -E "ratelimit: [1-9][0-9]* memory limits (written for the next start|read back from the last shutdown)" >&2; then
    fail "e: the crash's reinitialization wrote or read memory limits"
    rc=1
  fi
  [ $rc -eq 0 ] && echo "ok - e: a backend killed with SIGKILL: every memory limit full, no file written"

  local rc2=0
  take_crash 1 || rc2=1
  stop_cluster_server_immediate
  no_state_file "e: after pg_ctl stop -m immediate (before the start)" || rc2=1
  start_cluster_server
  crash_value_is "after pg_ctl stop -m immediate" 10.00 || rc2=1
  [ $rc2 -eq 0 ] && echo "ok - e: pg_ctl stop -m immediate writes no file: every memory limit full after the start"

  local rc3=0
  take_crash 4 || rc3=1
  kill_a_backend || rc3=1
  take_crash 1 || rc3=1
  stop_fast
  start_cluster_server
  crash_value_is "after a crash, one token taken and a clean restart" 9.00 || rc3=1
  [ $rc3 -eq 0 ] && echo "ok - e: a clean stop after a crash saves the state after it (9.00)"
  [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ]
}


LOAD_PID=""
# Ends test b's pgbench if a failure left it running.
end_load() {
  [ -n "$LOAD_PID" ] || return 0
  kill "$LOAD_PID" 2>/dev/null || true
  wait "$LOAD_PID" 2>/dev/null || true
  LOAD_PID=""
}

# Runs test $1 in a subshell with errexit on (so never call it where its
# status is tested, which turns errexit off inside): a command failing where
# no check expects it fails the test, naming the command; its sessions and
# load end with it. Sets failed on failure.
run_test() {
  local rc=0
  set +e
  (
    set -eE
    trap '[ "$failed" = 1 ] || echo "FAIL: $1: \"$BASH_COMMAND\" failed (line $LINENO)" >&2; failed=1' ERR
    trap 'end_sessions; end_load' EXIT
    "$1"
  )
  rc=$?
  set -e
  [ $rc -eq 0 ] || failed=1
}

trap stop_cluster EXIT
start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=300000 -c max_connections=100 \
  -c ratelimit.memory_durability=off
DATA=$(data_dir "$CLUSTER_DIR")
psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
start=$SECONDS
# MEMORY_RESTART_TESTS: some of the tests' functions, in order (all by default).
for t in ${MEMORY_RESTART_TESTS:-fast_stop_with_open_transactions fast_stop_under_load calls_racing_the_load \
  damaged_files crash_leaves_no_snapshot save_fails load_blocked save_not_durable}; do
  ensure_running
  run_test "$t"
done
echo "# memory restart tests: $((SECONDS - start)) s"
exit $failed
