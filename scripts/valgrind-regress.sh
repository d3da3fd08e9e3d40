#!/usr/bin/env bash
# Runs pg_regress with every backend under valgrind's memcheck, and fails if
# memcheck reports an error with a frame in the extension's code (see
# memcheck_errors_in_extension in scripts/lib.sh). Too slow for CI (about 30x
# slower than a normal run), so it is run by hand; scripts/memcheck.sh is the
# quick stage of scripts/test.sh.
#
#   scripts/valgrind-regress.sh                  # every regression test
#   scripts/valgrind-regress.sh token_bucket     # just some
#   RATELIMIT_MAJOR=17 scripts/valgrind-regress.sh token_bucket
#
# With RATELIMIT_MAJOR (17 or 18) the extension is built, installed and run
# in that major's cached root (scripts/pgmajors.sh: ensure_major_root makes
# it, once), with that major's valgrind and pg_regress; without it, on the
# host's PostgreSQL 15. Needs root for a major's root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/pgmajors.sh

tests=${*:-}
if [ -n "${RATELIMIT_MAJOR:-}" ]; then
  trap 'stop_valgrind_cluster; leave_major' EXIT
  ensure_major_root "$RATELIMIT_MAJOR"
  enter_major "$RATELIMIT_MAJOR"
  echo "== PG $RATELIMIT_MAJOR: building and installing the extension in $RATELIMIT_CHROOT"
  build_and_install_in_major
else
  ensure_packages
  build_and_install_extension
  trap stop_valgrind_cluster EXIT
fi
start_valgrind_cluster

rc=0
args=(-s installcheck PG_CONFIG="$PG_BINDIR/pg_config" ISOLATION=)
[ -n "$tests" ] && args+=(REGRESS="$tests")
run_pg_client make -C "$(server_source_dir)" "${args[@]}" || rc=$?
stop_valgrind_server
memcheck_errors_in_extension || rc=1
echo "valgrind regression run: $([ $rc -eq 0 ] && echo passed || echo failed)"
exit $rc
