#!/usr/bin/env bash
# Runs pg_regress with every backend under valgrind's memcheck, and fails if
# memcheck reports an error in the extension's code. Too slow for CI (about
# 30x slower than a normal run), so it is run by hand:
#
#   scripts/valgrind-regress.sh                  # every regression test
#   scripts/valgrind-regress.sh token_bucket     # just some
#
# Reports are written to $CLUSTER_DIR/valgrind.*.log; only errors whose stack
# goes through ratelimit.so count (PostgreSQL itself needs its own
# suppressions, which the Debian packages do not ship).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
build_and_install_extension
trap stop_cluster EXIT

CLUSTER_DIR=$(mktemp -d /tmp/ratelimit-valgrind.XXXXXX)
chmod 755 "$CLUSTER_DIR"
[ "$(id -u)" -eq 0 ] && chown postgres: "$CLUSTER_DIR"
as_cluster_user "$PG_BINDIR/initdb" -D "$CLUSTER_DIR/data" -A trust -U postgres --no-sync >/dev/null
# The postmaster runs under valgrind and every backend it forks is traced.
as_cluster_user bash -c "valgrind --quiet --trace-children=yes --track-origins=yes --error-limit=no \
  --log-file='$CLUSTER_DIR/valgrind.%p.log' \
  '$PG_BINDIR/postgres' -D '$CLUSTER_DIR/data' -c listen_addresses='' -k '$CLUSTER_DIR' -p 5432 \
  > '$CLUSTER_DIR/server.log' 2>&1 &"
export PGHOST=$CLUSTER_DIR PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
for _ in $(seq 1 120); do "$PG_BINDIR/pg_isready" -q && break; sleep 1; done

tests=${*:-}
rc=0
if [ -n "$tests" ]; then
  make -s installcheck REGRESS="$tests" ISOLATION= || rc=$?
else
  make -s installcheck ISOLATION= || rc=$?
fi

# Errors whose stack passes through the extension.
if grep -l "ratelimit.so" "$CLUSTER_DIR"/valgrind.*.log 2>/dev/null | xargs -r grep -lE "Invalid (read|write)|uninitialised|definitely lost" >/dev/null 2>&1; then
  echo "memcheck reported errors in ratelimit.so:"
  grep -B2 -A20 "ratelimit.so" "$CLUSTER_DIR"/valgrind.*.log | head -100
  rc=1
fi
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
echo "valgrind regression run: $([ $rc -eq 0 ] && echo passed || echo failed)"
exit $rc
