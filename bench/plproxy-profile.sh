#!/bin/bash
# Where a routed call's work goes, in instructions: the router backend's and
# the partition backend's instructions per call of ratelimit_limit through
# the router (ratelimit_proxy at this tree's version, and a 0.8.0 router,
# the last over PL/Proxy's call handler, beside it), of an empty PL/Proxy call, and of the call made directly on
# the partition, counted by valgrind's callgrind. Instruction counts do not
# move with other load on a shared machine (bench/plproxy.sh's throughput
# does), so they show what a change of the router saves.
#
#   bench/plproxy-profile.sh     # about 3 minutes; writes bench/plproxy-profile-latest.md
#   PROFILE_KEEP=1 bench/plproxy-profile.sh   # keep the callgrind files (for callgrind_annotate)
#   PROFILE_TARGETS="routed" bench/plproxy-profile.sh   # some of: direct noop routed routed_080
#
# One throwaway cluster (synchronous_commit=off, autovacuum off) holds the
# partition database `direct` (CREATE EXTENSION ratelimit, 10,000 keys) and
# the router databases r1 (this tree's ratelimit_proxy) and r1_080 (0.8.0),
# each with `direct` as its one partition; the server then runs under
# callgrind, every backend writing its own file. Each workload runs twice
# with pgbench -M prepared and one client, 200 and 1,000 calls: the
# difference of each backend's totals over 800 is the cost of one call
# without the connections' start-up (parse/bind/execute on the router,
# the routed statement on the partition, the call, both commits and the
# replies). The router backend is the file with PL/Proxy's call handler or
# ratelimit_proxy_route in it, the partition backend the other busy one. Only backends are counted,
# not pgbench or the kernel (no round trip, no wake-up).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
RATELIMIT_PACKAGES=("postgresql-$PG_MAJOR-plproxy")
ensure_packages
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
SMALL=200
LARGE=1000
KEYS=10000
OUT_MD=bench/plproxy-profile-latest.md
ROUTER_VERSION=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit_proxy.control)
CONFIG='{"kind": "token bucket", "rate": 1e9, "period": 1000}'

start_cluster -c shared_buffers=256MB -c synchronous_commit=off -c autovacuum=off
OUT_DIR="$CLUSTER_DIR/callgrind"
WORK=$(mktemp -d /tmp/ratelimit-plproxy-profile.XXXXXX)
chmod 755 "$WORK"
VALGRIND_PID=""
cleanup() {
  if [ -n "$VALGRIND_PID" ] && [ -d "$CLUSTER_DIR/data" ]; then
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ "${PROFILE_KEEP:-0}" = 1 ] && [ -d "$OUT_DIR" ]; then
    KEPT=$(mktemp -d /tmp/ratelimit-plproxy-profile-kept.XXXXXX)
    cp -r "$OUT_DIR" "$KEPT/" && echo "== callgrind files kept in $KEPT/callgrind"
  fi
  rm -rf "$WORK"
  stop_cluster
}
trap cleanup EXIT

PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE direct"
"${PSQL[@]}" -d direct -c "CREATE EXTENSION ratelimit" \
  -c "SELECT count(ratelimit_limit('n', 'k' || g, '$CONFIG', 0)) FROM generate_series(1, $KEYS) AS g" >/dev/null
for db in r1 r1_080; do
  version=$ROUTER_VERSION
  [ "$db" = r1_080 ] && version=0.8.0
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE $db"
  "${PSQL[@]}" -d "$db" -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$version'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=direct host=$CLUSTER_DIR port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')"
done
"${PSQL[@]}" -d r1 -c "CREATE FUNCTION bench_noop(hash integer) RETURNS integer LANGUAGE plproxy AS \$\$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT 1;
\$\$"
"${PSQL[@]}" -d postgres -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null

cat >"$WORK/grant.sql" <<SQL
\set k random(1, $KEYS)
SELECT ok FROM ratelimit_limit('n', 'k' || :k, '$CONFIG');
SQL
cat >"$WORK/noop.sql" <<SQL
\set k random(1, $KEYS)
SELECT bench_noop(ratelimit_hash('n', 'k' || :k));
SQL

# The same server again, under callgrind (every forked backend writes its own file).
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -w stop >/dev/null
mkdir -p "$OUT_DIR"
chown "$(cluster_os_user)" "$OUT_DIR"
# shellcheck disable=SC2046 # the server's options, one word each
as_cluster_user valgrind --tool=callgrind --callgrind-out-file="$OUT_DIR/cg.%p" \
  "$PG_BINDIR/postgres" -D "$CLUSTER_DIR/data" $(tr -d "'" <"$CLUSTER_DIR/server.opts") \
  >"$CLUSTER_DIR/valgrind.log" 2>&1 &
VALGRIND_PID=$!
for _ in $(seq 240); do "$PG_BINDIR/pg_isready" -q && break; sleep 0.5; done
"$PG_BINDIR/pg_isready" -q || { echo "the server did not start under valgrind" >&2; exit 1; }

# "<router backend> <partition backend>" instructions of one pgbench run of
# $2 calls of workload $1 in database $3 (a direct run: "<backend> 0").
# pgbench opens a second, short connection first: the busiest new files
# are the run's.
run_instructions() {
  local workload=$1 calls=$2 db=$3 before file total router=0 partition=0
  before=$(ls "$OUT_DIR" | sort)
  PGDATABASE=$db "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$calls" -f "$WORK/$workload.sql" >/dev/null
  sleep 5  # the backends write their files as they exit
  for file in $(comm -13 <(echo "$before") <(ls "$OUT_DIR" | sort)); do
    total=$(grep -m1 '^summary:' "$OUT_DIR/$file" | awk '{print $2}')
    if grep -q 'plproxy_call_handler\|ratelimit_proxy_route' "$OUT_DIR/$file"; then
      [ "$total" -gt "$router" ] && router=$total
    elif [ "$total" -gt "$partition" ]; then
      partition=$total
    fi
  done
  # A direct run: its backend is "the partition" here; report it first.
  [ "$router" -eq 0 ] && { echo "$partition 0"; return; }
  echo "$router $partition"
}

# "<router> <partition>" instructions per call of workload $1 in database $2.
per_call() {
  local small large
  read -r -a small <<<"$(run_instructions "$1" $SMALL "$2")"
  read -r -a large <<<"$(run_instructions "$1" $LARGE "$2")"
  echo "$(((large[0] - small[0]) / (LARGE - SMALL))) $(((large[1] - small[1]) / (LARGE - SMALL)))"
}

TARGETS=${PROFILE_TARGETS:-direct noop routed routed_080}
declare -A own part
declare -A SPECS=([direct]="grant direct" [noop]="noop r1" [routed]="grant r1" [routed_080]="grant r1_080")
for name in $TARGETS; do
  read -r workload db <<<"${SPECS[$name]}"
  read -r "own[$name]" "part[$name]" <<<"$(per_call "$workload" "$db")"
  echo "$name: ${own[$name]} + ${part[$name]} instructions per call"
done
{
  echo "# Instructions per routed call (bench/plproxy-profile.sh)"
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') with \`bench/plproxy-profile.sh\`; $("$PG_BINDIR/postgres" --version),"
  echo "PL/Proxy $(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-plproxy"), ratelimit_proxy $ROUTER_VERSION and 0.8.0 over"
  echo "ratelimit $(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit.control). Backend instructions (callgrind) of ($LARGE − $SMALL) calls / $((LARGE - SMALL)),"
  echo "pgbench -M prepared, 1 client, every call \`ratelimit_limit('n', <one of $KEYS keys>, cfg)\` granted"
  echo "(\"PL/Proxy, empty statement\": \`bench_noop(ratelimit_hash(...))\`, PL/Proxy routing \`SELECT 1\`)."
  echo
  echo "| | router backend | partition backend | total | total / direct |"
  echo "|---|---:|---:|---:|---:|"
  for name in $TARGETS; do
    label=$name
    case $name in
      direct) label="direct (one backend)" ;;
      noop) label="PL/Proxy, empty statement" ;;
      routed) label="routed \`ratelimit_limit\`, ratelimit_proxy $ROUTER_VERSION" ;;
      routed_080) label="routed \`ratelimit_limit\`, ratelimit_proxy 0.8.0 (PL/Proxy)" ;;
    esac
    router=${own[$name]} partition=${part[$name]}
    [ "$name" = direct ] && { partition=$router; router=0; }
    total=$((router + partition))
    echo "| $label | $router | $partition | $total | $(awk -v a="$total" -v b="${own[direct]:-0}" 'BEGIN { if (b == 0) print "–"; else printf "%.2f", a / b }') |"
  done
} >"$OUT_MD"
cat "$OUT_MD"
