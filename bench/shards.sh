#!/usr/bin/env bash
# Hot-key benchmark for sharded limits: 32 clients on one global limit with
# "shards" = 1, 4, 16, 64, against the same load spread over 100,000 keys,
# with synchronous_commit on and off. Every call is granted (the rate is far
# above the load), so this measures the cost of contention, not refusals.
# Then the same for a limit kept in shared memory ("storage": "memory",
# issue 19): one hot key without shards against 100,000 keys (made first).
# The server preloads the library (shared_preload_libraries = 'ratelimit',
# ratelimit.memory_max_keys = 200000), which memory limits need on
# PostgreSQL 15; so ratelimit_stats counts every table call too.
#
#   bench/shards.sh            # uses the installed extension
#   bench/shards.sh --build    # builds and installs it first
#   BENCH_SECONDS=10 bench/shards.sh
#
# Prints a markdown table and writes it to bench/shards-latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

SECONDS_PER_RUN=${BENCH_SECONDS:-10}
CLIENTS=32
OUT=bench/shards-latest.md
[ "${1:-}" = "--build" ] && { ensure_packages; build_and_install_extension; }

trap stop_cluster EXIT
start_cluster -c shared_buffers=256MB -c max_connections=100 \
  -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=200000
WORK=$(mktemp -d /tmp/ratelimit-shards.XXXXXX)

psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION ratelimit;
-- 100,000 keys, all existing, for the spread-out load.
SELECT count(ratelimit_limit('spread', 'k' || g, '{"kind": "token bucket", "rate": 1e9, "period": 1000}', 0))
FROM generate_series(1, 100000) AS g;
-- The same 100,000 keys of a memory limit (a grant of 1 token: an entry is
-- made only by a change).
SELECT count(ratelimit_limit('mem-spread', 'k' || g, '{"kind": "token bucket", "rate": 1e9, "period": 1000, "storage": "memory"}'))
FROM generate_series(1, 100000) AS g;
SQL

cat > "$WORK/spread.sql" <<'SQL'
\set k random(1, 100000)
SELECT ok FROM ratelimit_limit('spread', 'k' || :k, '{"kind": "token bucket", "rate": 1e9, "period": 1000}');
SQL
cat > "$WORK/mem-spread.sql" <<'SQL'
\set k random(1, 100000)
SELECT ok FROM ratelimit_limit('mem-spread', 'k' || :k, '{"kind": "token bucket", "rate": 1e9, "period": 1000, "storage": "memory"}');
SQL
cat > "$WORK/mem-hot.sql" <<'SQL'
SELECT ok FROM ratelimit_limit('mem-hot', NULL, '{"kind": "token bucket", "rate": 1e9, "period": 1000, "storage": "memory"}');
SQL

# Runs one pgbench load; prints its transactions per second.
run_load() {
  local script=$1
  "$PG_BINDIR/pgbench" -n -M prepared -T "$SECONDS_PER_RUN" -j 2 -c "$CLIENTS" -f "$script" 2>/dev/null |
    awk '/^tps = / { printf "%.0f", $3 }'
}

{
  echo "# Sharded hot limit vs many keys"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`BENCH_SECONDS=$SECONDS_PER_RUN bench/shards.sh\`: pgbench \`-n -M prepared -T $SECONDS_PER_RUN -j 2 -c $CLIENTS\`,"
  echo "$(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, $("$PG_BINDIR/postgres" --version), shared_buffers=256MB, every call granted."
  echo
  echo "Server started with \`shared_preload_libraries = 'ratelimit'\` and \`ratelimit.memory_max_keys = 200000\`. The memory rows"
  echo "compare a memory limit's one hot key (no shards) with the same memory limit kind over 100,000 keys."
  echo
  printf '| synchronous_commit | load | calls/s | ratio to many keys (same storage) |\n|---|---|---:|---:|\n'
} > "$OUT"
for sync in on off; do
  psql -X -q -c "ALTER SYSTEM SET synchronous_commit = $sync" -c "SELECT pg_reload_conf()" >/dev/null
  spread=$(run_load "$WORK/spread.sql")
  printf '| %s | 100,000 keys | %s | 1.00 |\n' "$sync" "$spread" >> "$OUT"
  for shards in 1 4 16 64; do
    config="{\"kind\": \"token bucket\", \"rate\": 1e9, \"period\": 1000, \"shards\": $shards}"
    psql -X -q -c "SELECT ratelimit_limit('global-$shards', NULL, '$config', 0)" >/dev/null
    printf "SELECT ok FROM ratelimit_limit('global-%s', NULL, '%s');\n" "$shards" "$config" > "$WORK/global.sql"
    tps=$(run_load "$WORK/global.sql")
    ratio=$(awk -v a="$tps" -v b="$spread" 'BEGIN { printf "%.2f", a / b }')
    printf '| %s | one global limit, %d shard%s | %s | %s |\n' "$sync" "$shards" "$([ "$shards" = 1 ] || echo s)" \
      "$tps" "$ratio" >> "$OUT"
  done
  mem_spread=$(run_load "$WORK/mem-spread.sql")
  printf '| %s | memory, 100,000 keys | %s | 1.00 |\n' "$sync" "$mem_spread" >> "$OUT"
  mem_hot=$(run_load "$WORK/mem-hot.sql")
  printf '| %s | memory, one global limit, no shards | %s | %s |\n' "$sync" "$mem_hot" \
    "$(awk -v a="$mem_hot" -v b="$mem_spread" 'BEGIN { printf "%.2f", a / b }')" >> "$OUT"
done
rm -rf "$WORK"
cat "$OUT"
