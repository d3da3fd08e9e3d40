#!/usr/bin/env bash
# Runs every SQL function of the extension (test/memcheck/every_function.sql,
# including ratelimit_limit_all with 1,000 elements) against a server whose
# backends run under valgrind's memcheck, and fails if memcheck reports any
# error with a frame in the extension's code. A stage of scripts/test.sh;
# expects the extension to be built and installed already. With
# RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's
# enter_major exports them), the server, valgrind and psql are another
# major's, in its root.
#
#   scripts/memcheck.sh [file.sql ...]     default: test/memcheck/every_function.sql
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

files=("$@")
[ ${#files[@]} -gt 0 ] || files=(test/memcheck/every_function.sql)
src=$(server_source_dir)
trap stop_valgrind_cluster EXIT
# Preloaded, so that ratelimit_stats' shared memory and memory limits are
# written and read too (a small memory, to fill it; PREPARE TRANSACTION on).
start_valgrind_cluster -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=8 -c max_prepared_transactions=2
rc=0
for file in "${files[@]}"; do
  echo "-- memcheck: $file"
  [[ $file != /* ]] || file=$(server_path "$file")
  # From the top of the source tree, where the files' \i paths start.
  run_pg_client /usr/bin/env -C "$src" "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -f "$file" \
    >"$CLUSTER_DIR/psql.out" 2>&1 || {
    rc=1
    echo "FAILED: $file did not run to the end:"
    tail -20 "$CLUSTER_DIR/psql.out"
  }
done
# Reports are complete only once the processes have exited.
stop_valgrind_server
memcheck_errors_in_extension || rc=1
echo "memcheck: $([ $rc -eq 0 ] && echo passed || echo failed)"
exit $rc
