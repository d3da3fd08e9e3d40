#!/usr/bin/env bash
# Runs every test: C++ unit tests, then pg_regress, the isolation specs and
# the libpqxx client contention tests against a throwaway cluster. Installs
# missing Debian packages first.
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

echo "== pg_regress and isolation specs (make installcheck)"
rc=0; make -s installcheck || rc=$?
if [ $rc -ne 0 ]; then
  for diffs in regression.diffs output_iso/regression.diffs; do [ -f "$diffs" ] && cat "$diffs"; done
fi
record $rc "make installcheck"

echo "== libpqxx client contention tests (build/client_tests)"
rc=0; build/client_tests || rc=$?
record $rc "client contention tests"

rc=0; check_server_log_for_crashes || rc=$?
record $rc "server log free of crashes"

stop_cluster
echo "test suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
