#!/usr/bin/env bash
# Tests ratelimit_stats with shared memory, on throwaway clusters of its own
# started with shared_preload_libraries = 'ratelimit':
#
# 1. test/regress/stats (ratelimit.stats_max_names = 3), run by
#    scripts/regress.sh on a cluster of its own: pg_regress (what is
#    counted, and stats_databases: per database, what a plain role and a
#    pg_read_all_stats member read) and the isolation spec counting lock
#    waits;
# 2. a cluster with test/regress/stats-million's settings, the largest
#    ratelimit.stats_max_names, 1000000 (about 1.1 GB of shared memory): the
#    C++ client's stats() test, then that suite's stats_many, which fills
#    every slot (a million calls: about half a minute);
# 3. scripts/stats-backends-test.sh (the per-backend slots, a cluster of its
#    own).
#
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
failed=0
require_program build/client_api_tests "the C++ client's API tests: cmake --build build" || failed=1

trap stop_cluster EXIT
scripts/regress.sh stats || failed=1
settings=$(scripts/regress.sh --settings stats-million)
read -ra MILLION <<<"$settings"
start_cluster "${MILLION[@]}"
# The C++ client's stats() against counting shared memory; here, where its
# inline-config names get a row each (of 3 slots, names without a definition
# get 1).
if [ -x build/client_api_tests ]; then
  build/client_api_tests --gtest_brief=1 --gtest_filter='ApiTest.Stats:ApiTest.ShadowMode' || failed=1
fi
scripts/regress.sh --running stats-million || failed=1
check_server_log_for_crashes || failed=1
stop_cluster
# The per-backend slots: sessions kept open, idle, terminated, a reset.
scripts/stats-backends-test.sh || failed=1
exit $failed
