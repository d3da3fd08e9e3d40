#!/usr/bin/env bash
# The shared memory a memory limit costs per key, next to what Redis's
# used_memory grows by for the same keys, in one run (issue 27).
#
#   bench/footprint.sh                              10,000 and 1,000,000 keys
#   FOOTPRINT_KEYS="10000 1000000 10000000" bench/footprint.sh
#                                                   10,000,000 too (~10 GB of
#                                                   shared memory with 0.8.0)
#   FOOTPRINT_IDENTITY=short                        short: name 'ip', keys '1' ..
#                                                   'N' (Redis: 'ip:1' ..); long: the
#                                                   goal's bound, a 16-byte name and
#                                                   39-byte IPv6 keys (56 bytes in all,
#                                                   Redis's key name:key)
#   FOOTPRINT_JOBS=1                                parallel sessions filling
#   BENCH_PORT=5432                                 the cluster's port (its
#                                                   socket is in a temp dir)
#
# For each N of FOOTPRINT_KEYS:
#  - PostgreSQL: the throwaway cluster restarted with shared_preload_libraries
#    = 'ratelimit' and ratelimit.memory_max_keys = N. What the extension
#    reserves is pg_shmem_allocations' rows named 'ratelimit%' (scripts/lib.sh's
#    shmem_allocation_bytes, as scripts/memory-sizing-test.sh counts them);
#    the whole segment's growth over the same cluster without the preload
#    (every row, the free space too) is shown beside it. Then the defined
#    memory limit 'ip' (a token bucket of one token a day) gets one call for
#    each of N distinct keys ('1' .. 'N'; FOOTPRINT_IDENTITY=long: the limit
#    'ip6_limit_16byte' and keys '2001:0db8:0000:0000:0000:0000:hhhh:hhhh',
#    the hex of 1 .. N): every one must be granted (a full
#    table of N live entries), and one more new key must be refused with
#    53200 (no room), so the per-key figure is that of a real fill. The
#    allocations are counted again after the fill.
#  - Redis: a fresh private redis-server (bench/redis.sh: unix socket, no
#    persistence); used_memory before and after one EVALSHA of
#    bench/redis_bucket.lua (rate 1, period 86,400,000 ms, capacity 1, count 1:
#    the same bucket) on each of the keys 'ip:1' .. 'ip:N' (long: name:key), sent through
#    redis-cli --pipe. Each key is then the two-field hash {v, t} with an
#    expiry that the bucket writes; DBSIZE and the keyspace's expires must be
#    N, and a second call on a key must be refused.
# The bytes per key are the totals divided by N; "marginal" is the growth
# from the previous N, per key added.
#
# Prints the table and writes bench/footprint-latest.md (long identities:
# bench/footprint-long-latest.md). Needs the extension
# installed (make install; RATELIMIT_PG_BINDIR for a relocated PostgreSQL),
# and redis-server (Debian's, installed with apt-get if missing). Before each
# N it checks that MemAvailable holds what the server will reserve
# (postgres -C shared_memory_size) plus Redis's share, and leaves that N out
# (saying so) otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

FOOTPRINT_KEYS=${FOOTPRINT_KEYS:-"10000 1000000"}
FOOTPRINT_JOBS=${FOOTPRINT_JOBS:-1}
FOOTPRINT_IDENTITY=${FOOTPRINT_IDENTITY:-short}
BENCH_PORT=${BENCH_PORT:-5432}
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
source bench/lib.sh
source bench/redis.sh
# The limit: one token a day, so every entry stays live (not back in its
# initial state) for the whole run, and a second call is refused.
LIMIT_CFG='{"kind": "token bucket", "rate": 1, "period": "1 day", "storage": "memory"}'
REDIS_ARGS=(1 86400000 1 1)   # rate, period ms, capacity, count: the same bucket
# The identities: the limit's name, its keys as a SQL expression of g and
# Redis's keys as an awk expression of g (the same text, after "name:").
case "$FOOTPRINT_IDENTITY" in
  short)
    LIMIT=ip KEY_SQL="g::text" KEY_AWK='sprintf("ip:%d", g)' ;;
  long)
    LIMIT=ip6_limit_16byte
    KEY_SQL="format('2001:0db8:0000:0000:0000:0000:%s:%s', lpad(to_hex(g >> 16), 4, '0'), lpad(to_hex(g & 65535), 4, '0'))"
    KEY_AWK='sprintf("ip6_limit_16byte:2001:0db8:0000:0000:0000:0000:%04x:%04x", int(g / 65536), g % 65536)' ;;
  *) echo "FOOTPRINT_IDENTITY: short or long, not $FOOTPRINT_IDENTITY" >&2; exit 2 ;;
esac
OUT_MD=bench/footprint-latest.md
[ "$FOOTPRINT_IDENTITY" = short ] || OUT_MD=bench/footprint-$FOOTPRINT_IDENTITY-latest.md

for n in $FOOTPRINT_KEYS; do
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || { echo "FOOTPRINT_KEYS: not a key count: $n" >&2; exit 2; }
done
[[ $FOOTPRINT_JOBS =~ ^[1-9][0-9]*$ ]] || { echo "FOOTPRINT_JOBS: not a positive number: $FOOTPRINT_JOBS" >&2; exit 2; }

WORK_DIR=$(mktemp -d /tmp/ratelimit-footprint.XXXXXX)
CLUSTER_DIR=""
cleanup() {
  stop_redis
  stop_cluster
  rm -rf "$WORK_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s)
since() { echo "$(($(date +%s) - started))s"; }
sql() { "${PSQL[@]}" -At -c "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
per_key() { awk -v b="$1" -v n="$2" 'BEGIN { printf "%.0f", b / n }'; }
mem_available_mb() { awk '/^MemAvailable:/ {printf "%d", $2 / 1024}' /proc/meminfo; }
# Every pg_shmem_allocations row, the free space (no name) included: the
# whole segment.
segment_bytes() { sql "SELECT sum(allocated_size) FROM pg_shmem_allocations"; }
redis_used_memory() { redis_cli info memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

ensure_redis
so_file="$("$PG_BINDIR/pg_config" --pkglibdir)/ratelimit.so"
so_md5=$(md5sum "$so_file" | cut -c1-12)
so_mtime=$(date -u -r "$so_file" '+%Y-%m-%d %H:%M:%S UTC')

# ---------------------------------------------------------------- without the preload
start_cluster -c "port=$BENCH_PORT" >/dev/null
export PGPORT=$BENCH_PORT
echo "== throwaway cluster in $CLUSTER_DIR (port $BENCH_PORT); the library $so_file of $so_mtime (md5 $so_md5…)"
sql "CREATE EXTENSION ratelimit" >/dev/null
sql "SELECT ratelimit_define('$LIMIT', '$LIMIT_CFG')" >/dev/null
# The first key as Redis names it (name:key); the awk of the load below
# must make the same text.
first_key=$(sql "SELECT '$LIMIT:' || $KEY_SQL FROM (VALUES (1)) v(g)")
[ "$first_key" = "$(awk "BEGIN { g = 1; print $KEY_AWK }")" ] ||
  { echo "FAIL: the SQL and awk keys differ: $first_key, $(awk "BEGIN { g = 1; print $KEY_AWK }")" >&2; exit 1; }
echo "== identities (name:key): '$first_key' (${#first_key} bytes) and so on"
ext_version=$(sql "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'")
pg_version=$(sql "SHOW server_version")
read -r plain_ext plain_other < <(shmem_allocation_bytes)
plain_segment=$(segment_bytes)
[ "$plain_ext" = 0 ] || { echo "FAIL: without the preload pg_shmem_allocations has $plain_ext bytes named 'ratelimit%'" >&2; exit 1; }
echo "== without the preload: the segment is $plain_segment bytes ($(mib "$plain_segment") MiB), none named 'ratelimit%'"
BASE_OPTS=$(cat "$CLUSTER_DIR/server.opts")
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null

# ---------------------------------------------------------------- each N
echo "n,ext_bytes,other_delta,segment_delta,ext_after_fill,granted,refused,one_more,fill_s,redis_before,redis_after,redis_keys,redis_expires,redis_encoding,redis_load_s,skipped" \
  > "$WORK_DIR/rows.csv"
REDIS_VERSION=$(redis-server --version | grep -o 'v=[^ ]*' | cut -c3-)
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
for n in $FOOTPRINT_KEYS; do
  preload="-c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=$n"
  # What the server will reserve, before it does (the server is stopped).
  need_mb=$(as_cluster_user "$PG_BINDIR/postgres" -D "$CLUSTER_DIR/data" -C shared_memory_size \
    -c shared_preload_libraries=ratelimit -c "ratelimit.memory_max_keys=$n")
  redis_mb=$((n * 400 / 1048576 + 64))   # generous: Redis has taken ~160 B a key
  avail_mb=$(mem_available_mb)
  if [ $((need_mb + redis_mb + 1024)) -gt "$avail_mb" ]; then
    echo "== $n keys: NOT RUN: the server would reserve $need_mb MB and Redis take up to $redis_mb MB; MemAvailable is $avail_mb MB"
    echo "$n,,,,,,,,,,,,,,,$need_mb MB needed, $avail_mb MB available" >> "$WORK_DIR/rows.csv"
    continue
  fi
  echo "== $n keys: ratelimit.memory_max_keys = $n (the server reserves $need_mb MB in all; MemAvailable $avail_mb MB) (at $(since))"
  echo "$BASE_OPTS $preload" > "$CLUSTER_DIR/server.opts"
  # The last N's entries are never read back: neither from the state file
  # (memory_durability = off) nor from the base file (= wal, the default).
  rm -f "$CLUSTER_DIR/data/ratelimit_memory.state" "$CLUSTER_DIR/data/ratelimit_memory.base"
  start_cluster_server
  read -r ext other < <(shmem_allocation_bytes)
  segment=$(segment_bytes)
  # Fill: one call per key, each a new entry; then one key more.
  t0=$(date +%s.%N)
  read -r granted refused < <(limit_each_key "$LIMIT" 1 "$n" "$FOOTPRINT_JOBS" "$KEY_SQL")
  t1=$(date +%s.%N)
  fill_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  one_more=$("${PSQL[@]}" -At -v VERBOSITY=sqlstate -c "SELECT (ratelimit_limit('$LIMIT', 'one more')).ok" 2>&1 | tr -d '\n' || true)
  one_more=${one_more#ERROR:  }
  read -r ext_after _ < <(shmem_allocation_bytes)
  [ "$granted" = "$n" ] && [ "$refused" = 0 ] || fail "$n keys: $granted granted and $refused refused, not $n and 0"
  [ "$one_more" = 53200 ] || fail "$n keys: a key more than memory_max_keys gave '$one_more', not 53200 (no room)"
  [ "$ext_after" = "$ext" ] || fail "$n keys: the extension's allocations changed with the fill: $ext -> $ext_after bytes"
  check_server_log_for_crashes || failed=1
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
  rm -f "$CLUSTER_DIR/data/ratelimit_memory.state" "$CLUSTER_DIR/data/ratelimit_memory.base"
  echo "   the extension's rows: $ext bytes ($(mib "$ext") MiB), $(per_key "$ext" "$n") bytes per key; the segment grew by $((segment - plain_segment)) bytes; $granted granted in ${fill_s}s, one more: $one_more"

  # Redis: the same keys, one bucket call each.
  start_redis >/dev/null
  before=$(redis_used_memory)
  t0=$(date +%s.%N)
  awk -v n="$n" -v sha="$REDIS_SHA" -v rate="${REDIS_ARGS[0]}" -v period="${REDIS_ARGS[1]}" \
      -v cap="${REDIS_ARGS[2]}" -v count="${REDIS_ARGS[3]}" 'BEGIN {
    tail = sprintf("$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(rate), rate, length(period), period,
                   length(cap), cap, length(count), count)
    for (g = 1; g <= n; g++) {
      k = '"$KEY_AWK"'
      printf "*8\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n%s", sha, length(k), k, tail
    }
  }' | redis_cli --pipe > "$WORK_DIR/pipe.out" 2>&1 || fail "$n keys: redis-cli --pipe failed: $(tail -2 "$WORK_DIR/pipe.out")"
  t1=$(date +%s.%N)
  redis_load_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  grep -q "errors: 0, replies: $n\$" "$WORK_DIR/pipe.out" || fail "$n keys: redis-cli --pipe: $(tail -1 "$WORK_DIR/pipe.out")"
  after=$(redis_used_memory)
  redis_keys=$(redis_cli dbsize)
  redis_expires=$(redis_cli info keyspace | tr -d '\r' | sed -n 's/^db0:.*expires=\([0-9]*\).*/\1/p')
  redis_encoding=$(redis_cli object encoding "$first_key")
  [ "$redis_keys" = "$n" ] && [ "$redis_expires" = "$n" ] || fail "$n keys: Redis holds $redis_keys keys, $redis_expires with an expiry"
  [ "$(redis_cli hlen "$first_key")" = 2 ] || fail "$n keys: $first_key is not a two-field hash"
  [ "$(redis_cli evalsha "$REDIS_SHA" 1 "$first_key" "${REDIS_ARGS[@]}" | head -1)" = 0 ] || fail "$n keys: a second call on $first_key was granted"
  stop_redis
  echo "   Redis: used_memory $before -> $after bytes, $(per_key "$((after - before))" "$n") bytes per key ($redis_keys keys, $redis_expires with an expiry, $redis_encoding) in ${redis_load_s}s"
  echo "$n,$ext,$((other - plain_other)),$((segment - plain_segment)),$ext_after,$granted,$refused,$one_more,$fill_s,$before,$after,$redis_keys,$redis_expires,$redis_encoding,$redis_load_s," >> "$WORK_DIR/rows.csv"
done
stop_cluster

# ---------------------------------------------------------------- report
command="bench/footprint.sh"
[ "$FOOTPRINT_KEYS" = "10000 1000000" ] || command="FOOTPRINT_KEYS=\"$FOOTPRINT_KEYS\" $command"
[ "$FOOTPRINT_JOBS" = 1 ] || command="FOOTPRINT_JOBS=$FOOTPRINT_JOBS $command"
[ "$FOOTPRINT_IDENTITY" = short ] || command="FOOTPRINT_IDENTITY=$FOOTPRINT_IDENTITY $command"
{
  echo "# Shared memory per key: memory limits and Redis (bench/footprint.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`$command\` ($(since)): ratelimit $ext_version, the library"
  echo "of $so_mtime (md5 $so_md5…), PostgreSQL $pg_version; redis-server $REDIS_VERSION (no persistence);"
  echo "$(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo) GiB RAM, $(uname -sr)."
  echo
  echo "PostgreSQL: \`shared_preload_libraries = 'ratelimit'\`, \`ratelimit.memory_max_keys\` = N; the extension's"
  echo "rows of \`pg_shmem_allocations\` (named \`ratelimit%\`), and the whole segment's growth over the same"
  echo "cluster without the preload (free space included). The defined limit \`$LIMIT\` (\`$LIMIT_CFG\`)"
  echo "then got one call for each of N keys (\`$KEY_SQL\` for g = 1 .. N): all granted, and a key more refused"
  echo "with 53200, so the table held N live entries. Redis: \`used_memory\` before and after one \`EVALSHA\` of"
  echo "\`bench/redis_bucket.lua\` (${REDIS_ARGS[*]}: the same bucket) on each of the same identities as"
  echo "name:key (\`$first_key\`, ...; each a two-field hash with an expiry). Bytes per key = total / N;"
  echo "marginal = growth from the previous N, per key."
  echo
  echo "| keys (N) | ratelimit: extension's rows | bytes / key | marginal | segment growth / key | fill | Redis: used_memory growth | bytes / key | marginal | load | ratelimit ÷ Redis |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  awk -F, 'function commas(x) { x = sprintf("%d", x); while (x ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", x); return x }
  NR > 1 {
    if ($16 != "") { printf "| %s | not run: %s | | | | | | | | | |\n", commas($1), $16; next }
    ext = $2; red = $11 - $10
    m = (pn ? sprintf("%.0f", (ext - pext) / ($1 - pn)) : "")
    rm = (pn ? sprintf("%.0f", (red - pred) / ($1 - pn)) : "")
    printf "| %s | %.1f MiB | %.0f | %s | %.0f | %s s | %.1f MiB | %.0f | %s | %s s | %.2f |\n",
      commas($1), ext / 1048576, ext / $1, m, $4 / $1, $9, red / 1048576, red / $1, rm, $15, (ext / $1) / (red / $1)
    pn = $1; pext = ext; pred = red
  }' "$WORK_DIR/rows.csv"
  echo
  echo "Checks: every fill granted N of N and refused the key after (53200); the extension's rows the same"
  echo "after the fill as before; Redis held N keys, N with an expiry, encoding $(awk -F, 'NR > 1 && $14 != "" {e = $14} END {print e}' "$WORK_DIR/rows.csv"); a second call refused."
  echo
  echo "Raw (CSV):"
  echo
  echo '```'
  cat "$WORK_DIR/rows.csv"
  echo '```'
} > "$WORK_DIR/report.md"
cp "$WORK_DIR/report.md" "$OUT_MD"
echo
cat "$OUT_MD"
echo "== wrote $OUT_MD"
exit "$failed"
