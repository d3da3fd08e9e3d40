#!/usr/bin/env bash
# Runs every test: C++ unit tests, then pg_regress, the isolation specs, the
# libpqxx client contention tests, the C++ client's API tests, the example
# HTTP service's end-to-end test, the fault tests and the DDL-under-load
# tests (both crash and restart the server) against a throwaway cluster,
# every SQL function under valgrind's memcheck (its own cluster), then the
# unit and client tests again built with ASan+UBSan. Installs missing Debian
# packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

passed=0
failed=0
record() { if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $2"; fi; }

ensure_packages

echo "== C++ unit tests (CMake/CTest)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 >/dev/null
rc=0; ctest --test-dir build --output-on-failure || rc=$?
record $rc "unit tests"

build_and_install_extension
trap stop_cluster EXIT
start_cluster
# For build/faults_test, which restarts the server and runs pg_dump/pg_restore
# through scripts/cluster-ctl.sh.
export CLUSTER_DIR PG_BINDIR

echo "== PGXN metadata (scripts/check-meta.sh)"
rc=0; scripts/check-meta.sh || rc=$?
record $rc "PGXN metadata"

echo "== pg_regress and isolation specs (make installcheck)"
rc=0; make -s installcheck || rc=$?
if [ $rc -ne 0 ]; then
  for diffs in regression.diffs output_iso/regression.diffs; do [ -f "$diffs" ] && cat "$diffs"; done
fi
record $rc "make installcheck"

echo "== memcheck: every SQL function under valgrind (scripts/memcheck.sh)"
rc=0; scripts/memcheck.sh || rc=$?
record $rc "memcheck"

echo "== libpqxx client contention tests (build/client_tests)"
rc=0; build/client_tests || rc=$?
record $rc "client contention tests"

echo "== C++ client API tests (build/client_api_tests)"
rc=0; build/client_api_tests || rc=$?
record $rc "C++ client API tests"

echo "== behind pgbouncer, pool_mode = transaction (scripts/pgbouncer-test.sh)"
rc=0; scripts/pgbouncer-test.sh || rc=$?
record $rc "behind pgbouncer"

echo "== example HTTP service end-to-end (examples/http-api/run-e2e.sh)"
rc=0; examples/http-api/run-e2e.sh || rc=$?
record $rc "example HTTP service end-to-end"

echo "== fault tests: kill, crash and restart, timeouts, DROP/CREATE EXTENSION, dump/restore (build/faults_test)"
rc=0; build/faults_test || rc=$?
record $rc "fault tests"
# The crash test restarts the server itself; if it could not, later stages
# still need one.
if ! cluster_server_running; then
  record 1 "server running after the fault tests"
  start_cluster_server || echo "could not start the server again"
fi

echo "== DDL under load: REINDEX CONCURRENTLY, CREATE/DROP INDEX, triggers, VACUUM FULL, CLUSTER, fillfactor while clients call; then a crash (build/ddl_load_test)"
rc=0; build/ddl_load_test || rc=$?
record $rc "DDL under load"
# Its crash test restarts the server itself; if it could not, later stages
# still need one.
if ! cluster_server_running; then
  record 1 "server running after the DDL-under-load tests"
  start_cluster_server || echo "could not start the server again"
fi

echo "== sanitizers: core_tests and client_tests built with ASan+UBSan (build-asan)"
rc=0
if cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRATELIMIT_SANITIZE=ON >/dev/null; then
  cmake --build build-asan -j2 --target core_tests client_tests >/dev/null || rc=$?
else
  rc=1
fi
record $rc "ASan+UBSan build"
if [ $rc -eq 0 ]; then
  # Any ASan, LeakSanitizer or UBSan report makes the program fail (UBSan
  # through -fno-sanitize-recover=all).
  sanitizer_env=(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1)
  rc=0; env "${sanitizer_env[@]}" build-asan/core_tests --gtest_brief=1 || rc=$?
  record $rc "unit tests under ASan+UBSan"
  rc=0; env "${sanitizer_env[@]}" build-asan/client_tests || rc=$?
  record $rc "client contention tests under ASan+UBSan"
fi

echo "== Debian package: dpkg-buildpackage, dpkg -i, installcheck against the installed files (scripts/package-test.sh)"
rc=0; scripts/package-test.sh || rc=$?
record $rc "Debian package"

rc=0; check_server_log_for_crashes || rc=$?
record $rc "server log free of crashes"

stop_cluster
echo "test suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
