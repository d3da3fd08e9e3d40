#!/usr/bin/env bash
# Tests ratelimit_stats' per-backend slots (src/pg/shmem/stats_slots.cpp;
# docs/internals.md, "Counting ratelimit_stats per backend") on a throwaway
# cluster of its own with shared_preload_libraries = 'ratelimit': sessions
# kept open (psql reading a fifo) count, stay idle, exit or are terminated,
# while others read the view. Checks:
#   1. 8 sessions counting one name at once: the total is the calls made,
#      while they are idle (their counts still in their slots), while a
#      reader reads during the counting (never decreasing), and after 4 are
#      terminated and 4 quit (their slots folded into the shared entries);
#   2. a session's counts are visible to another session right after its
#      last call, while it stays idle;
#   3. a plain role in another database sees none of those names (and, in
#      the counting database, sees them);
#   4. a reset empties the slots: an idle session's earlier counts are gone,
#      its later ones are counted exactly, and its exit folds only those;
#   5. a reset racing 4 counting sessions: never more counted than made,
#      and exact counting afterwards;
#   6. more names than a slot holds (40 against 16) from 2 sessions: every
#      name exact, idle and after exit;
#   7. one reset while 4 sessions count, none after it: every call made
#      once the reset returned is counted, idle and after exit.
# Needs the extension installed (make install). With RATELIMIT_CHROOT,
# PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's enter_major), the
# cluster is another major's, in its root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR).
CLUSTER_DIR=""
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}
ok() { echo "ok - $*"; }

WORK=$(mktemp -d)
declare -A SESSION_FD SESSION_PID
cleanup() {
  local i
  for i in "${!SESSION_FD[@]}"; do
    eval "exec ${SESSION_FD[$i]}>&-" 2>/dev/null || true
  done
  for i in "${!SESSION_PID[@]}"; do wait "${SESSION_PID[$i]}" 2>/dev/null || true; done
  stop_cluster
  rm -rf "$WORK"
}
trap cleanup EXIT
start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.stats_max_names=20000 -c max_connections=40

psql_() { run_pg_client "$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q() { psql_ -c "$1"; }

CFG='{"kind": "token bucket", "rate": 1000000000, "period": "1 second", "storage": "memory"}'
q "CREATE EXTENSION ratelimit" >/dev/null
q "CREATE ROLE stats_plain LOGIN" >/dev/null
q "CREATE DATABASE stats_other" >/dev/null
psql_ -d stats_other -c "CREATE EXTENSION ratelimit" >/dev/null

# A session kept open: psql reading the fifo $WORK/in.$1, writing $WORK/out.$1.
open_session() {
  local fd
  mkfifo "$WORK/in.$1"
  # Without the other sessions' fifos (else closing one would not end its psql).
  (
    for fd in "${SESSION_FD[@]}"; do eval "exec $fd>&-"; done
    run_pg_client "$PG_BINDIR/psql" -X -q -At <"$WORK/in.$1" >"$WORK/out.$1" 2>&1
  ) &
  SESSION_PID[$1]=$!
  exec {fd}>"$WORK/in.$1"
  SESSION_FD[$1]=$fd
  send "$1" "SELECT 'pid:' || pg_backend_pid();"
}
send() { echo "$2" >&"${SESSION_FD[$1]}"; }
# Waits (at most 5 minutes) until session $1 printed the line $2.
wait_line() {
  local tries=0
  until grep -qx -- "$2" "$WORK/out.$1"; do
    tries=$((tries + 1))
    if [ $tries -gt 3000 ]; then
      fail "session $1 never printed $2: $(tail -3 "$WORK/out.$1")"
      return 1
    fi
    sleep 0.1
  done
}
# Sends session $1 the statement $2 and waits until it ran.
run_in() {
  send "$1" "$2"
  send "$1" "SELECT 'done:$3';"
  wait_line "$1" "done:$3"
}
backend_pid() {
  wait_line "$1" 'pid:[0-9]*'
  sed -n 's/^pid://p' "$WORK/out.$1" | head -1
}
close_session() {
  send "$1" '\q'
  eval "exec ${SESSION_FD[$1]}>&-"
  wait "${SESSION_PID[$1]}" || true
  unset "SESSION_FD[$1]" "SESSION_PID[$1]"
}
# Terminates session $1's backend and waits until it is gone (its exit fold done).
terminate_session() {
  local pid
  pid=$(backend_pid "$1")
  q "SELECT pg_terminate_backend($pid, 60000)" >/dev/null
  eval "exec ${SESSION_FD[$1]}>&-"
  wait "${SESSION_PID[$1]}" || true
  unset "SESSION_FD[$1]" "SESSION_PID[$1]"
}
# Calls made for $1 as ratelimit_stats counts them (granted + refused; 0 without a row).
counted() {
  psql_ ${2:+-U "$2"} ${3:+-d "$3"} \
    -c "SELECT coalesce(sum(granted + refused), 0) FROM ratelimit_stats WHERE name = '$1'"
}
# $1 calls of name $2 (keys k0..k9).
calls() {
  echo "SELECT count(*) FROM generate_series(1, $1) g, LATERAL ratelimit_limit('$2', 'k' || (g % 10), '$CFG') r;"
}
expect() {
  if [ "$2" = "$3" ]; then ok "$1: $2"; else fail "$1: $2, expected $3"; fi
}

# 1. 8 sessions at once, a reader meanwhile.
for i in 1 2 3 4 5 6 7 8; do open_session "s$i"; done
for i in 1 2 3 4 5 6 7 8; do
  send "s$i" "$(calls 3000 hot)"
  send "s$i" "SELECT 'done:hot';"
done
last=0
monotonic=yes
while ! grep -qx done:hot "$WORK/out.s1" || ! grep -qx done:hot "$WORK/out.s8"; do
  now=$(counted hot)
  [ "$now" -lt "$last" ] && monotonic="no: $now after $last"
  last=$now
done
for i in 1 2 3 4 5 6 7 8; do wait_line "s$i" done:hot; done
expect "a reader during the counting never saw the count go down" "$monotonic" yes
expect "8 sessions x 3000 calls, the sessions idle" "$(counted hot)" 24000
# 2. and 3. while they are idle.
expect "a plain role in another database sees none of them" \
  "$(psql_ -U stats_plain -d stats_other -c "SELECT count(*) FROM ratelimit_stats WHERE name IS NOT NULL")" 0
expect "a plain role in the counting database sees them" "$(counted hot stats_plain)" 24000
for i in 1 2 3 4; do terminate_session "s$i"; done
expect "4 sessions terminated" "$(counted hot)" 24000
for i in 5 6 7 8; do close_session "s$i"; done
expect "4 more sessions quit" "$(counted hot)" 24000
open_session idle
run_in idle "$(calls 777 idlename)" idle1
expect "an idle session's counts, right after its last call" "$(counted idlename)" 777
send idle "$(calls 1 idlename)"
run_in idle "SELECT 1;" idle2
expect "one more call, visible at once" "$(counted idlename)" 778

# 4. A reset empties the slots.
q "SELECT ratelimit_stats_reset()" >/dev/null
expect "after the reset: the idle session's counts" "$(counted idlename)" 0
expect "after the reset: the 8 sessions' counts" "$(counted hot)" 0
run_in idle "$(calls 7 idlename)" idle3
expect "the idle session counts again after the reset" "$(counted idlename)" 7
terminate_session idle
expect "its exit folds only what it counted after the reset" "$(counted idlename)" 7

# 5. A reset racing 4 counting sessions.
for i in 1 2 3 4; do open_session "r$i"; done
for i in 1 2 3 4; do
  send "r$i" "$(calls 50000 race)"
  send "r$i" "SELECT 'done:race';"
done
resets=0
all_done() {
  local i
  for i in 1 2 3 4; do grep -qx done:race "$WORK/out.r$i" || return 1; done
}
until all_done; do
  q "SELECT ratelimit_stats_reset()" >/dev/null
  resets=$((resets + 1))
done
during=$(counted race)
if [ "$during" -le 200000 ]; then
  ok "$resets resets racing the counting: $during counted of 200000, never more"
else
  fail "$resets resets racing the counting: $during counted of 200000"
fi
q "SELECT ratelimit_stats_reset()" >/dev/null
for i in 1 2 3 4; do run_in "r$i" "$(calls 250 race)" race2; done
expect "4 sessions after the races, idle" "$(counted race)" 1000
for i in 1 2 3 4; do close_session "r$i"; done
expect "4 sessions after the races, gone" "$(counted race)" 1000

# 6. More names than a slot holds (16): 40 names from 2 sessions.
many="SELECT count(*) FROM generate_series(1, 2000) g,
  LATERAL ratelimit_limit('many' || (g % 40), 'k', '$CFG') r;"
check_many() {
  local rows
  rows=$(psql_ -c "SELECT count(*) FILTER (WHERE granted + refused = 100), count(*)
                   FROM ratelimit_stats WHERE name LIKE 'many%'")
  expect "40 names of 2 sessions x 50 calls each, $1 (names at 100, names)" "$rows" "40|40"
}
open_session m1
open_session m2
send m1 "$many"
run_in m2 "$many" many
wait_line m1 "2000"
check_many "the sessions idle"
terminate_session m1
close_session m2
check_many "the sessions gone"

# 7. One reset while 4 sessions count 16 names each, and no reset after it:
#    every call made once the reset returned is counted, while the sessions
#    are idle and after they quit. (A session that, while the reset was
#    deleting the entries, found a name's entry of the old period not yet
#    deleted must not give that entry's id a place in its slot: its later
#    counts would be added to no entry.) 9000 other names make the reset's
#    deletion long enough for the sessions to count meanwhile; the sessions
#    count until a row in spin_stop tells them to stop, after the reset
#    returned, however fast the machine.
q "SELECT ratelimit_stats_reset()" >/dev/null
q "SELECT count(*) FROM generate_series(1, 9000) g, LATERAL ratelimit_limit('fill' || g, 'k', '$CFG') r" >/dev/null
q "CREATE TABLE spin_stop ()" >/dev/null
spin() {
  echo "SELECT count(*) FROM generate_series(1, $1) g, LATERAL ratelimit_limit('spin' || (g % 16), 'k', '$CFG') r;"
}
# Counts 1,000 calls at a time (each statement sees spin_stop anew) until stopped.
spin_until_stopped="DO \$\$ BEGIN WHILE NOT EXISTS (SELECT FROM spin_stop) LOOP
  PERFORM count(*) FROM generate_series(1, 1000) g, LATERAL ratelimit_limit('spin' || (g % 16), 'k', '$CFG') r;
  END LOOP; END \$\$;"
for i in 1 2 3 4; do
  open_session "p$i"
  send "p$i" "$spin_until_stopped"
  send "p$i" "SELECT 'done:spin';"
done
active_spins() {
  q "SELECT count(*) FROM pg_stat_activity
     WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%''spin''%'"
}
tries=0
until [ "$(active_spins)" = 4 ] || [ $tries -gt 300 ]; do
  tries=$((tries + 1))
  sleep 0.1
done
sleep 0.3
q "SELECT ratelimit_stats_reset()" >/dev/null
expect "the 4 sessions were still counting when the reset returned" "$(active_spins)" 4
q "INSERT INTO spin_stop DEFAULT VALUES" >/dev/null
for i in 1 2 3 4; do wait_line "p$i" done:spin; done
q "CREATE TABLE spin_before AS SELECT name, granted + refused AS n FROM ratelimit_stats WHERE name LIKE 'spin%'" \
  >/dev/null
# Prints "names at +400|names|each name's count since spin_before".
check_spin() {
  local rows
  rows=$(psql_ -c "SELECT count(*) FILTER (WHERE a.n - coalesce(b.n, 0) = 400), count(*),
                          string_agg((a.n - coalesce(b.n, 0))::text, ' ' ORDER BY name)
                   FROM (SELECT name, granted + refused AS n FROM ratelimit_stats WHERE name LIKE 'spin%') a
                   LEFT JOIN spin_before b USING (name)")
  expect "16 names x 4 sessions x 100 calls after the reset, $1 (names at +400, names)" "${rows%|*}" "16|16"
  [ "${rows%|*}" = "16|16" ] || echo "  each name's count: ${rows##*|}" >&2
}
for i in 1 2 3 4; do run_in "p$i" "$(spin 1600)" spin2; done
check_spin "the sessions idle"
for i in 1 2 3 4; do close_session "p$i"; done
check_spin "the sessions gone"

check_server_log_for_crashes || failed=1
exit $failed
