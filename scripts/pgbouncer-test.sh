#!/usr/bin/env bash
# Runs the extension's pooler tests through a real pgbouncer in transaction
# pooling mode, in front of the throwaway cluster scripts/test.sh started
# (CLUSTER_DIR, PGHOST and PGPORT set; the extension installed):
#
#   - test/regress/pooler (pooled.sql) with scripts/regress.sh: SET LOCAL of
#     the extension's settings, throws => true aborting the caller's
#     transaction, named limits redefined while other server connections
#     cached them;
#   - build/client_api_tests (the C++ client's API tests);
#   - the hot-key contention tests with their exact bounds (build/client_tests).
#
# pgbouncer (Debian package pgbouncer) runs as the cluster's OS user on a
# unix socket in $CLUSTER_DIR/pgbouncer, with fewer server connections (8)
# than the contention tests' clients, so transactions of different clients
# share server connections. It is stopped by PID on exit, on failure too.
# With RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (a cluster of another
# major, scripts/pgmajors.sh), pgbouncer, psql and pg_regress are the root's
# and run there, and the host-built test programs reach pgbouncer's socket
# below the root's /tmp. A missing program fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
: "${CLUSTER_DIR:?pgbouncer-test.sh: CLUSTER_DIR is not set (run it from scripts/test.sh)}"

PGBOUNCER=/usr/sbin/pgbouncer
require_server_program "$PGBOUNCER" "Debian package pgbouncer"
require_program build/client_api_tests "the C++ client's API tests: cmake --build build"
require_program build/client_tests "the contention tests: cmake --build build"
BOUNCER_DIR=$CLUSTER_DIR/pgbouncer
BOUNCER_PORT=6432
# The directories as pgbouncer and the server see them.
bouncer_dir=$(server_path "$BOUNCER_DIR")
mkdir -p "$BOUNCER_DIR"
echo '"postgres" ""' >"$BOUNCER_DIR/userlist.txt"
cat >"$BOUNCER_DIR/pgbouncer.ini" <<INI
[databases]
* = host=$(server_path "$CLUSTER_DIR") port=${PGPORT:-5432}

[pgbouncer]
listen_addr =
listen_port = $BOUNCER_PORT
unix_socket_dir = $bouncer_dir
auth_type = trust
auth_file = $bouncer_dir/userlist.txt
pool_mode = transaction
admin_users = postgres
default_pool_size = 8
max_client_conn = 200
logfile = $bouncer_dir/pgbouncer.log
pidfile = $bouncer_dir/pgbouncer.pid
ignore_startup_parameters = extra_float_digits, options
INI
chown_to_cluster_user "$BOUNCER_DIR"

stop_pgbouncer() {
  local pid
  pid=$(cat "$BOUNCER_DIR/pgbouncer.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}
trap stop_pgbouncer EXIT
as_cluster_user "$PGBOUNCER" -d "$bouncer_dir/pgbouncer.ini"
export PGHOST=$BOUNCER_DIR PGPORT=$BOUNCER_PORT
for _ in $(seq 50); do run_pg_client "$PG_BINDIR/pg_isready" -q && break; sleep 0.1; done
mode=$(run_pg_client "$PG_BINDIR/psql" -X -At -d pgbouncer -c "SHOW CONFIG" | awk -F'|' '$1 == "pool_mode" { print $2 }')
[ "$mode" = transaction ] || { echo "pgbouncer is not in transaction mode ($mode)" >&2; exit 1; }
echo "-- pgbouncer $(as_cluster_user "$PGBOUNCER" --version | head -1), pool_mode = $mode, on $BOUNCER_DIR:$BOUNCER_PORT"

failed=0
run_pg_client "$PG_BINDIR/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS pooled" -c "CREATE DATABASE pooled"
run_pg_client "$PG_BINDIR/psql" -X -q -d pooled -c "CREATE EXTENSION ratelimit"
scripts/regress.sh --running pooler || failed=1
echo "-- the C++ client's API tests through pgbouncer"
PGDATABASE=pooled build/client_api_tests --gtest_brief=1 || failed=1
echo "-- hot-key contention tests (exact bounds) through pgbouncer"
PGDATABASE=pooled build/client_tests --gtest_brief=1 \
  --gtest_filter='ContentionTest.HotKeyTokenBucket:ContentionTest.HotKeyFixedWindow:ContentionTest.HotKeySharded' || failed=1
exit $failed
