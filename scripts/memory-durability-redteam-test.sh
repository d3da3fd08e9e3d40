#!/usr/bin/env bash
# Red-team cases for durable memory limits (issue 38), each a way the
# durability promise of docs/memory.md ("every write but those of the last
# second that nothing flushed") or a committed DROP's forgetting was broken
# on the first version, on clusters of their own:
#
#   A. The worker "ratelimit memory durability" ends (pg_terminate_backend,
#      or any FATAL) and a checkpoint completes before the restarted worker
#      has logged every entry again; then a crash: a key exhausted before is
#      still exhausted.
#   B. A standby that ends its recovery at a target and promotes itself
#      (recovery_target_action = promote: an end-of-recovery checkpoint, not
#      pg_promote's fast promotion), then crashes before its worker has
#      logged every entry: the key the primary exhausted is still exhausted.
#      (max_worker_processes = 0 makes "before its worker" certain; with a
#      worker the same window lasts until its first pass.)
#   C. DROP EXTENSION in a transaction that is then prepared: PREPARE
#      TRANSACTION is refused (0A000) and the memory limits stay; on the first
#      version the drop's forgetting stayed pending in the session and the
#      next commit there (ROLLBACK PREPARED itself) forgot the database's
#      memory limits of an extension that was never dropped.
#   D. The postmaster killed (kill -9) while a start reads the clean
#      shutdown's state file back: the next start still has every memory
#      limit (nothing in the WAL after that shutdown holds them; on the
#      first version the file was renamed aside, never read twice, and lost).
#   G. A worker that stops and cannot write the base file (a directory in
#      the way of its temporary file) PANICs: the crash restart replays the
#      limits from the WAL, and the key stays exhausted.
#
#   E. A hot standby whose own read-only callers hold the inline half of
#      memory_max_keys: redo evicts the standby's own entries for the
#      primary's records (the primary's state wins over a standby's own
#      decisions, docs/memory.md), so after a failover the keys the primary
#      exhausted are still exhausted (the first version skipped them).
#   F. DROP EXTENSION ratelimit, CREATE EXTENSION ratelimit and a memory
#      grant in one transaction: the grant stays after the commit (the
#      first version's forgetting at commit took it too).
#
# Needs the extension installed (make install) and pg_basebackup. Prints
# "ok - ..." or "FAIL: ..." per case; REDTEAM_CASES (default: all) picks.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/memory-durability/standby.sh
CLUSTER_DIR=""
require_server_program "$PG_BINDIR/pg_basebackup" "the standby of B" || exit 1
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
PRELOAD=(-c shared_preload_libraries=ratelimit -c ratelimit.memory_durability=wal -c ratelimit.memory_max_keys=300000 -c wal_level=replica
         -c max_wal_senders=4 -c checkpoint_timeout=1h -c max_prepared_transactions=2)
CFG='{"kind": "token bucket", "rate": 10, "period": "365 days", "storage": "memory"}'

psql_value() { run_pg_client "$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1 "$@"; }
# Whether key $1 is exhausted (ratelimit_check refuses it): t or f.
exhausted() { psql_value -c "SELECT NOT ok FROM ratelimit_check('rt', '$1', '$CFG')"; }
worker_pid() {
  psql_value -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'ratelimit memory durability'"
}
# Waits until the worker runs and has logged every entry since the start.
wait_durable() {
  local _
  for _ in $(seq 1 100); do
    [ -n "$(worker_pid)" ] && [ ! -e "$CLUSTER_DIR/data/ratelimit_memory.base" ] && return 0
    sleep 0.1
  done
  fail "the worker did not make memory limits durable within 10 s"
}

# A. The worker ends; a checkpoint completes without it; a crash.
worker_ended_then_checkpoint_then_crash() {
  psql_value -c "SELECT ratelimit_limit('rt', 'a', '$CFG', 10)" >/dev/null
  wait_durable
  local pid
  pid=$(worker_pid)
  psql_value -c "SELECT pg_terminate_backend($pid)" >/dev/null
  # Before the postmaster starts it again (bgw_restart_time: 1 s).
  psql_value -c "CHECKPOINT" >/dev/null
  stop_cluster_server_immediate
  start_cluster_server
  [ "$(exhausted a)" = t ] ||
    fail "A: a key exhausted before the worker ended, a checkpoint and a crash is full again"
  [ "$failed" = 1 ] || echo "ok - A: the worker ended, a checkpoint, a crash: the key is still exhausted"
}

# B. A standby promoted at its recovery target, crashed before its worker ran.
# The standby's helpers: scripts/memory-durability/standby.sh.
standby_promoted_at_target_then_crash() {
  psql_value -c "SELECT ratelimit_limit('rt', 'b', '$CFG', 10)" >/dev/null
  make_standby
  local target _
  target=$(psql_value -c "SELECT pg_current_wal_insert_lsn()")
  psql_value -c "SELECT pg_switch_wal()" >/dev/null
  echo "-c listen_addresses='' -k $(server_path "$STANDBY_DIR") -p 5433 ${PRELOAD[*]} -c hot_standby=off" \
    "-c max_worker_processes=0 -c recovery_target_lsn=$target -c recovery_target_action=promote" \
    >"$STANDBY_DIR/server.opts"
  start_standby || true  # pg_ctl -w waits for connections, refused until recovery ends
  for _ in $(seq 1 300); do
    grep -q "database system is ready to accept connections" "$STANDBY_DIR/server.log" && break
    sleep 0.1
  done
  grep -q "end-of-recovery" "$STANDBY_DIR/server.log" ||
    grep -q "archive recovery complete" "$STANDBY_DIR/server.log" ||
    { fail "B: the standby did not end its recovery at the target"; cat "$STANDBY_DIR/server.log" >&2; return; }
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -m immediate -w stop >/dev/null
  start_standby
  [ "$(standby -c "SELECT NOT ok FROM ratelimit_check('rt', 'b', '$CFG')")" = t ] ||
    { fail "B: the key the primary exhausted is full after the standby promoted at its target and crashed";
      grep -E "ratelimit|recovery|redo" "$STANDBY_DIR/server.log" >&2; }
  stop_standby
  [ "$failed" = 1 ] || echo "ok - B: a standby promoted at its recovery target, then a crash: the key is still exhausted"
}

# C. DROP EXTENSION in a prepared transaction.
prepared_drop_extension() {
  psql_value -c "SELECT ratelimit_limit('rt', 'c', '$CFG', 10)" >/dev/null
  local out
  out=$(run_pg_client "$PG_BINDIR/psql" -X -At -v VERBOSITY=verbose -c "BEGIN" -c "DROP EXTENSION ratelimit" \
    -c "PREPARE TRANSACTION 'rt'" -c "ROLLBACK PREPARED 'rt'" 2>&1 || true)
  [[ $out == *"0A000"* ]] || fail "C: PREPARE TRANSACTION after DROP EXTENSION ratelimit was not refused 0A000: $out"
  [ "$(psql_value -c "SELECT count(*) FROM pg_extension WHERE extname = 'ratelimit'")" = 1 ] ||
    fail "C: the extension is gone"
  [ "$(exhausted c)" = t ] ||
    fail "C: the memory limits of a database whose DROP EXTENSION was prepared and rolled back were forgotten"
  [ "$failed" = 1 ] || echo "ok - C: PREPARE after DROP EXTENSION ratelimit is refused 0A000; the memory limits stay"
}

# D. The postmaster's death during the load of the state file.
log_size() { stat -c %s "$CLUSTER_DIR/server.log"; }
postmaster_killed_during_load() {
  local keys=250000 try offset pid hit=0 _
  psql_value -c "SELECT ratelimit_define('rt-d', '$CFG')" \
    -c "SELECT count(*) FROM generate_series(1, $keys) g, ratelimit_limit('rt-d', g::text, NULL, 10) r" >/dev/null
  for try in 1 2 3; do
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w stop >/dev/null
    [ -e "$CLUSTER_DIR/data/ratelimit_memory.state" ] || { fail "D: a clean stop wrote no state file"; return; }
    offset=$(log_size)
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -l "$(server_path "$CLUSTER_DIR")/server.log" \
      -W start -o "$(cat "$CLUSTER_DIR/server.opts")" >/dev/null &
    # The load begins with the file's rename.
    for _ in $(seq 1 200000); do [ -e "$CLUSTER_DIR/data/ratelimit_memory.state" ] || break; done
    wait
    pid=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
    kill -KILL "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    sleep 1
    if ! tail -c +"$((offset + 1))" "$CLUSTER_DIR/server.log" | grep -q "read back from the last shutdown"; then
      hit=$try
      break
    fi
    start_cluster_server
  done
  cluster_server_running || start_cluster_server
  [ "$hit" != 0 ] || { fail "D: three loads ended before the postmaster could be killed"; return; }
  local live
  live=$(psql_value -c "SELECT count(*) FROM generate_series(1, $keys) g, ratelimit_check('rt-d', g::text) r WHERE NOT r.ok")
  [ "$live" = "$keys" ] ||
    fail "D: after the postmaster died during the start's load $live of $keys exhausted memory limits are left"
  [ "$failed" = 1 ] || echo "ok - D: the postmaster killed during the load (try $hit): all $keys memory limits kept"
}

# E. A standby's own inline entries against the primary's records.
standby_own_entries_crowd_out_redo() {
  stop_cluster
  local small=(-c shared_preload_libraries=ratelimit -c ratelimit.memory_durability=wal
               -c ratelimit.memory_max_keys=40 -c wal_level=replica -c max_wal_senders=4)
  start_cluster "${small[@]}" >/dev/null
  psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
  make_standby "${small[@]}"
  start_standby
  # The standby's own callers: 20 keys under an inline config, its inline half.
  standby -c "SELECT count(*) FROM generate_series(1, 20) g, ratelimit_limit('rt-own', g::text, '$CFG')" >/dev/null
  # In a transaction that takes an xid: its commit flushes the records, so
  # the standby is sent them before the primary is killed (without a write,
  # the WAL writer flushes them within wal_writer_delay, which the kill
  # below can beat: the flush position read here was then still before them).
  psql_value -c "SELECT count(*) FROM generate_series(1, 5) g, ratelimit_limit('rt', 'e' || g, '$CFG', 10); SELECT txid_current()" >/dev/null
  local lsn _
  lsn=$(psql_value -c "SELECT pg_current_wal_insert_lsn()")
  for _ in $(seq 1 300); do
    [ "$(standby -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && break
    sleep 0.1
  done
  stop_cluster_server_immediate
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -w promote >/dev/null
  local kept
  kept=$(standby -c "SELECT count(*) FROM generate_series(1, 5) g, ratelimit_check('rt', 'e' || g, '$CFG') r WHERE NOT r.ok")
  [ "$kept" = 5 ] ||
    fail "E: after a failover $kept of the 5 keys the primary exhausted are exhausted; the standby's own entries took their room"
  stop_standby
  [ "$failed" = 1 ] || echo "ok - E: a standby's own entries do not keep the primary's records out of redo"
}

# G. The worker stops and cannot keep the base file.
worker_that_cannot_keep_the_base_panics() {
  psql_value -c "SELECT ratelimit_limit('rt', 'g', '$CFG', 10)" >/dev/null
  wait_durable
  local offset pid _
  offset=$(log_size)
  as_cluster_user mkdir "$(data_dir "$CLUSTER_DIR")/ratelimit_memory.state.tmp"
  pid=$(worker_pid)
  # The PANIC's crash restart may end this session before it answers.
  psql_value -c "SELECT pg_terminate_backend($pid)" >/dev/null 2>&1 || true
  for _ in $(seq 1 100); do
    tail -c +"$((offset + 1))" "$CLUSTER_DIR/server.log" | grep -q "database system is ready to accept connections" && break
    sleep 0.2
  done
  rmdir "$CLUSTER_DIR/data/ratelimit_memory.state.tmp"
  tail -c +"$((offset + 1))" "$CLUSTER_DIR/server.log" |
    grep -q 'PANIC:  ratelimit: the worker "ratelimit memory durability" stops and could not keep the memory limits' ||
    fail "G: no PANIC naming the base file when the worker could not keep it"
  wait_durable
  [ "$(exhausted g)" = t ] || fail "G: after the worker's PANIC and the crash restart the key is full"
  [ "$failed" = 1 ] || echo "ok - G: a worker that cannot keep the base file PANICs; the crash restart keeps the key"
}

# F. A grant after DROP and CREATE EXTENSION in one transaction.
grant_after_reinstall_in_one_transaction() {
  psql_value -c "BEGIN" -c "DROP EXTENSION ratelimit" -c "CREATE EXTENSION ratelimit" \
    -c "SELECT ratelimit_limit('rt', 'f', '$CFG', 10)" -c "COMMIT" >/dev/null
  [ "$(exhausted f)" = t ] ||
    fail "F: a grant made after DROP and CREATE EXTENSION in one transaction was forgotten at its commit"
  [ "$failed" = 1 ] || echo "ok - F: a grant after DROP and CREATE EXTENSION in one transaction stays"
}

trap 'stop_standby; stop_cluster' EXIT
CASES=${REDTEAM_CASES:-A B C D E F G}
wants() { [[ " $CASES " == *" $1 "* ]]; }
start_cluster "${PRELOAD[@]}" >/dev/null
psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
wants A && worker_ended_then_checkpoint_then_crash
wants B && standby_promoted_at_target_then_crash
wants C && prepared_drop_extension
wants D && postmaster_killed_during_load
wants G && worker_that_cannot_keep_the_base_panics
wants F && grant_after_reinstall_in_one_transaction
wants E && standby_own_entries_crowd_out_redo
stop_cluster
[ "$failed" = 0 ] && echo "memory durability red team: all checks passed"
exit $failed
