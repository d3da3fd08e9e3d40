#!/usr/bin/env bash
# Tests ratelimit_stats with shared memory: a throwaway cluster of its own
# started with shared_preload_libraries = 'ratelimit' and
# ratelimit.stats_max_names = 3, then pg_regress (test/stats/sql: what is
# counted, and stats_databases: per database, what a plain role and a
# pg_read_all_stats member read) and the isolation spec counting lock
# waits (test/stats/specs); then a second
# cluster with the largest ratelimit.stats_max_names, 1000000 (about 1.1 GB
# of shared memory): the C++ client's stats() test, and stats_many, which
# fills every slot (a million calls: about half a minute); then
# scripts/stats-backends-test.sh (the per-backend slots, a cluster of its own).
# The main cluster of scripts/test.sh runs without the preload, where
# sql/stats.sql checks the view is empty (on 15 and 16; from 17 the DSM
# registry serves it without the preload, and this script tests the
# preloaded path). Needs the extension installed (make install) and
# build/client_api_tests (CMake); a missing program fails the test. With
# RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's
# enter_major exports them), the clusters, pg_regress and the isolation
# tester are another major's, in its root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR):
# this script stops only clusters it started.
CLUSTER_DIR=""
PG_REGRESS=$(server_pgxs_program pg_regress)
PG_ISOLATION_REGRESS=$(server_pgxs_program pg_isolation_regress)
SRC=$(server_source_dir)
failed=0
require_program build/client_api_tests "the C++ client's API tests: cmake --build build" || failed=1

# pg_regress (or the isolation tester, $1) of test/stats, writing to $2 (a
# host path), the rest of the arguments its own; prints the diffs on failure.
stats_regress() {
  local program=$1 out=$2
  shift 2
  run_pg_client "$program" --bindir="$PG_BINDIR" --host="$(server_path "$PGHOST")" --port="$PGPORT" \
    --inputdir="$SRC/test/stats" --outputdir="$(server_path "$out")" --load-extension=ratelimit "$@" || {
    cat "$out/regression.diffs" 2>/dev/null || true
    return 1
  }
}

trap stop_cluster EXIT
start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.stats_max_names=3
# STATS_TEST_OUT keeps the results (a host path; below RATELIMIT_CHROOT when
# that is set); by default they go with the cluster's directory.
OUT=${STATS_TEST_OUT:-$CLUSTER_DIR/stats-results}
stats_regress "$PG_REGRESS" "$OUT" --dbname=stats_regression stats_preload stats_databases || failed=1
stats_regress "$PG_ISOLATION_REGRESS" "$OUT/iso" --dbname=stats_isolation lock_waits || failed=1
check_server_log_for_crashes || failed=1
stop_cluster
start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.stats_max_names=1000000
# The C++ client's stats() against counting shared memory; here, where its
# inline-config names get a row each (of 3 slots, names without a definition
# get 1).
if [ -x build/client_api_tests ]; then
  build/client_api_tests --gtest_brief=1 --gtest_filter='ApiTest.Stats:ApiTest.ShadowMode' || failed=1
fi
OUT=${STATS_TEST_OUT:+$STATS_TEST_OUT/many}
OUT=${OUT:-$CLUSTER_DIR/stats-results}
stats_regress "$PG_REGRESS" "$OUT" --dbname=stats_regression stats_many || failed=1
check_server_log_for_crashes || failed=1
stop_cluster
# The per-backend slots: sessions kept open, idle, terminated, a reset.
scripts/stats-backends-test.sh || failed=1
exit $failed
