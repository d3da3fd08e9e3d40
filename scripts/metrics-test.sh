#!/usr/bin/env bash
# Tests examples/prometheus: Debian's prometheus-postgres-exporter, run with
# queries.yaml against a throwaway cluster (shared_preload_libraries =
# 'ratelimit', so that ratelimit_stats counts on 15), exports every counter
# of ratelimit_stats per limit name with the view's values, under names
# `promtool check metrics` has nothing to say about (counters end in _total);
# and alerts.yaml passes `promtool check rules` and its unit tests
# (alerts_test.yaml).
#
# The cluster gets traffic in two databases that makes every counter
# non-zero somewhere: grants, refusals, a refund (fractional tokens), a
# shadow limit's refusals, a call that waits for another's row lock, memory
# limits out of room, a name with quotes, a backslash and a newline, and a
# name past ratelimit.stats_max_names (the overflow row). Then the exporter
# (as the cluster's OS user, on a free port of 127.0.0.1, the default
# collectors off) is scraped with curl, three times:
#   1. as a pg_monitor role connected to app1: every database's counters,
#      summed per name, and the overflow row, without a datname label;
#   2. as a plain role with two DSNs, app1 and app2: each database's own
#      names, labelled datname = app1 / app2;
#   3. with a copy of queries.yaml whose granted column reads refused: the
#      comparison must fail (the test can fail);
#   4. with a copy of queries.yaml with 0.10.0's names (no _total): promtool
#      check metrics must complain (the lint can fail).
# `promtool check metrics` must print nothing on scrapes 1 and 2, whole
# (the exporter's own metrics too).
# Each scrape is compared with the view as that role reads it, numerically,
# for every row and every column of the view (the columns come from the
# catalog: a counter the file does not export fails).
#
# promtool is Debian's (package prometheus, 2.42 on bookworm), taken out of
# the package's .deb (apt-get download) into RATELIMIT_CACHE rather than
# installed: installing prometheus would start a Prometheus server.
# Needs the extension installed (make install), python3 and curl; installs
# prometheus-postgres-exporter and curl if missing. Runs on the host's
# server (RATELIMIT_PG_BINDIR honoured), not in a RATELIMIT_CHROOT.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
CLUSTER_DIR=""
EXPORTER_PID=""
EXPORTER=/usr/bin/prometheus-postgres-exporter
EXAMPLES=examples/prometheus
if [ -n "${RATELIMIT_CHROOT:-}" ]; then
  echo "FAIL: scripts/metrics-test.sh runs against the host's server, not in RATELIMIT_CHROOT" >&2
  exit 2
fi

stop_exporter() {
  if [ -n "$EXPORTER_PID" ]; then
    kill "$EXPORTER_PID" 2>/dev/null || true
    wait "$EXPORTER_PID" 2>/dev/null || true
    EXPORTER_PID=""
  fi
}
trap 'stop_exporter; stop_cluster' EXIT

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The exporter and curl (scripts/lib.sh's RATELIMIT_PACKAGES has them; this
# stage alone installs them too).
missing=()
for pkg in prometheus-postgres-exporter curl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
failed=0
require_program "$EXPORTER" "Debian package prometheus-postgres-exporter" || exit 1
require_program curl "Debian package curl" || exit 1
require_program python3 "comparing the scrape with the view" || exit 1

# promtool of Debian's prometheus package, extracted once into the cache
# (per package version); prints its path.
promtool_path() {
  if command -v promtool >/dev/null; then
    command -v promtool
    return
  fi
  local version cache tmp
  version=$(apt-cache policy prometheus | awk '/Candidate:/ { print $2 }')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    sudo_if_needed apt-get update -qq
    version=$(apt-cache policy prometheus | awk '/Candidate:/ { print $2 }')
  fi
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    echo "no Debian package prometheus in apt's lists" >&2
    return 1
  fi
  cache=${RATELIMIT_CACHE:-/var/cache/ratelimit}
  mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache=${XDG_CACHE_HOME:-$HOME/.cache}/ratelimit
  cache=$cache/promtool-${version//[^A-Za-z0-9.+~-]/_}
  if [ ! -x "$cache/promtool" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d)
    chmod 777 "$tmp"  # apt-get download writes as _apt where it can
    (cd "$tmp" && apt-get download -q "prometheus=$version" >/dev/null 2>"$tmp/download.log") ||
      { cat "$tmp/download.log" >&2; rm -rf "$tmp"; return 1; }
    dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$tmp/promtool"
    chmod 755 "$tmp/promtool"
    mv "$tmp/promtool" "$cache/promtool"
    rm -rf "$tmp"
  fi
  echo "$cache/promtool"
}

# promtool check metrics on a whole scrape ($1): it must print nothing
# (Prometheus's naming conventions: counters end in _total, HELP on every
# metric, ...).
lint_scrape() {
  local out rc=0
  [ -n "${PROMTOOL:-}" ] || { echo "FAIL: no promtool to check $1" >&2; return 1; }
  out=$("$PROMTOOL" check metrics <"$1" 2>&1) || rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then
    echo "$out"
    echo "FAIL: promtool check metrics on $(basename "$1") (exit $rc)" >&2
    return 1
  fi
  echo "ok - promtool check metrics prints nothing on $(basename "$1") ($(grep -c '^# HELP' "$1") metrics)"
}

echo "== alerts.yaml: promtool check rules, promtool test rules alerts_test.yaml"
PROMTOOL=""
if PROMTOOL=$(promtool_path); then
  "$PROMTOOL" --version 2>&1 | head -1
  (cd "$EXAMPLES" && "$PROMTOOL" check rules alerts.yaml && "$PROMTOOL" test rules alerts_test.yaml) || failed=1
else
  echo "FAIL: no promtool (Debian package prometheus)" >&2
  failed=1
fi

start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.stats_max_names=8 -c ratelimit.memory_max_keys=4
PSQL=("$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1)
psql_in() { local db=$1; shift; PGDATABASE=$db run_pg_client "${PSQL[@]}" "$@"; }

echo "== traffic in databases app1 and app2"
run_pg_client "${PSQL[@]}" -c "CREATE DATABASE app1" -c "CREATE DATABASE app2" \
  -c "CREATE ROLE metrics_monitor LOGIN IN ROLE pg_monitor" -c "CREATE ROLE metrics_plain LOGIN"
psql_in app1 >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
SET ratelimit.now = '2026-01-01 00:00:00+00';
-- api: 5 tokens an hour; 4.75 granted in 5 calls, 3 refused, 0.25 refunded.
SELECT ratelimit_define('api', '{"kind": "token bucket", "rate": 5, "period": "1 hour"}');
SELECT (ratelimit_limit('api', 'alice')).ok FROM generate_series(1, 4);
SELECT ok FROM ratelimit_limit('api', 'alice', count => 0.75);
SELECT ok FROM ratelimit_limit('api', 'alice', count => 0.5);
SELECT (ratelimit_limit('api', 'alice')).ok FROM generate_series(1, 2);
SELECT ratelimit_refund('api', 'alice', 0.25);
-- trial: shadow mode, 1 call an hour: 1 granted, 2 shadow refusals.
SELECT ratelimit_define('trial', '{"kind": "fixed window", "rate": 1, "period": "1 hour", "shadow": true}');
SELECT (ratelimit_limit('trial', 'bob')).ok FROM generate_series(1, 3);
-- An inline config (a name without a definition).
SELECT (ratelimit_limit('inline', 'k', '{"kind": "sliding window", "rate": 2, "period": 60000}')).ok FROM generate_series(1, 3);
-- A name the exposition format must escape.
SELECT ratelimit_define(E'tenant "a\\b"\nline 2 \u00e9', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT (ratelimit_limit(E'tenant "a\\b"\nline 2 \u00e9', 'k')).ok FROM generate_series(1, 4);
-- sessions: a memory limit; ratelimit.memory_max_keys = 4: keys 5 and 6 find no room (53200).
SELECT ratelimit_define('sessions', '{"kind": "token bucket", "rate": 2, "period": "1 day", "storage": "memory"}');
DO $$
BEGIN
  FOR i IN 1..6 LOOP
    BEGIN
      PERFORM ratelimit_limit('sessions', 's' || i);
    EXCEPTION WHEN SQLSTATE '53200' THEN NULL;
    END;
  END LOOP;
END
$$;
-- waits: its row exists (a call that finds none inserts it, and one racing
-- that insert waits on the unique index, not on the row lock it counts).
SELECT ratelimit_define('waits', '{"kind": "token bucket", "rate": 100, "period": "1 hour"}');
SELECT ok FROM ratelimit_limit('waits', 'k');
SQL

# waits: a call that waits for another transaction's row lock. The holder
# takes the lock and sleeps; once the waiter waits on it, the holder's sleep
# is cancelled (its transaction rolls back) and the waiter decides.
OUT=$CLUSTER_DIR/lock
psql_in app1 -v ON_ERROR_STOP=0 -c "SET application_name = 'metrics_holder'" -c "BEGIN" \
  -c "SELECT ok FROM ratelimit_limit('waits', 'k')" -c "SELECT pg_sleep(120)" -c "COMMIT" >"$OUT.holder" 2>&1 &
holder=$!
wait_for() {  # a condition (SQL) true within 30 s
  local _
  for _ in $(seq 1 300); do
    [ "$(psql_in app1 -c "SELECT $1")" = t ] && return 0
    sleep 0.1
  done
  echo "FAIL: timed out waiting for: $1" >&2
  return 1
}
wait_for "EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'metrics_holder' AND query = 'SELECT pg_sleep(120)')"
psql_in app1 -c "SET application_name = 'metrics_waiter'" -c "SELECT ok FROM ratelimit_limit('waits', 'k')" >"$OUT.waiter" 2>&1 &
waiter=$!
wait_for "EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'metrics_waiter' AND wait_event_type = 'Lock')"
psql_in app1 -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'metrics_holder'" >/dev/null
wait "$holder" || true
wait "$waiter" || { cat "$OUT.waiter"; echo "FAIL: the waiting call failed" >&2; exit 1; }

psql_in app2 >/dev/null <<'SQL'
CREATE EXTENSION ratelimit;
SET ratelimit.now = '2026-01-01 00:00:00+00';
-- api here too: a pg_read_all_stats role reads both databases' api summed.
SELECT ratelimit_define('api', '{"kind": "token bucket", "rate": 5, "period": "1 hour"}');
SELECT (ratelimit_limit('api', 'carol')).ok FROM generate_series(1, 2);
SELECT (ratelimit_limit('app2-only', 'k', '{"kind": "fixed window", "rate": 1, "period": 60000}')).ok FROM generate_series(1, 2);
-- Eight names take ratelimit.stats_max_names' eight slots: late goes to the overflow row.
SELECT ratelimit_define('late', '{"kind": "token bucket", "rate": 1, "period": "1 hour"}');
SELECT (ratelimit_limit('late', 'k')).ok FROM generate_series(1, 2);
SQL
psql_in app1 -c "SELECT coalesce(name, '(overflow)'), granted, refused, shadow_refused, tokens_granted, lock_waits, memory_full FROM ratelimit_stats ORDER BY name NULLS LAST"

# The view's rows as ROLE reads them in DB, as JSON (the checker's SOURCE).
view_rows() {
  PGUSER=$1 psql_in "$2" -c "SELECT coalesce(json_agg(s), '[]') FROM (SELECT *, extract(epoch FROM stats_reset) AS reset_epoch FROM ratelimit_stats) s"
}
psql_in app1 -c "SELECT json_agg(attname ORDER BY attnum) FROM pg_attribute
  WHERE attrelid = 'ratelimit_stats'::regclass AND attnum > 0 AND NOT attisdropped" >"$CLUSTER_DIR/columns.json"

# Starts the exporter (as the cluster's OS user, which must read $1, the
# queries file) with DATA_SOURCE_NAME $2 on a free port of 127.0.0.1 and
# scrapes /metrics into $3 (the first answer, with the file's queries run).
scrape() {
  local queries=$1 dsn=$2 out=$3 log=$3.log port _ user=()
  [ "$(id -u)" -eq 0 ] && user=(setpriv --reuid=postgres --regid=postgres --init-groups)
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 40000))
    # A port something already answers on is not ours to scrape.
    curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && continue
    DATA_SOURCE_NAME=$dsn "${user[@]}" "$EXPORTER" --web.listen-address="127.0.0.1:$port" \
      --extend.query-path="$queries" --disable-default-metrics --disable-settings-metrics \
      --no-collector.database --no-collector.bgwriter >"$log" 2>&1 &
    EXPORTER_PID=$!
    for _ in $(seq 1 100); do
      if ! kill -0 "$EXPORTER_PID" 2>/dev/null; then
        wait "$EXPORTER_PID" || true
        EXPORTER_PID=""
        grep -q "address already in use" "$log" && continue 2
        cat "$log"
        echo "FAIL: the exporter exited" >&2
        return 1
      fi
      if curl -fsS -o "$out" "http://127.0.0.1:$port/metrics" 2>/dev/null; then
        echo "== scraped the exporter on 127.0.0.1:$port ($(grep -c '^ratelimit_stats_' "$out") ratelimit_stats series)"
        stop_exporter
        if grep -E 'level=(error|warn)' "$log"; then
          echo "FAIL: the exporter logged errors" >&2
          return 1
        fi
        return 0
      fi
      sleep 0.1
    done
    cat "$log"
    echo "FAIL: the exporter did not answer on 127.0.0.1:$port" >&2
    stop_exporter
    return 1
  done
  echo "FAIL: no free port for the exporter" >&2
  return 1
}

DIR=$CLUSTER_DIR/metrics
mkdir -p "$DIR"
cp "$EXAMPLES/queries.yaml" "$DIR/queries.yaml"
chmod 755 "$DIR"
chmod 644 "$DIR/queries.yaml" "$CLUSTER_DIR/columns.json"
DSN="host=$PGHOST port=$PGPORT sslmode=disable"
CHECK=(python3 scripts/prometheus_metrics_check.py)

echo "== 1. as a pg_monitor role in app1: every database's counters, summed per name, and the overflow row"
view_rows metrics_monitor app1 >"$DIR/monitor.json"
if scrape "$DIR/queries.yaml" "$DSN user=metrics_monitor dbname=app1" "$DIR/monitor.metrics"; then
  "${CHECK[@]}" "$DIR/monitor.metrics" "$CLUSTER_DIR/columns.json" "=$DIR/monitor.json" --require-nonzero || failed=1
  lint_scrape "$DIR/monitor.metrics" || failed=1
  grep '^# HELP ratelimit_stats_' "$DIR/monitor.metrics"
  python3 -c 'import json, sys; rows = json.load(open(sys.argv[1])); sys.exit(0 if any(r["name"] is None for r in rows) else 1)' \
    "$DIR/monitor.json" || { echo "FAIL: the traffic made no overflow row" >&2; failed=1; }
  grep '^ratelimit_stats_granted' "$DIR/monitor.metrics"
else
  failed=1
fi

echo "== 2. as a plain role, DSNs of app1 and app2: each database's names, with datname"
view_rows metrics_plain app1 >"$DIR/app1.json"
view_rows metrics_plain app2 >"$DIR/app2.json"
if scrape "$DIR/queries.yaml" "$DSN user=metrics_plain dbname=app1,$DSN user=metrics_plain dbname=app2" "$DIR/plain.metrics"; then
  "${CHECK[@]}" "$DIR/plain.metrics" "$CLUSTER_DIR/columns.json" "app1=$DIR/app1.json" "app2=$DIR/app2.json" || failed=1
  lint_scrape "$DIR/plain.metrics" || failed=1
  grep '^ratelimit_stats_refused' "$DIR/plain.metrics"
else
  failed=1
fi

echo "== 3. a queries file whose granted reads refused: the comparison must fail"
sed 's/^\( *\)granted AS granted_total,$/\1refused AS granted_total,/' "$EXAMPLES/queries.yaml" >"$DIR/wrong.yaml"
chmod 644 "$DIR/wrong.yaml"
if cmp -s "$EXAMPLES/queries.yaml" "$DIR/wrong.yaml"; then
  echo "FAIL: could not make the wrong queries file (no line 'granted AS granted_total,' in queries.yaml)" >&2
  failed=1
elif scrape "$DIR/wrong.yaml" "$DSN user=metrics_monitor dbname=app1" "$DIR/wrong.metrics"; then
  rc=0
  "${CHECK[@]}" "$DIR/wrong.metrics" "$CLUSTER_DIR/columns.json" "=$DIR/monitor.json" >"$DIR/wrong.out" || rc=$?
  if [ $rc -eq 1 ] && grep -q "ratelimit_stats_granted" "$DIR/wrong.out"; then
    echo "ok - the comparison fails on it: $(grep -c '^FAIL' "$DIR/wrong.out") differences, e.g. $(head -1 "$DIR/wrong.out")"
  else
    cat "$DIR/wrong.out"
    echo "FAIL: the comparison did not catch granted reading refused (exit $rc)" >&2
    failed=1
  fi
else
  failed=1
fi

echo "== 4. 0.10.0's names (counters without _total): promtool check metrics must complain"
sed 's/^\( *\)\([a-z_]*\) AS \2_total,$/\1\2,/; s/^\( *\)- \([a-z_]*\)_total:$/\1- \2:/' "$EXAMPLES/queries.yaml" >"$DIR/old-names.yaml"
chmod 644 "$DIR/old-names.yaml"
if ! grep -q '^ *granted,$' "$DIR/old-names.yaml"; then
  echo "FAIL: could not make the old-names queries file" >&2
  failed=1
elif [ -z "${PROMTOOL:-}" ]; then
  failed=1
elif scrape "$DIR/old-names.yaml" "$DSN user=metrics_monitor dbname=app1" "$DIR/old-names.metrics"; then
  "$PROMTOOL" check metrics <"$DIR/old-names.metrics" >"$DIR/old-names.lint" 2>&1 || true
  if grep -q 'ratelimit_stats_granted counter metrics should have "_total" suffix' "$DIR/old-names.lint"; then
    echo "ok - promtool complains: $(grep -c '_total" suffix' "$DIR/old-names.lint") counters without _total"
  else
    cat "$DIR/old-names.lint"
    echo "FAIL: promtool check metrics did not flag 0.10.0's counter names" >&2
    failed=1
  fi
else
  failed=1
fi

check_server_log_for_crashes || failed=1
[ $failed -eq 0 ] && echo "== metrics test passed"
exit $failed
