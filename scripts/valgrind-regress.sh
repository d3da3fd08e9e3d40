#!/usr/bin/env bash
# Runs pg_regress with every backend under valgrind's memcheck, and fails if
# memcheck reports an error with a frame in the extension's code (see
# memcheck_errors_in_extension in scripts/lib.sh). Too slow for CI (about 30x
# slower than a normal run), so it is run by hand; scripts/memcheck.sh is the
# quick stage of scripts/test.sh.
#
#   scripts/valgrind-regress.sh                  # every regression test
#   scripts/valgrind-regress.sh token_bucket     # just some
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
build_and_install_extension
trap stop_valgrind_cluster EXIT
start_valgrind_cluster

tests=${*:-}
rc=0
if [ -n "$tests" ]; then
  make -s installcheck REGRESS="$tests" ISOLATION= || rc=$?
else
  make -s installcheck ISOLATION= || rc=$?
fi
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w -t 300 stop >/dev/null
memcheck_errors_in_extension || rc=1
echo "valgrind regression run: $([ $rc -eq 0 ] && echo passed || echo failed)"
exit $rc
