#!/usr/bin/env bash
# What a memory grant's WAL costs a standby's replay (issue 38): N memory
# decisions on a primary, then the redo of exactly those decisions timed by
# the server itself. A crash recovery's redo is a standby's replay of the
# same records by the same startup process, and it logs how long it took:
#
#   LOG:  redo done at 0/...  system usage: CPU: user: U s, system: S s, elapsed: E s
#
#   bench/replay.sh
#   REPLAY_CLIENTS=8 REPLAY_DECISIONS=400000         (the defaults; pgbench -t N/clients)
#   REPLAY_DURABILITY="wal off"                      the memory_durability settings measured
#   REPLAY_SO=./ratelimit.so                         the library (default: the installed one)
#
# For each setting: a fresh preloaded cluster (the library pinned as
# bench/lib.sh pins it; shared_buffers = 256MB, max_wal_size = 4GB and
# checkpoint_timeout = 1h, so no checkpoint falls inside the run), the
# extension created, a CHECKPOINT with no memory limit alive yet (so the
# durability worker has nothing to log again), pgbench -n -M prepared -j 2
# of a grant of a random one of 100,000 keys per transaction, as w06a but of
# a bucket that refills one token an hour (w06a's refills in a microsecond,
# so its entries are full again at the redo, which keeps none of them: here
# every entry is live and redo keeps it) for REPLAY_DECISIONS transactions, a transaction that takes an xid (its
# commit flushes every record before it), pg_stat_wal and pg_waldump
# --stats over the run's WAL, an immediate stop (a crash) and a start: its
# crash recovery redoes everything from the CHECKPOINT on. Prints the
# primary's decisions per second, the WAL per decision, the redo's elapsed
# time, and its decisions per second and microseconds per decision; checks
# that the recovered server holds as many memory limits as before the stop
# (wal) or none (off). Writes bench/replay-latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

REPLAY_CLIENTS=${REPLAY_CLIENTS:-8}
REPLAY_DECISIONS=${REPLAY_DECISIONS:-400000}
REPLAY_DURABILITY=${REPLAY_DURABILITY:-"wal off"}
REPLAY_SO=${REPLAY_SO:-"$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"}
[ -f "$REPLAY_SO" ] || { echo "REPLAY_SO: no such file: $REPLAY_SO" >&2; exit 2; }
[[ $REPLAY_CLIENTS =~ ^[1-9][0-9]*$ ]] || { echo "REPLAY_CLIENTS: not a positive number: $REPLAY_CLIENTS" >&2; exit 2; }
[[ $REPLAY_DECISIONS =~ ^[1-9][0-9]*$ ]] ||
  { echo "REPLAY_DECISIONS: not a positive number: $REPLAY_DECISIONS" >&2; exit 2; }
for d in $REPLAY_DURABILITY; do
  [[ $d =~ ^(off|wal)$ ]] || { echo "REPLAY_DURABILITY: off or wal, not: $d" >&2; exit 2; }
done
PER_CLIENT=$((REPLAY_DECISIONS / REPLAY_CLIENTS))
DECISIONS=$((PER_CLIENT * REPLAY_CLIENTS))

PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
work_dir_removed_on_exit replay
copy_stable_library "$REPLAY_SO" "$WORK_DIR/ratelimit.so"
so_md5=$(md5sum < "$WORK_DIR/ratelimit.so" | cut -c1-12)
OUT=bench/replay-latest.md
cat >"$WORK_DIR/grant.sql" <<'SQL'
\set k random(1, 100000)
SELECT ratelimit_limit('m', 'k' || :k, '{"kind": "token bucket", "rate": 1, "period": 3600000, "capacity": 1000, "storage": "memory"}');
SQL
chmod 644 "$WORK_DIR/grant.sql"
ROWS=()

# The number of memory limits the server holds (ratelimit_status's rows of 'm').
memory_limits() {
  "${PSQL[@]}" -At -c "SELECT count(*) FROM ratelimit_status WHERE name = 'm'"
}

# One measurement with ratelimit.memory_durability = $1.
measure() {
  local d=$1 pinned start_lsn end_lsn b0 r0 b1 r1 t0 t1 tps before after redo user sys elapsed waldump rl_records
  start_cluster -c shared_buffers=256MB -c max_wal_size=4GB -c checkpoint_timeout=1h >/dev/null
  pinned=$CLUSTER_DIR/lib/ratelimit.so
  mkdir -p "$(dirname "$pinned")"
  cp "$WORK_DIR/ratelimit.so" "$pinned"
  chmod 755 "$(dirname "$pinned")" "$pinned"
  create_pinned_extension postgres "$pinned"
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  echo "$(cat "$CLUSTER_DIR/server.opts") -c shared_preload_libraries=$pinned \
-c dynamic_library_path=$(dirname "$pinned"):$("$PG_BINDIR/pg_config" --pkglibdir) \
-c ratelimit.memory_max_keys=200000 -c ratelimit.memory_durability=$d" >"$CLUSTER_DIR/server.opts"
  start_cluster_server
  [ "$("${PSQL[@]}" -At -c "SHOW ratelimit.memory_durability")" = "$d" ] ||
    { echo "FAIL: ratelimit.memory_durability is not $d" >&2; exit 1; }
  "${PSQL[@]}" -c "CHECKPOINT"
  read -r start_lsn b0 r0 < <("${PSQL[@]}" -At -F ' ' \
    -c "SELECT pg_current_wal_insert_lsn(), wal_bytes, wal_records FROM pg_stat_wal")
  t0=$(date +%s.%N)
  "$PG_BINDIR/pgbench" -n -M prepared -c "$REPLAY_CLIENTS" -j 2 -t "$PER_CLIENT" \
    -f "$WORK_DIR/grant.sql" postgres >"$WORK_DIR/pgbench.log" 2>&1 || true
  t1=$(date +%s.%N)
  tps=$(awk '/^tps/ {printf "%d", $3}' "$WORK_DIR/pgbench.log")
  [ "${tps:-0}" -gt 0 ] || { echo "FAIL: pgbench gave no tps: $(head -5 "$WORK_DIR/pgbench.log")" >&2; exit 1; }
  # A commit that takes an xid flushes the WAL up to it: every decision's record.
  "${PSQL[@]}" -At -c "SELECT txid_current()" >/dev/null
  read -r end_lsn b1 r1 < <("${PSQL[@]}" -At -F ' ' \
    -c "SELECT pg_current_wal_flush_lsn(), wal_bytes, wal_records FROM pg_stat_wal")
  before=$(memory_limits)
  waldump=$("$PG_BINDIR/pg_waldump" -p "$CLUSTER_DIR/data/pg_wal" -s "$start_lsn" -e "$end_lsn" --stats 2>/dev/null || true)
  rl_records=$(awk '$1 ~ /^(ratelimit|custom)/ {print $1 ": " $2 " records"}' <<<"$waldump" | paste -sd ';' -)
  local offset
  offset=$(stat -c %s "$CLUSTER_DIR/server.log")
  stop_cluster_server_immediate
  start_cluster_server
  redo=$(tail -c +"$((offset + 1))" "$CLUSTER_DIR/server.log" | grep "redo done at" | tail -1 || true)
  after=$(memory_limits)
  if [ -n "$redo" ]; then
    user=$(sed -nE 's/.*CPU: user: ([0-9.]+) s.*/\1/p' <<<"$redo")
    sys=$(sed -nE 's/.*system: ([0-9.]+) s, elapsed.*/\1/p' <<<"$redo")
    elapsed=$(sed -nE 's/.*elapsed: ([0-9.]+) s.*/\1/p' <<<"$redo")
  else
    user=-; sys=-; elapsed=-   # nothing to redo: the server says "redo is not required"
  fi
  if [ "$d" = wal ] && [ "$after" != "$before" ]; then
    echo "FAIL: $before memory limits before the crash, $after after its recovery" >&2; exit 1
  fi
  if [ "$d" = off ] && [ "$after" != 0 ]; then
    echo "FAIL: durability off, yet $after memory limits after the crash" >&2; exit 1
  fi
  ROWS+=("$(awk -v d="$d" -v n="$DECISIONS" -v tps="$tps" -v secs="$(echo "$t1 - $t0" | bc)" \
    -v bytes="$((b1 - b0))" -v recs="$((r1 - r0))" -v user="$user" -v sys="$sys" -v el="$elapsed" \
    -v before="$before" -v after="$after" -v rl="${rl_records:-none}" 'BEGIN {
      # Without records of the extension (off), the redo is of other WAL: no rate per decision.
      none = (el == "-" || el == 0 || rl == "none")
      rate = none ? "-" : sprintf("%.0f", n / el)
      us = none ? "-" : sprintf("%.2f", el * 1e6 / n)
      ratio = (rate == "-") ? "-" : sprintf("%.1f×", rate / tps)
      printf "| %s | %d | %d | %.1f | %.2f | %s | %s / %s / %s | %s | %s | %s | %s → %s |",
        d, n, tps, bytes / n, recs / n, rl, el, user, sys, rate, us, ratio, before, after
    }')")
  echo "   durability $d: ${ROWS[-1]}"
  stop_cluster
}

started=$(date +%s)
for d in $REPLAY_DURABILITY; do measure "$d"; done
{
  echo "# What a memory grant's WAL costs a replay (bench/replay.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') ($(( ($(date +%s) - started) / 60 )) min); $("$PG_BINDIR/postgres" --version);"
  echo "$(nproc) CPUs; library $REPLAY_SO (md5 $so_md5…); pgbench -n -M prepared -c $REPLAY_CLIENTS -j 2 of a memory grant of a random one of 100,000 keys (a bucket that refills a token an hour),"
  echo "$DECISIONS decisions on a fresh cluster after a CHECKPOINT, then an immediate stop and a start:"
  echo "its crash recovery redoes them (as a standby's startup process replays them). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| durability | decisions | primary tps | WAL bytes per decision | WAL records per decision | the extension's records (pg_waldump --stats) | redo elapsed / user / system (s) | redo decisions per second | redo µs per decision | redo rate ÷ primary tps | memory limits before → after the crash |"
  echo "|---|---:|---:|---:|---:|---|---|---:|---:|---:|---|"
  printf '%s\n' "${ROWS[@]}"
} >"$OUT"
cat "$OUT"
