# The state file's faults, cases d, f, g and h of
# scripts/memory-restart-test.sh (its header says what each proves):
# damaged and crafted files, a save that cannot create its file, a load that
# cannot rename it, a save whose fsync after the rename fails.
# Sourced by that script (after scripts/lib.sh); defines functions only,
# which use its helpers and variables (psql_value, value_of, stop_fast,
# DATA, STATE_FILE, STATE_TOOL, MAJOR, ...).
# shellcheck shell=bash

# d. The limit the damaged-file cases read: 'damage', key 'k' and the NULL key.
damage_limit_full() {
  local values
  values="$(value_of damage "'k'") $(value_of damage NULL)"
  [ "$values" = "10.00 10.00" ] || { fail "$1: the memory limit is $values, not full (10.00 10.00)"; return 1; }
  [ "$(memory_entries)" = 0 ] || { fail "$1: ratelimit_status lists $(memory_entries) memory entries, not 0"; return 1; }
}

# Puts the host file $1 in the data directory as the state file, owned by
# the server's user.
install_state_file() {
  cp "$1" "$CLUSTER_DIR/install.state"
  chmod 644 "$CLUSTER_DIR/install.state"
  as_cluster_user cp "$(server_path "$CLUSTER_DIR/install.state")" "$DATA/$STATE_FILE"
  as_cluster_user chmod 600 "$DATA/$STATE_FILE"
}

# Starts the server on the state file of case $1 ($2: the file, a host
# path) and checks that the file is dropped: the server starts and stays
# up, logs one line naming the file, reads every memory limit full and
# leaves no file behind. The server is stopped cleanly again at the end.
dropped_file_case() {
  local case=$1 offset lines rc=0
  install_state_file "$2"
  offset=$(server_log_size)
  if ! start_cluster_server; then
    fail "d: $case: the server did not start: $(log_since "$offset" | tail -5)"
    ensure_running
    stop_fast
    return 1
  fi
  sleep 3
  psql_value -c "SELECT 1" >/dev/null 2>&1 || { fail "d: $case: the server accepts no connection 3 seconds after its start"; rc=1; }
  log_free_of_crashes "d: $case" "$offset" || rc=1
  ensure_running
  lines=$(log_since "$offset" | grep -cE "LOG: +ratelimit: .*$STATE_FILE" || true)
  if [ "$lines" != 1 ]; then
    fail "d: $case: the log has $lines 'ratelimit: ' LOG lines naming $STATE_FILE, not 1:"
    log_since "$offset" | grep -E "ratelimit" >&2 || true
    rc=1
  fi
  damage_limit_full "d: $case" || rc=1
  no_state_file "d: $case (after the start)" || rc=1
  stop_fast
  [ $rc -eq 0 ] && echo "ok - d: $case: dropped with one LOG line; the server stays up, every memory limit full, no file left"
  return $rc
}

# d. Damaged state files.
damaged_files() {
  local db now real=$CLUSTER_DIR/real.state crafted=$CLUSTER_DIR/crafted.state dump offset case rc=0 values
  define_yearly damage
  psql_value -c "SELECT ratelimit_limit('damage', 'k', NULL, 4), ratelimit_limit('damage', NULL, NULL, 7)" >/dev/null
  db=$(psql_value -c "SELECT oid FROM pg_database WHERE datname = current_database()")
  stop_fast
  # The file a clean stop wrote, in the format the crafted files follow.
  if [ ! -f "$CLUSTER_DIR/data/$STATE_FILE" ]; then
    fail "d: a clean stop wrote no $STATE_FILE"
    rc=1
    : >"$real"
  else
    cp "$CLUSTER_DIR/data/$STATE_FILE" "$real"
    if ! dump=$(python3 "$STATE_TOOL" dump "$real" "$MAJOR"); then
      fail "d: the $STATE_FILE a clean stop wrote is not format 4 of PostgreSQL $MAJOR: $dump"
      rc=1
    elif ! grep -qx "$db damage k 6.00" <<<"$dump" || ! grep -qx "$db damage <NULL> 3.00" <<<"$dump"; then
      fail "d: the $STATE_FILE a clean stop wrote lacks 'damage' at 6 and 3: $(grep damage <<<"$dump")"
      rc=1
    else
      echo "ok - d: a clean stop writes $STATE_FILE in format 4 ($(wc -l <<<"$dump") records, CRC-32C right)"
    fi
  fi

  # A crafted file of two valid records is loaded, of format 4 and of format 3.
  for case in good good3; do
    now=$(($(date +%s%N) / 1000))
    python3 "$STATE_TOOL" craft "$case" "$crafted" "$MAJOR" "$db" "$now" "$CLUSTER_DIR/data/global/pg_control"
    install_state_file "$crafted"
    offset=$(server_log_size)
    start_cluster_server
    values="$(value_of damage "'k'") $(value_of damage NULL)"
    if [ "$values" != "6.00 3.00" ]; then
      fail "d: $case: a crafted file of valid records was not loaded: 'damage' is $values, not 6.00 3.00"
      log_since "$offset" | grep ratelimit >&2 || true
      rc=1
    elif ! log_since "$offset" | grep -q "ratelimit: 2 memory limits read back from the last shutdown"; then
      fail "d: $case: the crafted file was loaded without the log line 'ratelimit: 2 memory limits read back from the last shutdown'"
      rc=1
    elif log_since "$offset" | grep -E "LOG: +ratelimit: .*$STATE_FILE" >&2; then
      fail "d: $case: a crafted file of valid records was loaded with a LOG line naming $STATE_FILE"
      rc=1
    else
      echo "ok - d: $case: a crafted file of valid records is loaded (6.00 3.00)"
    fi
    no_state_file "d: $case crafted file (after the start)" || rc=1
    stop_fast
    # The tables kept a format-4 file's seeds: the clean stop wrote them again.
    if [ "$case" = good ] && [ "$(python3 "$STATE_TOOL" seeds "$CLUSTER_DIR/data/$STATE_FILE")" != "$(python3 "$STATE_TOOL" seeds "$crafted")" ]; then
      fail "d: good: the saved state's hash seeds are not those of the file it loaded"
      rc=1
    elif [ "$case" = good ]; then
      echo "ok - d: good: the clean stop saved the hash seeds of the file it loaded"
    fi
  done

  for case in truncated flipped format major stale foreign huge-lengths nan empty random bad-crc; do
    python3 "$STATE_TOOL" craft "$case" "$crafted" "$MAJOR" "$db" "$now" "$CLUSTER_DIR/data/global/pg_control"
    offset=$(server_log_size)
    dropped_file_case "$case" "$crafted" || rc=1
    # Its two records made their entries before the checksum was checked:
    # dropped_file_case found none left; the line says the file was dropped.
    if [ "$case" = bad-crc ] && ! log_since "$offset" | grep -q "ratelimit: \"$STATE_FILE\" is damaged and was dropped"; then
      fail "d: bad-crc: no LOG line 'ratelimit: \"$STATE_FILE\" is damaged and was dropped'"
      rc=1
    fi
    # Nor did the tables keep the seeds of a file found damaged after its
    # entries were made: the clean stop wrote seeds drawn at the start.
    if [ "$case" = bad-crc ] || [ "$case" = flipped ]; then
      if [ "$(python3 "$STATE_TOOL" seeds "$CLUSTER_DIR/data/$STATE_FILE")" = "$(python3 "$STATE_TOOL" seeds "$crafted")" ]; then
        fail "d: $case: the dropped file's hash seeds stayed in use (the clean stop saved them again)"
        rc=1
      else
        echo "ok - d: $case: the dropped file's hash seeds were not kept"
      fi
    fi
  done
  start_cluster_server
  return $rc
}

# f. A save that cannot write its file: with a directory where the
# temporary file goes, a clean stop logs why it could not write (and that
# memory limits start afresh) and leaves no state file; the next start reads
# every memory limit full, and once the way is clear a clean stop saves again.
save_fails() {
  local offset rc=0 value
  define_yearly unsaved
  [ "$(psql_value -c "SELECT (ratelimit_limit('unsaved', 'k', NULL, 4)).ok")" = t ] || { fail "f: taking 4 of 'unsaved' failed"; return 1; }
  as_cluster_user mkdir "$DATA/$STATE_FILE.tmp"
  offset=$(server_log_size)
  stop_fast
  if ! log_since "$offset" | grep -q "ratelimit: could not write \"$STATE_FILE\": Is a directory; memory limits start afresh"; then
    fail "f: a save that could not create its file did not log 'ratelimit: could not write \"$STATE_FILE\": Is a directory; memory limits start afresh'"
    log_since "$offset" | grep ratelimit >&2 || true
    rc=1
  fi
  no_state_file "f: after a save that failed" || rc=1
  # (A shutdown's log has the replication launcher's exit code 1: the check
  # of crashes reads from the start on.)
  offset=$(server_log_size)
  start_cluster_server
  value=$(value_of unsaved "'k'")
  [ "$value" = 10.00 ] || { fail "f: after a save that failed, 'unsaved' is $value, not 10.00 (full)"; rc=1; }
  log_free_of_crashes "f: the start after a save that failed" "$offset" || rc=1
  [ $rc -eq 0 ] && echo "ok - f: a save that cannot create its file logs why, writes nothing, and the next start is full"

  local rc2=0
  as_cluster_user rmdir "$DATA/$STATE_FILE.tmp"
  [ "$(psql_value -c "SELECT (ratelimit_limit('unsaved', 'k', NULL, 4)).ok")" = t ] || { fail "f: taking 4 of 'unsaved' again failed"; rc2=1; }
  stop_fast
  start_cluster_server
  value=$(value_of unsaved "'k'")
  [ "$value" = 6.00 ] || { fail "f: once the way was clear, a clean restart kept 'unsaved' at $value, not 6.00"; rc2=1; }
  [ $rc2 -eq 0 ] && echo "ok - f: once the way is clear, a clean stop saves again (6.00)"
  [ $rc -eq 0 ] && [ $rc2 -eq 0 ]
}

# g. A start whose load cannot rename the file out of the way: a directory
# where the file is renamed to (an operator's; the server never removes
# it). The start logs the rename's failure (not a read's), begins every
# memory limit afresh, answers calls and leaves the file as it was; its
# clean stop writes this run's limits over it (the old file, written before
# this run's shutdown checkpoint, could not be read after it anyway), and
# once the way is clear the next start reads this run's limits back.
load_blocked() {
  local offset rc=0 line kept=$CLUSTER_DIR/kept.state
  define_yearly blocked
  [ "$(psql_value -c "SELECT (ratelimit_limit('blocked', 'old', NULL, 4)).ok")" = t ] || { fail "g: taking 4 of 'blocked' failed"; return 1; }
  as_cluster_user mkdir "$DATA/$STATE_FILE.loading"
  offset=$(server_log_size)
  stop_fast
  if ! log_since "$offset" | grep -qE "ratelimit: [1-9][0-9]* memory limits written for the next start"; then
    fail "g: the clean stop before did not log 'ratelimit: N memory limits written for the next start' (N > 0)"
    log_since "$offset" | grep ratelimit >&2 || true
    return 1
  fi
  cp "$CLUSTER_DIR/data/$STATE_FILE" "$kept"

  offset=$(server_log_size)
  start_cluster_server
  line="ratelimit: could not rename \"$STATE_FILE\" to \"$STATE_FILE.loading\": Is a directory; memory limits start afresh"
  if [ "$(log_since "$offset" | grep -cF "$line")" != 1 ]; then
    fail "g: a start with a directory named $STATE_FILE.loading did not log once '$line'"
    log_since "$offset" | grep ratelimit >&2 || true
    rc=1
  fi
  if log_since "$offset" | grep -E "could not read|memory limits read back" >&2; then
    fail "g: a start whose load could not rename the file logged a read"
    rc=1
  fi
  [ "$(memory_entries)" = 0 ] || { fail "g: the start lists $(memory_entries) memory entries, not 0 (afresh)"; rc=1; }
  [ "$(value_of blocked "'old'")" = 10.00 ] || { fail "g: 'blocked' 'old' is $(value_of blocked "'old'"), not 10.00 (afresh)"; rc=1; }
  cmp -s "$kept" "$CLUSTER_DIR/data/$STATE_FILE" || { fail "g: $STATE_FILE is not kept as it was"; rc=1; }
  [ -d "$CLUSTER_DIR/data/$STATE_FILE.loading" ] || { fail "g: the directory $STATE_FILE.loading was removed"; rc=1; }
  log_free_of_crashes "g: the start with the directory in the way" "$offset" || rc=1
  [ "$(psql_value -c "SELECT (ratelimit_limit('blocked', 'new', NULL, 3)).ok")" = t ] || { fail "g: taking 3 of 'blocked' 'new' failed"; rc=1; }
  [ $rc -eq 0 ] && echo "ok - g: a load that cannot rename the file logs that rename, starts afresh, answers calls and keeps the file"

  local rc2=0
  offset=$(server_log_size)
  stop_fast
  line="ratelimit: 1 memory limits written for the next start"
  log_since "$offset" | grep -qF "$line" || { fail "g: the clean stop of the run afresh did not log '$line'"; rc2=1; }
  as_cluster_user rmdir "$DATA/$STATE_FILE.loading"
  offset=$(server_log_size)
  start_cluster_server
  line="ratelimit: 1 memory limits read back from the last shutdown"
  log_since "$offset" | grep -qF "$line" || { fail "g: once the way was clear, the start did not log '$line'"; rc2=1; }
  [ "$(value_of blocked "'new'") $(value_of blocked "'old'")" = "7.00 10.00" ] ||
    { fail "g: once the way was clear, 'blocked' 'new' and 'old' are $(value_of blocked "'new'") $(value_of blocked "'old'"), not 7.00 10.00"; rc2=1; }
  no_state_file "g: after the load once the way was clear" || rc2=1
  [ $rc2 -eq 0 ] && echo "ok - g: its clean stop writes the run's limits over the old file (1), read back once the way is clear"
  [ $rc -eq 0 ] && [ $rc2 -eq 0 ]
}

# Builds test/fault/fsync_fault.c where the server runs, with its
# PostgreSQL's compiler and flags, warnings as errors; prints the shared
# library's path as the server sees it.
build_fsync_fault() {
  local cc cflags out
  cc=$(in_server_root "$PG_BINDIR/pg_config" --cc)
  cflags="$(in_server_root "$PG_BINDIR/pg_config" --cflags) $(in_server_root "$PG_BINDIR/pg_config" --cflags_sl)"
  out=$(server_path "$CLUSTER_DIR")/fsync_fault.so
  # shellcheck disable=SC2086  # the compiler and its flags are words
  in_server_root $cc $cflags -Wextra -Werror -shared -o "$out" "$(server_source_dir)/test/fault/fsync_fault.c" -ldl >&2 || return 1
  echo "$out"
}

# h. A clean stop whose rename is done but whose fsync of the data
# directory after it fails (the shim, in this run's environment only): the
# file is in place, so the stop logs that the limits were written but not
# made durable (what failed, and the errno), not that they start afresh;
# the next start, without the shim, reads them back.
save_not_durable() {
  local offset rc=0 shim entries line
  shim=$(build_fsync_fault) || { fail "h: test/fault/fsync_fault.c did not build"; return 1; }
  define_yearly undurable
  stop_fast
  as_cluster_user env LD_PRELOAD="$shim" RATELIMIT_FAULT_FSYNC_DIR_AFTER="$STATE_FILE" \
    "$PG_BINDIR/pg_ctl" -D "$DATA" -l "$(server_path "$CLUSTER_DIR")/server.log" -w start \
    -o "$(cat "$CLUSTER_DIR/server.opts")" >/dev/null
  [ "$(psql_value -c "SELECT (ratelimit_limit('undurable', 'k', NULL, 4)).ok")" = t ] || { fail "h: taking 4 of 'undurable' failed"; return 1; }
  offset=$(server_log_size)
  stop_fast
  line="memory limits written to \"$STATE_FILE\" but not made durable: could not fsync the data directory: Input/output error"
  entries=$(log_since "$offset" | grep -F "$line" | sed -nE 's/.*ratelimit: ([0-9]+) memory limits written .*/\1/p' || true)
  if [ -z "$entries" ] || [ "$entries" -lt 1 ]; then
    fail "h: a clean stop whose fsync of the data directory failed did not log 'ratelimit: N $line' (N > 0)"
    log_since "$offset" | grep -E "ratelimit:|fsync" >&2 || true
    return 1
  fi
  if log_since "$offset" | grep -E "could not write|start afresh|written for the next start" >&2; then
    fail "h: a save whose file is in place logged that it was not written, or that it was durable"
    rc=1
  fi
  log_since "$offset" | grep -E "PANIC|terminated by signal" >&2 && { fail "h: the shutdown crashed"; rc=1; }
  [ -f "$CLUSTER_DIR/data/$STATE_FILE" ] || { fail "h: $STATE_FILE is not in place"; rc=1; }
  offset=$(server_log_size)
  start_cluster_server
  line="ratelimit: $entries memory limits read back from the last shutdown"
  log_since "$offset" | grep -qF "$line" || { fail "h: the next start did not log '$line'"; rc=1; }
  [ "$(value_of undurable "'k'")" = 6.00 ] || { fail "h: the next start has 'undurable' at $(value_of undurable "'k'"), not 6.00"; rc=1; }
  [ $rc -eq 0 ] && echo "ok - h: a save whose fsync after the rename fails logs 'written but not made durable' ($entries), and the next start reads them back"
  return $rc
}
