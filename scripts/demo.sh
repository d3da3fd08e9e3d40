#!/usr/bin/env bash
# The main job: build and install the extension, start a throwaway cluster,
# run the articles' examples against it, print the results, stop the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
build_and_install_extension
trap stop_cluster EXIT
start_cluster
echo "== demo (scripts/demo.sql)"
"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -f scripts/demo.sql
