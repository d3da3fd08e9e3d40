#!/usr/bin/env bash
# Memory limits that survive a crash and a failover (ratelimit.memory_durability
# = wal, the default, with shared_preload_libraries = 'ratelimit'), on
# clusters of their own:
#
#   a. 100,000 exhausted keys, CHECKPOINT (twice), a crash (pg_ctl stop -m
#      immediate): every key is still exhausted; the worker's first pass
#      removes the base file the start kept.
#   b. kill -9 of the postmaster under a 32-client load with savepoints and
#      rollbacks: every key whose load ended 3 seconds before the crash has
#      taken exactly the grants of the committed rows (rolled-back grants
#      refunded exactly once); every key of the load the crash cut off has
#      taken at least its committed rows' grants (a committed write is never
#      lost), and at most the grants of transactions in flight and of the
#      last second more.
#   c. A streaming standby (pg_basebackup, primary_conninfo) replays the
#      primary's memory limits; a standby started without the library in
#      shared_preload_libraries is refused with PostgreSQL's message (it
#      stops, no loop). The primary is killed (kill -9) and the standby
#      promoted: it continues every memory limit exactly, with its own
#      decisions from before the promotion, and logs them all durably (a
#      crash after the promotion keeps them).
#   d. A crash during crash recovery: the next recovery ends with the state.
#   e. Records redo cannot apply (test/fault/wal_inject.c: an unknown kind,
#      a truncated, a NaN, an oversized and a foreign-length record) are
#      skipped with one LOG line and a summary; the server starts and the
#      valid records around them apply.
#   f. A key space smaller than the records (memory_max_keys lowered across
#      a crash): recovery keeps what fits, says how many it skipped, starts.
#   g. The WAL of memory limits replayed without the library preloaded: the
#      start is refused with PostgreSQL's message, once; with the library it
#      recovers.
#   h. Without the worker (max_worker_processes = 0) a memory write waits
#      for it and then fails 55000, naming it; reads still answer.
#   i. A clean restart reads the shutdown's file back and keeps it (the
#      base file) until the worker has logged every entry: a crash right
#      after the start keeps every memory limit; then the file is gone.
#   j. A grant in a transaction without an xid, which no commit flushes, is
#      flushed by the durability worker (polled for up to 10 s, wal_level =
#      minimal so that no standby snapshot flushes it instead).
#   k. A WAL switch leaves the durability worker running (its flush never
#      asks for WAL past the last record's end).
#
# Needs the extension installed (make install), pgbench, pg_basebackup. With
# RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's
# enter_major), the clusters and their programs are another major's, in its
# root. Prints "ok - ..." or "FAIL: ..." per check.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/memory-durability/standby.sh
CLUSTER_DIR=""
require_server_program "$PG_BINDIR/pgbench" "the loads of b and c" || exit 1
require_server_program "$PG_BINDIR/pg_basebackup" "the standby of c" || exit 1
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
PRELOAD=(-c shared_preload_libraries=ratelimit -c ratelimit.memory_durability=wal
         -c ratelimit.memory_max_keys=300000 -c max_connections=100 -c wal_level=replica -c max_wal_senders=4
         -c checkpoint_timeout=1h)
LOAD_CFG='{"kind": "fixed window", "rate": 1000000000, "period": "1000 days", "storage": "memory"}'
YEARLY_CFG='{"kind": "token bucket", "rate": 10, "period": "365 days", "storage": "memory"}'

psql_value() { run_pg_client "$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1 "$@"; }
log_size() { stat -c %s "$1/server.log"; }
log_since() { tail -c +"$(($2 + 1))" "$1/server.log"; }

# Kills the postmaster of the cluster in $1 with SIGKILL (by its pid file)
# and waits until none of its processes is left attached to shared memory
# (the next start refuses to run beside them).
kill_postmaster() {
  local pid dir=$1 _
  pid=$(head -1 "$dir/data/postmaster.pid")
  kill -KILL "$pid"
  for _ in $(seq 1 300); do
    if ! as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$dir")" -l "$(server_path "$dir")/server.log" -w \
      start -o "$(cat "$dir/server.opts")" >/dev/null 2>&1; then
      sleep 0.2
      continue
    fi
    return 0
  done
  echo "FAIL: the cluster in $dir did not start again after its postmaster was killed" >&2
  return 1
}

# The keys of prefix $1 (1..50) whose memory limit has not taken exactly
# what the rows of grants say (committed grants); "" when every one has.
# $2: '=' (exact) or '>=' (at least), PGHOST/PGPORT as set.
keys_off() {
  psql_value -c "SELECT string_agg(k || ':' || taken || '/' || rows, ' ' ORDER BY k) FROM (
      SELECT k, (1000000000 - v.value)::bigint AS taken,
             (SELECT count(*) FROM grants g WHERE g.k = keys.k) AS rows
      FROM (SELECT '$1' || i AS k FROM generate_series(1, 50) i) keys,
           ratelimit_value('load', keys.k, '$LOAD_CFG') v) s
    WHERE NOT (taken $2 rows)"
}
# The grants taken beyond the committed rows over the keys of prefix $1.
excess_of() {
  psql_value -c "SELECT coalesce(sum((1000000000 - v.value)::bigint), 0) - (SELECT count(*) FROM grants WHERE k LIKE '$1%')
    FROM generate_series(1, 50) i, ratelimit_value('load', '$1' || i, '$LOAD_CFG') v"
}

# The pgbench script of a load on the keys of prefix $1: a grant and its
# row, a second one under a savepoint rolled back (or released), and one
# transaction in ten rolled back whole.
write_load() {
  cat >"$CLUSTER_DIR/load_$1.sql" <<SQL
\\set k random(1, 50)
\\set r random(1, 10)
BEGIN;
SELECT ok FROM ratelimit_limit('load', '$1' || :k, '$LOAD_CFG');
INSERT INTO grants VALUES ('$1' || :k);
SAVEPOINT s;
SELECT ok FROM ratelimit_limit('load', '$1' || :k, '$LOAD_CFG');
INSERT INTO grants VALUES ('$1' || :k);
\\if :r <= 5
ROLLBACK TO SAVEPOINT s;
\\else
RELEASE SAVEPOINT s;
\\endif
\\if :r = 1
ROLLBACK;
\\else
COMMIT;
\\endif
SQL
  chown_to_cluster_user "$CLUSTER_DIR/load_$1.sql"
}
# Runs the load of prefix $1 for $2 seconds with 32 clients (in the background with $3 = bg).
run_load() {
  write_load "$1"
  local cmd=("$PG_BINDIR/pgbench" -n -c 32 -j 2 -T "$2" -f "$(server_path "$CLUSTER_DIR")/load_$1.sql")
  if [ "${3:-}" = bg ]; then
    run_pg_client "${cmd[@]}" >"$CLUSTER_DIR/load_$1.out" 2>&1 &
    LOAD_PID=$!
  else
    run_pg_client "${cmd[@]}" >"$CLUSTER_DIR/load_$1.out" 2>&1 || { cat "$CLUSTER_DIR/load_$1.out" >&2; return 1; }
  fi
}
LOAD_PID=""
end_load() { [ -z "$LOAD_PID" ] || { wait "$LOAD_PID" 2>/dev/null || true; LOAD_PID=""; }; }

new_cluster() {
  start_cluster "${PRELOAD[@]}" "$@" >/dev/null
  psql_value -c "CREATE EXTENSION ratelimit" -c "CREATE TABLE grants (k text)" >/dev/null
}

# a. Exhausted keys through two checkpoints and a crash.
checkpointed_keys_survive_a_crash() {
  [ "$(psql_value -c "SELECT count(*) FROM generate_series(1, 100000) g, ratelimit_limit('yearly', g::text, '$YEARLY_CFG', 10) r WHERE r.ok")" = 100000 ] ||
    { fail "a: 100,000 keys were not all granted 10"; return; }
  psql_value -c "CHECKPOINT" -c "CHECKPOINT" >/dev/null
  stop_cluster_server_immediate
  start_cluster_server
  local exhausted
  exhausted=$(psql_value -c "SELECT count(*) FROM generate_series(1, 100000) g, ratelimit_check('yearly', g::text, '$YEARLY_CFG') r WHERE NOT r.ok")
  [ "$exhausted" = 100000 ] || fail "a: after CHECKPOINT and a crash $exhausted of 100,000 keys are exhausted"
  local _
  for _ in $(seq 1 100); do [ -e "$CLUSTER_DIR/data/ratelimit_memory.base" ] || break; sleep 0.1; done
  [ ! -e "$CLUSTER_DIR/data/ratelimit_memory.base" ] || fail "a: the base file is still there 10 s after the start"
  grep -q "memory limits recovered, kept in \"ratelimit_memory.base\"" "$CLUSTER_DIR/server.log" ||
    fail "a: the crash recovery did not keep its entries in the base file"
  [ "$failed" = 1 ] || echo "ok - a: 100,000 exhausted keys, CHECKPOINT twice, a crash: all still exhausted"
}

# b. kill -9 of the postmaster under load.
postmaster_killed_under_load() {
  run_load a 6
  run_load b 60 bg
  sleep 3
  kill_postmaster "$CLUSTER_DIR" || return
  end_load
  local off excess rows
  off=$(keys_off a =)
  [ -z "$off" ] || fail "b: keys whose load ended 3 s before the crash are off (taken/rows): $off"
  off=$(keys_off b '>=')
  [ -z "$off" ] || fail "b: keys of the load the crash cut off lost committed grants (taken/rows): $off"
  excess=$(excess_of b)
  rows=$(psql_value -c "SELECT count(*) FROM grants WHERE k LIKE 'b%'")
  # In flight: 32 transactions of at most 2 grants; the last second: a third of 3 seconds' rows.
  [ "$rows" -gt 0 ] && [ "$excess" -le $((64 + rows / 3)) ] ||
    fail "b: $excess grants beyond the $rows committed rows of the cut-off load (at most $((64 + rows / 3)))"
  [ "$failed" = 1 ] || echo "ok - b: kill -9 under load: the older load exact ($(psql_value -c "SELECT count(*) FROM grants WHERE k LIKE 'a%'") rows), the cut-off one $rows rows + $excess in flight"
}

# c. A streaming standby, and a failover to it.
# The standby's helpers: scripts/memory-durability/standby.sh.

standby_without_library_is_refused() {
  make_standby -c wal_level=replica
  psql_value -c "SELECT ratelimit_limit('load', 'nolib', '$LOAD_CFG')" >/dev/null
  if start_standby 2>/dev/null; then
    sleep 2
    psql_value -c "SELECT ratelimit_limit('load', 'nolib', '$LOAD_CFG')" >/dev/null
  fi
  local _
  for _ in $(seq 1 100); do
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" status >/dev/null 2>&1 || break
    sleep 0.2
  done
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" status >/dev/null 2>&1 &&
    fail "c: a standby without the library kept running over the memory limits' WAL"
  [ "$(grep -c "resource manager with ID 200 not registered" "$STANDBY_DIR/server.log")" = 1 ] ||
    { fail "c: a standby without the library did not stop once, naming the resource manager"; cat "$STANDBY_DIR/server.log" >&2; }
  stop_standby
}

failover_continues_memory_limits() {
  standby_without_library_is_refused
  make_standby "${PRELOAD[@]}"
  start_standby
  run_load c 4
  local lsn _
  lsn=$(psql_value -c "SELECT pg_current_wal_flush_lsn()")
  for _ in $(seq 1 300); do
    [ "$(standby -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && break
    sleep 0.1
  done
  local off
  off=$(PGHOST=$STANDBY_DIR PGPORT=5433 keys_off c =)
  [ -z "$off" ] || fail "c: the hot standby's replayed memory limits are off (taken/rows): $off"
  # A decision of the standby's own, before the promotion.
  [ "$(standby -c "SELECT remaining FROM ratelimit_limit('yearly', 'standby-own', '$YEARLY_CFG', 3)")" = 7 ] ||
    fail "c: the standby's own decision did not answer remaining = 7"
  kill_postmaster_only "$CLUSTER_DIR"
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -w promote >/dev/null
  for _ in $(seq 1 100); do grep -q "memory limits are durable" "$STANDBY_DIR/server.log" && break; sleep 0.1; done
  off=$(PGHOST=$STANDBY_DIR PGPORT=5433 keys_off c =)
  [ -z "$off" ] || fail "c: after the failover the memory limits are off (taken/rows): $off"
  [ "$(standby -c "SELECT ok FROM ratelimit_limit('load', 'c1', '$LOAD_CFG')")" = t ] ||
    fail "c: the promoted standby did not grant"
  sleep 1.5  # older than the durability bound
  psql_value -c "SELECT 1" >/dev/null 2>&1 && fail "c: the old primary still answers"
  # A crash of the promoted server keeps what it decided, and the standby's own decision.
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -m immediate -w stop >/dev/null
  start_standby
  [ "$(standby -c "SELECT value FROM ratelimit_value('yearly', 'standby-own', '$YEARLY_CFG')" | cut -d. -f1)" = 7 ] ||
    fail "c: the standby's own decision was not kept through the promotion and a crash"
  [ "$(standby -c "SELECT (1000000000 - value)::bigint - (SELECT count(*) FROM grants WHERE k = 'c1') FROM ratelimit_value('load', 'c1', '$LOAD_CFG')")" = 1 ] ||
    fail "c: the promoted server's own grant was not kept through its crash"
  grep -E "PANIC|terminated by signal" "$STANDBY_DIR/server.log" >&2 && fail "c: the standby crashed"
  stop_standby
  [ "$failed" = 1 ] || echo "ok - c: a standby replays memory limits, one without the library is refused, a failover continues them exactly"
}
# Kills the postmaster in $1 and waits for its processes to go (no restart).
kill_postmaster_only() {
  local pid _
  pid=$(head -1 "$1/data/postmaster.pid")
  kill -KILL "$pid"
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  sleep 2  # its children notice the postmaster's death
}

# d. A crash during crash recovery: the postmaster killed (kill -9) as soon
# as the log says redo started, before it says redo is done (else tried
# again, with more to replay).
crash_during_recovery() {
  local try offset hit=0 pid _
  for try in 1 2 3; do
    psql_value -c "SELECT count(*) FROM generate_series(1, 300 * $try) n, generate_series(1, 1000) i,
                     ratelimit_limit('load', 'd$try-' || i, '$LOAD_CFG', n * 0 + 1)" >/dev/null
    sleep 1.5  # every decision older than the durability bound
    stop_cluster_server_immediate
    offset=$(log_size "$CLUSTER_DIR")
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -l "$(server_path "$CLUSTER_DIR")/server.log" \
      -W start -o "$(cat "$CLUSTER_DIR/server.opts")" >/dev/null
    for _ in $(seq 1 5000); do grep -q "redo starts at" <(log_since "$CLUSTER_DIR" "$offset") && break; done
    pid=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
    kill -KILL "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    sleep 2  # the startup process notices the postmaster's death
    if ! log_since "$CLUSTER_DIR" "$offset" | grep -q "redo done at"; then hit=$try; break; fi
    start_cluster_server
  done
  cluster_server_running || start_cluster_server
  [ "$hit" != 0 ] || fail "d: three recoveries ended before they could be stopped"
  local wrong
  wrong=$(psql_value -c "SELECT count(*) FROM generate_series(1, $((hit == 0 ? 3 : hit))) t, generate_series(1, 1000) i,
                           ratelimit_value('load', 'd' || t || '-' || i, '$LOAD_CFG') v WHERE v.value <> 1000000000 - 300 * t")
  [ "$wrong" = 0 ] || fail "d: after a crash during recovery $wrong keys are not at what they took"
  [ "$failed" = 1 ] || echo "ok - d: a crash during crash recovery (try $hit): the next recovery ends with every key at what it took"
}

# Builds test/fault/wal_inject.c with the server's flags; its path as the server sees it.
build_wal_inject() {
  local cc cflags out
  cc=$(in_server_root "$PG_BINDIR/pg_config" --cc)
  cflags="$(in_server_root "$PG_BINDIR/pg_config" --cflags) $(in_server_root "$PG_BINDIR/pg_config" --cflags_sl)"
  out=$(server_path "$CLUSTER_DIR")/wal_inject.so
  # shellcheck disable=SC2086  # the compiler and its flags are words
  in_server_root $cc $cflags -Wextra -Werror -shared -isystem "$(in_server_root "$PG_BINDIR/pg_config" --includedir-server)" \
    -o "$out" "$(server_source_dir)/test/fault/wal_inject.c" >&2 || return 1
  echo "$out"
}

# e. Records redo cannot apply.
damaged_records_are_skipped() {
  local so offset
  so=$(build_wal_inject) || { fail "e: test/fault/wal_inject.c did not build"; return; }
  psql_value -c "SELECT ratelimit_limit('yearly', 'before', '$YEARLY_CFG', 4)" \
    -c "CREATE FUNCTION inject_wal(int, int, bytea) RETURNS pg_lsn AS '$so', 'inject_wal' LANGUAGE C STRICT" \
    -c "SELECT inject_wal(200, 48, '\\x00')" \
    -c "SELECT inject_wal(200, 0, '\\x0102')" \
    -c "SELECT inject_wal(200, 0, decode('01000000010000000100000001000000000000000000f87f' || repeat('00', 32) || '6b6b', 'hex'))" \
    -c "SELECT inject_wal(200, 16, '\\x01000000ff000000ff000000')" \
    -c "SELECT inject_wal(200, 32, '\\x010203')" \
    -c "SELECT ratelimit_limit('yearly', 'after', '$YEARLY_CFG', 6)" \
    -c "DROP FUNCTION inject_wal(int, int, bytea)" >/dev/null
  offset=$(log_size "$CLUSTER_DIR")
  stop_cluster_server_immediate
  start_cluster_server
  [ "$(psql_value -c "SELECT round(value) FROM ratelimit_value('yearly', 'before', '$YEARLY_CFG')")" = 6 ] &&
    [ "$(psql_value -c "SELECT round(value) FROM ratelimit_value('yearly', 'after', '$YEARLY_CFG')")" = 4 ] ||
    fail "e: the valid records around the damaged ones did not apply"
  [ "$(log_since "$CLUSTER_DIR" "$offset" | grep -c 'is not one this version can apply, and was skipped')" = 1 ] ||
    fail "e: not one LOG line for the first record redo could not apply"
  log_since "$CLUSTER_DIR" "$offset" | grep -q "recovery skipped 0 memory limits for want of room, 5 WAL records it could not read" ||
    { fail "e: no summary of the 5 skipped records"; log_since "$CLUSTER_DIR" "$offset" | grep ratelimit >&2; }
  [ "$failed" = 1 ] || echo "ok - e: 5 damaged or foreign records skipped with one LOG line and a summary; the server started"
}

# f. Fewer keys than the WAL holds.
smaller_key_space() {
  # One implicit transaction that takes an xid: its commit flushes every
  # record before it, so the immediate stop cannot cut them (without a write
  # the WAL writer flushes them within wal_writer_delay, which a fast
  # machine's stop can beat).
  psql_value -c "SELECT count(*) FROM generate_series(1, 1000) g, ratelimit_limit('yearly', 'f' || g, '$YEARLY_CFG'); SELECT txid_current()" >/dev/null
  local offset live
  offset=$(log_size "$CLUSTER_DIR")
  stop_cluster_server_immediate
  sed -i 's/ratelimit.memory_max_keys=300000/ratelimit.memory_max_keys=400/' "$CLUSTER_DIR/server.opts"
  start_cluster_server || { fail "f: the server did not start with a smaller memory_max_keys"; return; }
  live=$(psql_value -c "SELECT count(*) FROM ratelimit_status WHERE storage = 'memory'")
  [ "$live" -le 400 ] && [ "$live" -gt 0 ] || fail "f: $live memory limits after recovery into 400 keys"
  log_since "$CLUSTER_DIR" "$offset" | grep -q "found no room and was skipped" || fail "f: no LOG line for the skipped memory limits"
  sed -i 's/ratelimit.memory_max_keys=400/ratelimit.memory_max_keys=300000/' "$CLUSTER_DIR/server.opts"
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w stop >/dev/null
  start_cluster_server
  [ "$failed" = 1 ] || echo "ok - f: recovery into fewer keys than the WAL holds keeps $live, says so and starts"
}

# g. The memory limits' WAL without the library.
recovery_without_library() {
  psql_value -c "SELECT ratelimit_limit('yearly', 'g', '$YEARLY_CFG', 5)" >/dev/null
  sleep 1.5  # older than the durability bound
  stop_cluster_server_immediate
  local opts offset
  opts=$(cat "$CLUSTER_DIR/server.opts")
  sed -i 's/-c shared_preload_libraries=ratelimit//' "$CLUSTER_DIR/server.opts"
  offset=$(log_size "$CLUSTER_DIR")
  if start_cluster_server 2>/dev/null; then fail "g: the server started over memory limits' WAL without the library"; fi
  [ "$(log_since "$CLUSTER_DIR" "$offset" | grep -c "resource manager with ID 200 not registered")" = 1 ] ||
    fail "g: the refused start did not name the resource manager once"
  cluster_server_running && fail "g: the refused server kept running"
  echo "$opts" >"$CLUSTER_DIR/server.opts"
  start_cluster_server
  [ "$(psql_value -c "SELECT round(value) FROM ratelimit_value('yearly', 'g', '$YEARLY_CFG')")" = 5 ] ||
    fail "g: with the library the recovery did not restore the memory limit"
  [ "$failed" = 1 ] || echo "ok - g: recovery without the library is refused once, naming the resource manager; with it, it recovers"
}

# i. A clean restart with durability: the shutdown's file is read back,
# kept as the base file until the worker has logged every entry, then
# removed; a crash right after a clean start keeps the memory limits too.
clean_restart_then_crash() {
  psql_value -c "SELECT ratelimit_limit('yearly', 'i', '$YEARLY_CFG', 3)" >/dev/null
  local offset _
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w stop >/dev/null
  [ -e "$CLUSTER_DIR/data/ratelimit_memory.state" ] || fail "i: a clean stop wrote no state file"
  offset=$(log_size "$CLUSTER_DIR")
  start_cluster_server
  stop_cluster_server_immediate  # at once: the worker may not have logged them yet
  start_cluster_server
  [ "$(psql_value -c "SELECT round(value) FROM ratelimit_value('yearly', 'i', '$YEARLY_CFG')")" = 7 ] ||
    fail "i: a clean restart and a crash right after it did not keep the memory limit"
  log_since "$CLUSTER_DIR" "$offset" | grep -qE "ratelimit: [1-9][0-9]* memory limits read back from the last shutdown" ||
    fail "i: the clean start did not read the state file back"
  for _ in $(seq 1 100); do [ -e "$CLUSTER_DIR/data/ratelimit_memory.base" ] || break; sleep 0.1; done
  [ ! -e "$CLUSTER_DIR/data/ratelimit_memory.base" ] && [ ! -e "$CLUSTER_DIR/data/ratelimit_memory.state" ] ||
    fail "i: a file is left in the data directory once the worker logged every entry"
  [ "$failed" = 1 ] || echo "ok - i: a clean restart keeps memory limits through the base file, and a crash right after it too"
}

# j. A grant in a transaction without an xid: no commit flushes its
# record (memory_wal.cpp inserts it out of the transaction's account); the
# durability worker does, within its 50 ms look. Polled for up to 10 s, so
# a slow machine does not fail it, on a cluster of its own with wal_level =
# minimal: there the background writer logs no standby snapshot (whose
# flush, every 15 s, would flush the record too), and nothing else flushes.
grant_flushed_without_commit() {
  local row ok no_xid inserted flushed _
  row=$(psql_value -F ' ' -c "SELECT (ratelimit_limit('yearly', 'j', '$YEARLY_CFG', 4)).ok, txid_current_if_assigned() IS NULL, pg_current_wal_insert_lsn()")
  read -r ok no_xid inserted <<<"$row"
  [ "$ok" = t ] && [ "$no_xid" = t ] || { fail "j: the grant was refused or took an xid: $row"; return; }
  for _ in $(seq 1 100); do
    flushed=$(psql_value -c "SELECT pg_current_wal_flush_lsn() >= '$inserted'::pg_lsn")
    [ "$flushed" = t ] && break
    sleep 0.1
  done
  [ "$flushed" = t ] || fail "j: the grant's record (before $inserted) was not flushed 10 s later"
  [ "$failed" = 1 ] || echo "ok - j: a grant no commit flushes is flushed by the worker"
}

# k. A WAL switch (and a record that ends a page) leaves the insert position
# past the next page's header, where no flush reaches: the worker's flush
# must not ask for it (XLogFlush raises, the worker exits and is restarted
# every second while nothing else moves the WAL). Its pid is the same 1.5 s
# after the switch, and the log has no such exit.
wal_switch_keeps_the_worker() {
  local worker_pid offset
  worker_pid=$(psql_value -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'ratelimit memory durability'")
  [ -n "$worker_pid" ] || { fail "k: no durability worker"; return; }
  offset=$(log_size "$CLUSTER_DIR")
  psql_value -c "CREATE TABLE switched ()" -c "SELECT pg_switch_wal()" >/dev/null
  sleep 1.5
  [ "$(psql_value -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'ratelimit memory durability'")" = "$worker_pid" ] ||
    fail "k: the durability worker did not survive a WAL switch: $(log_since "$CLUSTER_DIR" "$offset" | grep -m2 -E 'not satisfied|exited')"
  [ "$failed" = 1 ] || echo "ok - k: a WAL switch leaves the durability worker running"
}

# h. No worker.
no_worker_refuses_writes() {
  stop_cluster
  start_cluster "${PRELOAD[@]}" -c max_worker_processes=0 >/dev/null
  psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
  local out
  out=$(run_pg_client "$PG_BINDIR/psql" -X -At -v VERBOSITY=verbose \
    -c "SELECT ratelimit_limit('yearly', 'h', '$YEARLY_CFG')" 2>&1 || true)
  [[ $out == *"55000"*"memory rate limits are not durable yet"* ]] || fail "h: a write without the worker answered: $out"
  [ "$(psql_value -c "SELECT ok FROM ratelimit_check('yearly', 'h', '$YEARLY_CFG')")" = t ] ||
    fail "h: a read without the worker did not answer"
  [ "$failed" = 1 ] || echo "ok - h: without the worker a write fails 55000 naming it; a read answers"
}

trap 'end_load; stop_standby; stop_cluster' EXIT
# DURABILITY_CASES (default: all) runs some of the cases, in order.
CASES=${DURABILITY_CASES:-a b c d e f g h i j k}
wants() { [[ " $CASES " == *" $1 "* ]]; }
if wants a || wants b || wants c; then
  new_cluster
  wants a && checkpointed_keys_survive_a_crash
  wants b && postmaster_killed_under_load
  wants c && failover_continues_memory_limits
  stop_cluster
fi
if wants j || wants k; then
  new_cluster -c wal_level=minimal -c max_wal_senders=0
  wants j && grant_flushed_without_commit
  wants k && wal_switch_keeps_the_worker
  stop_cluster
fi
if wants d || wants e || wants f || wants g || wants i; then
  new_cluster
  wants d && crash_during_recovery
  wants e && damaged_records_are_skipped
  wants f && smaller_key_space
  wants g && recovery_without_library
  wants i && clean_restart_then_crash
  stop_cluster
fi
wants h && no_worker_refuses_writes
stop_cluster
[ "$failed" = 0 ] && echo "memory durability: all checks passed"
exit $failed
