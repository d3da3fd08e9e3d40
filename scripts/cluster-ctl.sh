#!/usr/bin/env bash
# Controls the throwaway cluster of scripts/lib.sh (start_cluster) from a test
# program (build/faults_test), which runs it with std::system. Server and
# dump commands run as the cluster's OS user (postgres when run as root).
#
# Needs CLUSTER_DIR (the cluster's directory) in the environment, and uses
# PG_BINDIR from the environment when set (scripts/test.sh exports both).
# With RATELIMIT_CHROOT set (a cluster of another major, scripts/pgmajors.sh)
# the commands run in that root, PG_BINDIR is a path inside it, and a dump
# FILE must be below it (a host path, as CLUSTER_DIR is).
#
#   cluster-ctl.sh stop-immediate       pg_ctl stop -m immediate (a crash: recovery on the next start)
#   cluster-ctl.sh start                pg_ctl start -w with start_cluster's options
#   cluster-ctl.sh status               exit 0 if the server is running
#   cluster-ctl.sh dump DB FILE         pg_dump -Fc of database DB into FILE
#   cluster-ctl.sh restore DB FILE      pg_restore FILE into the existing database DB, stopping on any error
set -euo pipefail
bindir_from_env=${PG_BINDIR:-}
source "$(dirname "$0")/lib.sh"
[ -n "$bindir_from_env" ] && PG_BINDIR=$bindir_from_env
: "${CLUSTER_DIR:?cluster-ctl.sh: CLUSTER_DIR is not set}"
[ -d "$CLUSTER_DIR/data" ] || { echo "cluster-ctl.sh: no cluster in $CLUSTER_DIR" >&2; exit 2; }

usage() { echo "usage: $0 stop-immediate | start | status | dump DB FILE | restore DB FILE" >&2; exit 2; }

# FILE (a host path) as the cluster's tools see it.
dump_file() {
  local file
  file=$(server_path "$1")
  if [ -n "${RATELIMIT_CHROOT:-}" ] && [ "$file" = "$1" ]; then
    echo "cluster-ctl.sh: $1 is not below $RATELIMIT_CHROOT, where the server runs" >&2
    exit 2
  fi
  echo "$file"
}

case "${1:-}" in
  stop-immediate) [ $# -eq 1 ] || usage; stop_cluster_server_immediate ;;
  start) [ $# -eq 1 ] || usage; start_cluster_server ;;
  status) [ $# -eq 1 ] || usage; cluster_server_running ;;
  dump) [ $# -eq 3 ] || usage; file=$(dump_file "$3"); as_cluster_user "$PG_BINDIR/pg_dump" -Fc -d "$2" -f "$file" ;;
  restore) [ $# -eq 3 ] || usage; file=$(dump_file "$3"); as_cluster_user "$PG_BINDIR/pg_restore" --exit-on-error -d "$2" "$file" ;;
  *) usage ;;
esac
