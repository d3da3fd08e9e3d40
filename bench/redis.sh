#!/usr/bin/env bash
# The Redis comparison of issue 19: a token bucket in Lua (bench/redis_bucket.lua)
# on a private redis-server, called with EVALSHA by redis-benchmark, one call
# per request and no pipelining, over 100,000 random keys and on one hot key,
# with 1, 8 and 32 clients.
#
#   bench/redis.sh                      Redis alone: prints a table and writes
#                                       bench/redis-latest.md
#   BENCH_SECONDS=10 BENCH_ROUNDS=3     about how long each run lasts, and how
#                                       many rounds (the table shows medians)
#
# bench/run.sh sources this file for its functions (the workloads r6a and r6b,
# run in the same matrix as pgbench's workloads, side by side); sourced, it
# defines functions only.
#
# The server: Debian's redis-server (installed with apt-get, with
# redis-tools, if missing), started in a temp dir on a unix socket only (as
# the PostgreSQL cluster of bench/run.sh), with no persistence (no RDB
# snapshot, no AOF), and stopped by its PID on exit, on failure too.
# redis-benchmark: -s <socket> -c <clients> -n <requests> -r 100000, --threads 2
# (pgbench's -j 2) when more than one client. It runs a number of requests,
# not a time: -n is the rate of a short probe run of that client count times
# BENCH_SECONDS.

REDIS_RATE=1000000      # bench/run.sh's CFG: a million tokens per 1000 ms,
REDIS_PERIOD_MS=1000    # a million at most, one per call: every call is granted
REDIS_CAPACITY=1000000
REDIS_KEYS=100000
REDIS_PID=""
REDIS_DIR=""
REDIS_SHA=""
REDIS_REQUESTS=0
REDIS_VERSION=""
declare -A REDIS_PROBE_RPS=()

# Installs Debian's redis-server and redis-tools if either is missing.
ensure_redis() {
  local missing=() pkg sudo=""
  for pkg in redis-server redis-tools; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "== installing Debian packages: ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

redis_cli() { redis-cli -s "$REDIS_DIR/redis.sock" "$@"; }

# Starts a private redis-server in a new temp dir and loads the Lua bucket
# (REDIS_SHA). The caller's trap must call stop_redis. REDIS_PERSISTENCE:
# none (the default: no RDB snapshot, no AOF) or aof (appendonly yes,
# appendfsync everysec: every write in the append-only file, fsynced once a
# second, Redis's durability that at most a second is lost; bench/floor.sh).
start_redis() {
  local persistence=(--appendonly no)
  case "${REDIS_PERSISTENCE:-none}" in
    none) ;;
    aof) persistence=(--appendonly yes --appendfsync everysec) ;;
    *) echo "REDIS_PERSISTENCE: none or aof, not: $REDIS_PERSISTENCE" >&2; return 2 ;;
  esac
  REDIS_DIR=$(mktemp -d /tmp/ratelimit-redis.XXXXXX)
  redis-server --port 0 --unixsocket "$REDIS_DIR/redis.sock" --unixsocketperm 700 \
    --dir "$REDIS_DIR" --save '' "${persistence[@]}" --daemonize no --logfile "$REDIS_DIR/redis.log" &
  REDIS_PID=$!
  local _
  for _ in $(seq 100); do
    [ "$(redis_cli ping 2>/dev/null)" = PONG ] && break
    sleep 0.1
  done
  [ "$(redis_cli ping 2>/dev/null)" = PONG ] || { echo "redis-server did not start: $(tail -3 "$REDIS_DIR/redis.log")" >&2; return 1; }
  REDIS_SHA=$(redis_cli -x script load < "$(dirname "${BASH_SOURCE[0]}")/redis_bucket.lua")
  [[ $REDIS_SHA =~ ^[0-9a-f]{40}$ ]] || { echo "SCRIPT LOAD failed: $REDIS_SHA" >&2; return 1; }
  redis_check_bucket
  REDIS_VERSION=$(redis-server --version | grep -o 'v=[^ ]*' | cut -c3-)
  [ "$(redis_cli config get appendonly | tail -1)" = "$([ "${REDIS_PERSISTENCE:-none}" = aof ] && echo yes || echo no)" ] ||
    { echo "redis-server: appendonly is not what REDIS_PERSISTENCE=${REDIS_PERSISTENCE:-none} asks" >&2; return 1; }
  echo "== redis-server $REDIS_VERSION running in $REDIS_DIR (pid $REDIS_PID, persistence ${REDIS_PERSISTENCE:-none}), script $REDIS_SHA"
}

# Fails unless the bucket grants from a full bucket and refuses an empty one.
redis_check_bucket() {
  local out
  out=$(redis_cli evalsha "$REDIS_SHA" 1 check:a 1 3600000 2 1 | tr '\n' ' ')
  [ "$out" = "1 1.000000 " ] || [ "${out%% *}" = 1 ] || { echo "bucket check: first call gave $out" >&2; return 1; }
  redis_cli evalsha "$REDIS_SHA" 1 check:a 1 3600000 2 1 >/dev/null
  out=$(redis_cli evalsha "$REDIS_SHA" 1 check:a 1 3600000 2 1 | head -1)
  [ "$out" = 0 ] || { echo "bucket check: the third call of a 2-token bucket was not refused" >&2; return 1; }
  redis_cli del check:a >/dev/null
}

# Stops the redis-server of start_redis (by its PID) and removes its directory.
stop_redis() {
  if [ -n "$REDIS_PID" ]; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
  fi
  [ -z "$REDIS_DIR" ] || rm -rf "$REDIS_DIR"
  REDIS_DIR=""
}

# The bucket key redis-benchmark sends: $1 = random (one of 100,000,
# __rand_int__ with -r) or hot (one key).
redis_key() { if [ "$1" = hot ]; then echo "b:hot"; else echo "b:__rand_int__"; fi; }

# One redis-benchmark run of $3 requests: $1 clients, keys $2 (random|hot).
# Prints "requests/s average-latency-ms"; the full output goes to $4.
redis_benchmark() {
  local clients=$1 keys=$2 requests=$3 log=$4 threads=()
  [ "$clients" -eq 1 ] || threads=(--threads 2)
  redis-benchmark -s "$REDIS_DIR/redis.sock" -c "$clients" -n "$requests" -r "$REDIS_KEYS" "${threads[@]}" --csv \
    evalsha "$REDIS_SHA" 1 "$(redis_key "$keys")" "$REDIS_RATE" "$REDIS_PERIOD_MS" "$REDIS_CAPACITY" 1 > "$log" 2>&1 || return 1
  awk -F, 'NR > 1 && NF > 2 {gsub(/"/, "", $2); gsub(/"/, "", $3); print $2 + 0, $3 + 0; found = 1} END {exit !found}' "$log"
}

# Sets REDIS_REQUESTS to the requests for about $3 seconds of $1 clients on
# keys $2: the rate of a short probe run (once per client count and keys,
# after a warm-up of 20,000 calls) times $3.
redis_requests_for() {
  local clients=$1 keys=$2 seconds=$3 rps=""
  if [ -z "${REDIS_PROBE_RPS[$clients $keys]:-}" ]; then
    read -r rps _ < <(redis_benchmark "$clients" "$keys" 20000 "$REDIS_DIR/probe.log") || true
    [ -n "$rps" ] || { echo "redis-benchmark failed: $(tail -3 "$REDIS_DIR/probe.log")" >&2; return 1; }
    read -r rps _ < <(redis_benchmark "$clients" "$keys" "$(awk -v r="$rps" 'BEGIN {printf "%d", r * 2}')" "$REDIS_DIR/probe.log") || true
    [ -n "$rps" ] || { echo "redis-benchmark failed: $(tail -3 "$REDIS_DIR/probe.log")" >&2; return 1; }
    REDIS_PROBE_RPS[$clients $keys]=${rps%.*}
  fi
  REDIS_REQUESTS=$(( REDIS_PROBE_RPS[$clients $keys] * seconds ))
}

# Redis alone: rounds of 1, 8, 32 clients on random keys and the hot key.
redis_main() {
  set -euo pipefail
  cd "$(dirname "$0")/.."
  local seconds=${BENCH_SECONDS:-10} rounds=${BENCH_ROUNDS:-3} out=bench/redis-latest.md round clients keys n rps lat
  ensure_redis
  REDIS_WORK=$(mktemp -d /tmp/ratelimit-redis-bench.XXXXXX)
  local work=$REDIS_WORK
  trap 'stop_redis; rm -rf "$REDIS_WORK"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  [ -z "${BENCH_NICE:-}" ] || renice -n "$BENCH_NICE" -p $$ >/dev/null
  start_redis
  for round in $(seq "$rounds"); do
    for clients in 1 8 32; do
      for keys in random hot; do
        redis_requests_for "$clients" "$keys" "$seconds"
        n=$REDIS_REQUESTS
        read -r rps lat < <(redis_benchmark "$clients" "$keys" "$n" "$work/r$round-c$clients-$keys.log")
        echo "$round,$clients,$keys,$rps,$lat" >> "$work/runs.csv"
        printf '   round %d: %2s clients, %-6s keys: %9.0f calls/s (%s ms average, %d calls)\n' "$round" "$clients" "$keys" "$rps" "$lat" "$n"
      done
    done
  done
  {
    echo "# Redis Lua token bucket (bench/redis.sh)"
    echo
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`BENCH_SECONDS=$seconds BENCH_ROUNDS=$rounds${BENCH_NICE:+ BENCH_NICE=$BENCH_NICE} bench/redis.sh\`;"
    echo "$(nproc) CPUs, redis-server $(redis-server --version | grep -o 'v=[^ ]*' | cut -c3-) on a unix socket, no persistence;"
    echo "\`redis-benchmark -s SOCKET -c N -n REQUESTS -r $REDIS_KEYS [--threads 2] EVALSHA <bench/redis_bucket.lua> 1 KEY $REDIS_RATE $REDIS_PERIOD_MS $REDIS_CAPACITY 1\`,"
    echo "no pipelining. Calls/s, median of $rounds rounds."
    echo
    echo "| keys | 1 client | 8 clients | 32 clients |"
    echo "|---|---:|---:|---:|"
    for keys in random hot; do
      printf '| %s |' "$([ "$keys" = hot ] && echo 'one hot key' || echo '100,000 random keys')"
      for clients in 1 8 32; do
        awk -F, -v c="$clients" -v k="$keys" '$2 == c && $3 == k {v[++n] = $4}
          END {for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) {t = v[j]; v[j] = v[j-1]; v[j-1] = t}
               printf " %.0f |", (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)}' "$work/runs.csv"
      done
      echo
    done
  } > "$out"
  cat "$out"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  redis_main "$@"
fi
