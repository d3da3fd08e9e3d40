#!/usr/bin/env bash
# What the limiter costs an HTTP request: the example service
# (examples/http-api) with and without its limit call, under wrk, side by
# side. POST /messages as a random one of 10,000 users: one transaction that
# calls ratelimit_limit and ratelimit_headers, then inserts the message,
# against the same transaction without the limit call (--no-limiter).
#
#   bench/wrk.sh                                   # BENCH_SECONDS=10 BENCH_ROUNDS=3
#   BENCH_SECONDS=5 BENCH_ROUNDS=2 bench/wrk.sh    # quicker
#
# Uses the installed extension and its own throwaway cluster (shared_buffers
# 256MB, synchronous_commit off, so that the commit flush does not hide the
# CPU cost). Each round runs both variants, alternating which goes first.
# Prints a markdown table and writes it to bench/wrk-latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source examples/http-api/service.sh

SECONDS_PER_RUN=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP_SECONDS=${BENCH_WARMUP:-3}
export BENCH_USERS=${BENCH_USERS:-10000}
THREADS=8           # the service's worker threads and database connections
WRK_CONNECTIONS=8   # at most THREADS: httplib serves a keep-alive connection on one thread until it closes
WRK_THREADS=2
# Generous enough that every user's requests are granted in a run: the
# benchmark measures the granting path (lock, refill, write), the one a
# healthy service takes. The 429 column shows it.
MESSAGES_LIMIT='{"kind": "token bucket", "rate": 100, "period": "1 minute", "capacity": 200}'
OUT=bench/wrk-latest.md

ensure_packages
echo "== building examples/http-api (build-example)"
build_http_api

WORK=$(mktemp -d /tmp/ratelimit-wrk.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do stop_http_api "$pid"; done
  stop_cluster
  rm -rf "$WORK"
}
trap cleanup EXIT
start_cluster -c shared_buffers=256MB -c synchronous_commit=off
createdb ratelimit_wrk
export PGDATABASE=ratelimit_wrk
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION ratelimit"

# One after the other: both create the same tables.
start_http_api "$WORK/with" --threads "$THREADS" --messages-limit "$MESSAGES_LIMIT"
pids+=("$HTTP_API_PID")
port_with=$HTTP_API_PORT
start_http_api "$WORK/without" --threads "$THREADS" --no-limiter
pids+=("$HTTP_API_PID")
port_without=$HTTP_API_PORT

WRK=(wrk -t "$WRK_THREADS" -c "$WRK_CONNECTIONS" --latency -s bench/wrk-messages.lua)

# Runs wrk for $2 seconds against port $1; its report goes to $3.
run_wrk() {
  "${WRK[@]}" -d "${2}s" "http://127.0.0.1:$1" >"$3"
}

# A field of a wrk report: requests/s, the 50%/99% latency, non-2xx responses.
requests_per_second() { awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$1"; }
latency() { awk -v p="$2%" '$1 == p { print $2 }' "$1"; }
non_2xx() { awk '/Non-2xx or 3xx responses:/ { n = $5 } END { print n + 0 }' "$1"; }
total_requests() { awk '/requests in/ { print $1 }' "$1"; }

echo "== warming up both services (${WARMUP_SECONDS}s each)"
run_wrk "$port_with" "$WARMUP_SECONDS" "$WORK/warmup-with.txt"
run_wrk "$port_without" "$WARMUP_SECONDS" "$WORK/warmup-without.txt"

for round in $(seq 1 "$ROUNDS"); do
  order="with without"
  [ $((round % 2)) -eq 0 ] && order="without with"
  for variant in $order; do
    port=$port_with
    [ "$variant" = without ] && port=$port_without
    echo "== round $round: $variant limiter (${SECONDS_PER_RUN}s)"
    run_wrk "$port" "$SECONDS_PER_RUN" "$WORK/round$round-$variant.txt"
  done
done

cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
  echo "# What the limiter costs an HTTP request"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`BENCH_SECONDS=$SECONDS_PER_RUN BENCH_ROUNDS=$ROUNDS bench/wrk.sh\`."
  echo
  echo "- Load: \`${WRK[*]} -d ${SECONDS_PER_RUN}s\`, POST /messages as a random one of $BENCH_USERS users,"
  echo "  after a ${WARMUP_SECONDS}s warm-up of each variant; the variants alternate which runs first in each round."
  echo "- Service: examples/http-api (cpp-httplib $(dpkg-query -W -f='${Version}' libcpp-httplib-dev), libpqxx"
  echo "  $(dpkg-query -W -f='${Version}' libpqxx-dev)), $THREADS worker threads, one connection each. With the limiter a request"
  echo "  runs \`ratelimit_limit('messages', user)\` and \`ratelimit_headers\` (limit \`$MESSAGES_LIMIT\`)"
  echo "  and the INSERT in one transaction; without it, the INSERT alone in the same transaction shape."
  echo "- Server: $("$PG_BINDIR/postgres" --version), throwaway cluster, shared_buffers=256MB, synchronous_commit=off,"
  echo "  on the same machine as the service and wrk."
  echo "- Machine: $(nproc) CPUs ($cpu_model), $(free -g | awk '/^Mem:/ {print $2}') GiB; everything shares the CPUs."
  echo
  echo "| round | with limiter (req/s) | without (req/s) | ratio | p50 with / without | p99 with / without | 429s with |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for round in $(seq 1 "$ROUNDS"); do
    with=$WORK/round$round-with.txt
    without=$WORK/round$round-without.txt
    ratio=$(awk -v a="$(requests_per_second "$with")" -v b="$(requests_per_second "$without")" \
      'BEGIN { printf "%.2f", a / b }')
    printf '| %s | %s | %s | %s | %s / %s | %s / %s | %s of %s |\n' "$round" \
      "$(requests_per_second "$with")" "$(requests_per_second "$without")" "$ratio" \
      "$(latency "$with" 50)" "$(latency "$without" 50)" "$(latency "$with" 99)" "$(latency "$without" 99)" \
      "$(non_2xx "$with")" "$(total_requests "$with")"
  done
  # The medians over the rounds, and the ratio of the medians.
  for variant in with without; do
    for round in $(seq 1 "$ROUNDS"); do requests_per_second "$WORK/round$round-$variant.txt"; echo; done |
      sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }' \
      >"$WORK/median-$variant"
  done
  median_with=$(cat "$WORK/median-with")
  median_without=$(cat "$WORK/median-without")
  printf '| **median** | **%.0f** | **%.0f** | **%s** | | | |\n' "$median_with" "$median_without" \
    "$(awk -v a="$median_with" -v b="$median_without" 'BEGIN { printf "%.2f", a / b }')"
} >"$OUT"

# A 500 from either service would make the comparison meaningless.
for variant in with without; do
  if [ -s "$WORK/$variant.stderr" ]; then
    echo "the service ($variant limiter) logged errors:" >&2
    head -n 20 "$WORK/$variant.stderr" >&2
    exit 1
  fi
done
cat "$OUT"
