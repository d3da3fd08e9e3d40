#!/usr/bin/env bash
# The main job: build and install the extension, start a throwaway cluster
# with shared_preload_libraries = 'ratelimit' (ratelimit_stats and memory
# limits need it on PostgreSQL 15 and 16), run the tour of scripts/demo.sql
# against it, print it, stop the cluster (also when a step fails).
#
# --installed: use the extension as installed (no package check, no build);
# scripts/demo-test.sh runs it so after the test command's build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# Not the cluster of a caller (scripts/test.sh exports its CLUSTER_DIR): this
# script stops only the cluster it started.
CLUSTER_DIR=""

if [ "${1:-}" != "--installed" ]; then
  ensure_packages
  build_and_install_extension
fi
trap stop_cluster EXIT
start_cluster -c shared_preload_libraries=ratelimit
echo "== demo (scripts/demo.sql)"
# The picture's dots and the tables' rules are UTF-8, whatever the locale
# initdb picked for the cluster.
PGCLIENTENCODING=UTF8 run_pg_client "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -f scripts/demo.sql 2>&1
