#!/usr/bin/env bash
# Tests ratelimit_stats with shared memory: a throwaway cluster of its own
# started with shared_preload_libraries = 'ratelimit' and
# ratelimit.stats_max_names = 3, then pg_regress (test/stats/sql) and the
# isolation spec counting lock waits (test/stats/specs); then a second
# cluster with the largest ratelimit.stats_max_names, 1000000 (about 1.1 GB
# of shared memory): the C++ client's stats() test, and stats_many, which
# fills every slot (a million calls: about half a minute).
# The main cluster of scripts/test.sh runs without the preload, where
# sql/stats.sql checks the view is empty. Needs the extension installed
# (make install) and build/client_api_tests (CMake); a missing program fails
# the test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
failed=0
require_program build/client_api_tests "the C++ client's API tests: cmake --build build" || failed=1
trap stop_cluster EXIT
start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.stats_max_names=3
PKGLIB=$("$PG_BINDIR/pg_config" --pkglibdir)/pgxs/src/test
OUT=${STATS_TEST_OUT:-$CLUSTER_DIR/stats-results}
"$PKGLIB/regress/pg_regress" --bindir="$PG_BINDIR" --host="$PGHOST" --port="$PGPORT" --inputdir=test/stats \
  --outputdir="$OUT" --load-extension=ratelimit --dbname=stats_regression stats_preload || {
  cat "$OUT/regression.diffs" 2>/dev/null || true
  failed=1
}
"$PKGLIB/isolation/pg_isolation_regress" --bindir="$PG_BINDIR" --host="$PGHOST" --port="$PGPORT" \
  --inputdir=test/stats --outputdir="$OUT/iso" --load-extension=ratelimit --dbname=stats_isolation lock_waits || {
  cat "$OUT/iso/regression.diffs" 2>/dev/null || true
  failed=1
}
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
"$PKGLIB/regress/pg_regress" --bindir="$PG_BINDIR" --host="$PGHOST" --port="$PGPORT" --inputdir=test/stats \
  --outputdir="$OUT" --load-extension=ratelimit --dbname=stats_regression stats_many || {
  cat "$OUT/regression.diffs" 2>/dev/null || true
  failed=1
}
check_server_log_for_crashes || failed=1
exit $failed
