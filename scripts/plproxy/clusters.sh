# The PL/Proxy router test's clusters and databases: the partition clusters
# and their cleanup, the partition and router databases, the partitions'
# clocks, and psql, progress lines and checks as every part of the test
# prints them.
# Sourced by scripts/plproxy-test.sh (after scripts/lib.sh); defines
# functions only, which use the driver's variables (SRC, WORK, MAIN_HOST,
# PARTITIONS, PART_DIRS, PART_HOSTS, API_VERSION, ROUTER_VERSION, failed).
# shellcheck shell=bash

# Stops the partition clusters (and the main one, if this script started
# it). They are thrown away, so without a shutdown checkpoint (-m immediate):
# flushing the databases the test created takes seconds on a busy disk.
cleanup() {
  local dir
  for dir in "${PART_DIRS[@]}"; do
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(server_path "$dir")/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
  done
  [ -n "$WORK" ] && rm -rf "$WORK"
  if [ "$OWN_CLUSTER" -eq 1 ]; then stop_cluster; fi
}

# Prints a progress line with the seconds since the script started.
say() { echo "-- [${SECONDS}s] $*"; }

# psql, from the top of the source tree (the files it reads are relative to it).
psql_in() {
  run_pg_client PGOPTIONS="-c client_min_messages=warning" /usr/bin/env -C "$SRC" "$PG_BINDIR/psql" -X -q \
    -v ON_ERROR_STOP=1 "$@"
}

# Records one check: its name, the value expected and the value found.
check() {
  if [ "$2" = "$3" ]; then
    echo "   ok   $1"
  else
    echo "   FAIL $1: expected '$2', got '$3'"
    # shellcheck disable=SC2034  # the driver's result
    failed=1
  fi
}

# Creates partition database rl_p$1 with the ratelimit extension (this
# tree's version, or $3), the app pattern's table and function and the
# test's catalog helpers, on the server at socket dir $2 (as the servers see it).
create_partition_db() {
  local i=$1 host=$2 version=${3:-$API_VERSION}
  psql_in -h "$host" -d postgres -c "DROP DATABASE IF EXISTS rl_p$i" -c "CREATE DATABASE rl_p$i"
  psql_in -h "$host" -d "rl_p$i" -c "CREATE EXTENSION ratelimit VERSION '$version'" -f examples/plproxy/partition.sql \
    -f test/regress/router/api.sql
}

# Creates router database $1 whose server ratelimit has the partitions at
# the socket dirs (as the servers see them) given as the other arguments (database rl_p<i> in each),
# with ratelimit_proxy at ROUTER_VERSION (or the version in $VERSION).
create_router_db() {
  local db=$1 options="" i=0 host
  shift
  for host in "$@"; do
    options+="${options:+, }p$i 'dbname=rl_p$i host=$host port=5432'"
    i=$((i + 1))
  done
  psql_in -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  psql_in -d "$db" -f test/regress/router/api.sql -f - <<SQL
CREATE EXTENSION plproxy;
CREATE EXTENSION ratelimit_proxy VERSION '${VERSION:-$ROUTER_VERSION}';
CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS ($options);
CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres');
\i examples/plproxy/router.sql
SQL
}

# Freezes (or, with an empty $1, unfreezes) the clock of every partition
# database for new sessions; the socket dirs are the other arguments.
set_partition_clock() {
  local now=$1 i=0 host
  shift
  for host in "$@"; do
    if [ -n "$now" ]; then
      psql_in -h "$host" -d postgres -c "ALTER DATABASE rl_p$i SET ratelimit.now = '$now'"
    else
      psql_in -h "$host" -d postgres -c "ALTER DATABASE rl_p$i RESET ratelimit.now"
    fi
    i=$((i + 1))
  done
}

# Starts the separate clusters of case 2: partition i in a throwaway cluster
# of its own (copies of one initdb), preloaded so that its stats and memory
# limits have shared memory; their directories go to PART_DIRS and
# PART_HOSTS.
start_partition_clusters() {
  local template="$WORK/template" i dir host
  mkdir "$template"
  chown_to_cluster_user "$template"
  as_cluster_user "$PG_BINDIR/initdb" -D "$(server_path "$template")/data" -A trust -U postgres --no-sync >/dev/null
  for i in $(seq 0 $((PARTITIONS - 1))); do
    dir=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-partition$i.XXXXXX")
    chmod 755 "$dir"
    chown_to_cluster_user "$dir"
    host=$(server_path "$dir")
    as_cluster_user cp -a "$(server_path "$template")/data" "$host/data"
    PART_DIRS+=("$dir")
    PART_HOSTS+=("$host")
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$host/data" -l "$host/server.log" -w start \
      -o "-c listen_addresses='' -k $host -p 5432 -c shared_preload_libraries=ratelimit" >/dev/null
  done
}

# Fresh databases for a group of checks: partitions $1 0 .. $1 ($2 - 1)
# with the extension, and the router's database $3 (empty).
fresh_databases() {
  local prefix=$1 count=$2 router=$3 i
  for ((i = 0; i < count; i++)); do
    psql_in -d postgres -c "DROP DATABASE IF EXISTS $prefix$i" -c "CREATE DATABASE $prefix$i"
    psql_in -d "$prefix$i" -c "CREATE EXTENSION ratelimit VERSION '$API_VERSION'"
  done
  psql_in -d postgres -c "DROP DATABASE IF EXISTS $router" -c "CREATE DATABASE $router"
}
