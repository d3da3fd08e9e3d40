#!/usr/bin/env bash
# Ten million keys in one memory limit on one server (issue 27): fill,
# exact answers, a status scan, the sweep of a full table, and a clean
# restart that keeps every key, each timed. Opt-in: not part of
# scripts/test.sh (with 0.8.0 it reserves about 9 GB of shared memory).
#
#   bench/tenmillion.sh                       10,000,000 keys
#   TENMILLION_KEYS=100000 bench/tenmillion.sh   a quick run of the same steps
#   TENMILLION_JOBS=2                         parallel sessions for each pass
#   BENCH_PORT=5432                           the cluster's port (its socket
#                                             is in a temp dir)
#
# What it does, on a throwaway cluster with shared_preload_libraries =
# 'ratelimit' and ratelimit.memory_max_keys = TENMILLION_KEYS (N):
#  1. Before the server starts, postgres -C shared_memory_size says what it
#     will reserve; if MemAvailable cannot hold that and 2 GB more, the run
#     stops there and says so (exit 3).
#  2. The defined limit 'ip' ({"kind": "token bucket", "rate": 1, "period":
#     "1 day", "storage": "memory"}: one token, refilled after a day) gets one
#     call per key '1' .. 'N' (bench/lib.sh's limit_each_key: statements of
#     1,000,000 calls over generate_series, TENMILLION_JOBS sessions): every
#     one must be granted.
#  3. A new key more: the table is full of live entries, so the call sweeps
#     it for an entry to evict, finds none and must fail with 53200. Timed:
#     the sweep of a full table.
#  4. A second call per key: every one must be refused (each sees its first).
#  5. ratelimit_status: count(*) over the whole view, timed; N memory rows of
#     'ip'. ratelimit_cleanup(), timed; it must remove nothing (all live).
#  6. pg_ctl stop -m fast, then start: both timed by the clock and by the
#     server log's own timestamps. The postmaster writes the state file after
#     "database system is shut down" and logs "N memory limits written";
#     at the next start it reads it back while it makes shared memory, after
#     "starting PostgreSQL" and before it accepts connections, and logs "N
#     memory limits read back". Writing = shut down -> written; loading =
#     starting -> read back (shared memory included; the first start, with
#     no file, is shown for comparison). Both counts must be N.
#  7. A third call per key: every one must be refused (the state survived),
#     and ratelimit_status must still hold N memory rows of 'ip'.
# Prints the results and writes bench/tenmillion-latest.md; exit status 0
# only if every check held and the server log shows no crash.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

TENMILLION_KEYS=${TENMILLION_KEYS:-10000000}
TENMILLION_JOBS=${TENMILLION_JOBS:-2}
BENCH_PORT=${BENCH_PORT:-5432}
OUT_MD=bench/tenmillion-latest.md
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
LIMIT_CFG='{"kind": "token bucket", "rate": 1, "period": "1 day", "storage": "memory"}'
N=$TENMILLION_KEYS
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "TENMILLION_KEYS: not a key count: $N" >&2; exit 2; }
[[ $TENMILLION_JOBS =~ ^[1-9][0-9]*$ ]] || { echo "TENMILLION_JOBS: not a positive number: $TENMILLION_JOBS" >&2; exit 2; }

work_dir_removed_on_exit tenmillion

started=$(date +%s)
since() { echo "$(($(date +%s) - started))s"; }
sql() { "${PSQL[@]}" -At -c "$1"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
results=()   # "step|seconds|what": the report's rows
result() { results+=("$1|$2|$3"); printf '   %-40s %8s s   %s\n' "$1" "$2" "$3"; }
# The time (epoch seconds) of the first line of the server log past byte $1
# that matches $2, from its log_line_prefix ('%m [%p] ': milliseconds).
log_time() {
  local line
  line=$(tail -c +"$(($1 + 1))" "$CLUSTER_DIR/server.log" | grep -m1 -E "$2") || { echo ""; return; }
  date -d "$(awk '{print $1, $2, $3}' <<< "$line")" +%s.%N
}
# The number in the first log line past byte $1 that matches $2 ("N memory limits ...").
log_count() {
  tail -c +"$(($1 + 1))" "$CLUSTER_DIR/server.log" | grep -m1 -E "$2" | sed -E 's/.*ratelimit: ([0-9]+) memory limits.*/\1/'
}
log_offset() { stat -c %s "$CLUSTER_DIR/server.log"; }
# When the running postmaster's process started (epoch seconds, to the
# kernel's clock tick, 10 ms): now, less the time since then (/proc/uptime
# less /proc/<pid>/stat's starttime, both counted from boot).
postmaster_started_at() {
  local pid
  pid=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
  awk -v now="$(date +%s.%N)" -v up="$(cut -d' ' -f1 /proc/uptime)" -v hz="$(getconf CLK_TCK)" \
    '{sub(/^.*\) /, ""); printf "%.2f", now - (up - $20 / hz)}' "/proc/$pid/stat"
}
pg_ctl_cluster() { as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" "$@"; }

so_file="$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"
so_md5=$(md5sum "$so_file" | cut -c1-12)
so_mtime=$(date -u -r "$so_file" '+%Y-%m-%d %H:%M:%S UTC')

# ---------------------------------------------------------------- 1. memory
start_cluster -c "port=$BENCH_PORT" >/dev/null
export PGPORT=$BENCH_PORT
sql "CREATE EXTENSION ratelimit" >/dev/null
sql "SELECT ratelimit_define('ip', '$LIMIT_CFG')" >/dev/null
ext_version=$(sql "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")
pg_version=$(sql "SHOW server_version")
pg_ctl_cluster -m fast -w stop >/dev/null
need_mb=$(as_cluster_user "$PG_BINDIR/postgres" -D "$CLUSTER_DIR/data" -C shared_memory_size \
  -c shared_preload_libraries=ratelimit -c "ratelimit.memory_max_keys=$N")
avail_mb=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1024}' /proc/meminfo)
echo "== $N keys: the server will reserve $need_mb MB of shared memory; MemAvailable is $avail_mb MB"
if [ $((need_mb + 2048)) -gt "$avail_mb" ]; then
  echo "NOT RUN: $need_mb MB of shared memory and 2048 MB for the rest do not fit in the $avail_mb MB available" >&2
  exit 3
fi
opts=$(cat "$CLUSTER_DIR/server.opts")
echo "$opts -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=$N" > "$CLUSTER_DIR/server.opts"
off=$(log_offset)
start_cluster_server
# From the postmaster's process start to "starting PostgreSQL" (logged once
# shared memory is made): an empty start's share of the load below.
empty_start=$(secs "$(postmaster_started_at)" "$(log_time "$off" 'starting PostgreSQL')")
read -r ext_bytes _ < <(shmem_allocation_bytes)
echo "== started with the preload ($(since)): the extension's shared memory is $ext_bytes bytes," \
  "$(awk -v b="$ext_bytes" -v n="$N" 'BEGIN { printf "%.0f", b / n }') bytes per key; an empty start took ${empty_start}s"

# ---------------------------------------------------------------- 2.-5.
echo "== steps (at $(since)):"
t0=$(now)
read -r ok refused < <(limit_each_key ip 1 "$N" "$TENMILLION_JOBS")
result "fill: a first call per key" "$(secs "$t0" "$(now)")" "$ok granted, $refused refused"
[ "$ok" = "$N" ] && [ "$refused" = 0 ] || fail "the first calls: $ok granted, $refused refused; not $N and 0"

t0=$(now)
one_more=$("${PSQL[@]}" -At -v VERBOSITY=sqlstate -c "SELECT (ratelimit_limit('ip', 'one more')).ok" 2>&1 | tr -d '\n' || true)
one_more=${one_more#ERROR:  }
result "a new key in the full table (sweep)" "$(secs "$t0" "$(now)")" "$one_more"
[ "$one_more" = 53200 ] || fail "a new key in the full table gave '$one_more', not 53200"

t0=$(now)
read -r ok refused < <(limit_each_key ip 1 "$N" "$TENMILLION_JOBS")
result "a second call per key" "$(secs "$t0" "$(now)")" "$ok granted, $refused refused"
[ "$ok" = 0 ] && [ "$refused" = "$N" ] || fail "the second calls: $ok granted, $refused refused; not 0 and $N"

t0=$(now)
read -r rows ip_rows < <(sql "SELECT count(*), count(*) FILTER (WHERE name = 'ip' AND storage = 'memory') FROM ratelimit_status" | tr '|' ' ')
result "ratelimit_status: count(*)" "$(secs "$t0" "$(now)")" "$rows rows, $ip_rows memory rows of 'ip'"
[ "$rows" = "$N" ] && [ "$ip_rows" = "$N" ] || fail "ratelimit_status holds $rows rows, $ip_rows memory rows of 'ip'; not $N"

t0=$(now)
removed=$(sql "SELECT ratelimit_cleanup()")
result "ratelimit_cleanup()" "$(secs "$t0" "$(now)")" "$removed removed"
[ "$removed" = 0 ] || fail "ratelimit_cleanup() removed $removed live entries"

# ---------------------------------------------------------------- 6. restart
off=$(log_offset)
t0=$(now)
pg_ctl_cluster -m fast -w -t 600 stop >/dev/null
stop_s=$(secs "$t0" "$(now)")
file_bytes=$(stat -c %s "$CLUSTER_DIR/data/ratelimit_memory.state" 2>/dev/null || echo 0)
t0=$(now)
start_cluster_server
start_s=$(secs "$t0" "$(now)")
write_s=$(secs "$(log_time "$off" 'checkpoint complete')" "$(log_time "$off" 'memory limits written')")
load_s=$(secs "$(postmaster_started_at)" "$(log_time "$off" 'memory limits read back')")
ready_s=$(secs "$(postmaster_started_at)" "$(log_time "$off" 'ready to accept connections')")
# The restart's lines of the server log, for the report.
tail -c +"$((off + 1))" "$CLUSTER_DIR/server.log" |
  grep -E 'shutdown request|shutting down|checkpoint complete|is shut down|memory limits|starting PostgreSQL|ready to accept' > "$WORK_DIR/restart.log" || true
written=$(log_count "$off" 'memory limits written')
read_back=$(log_count "$off" 'memory limits read back')
result "pg_ctl stop -m fast" "$stop_s" "the state file: $file_bytes bytes"
result "  writing the state (server log)" "$write_s" "$written memory limits written (shutdown checkpoint complete -> written)"
result "pg_ctl start" "$start_s" "until it accepts connections"
result "  loading the state" "$load_s" "$read_back read back (the postmaster's process start -> read back: shared memory made, file read; an empty start took ${empty_start} s to make shared memory)"
result "  postmaster start to ready" "$ready_s" "accepting connections"
[ "$written" = "$N" ] || fail "the server log says '$written' memory limits written, not $N"
[ "$read_back" = "$N" ] || fail "the server log says '$read_back' memory limits read back, not $N"

# ---------------------------------------------------------------- 7. survived
t0=$(now)
read -r ok refused < <(limit_each_key ip 1 "$N" "$TENMILLION_JOBS")
result "a third call per key, after the restart" "$(secs "$t0" "$(now)")" "$ok granted, $refused refused"
[ "$ok" = 0 ] && [ "$refused" = "$N" ] || fail "after the restart: $ok granted, $refused refused; not 0 and $N"
ip_rows=$(sql "SELECT count(*) FROM ratelimit_status WHERE name = 'ip' AND storage = 'memory'")
[ "$ip_rows" = "$N" ] || fail "after the restart ratelimit_status holds $ip_rows memory rows of 'ip', not $N"
check_server_log_for_crashes || failed=1
stop_cluster

# ---------------------------------------------------------------- report
command="bench/tenmillion.sh"
[ "$N" = 10000000 ] || command="TENMILLION_KEYS=$N $command"
[ "$TENMILLION_JOBS" = 2 ] || command="TENMILLION_JOBS=$TENMILLION_JOBS $command"
{
  echo "# $N keys in one memory limit (bench/tenmillion.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`$command\` ($(since) in all): ratelimit $ext_version, the"
  echo "library of $so_mtime (md5 $so_md5…), PostgreSQL $pg_version, $(nproc) CPUs,"
  echo "$(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo) GiB RAM, $(uname -sr); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "\`shared_preload_libraries = 'ratelimit'\`, \`ratelimit.memory_max_keys = $N\`: the extension's rows of"
  echo "\`pg_shmem_allocations\` hold $ext_bytes bytes ($(awk -v b="$ext_bytes" 'BEGIN { printf "%.2f", b / 1073741824 }') GiB), $(awk -v b="$ext_bytes" -v n="$N" 'BEGIN { printf "%.0f", b / n }') bytes per key. The defined limit"
  echo "\`ip\` (\`$LIMIT_CFG\`), keys '1' .. '$N', $TENMILLION_JOBS sessions"
  echo "of \`SELECT … FROM generate_series(lo, hi) g, ratelimit_limit('ip', g::text) r\` (1,000,000 calls each)."
  echo
  echo "| step | seconds | result |"
  echo "|---|---:|---|"
  for r in "${results[@]}"; do
    IFS='|' read -r step s what <<< "$r"
    echo "| $step | $s | $what |"
  done
  echo
  echo "The restart's lines of the server log:"
  echo
  echo '```'
  cat "$WORK_DIR/restart.log"
  echo '```'
  echo
  if [ "$failed" -eq 0 ]; then
    echo "Every check held: each first call granted, the key past the table refused (53200), each second and"
    echo "third call (the third after the restart) refused, $N rows in \`ratelimit_status\` before and after."
  else
    echo "**Some checks FAILED** (see the script's output)."
  fi
} > "$WORK_DIR/report.md"
cp "$WORK_DIR/report.md" "$OUT_MD"
echo
cat "$OUT_MD"
echo "== wrote $OUT_MD"
exit "$failed"
