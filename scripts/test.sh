#!/usr/bin/env bash
# Runs every test. Which stage runs on which PostgreSQL major:
#
#   stage                                                      15  17  18
#   C++ unit tests (CTest), and again under ASan+UBSan          x   -   -
#   build of the extension with -Werror                         x   x   x
#   pg_regress and the isolation specs (make installcheck)      x   x   x
#   ratelimit_stats preloaded (scripts/stats-test.sh)           x   x   x
#   memory limits, preloaded and not (scripts/memory-test.sh)   x   x   x
#   memory limits across restarts: fast stops with open
#     transactions and under load, calls racing the start,
#     damaged state files, crashes (memory-restart-test.sh)     x   x   x
#   memory limits through the WAL: a crash after CHECKPOINT,
#     kill -9 under load, a failover to a streaming standby, a
#     crash during recovery, damaged records, no library, no
#     worker (memory-durability-test.sh, and the red team's
#     cases: memory-durability-redteam-test.sh)                 x   x   x
#   memory sizes in docs/memory.md (memory-sizing-test.sh)      x   x   x
#   every SQL function under memcheck (scripts/memcheck.sh)     x   x   x
#   libpqxx contention and C++ client API tests                 x   x   x
#   behind pgbouncer (scripts/pgbouncer-test.sh)                x   x   x
#   fault tests, DDL under load (crash and restart)             x   x   x
#   PL/Proxy router (scripts/plproxy-test.sh)                   x   x   x
#   docs: README length, links, the code layout's tables
#     (scripts/check-docs.sh), PGXN metadata, HTTP example,
#     Debian package                                            x   -   -
#   Prometheus exporter scraped against ratelimit_stats,
#     promtool on the example alerts (scripts/metrics-test.sh)  x   -   -
#   the playground page in headless chromium, driven by
#     playwright-core (scripts/playground-test.sh)              x   -   -
#   the main job's demo, its output checked (demo-test.sh)      x   -   -
#
# 15 is the host's server; each other supported major (RATELIMIT_MAJORS,
# default "17 18"; empty skips them) runs in a chroot of the Debian suite
# that carries it (scripts/pgmajors.sh), where its server, pg_regress,
# valgrind and pgbouncer run; the client test programs are the host's
# (CMake), against its socket. The unit, sanitizer and example stages test
# code that does not depend on the server's major. A stage whose program is
# missing fails; none is skipped. Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/pgmajors.sh
RATELIMIT_MAJORS=${RATELIMIT_MAJORS-17 18}

passed=0
failed=0
record() { if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $2"; fi; }

# Runs "$@" (a program of the tree: build/..., scripts/...) as the stage
# named $1 and records its result; a missing program fails the stage.
stage() {
  local name=$1 rc=0
  shift
  if require_program "$1" "stage \"$name\""; then "$@" || rc=$?; else rc=127; fi
  record $rc "$name"
}

# Starts the server again if a test that crashes it could not (later stages
# need one), and records that as a failure.
ensure_server_running() {
  cluster_server_running && return 0
  record 1 "$1"
  start_cluster_server || echo "could not start the server again"
}

ensure_packages
# The other majors' chroots are made (if not cached) while the host's stages run.
prefetch_major_roots $RATELIMIT_MAJORS
trap stop_major_prefetch EXIT

echo "== source layout: a header per module, the layer order, no dependency cycle between modules or folders (scripts/check-layout.sh)"
stage "source layout" scripts/check-layout.sh

echo "== documentation: README at most 300 lines, every relative link and anchor of README.md and docs/ resolves, every folder and module of src/ is in internals.md's code layout (scripts/check-docs.sh)"
stage "documentation links" scripts/check-docs.sh

echo "== C++ unit tests (CMake/CTest)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 >/dev/null
rc=0; ctest --test-dir build --output-on-failure || rc=$?
record $rc "unit tests"

build_and_install_extension
trap 'stop_cluster; leave_major; stop_major_prefetch' EXIT
start_cluster
# For build/faults_test, which restarts the server and runs pg_dump/pg_restore
# through scripts/cluster-ctl.sh.
export CLUSTER_DIR PG_BINDIR

echo "== PGXN metadata (scripts/check-meta.sh)"
stage "PGXN metadata" scripts/check-meta.sh

echo "== pg_regress and isolation specs (make installcheck)"
rc=0; make -s installcheck || rc=$?
if [ $rc -ne 0 ]; then
  for diffs in regression.diffs output_iso/regression.diffs; do [ -f "$diffs" ] && cat "$diffs"; done
fi
record $rc "make installcheck"

echo "== ratelimit_stats with shared_preload_libraries, its own cluster (scripts/stats-test.sh)"
stage "stats with shared memory" scripts/stats-test.sh

echo "== the main job's demo on a preloaded cluster of its own, its output checked (scripts/demo-test.sh)"
stage "demo" scripts/demo-test.sh

echo "== memory limits with shared_preload_libraries, their own clusters: regression, isolation, contention, restarts, a hot standby (scripts/memory-test.sh)"
stage "memory limits" scripts/memory-test.sh

echo "== memory limits across restarts: fast stops with open transactions and under load, calls racing the start, damaged state files, crashes (scripts/memory-restart-test.sh)"
stage "memory limits across restarts" scripts/memory-restart-test.sh

echo "== memory limits through the WAL: crashes, kill -9 under load, a failover, damaged records (scripts/memory-durability-test.sh)"
stage "memory limits through the WAL" scripts/memory-durability-test.sh
echo "== memory limits through the WAL, the red team's cases: the worker gone, a self-promoted standby, PREPARE, a killed load, a standby's own entries, DROP and CREATE (scripts/memory-durability-redteam-test.sh)"
stage "memory limits through the WAL: red-team cases" scripts/memory-durability-redteam-test.sh

echo "== docs/memory.md's shared-memory sizes of memory limits, from pg_shmem_allocations (scripts/memory-sizing-test.sh)"
stage "memory sizing" scripts/memory-sizing-test.sh

echo "== memcheck: every SQL function under valgrind (scripts/memcheck.sh)"
stage "memcheck" scripts/memcheck.sh

echo "== libpqxx client contention tests (build/client_tests)"
stage "client contention tests" build/client_tests

echo "== C++ client API tests (build/client_api_tests)"
stage "C++ client API tests" build/client_api_tests

echo "== behind pgbouncer, pool_mode = transaction (scripts/pgbouncer-test.sh)"
stage "behind pgbouncer" scripts/pgbouncer-test.sh

echo "== PL/Proxy router: ratelimit_proxy over 4 partitions, in one cluster and in separate clusters (scripts/plproxy-test.sh)"
stage "PL/Proxy router" scripts/plproxy-test.sh

echo "== example HTTP service end-to-end (examples/http-api/run-e2e.sh)"
stage "example HTTP service end-to-end" examples/http-api/run-e2e.sh
echo "== Prometheus metrics: prometheus-postgres-exporter with examples/prometheus/queries.yaml, scraped and compared with ratelimit_stats; promtool on alerts.yaml (scripts/metrics-test.sh)"
stage "Prometheus metrics" scripts/metrics-test.sh
echo "== playground in a browser: Debian's chromium, headless, via playwright-core (scripts/playground-test.sh)"
stage "playground browser test" scripts/playground-test.sh

echo "== fault tests: kill, crash and restart, timeouts, DROP/CREATE EXTENSION, dump/restore (build/faults_test)"
stage "fault tests" build/faults_test
# The crash test restarts the server itself; if it could not, later stages
# still need one.
ensure_server_running "server running after the fault tests"

echo "== DDL under load: REINDEX CONCURRENTLY, CREATE/DROP INDEX, triggers, VACUUM FULL, CLUSTER, fillfactor while clients call; then a crash (build/ddl_load_test)"
stage "DDL under load" build/ddl_load_test
ensure_server_running "server running after the DDL-under-load tests"

echo "== sanitizers: core_tests and client_tests built with ASan+UBSan (build-asan)"
rc=0
if cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRATELIMIT_SANITIZE=ON >/dev/null; then
  cmake --build build-asan -j2 --target core_tests kind_registry_tests client_tests >/dev/null || rc=$?
else
  rc=1
fi
record $rc "ASan+UBSan build"
if [ $rc -eq 0 ]; then
  # Any ASan, LeakSanitizer or UBSan report makes the program fail (UBSan
  # through -fno-sanitize-recover=all).
  sanitizer_env=(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1)
  export "${sanitizer_env[@]}"
  stage "unit tests under ASan+UBSan" build-asan/core_tests --gtest_brief=1
  stage "toy kind's tests under ASan+UBSan" build-asan/kind_registry_tests --gtest_brief=1
  stage "client contention tests under ASan+UBSan" build-asan/client_tests
  # Their memory cases need a server with memory limits: a preloaded one.
  stage "memory contention tests under ASan+UBSan" scripts/memory-test.sh --client build-asan/client_tests
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

echo "== Debian package: dpkg-buildpackage, dpkg -i, installcheck against the installed files (scripts/package-test.sh)"
stage "Debian package" scripts/package-test.sh

rc=0; check_server_log_for_crashes || rc=$?
record $rc "server log free of crashes"

stop_cluster

# The stages run against another major ($1), in its cached chroot: build
# there with its PGXS (-Werror), its make installcheck, the preloaded stats,
# memory (restarts and sizes too), memcheck and pgbouncer stages with that major's server, valgrind and
# pgbouncer, and the host-built libpqxx programs against its server. Unit and
# sanitizer runs are the host's.
test_major() {
  local major=$1 start=$SECONDS rc
  echo "== PG $major: $(major_suite "$major") root with postgresql-$major (scripts/pgmajors.sh)"
  rc=0; ensure_major_root "$major" || rc=$?
  grep -s "^PG $major: bootstrap" "$RATELIMIT_CACHE/chroots/prefetch.log" || true
  record $rc "PG $major: chroot"
  [ $rc -eq 0 ] || return 0
  echo "== PG $major: build (-Werror) and install the extension with PostgreSQL $major's PGXS"
  rc=0; { enter_major "$major" && build_and_install_in_major; } || rc=$?
  record $rc "PG $major: build and install"
  [ $rc -eq 0 ] || { leave_major; return 0; }
  rc=0; start_cluster || rc=$?
  record $rc "PG $major: throwaway cluster"
  [ $rc -eq 0 ] || { stop_cluster; leave_major; return 0; }

  echo "== PG $major: pg_regress and isolation specs (make installcheck)"
  rc=0; installcheck_in_major || rc=$?
  record $rc "PG $major: make installcheck"
  echo "== PG $major: ratelimit_stats with shared_preload_libraries, its own cluster (scripts/stats-test.sh)"
  stage "PG $major: stats with shared memory" scripts/stats-test.sh
  echo "== PG $major: memory limits, preloaded and through the DSM registry, their own clusters (scripts/memory-test.sh)"
  stage "PG $major: memory limits" scripts/memory-test.sh
  echo "== PG $major: memory limits across restarts (scripts/memory-restart-test.sh)"
  stage "PG $major: memory limits across restarts" scripts/memory-restart-test.sh
  echo "== PG $major: memory limits through the WAL (scripts/memory-durability-test.sh)"
  stage "PG $major: memory limits through the WAL" scripts/memory-durability-test.sh
  echo "== PG $major: memory limits through the WAL, the red team's cases (scripts/memory-durability-redteam-test.sh)"
  stage "PG $major: memory limits through the WAL: red-team cases" scripts/memory-durability-redteam-test.sh
  echo "== PG $major: docs/memory.md's shared-memory sizes of memory limits (scripts/memory-sizing-test.sh)"
  stage "PG $major: memory sizing" scripts/memory-sizing-test.sh
  echo "== PG $major: PL/Proxy router over 4 partitions, in the root's PL/Proxy (scripts/plproxy-test.sh)"
  stage "PG $major: PL/Proxy router" scripts/plproxy-test.sh
  echo "== PG $major: memcheck: every SQL function under PostgreSQL $major's valgrind (scripts/memcheck.sh)"
  stage "PG $major: memcheck" scripts/memcheck.sh
  echo "== PG $major: libpqxx client contention tests (build/client_tests)"
  stage "PG $major: client contention tests" build/client_tests
  echo "== PG $major: C++ client API tests (build/client_api_tests)"
  stage "PG $major: C++ client API tests" build/client_api_tests
  echo "== PG $major: behind the root's pgbouncer, pool_mode = transaction (scripts/pgbouncer-test.sh)"
  stage "PG $major: behind pgbouncer" scripts/pgbouncer-test.sh
  echo "== PG $major: fault tests (build/faults_test)"
  stage "PG $major: fault tests" build/faults_test
  ensure_server_running "PG $major: server running after the fault tests"
  echo "== PG $major: DDL under load (build/ddl_load_test)"
  stage "PG $major: DDL under load" build/ddl_load_test
  ensure_server_running "PG $major: server running after the DDL-under-load tests"
  rc=0; check_server_log_for_crashes || rc=$?
  record $rc "PG $major: server log free of crashes"
  stop_cluster
  leave_major
  echo "== PG $major: done in $((SECONDS - start)) s"
}

for major in $RATELIMIT_MAJORS; do test_major "$major"; done

echo "test suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
