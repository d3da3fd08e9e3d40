#!/usr/bin/env bash
# Tests ratelimit_proxy: the ratelimit API in a router database, routed by
# PL/Proxy (Debian: postgresql-15-plproxy, installed here if missing) to
# partition databases that each have the ratelimit extension at the version
# of this tree (ratelimit.control), the router at its own (the
# ratelimit_proxy.control of this tree). Two cases:
#
#   1. one cluster: the router database `router` and 4 partition databases
#      rl_p0 .. rl_p3 in the throwaway cluster scripts/test.sh started
#      (CLUSTER_DIR, PGHOST and PGPORT set; the extensions installed), or in
#      one this script starts when run alone;
#   2. separate clusters: the router database `router_clusters` in that
#      cluster, and partition i in a throwaway cluster of its own (each its
#      own postmaster, on a unix socket in its own temp dir, started with
#      shared_preload_libraries = 'ratelimit' so that its stats and memory
#      limits work on PostgreSQL 15).
#
# In each case:
#   - scripts/regress.sh runs test/regress/router against the router
#     database: router.sql (the catalog comparison:
#     every user-facing function, view and type of ratelimit on every
#     partition has a twin of the same signature and rights on the router;
#     every function through the router, each key's row on exactly one
#     partition, definitions on every partition, overrides on the key's,
#     headers by key, ratelimit_status gathered, SQLSTATEs such as PT429 and
#     22023 through the router, limit_all across partitions refused with
#     0A000, ratelimit_simulate answered by any partition, each the same), postgrest.sql (ratelimit.error_format = postgrest set in the
#     router session by SET, SET LOCAL, a hook's set_config and a role
#     setting: the PGRST error one node raises), app_pattern.sql (the
#     app's function routed to the partition of its key, examples/plproxy),
#     and no_reconnect.sql (a flood of refusals and bad calls keeps every
#     partition backend: no new session, no PL/Proxy notice, every SQLSTATE
#     as one node raises it), routed_settings.sql (every routed function's
#     answer bit for bit one node's, with hostile DateStyle, TimeZone,
#     IntervalStyle, extra_float_digits, lc_numeric and client_encoding in
#     the router session and others on the partitions) and
#     hostile_callers.sql (every C function PUBLIC may execute on the
#     router, called by a role without privileges with rows and arrays of
#     the wrong types), with the partitions' clocks frozen; in case 2
#     also router_shared.sql
#     (ratelimit_stats summed over the partitions, memory limits routed);
#   - the hot-key exact bound through the router: pgbench, 16 clients, 400
#     calls on one key of a token bucket of capacity 200 that refills 250
#     tokens in 100 years. Exactly 200 calls are granted (the bucket holds
#     200 tokens and refills far less than one during the run; a refusal
#     means less than one token was left, so at least 200 were taken), and
#     the one partition that owns the key holds its row, emptied.
# Then resharding (docs/scale-out.md) from 2 to 4 partitions in the main
# cluster: every limit keeps its state, on its own partition. The router's
# schema: a fresh ratelimit_proxy (its complete script) is, object by object,
# the router updated from every release (run_fresh_vs_upgraded). Upgrades
# with mixed versions, from 0.4.0 and from 0.7.0: a ratelimit_proxy router
# of that release over partitions at ratelimit of that release and at this
# tree's version works, and after the partitions and then the router are
# updated, the whole API does; a router at this tree's version over a 0.7.0
# partition fails the calls new in this version routed there, naming it
# (update the partitions first). Two
# partition databases of one server: ratelimit_stats and the memory
# entries through the router count that server once. And, in case 2, a
# stopped partition: the keys it owns fail with a connection error naming
# it (08001 "could not connect" once the open connections are gone), every
# other key works, in a router session that had connections open and at
# the next attempt; after a restart it works again in that session.
# The router's own connections, in case 1: one per partition and session,
# new ones after the server changes, cancelled and timed-out calls
# (run_transport); and, over two partition databases of their own, their
# connection_lifetime, a connection terminated while idle and during a
# RUN ON ALL call, a partition's notices, a partition answering another
# row shape, a column of another type or two rows to a one-row call, plans
# invalidated during calls,
# and the memory failed calls leave (run_transport_failures).
#
# The checks are in scripts/plproxy/, a file per concern: clusters.sh (the
# clusters and databases), routing.sh (hot key, one server's partitions, a
# stopped partition), transport.sh (the router's own connections),
# upgrades.sh (resharding, the router's schema, mixed versions); this file
# sets up and runs them in order.
#
# Every cluster this script starts is stopped with pg_ctl on exit, on
# failure too. The databases it creates in the main cluster stay there.
#
# With RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's
# enter_major exports them), every server, psql, pgbench and pg_regress is
# another major's, in its root (whose package list has its PL/Proxy): the
# clusters' directories are below the root's /tmp, and the paths the
# servers and their clients are given (sockets, files) are as seen there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
if [ -z "${RATELIMIT_CHROOT:-}" ]; then
  RATELIMIT_PACKAGES=("postgresql-$PG_MAJOR-plproxy")
  ensure_packages
fi
# The source tree as the servers' programs see it.
SRC=$(server_source_dir)
# The test's parts, one concern each (functions only).
source scripts/plproxy/clusters.sh   # the clusters and databases, psql, checks
source scripts/plproxy/routing.sh    # hot key, one server's partitions, a stopped one
source scripts/plproxy/transport.sh  # the router's own connections, and their failures
source scripts/plproxy/upgrades.sh   # resharding, the router's schema, mixed versions

PARTITIONS=4
# The partitions run this tree's ratelimit, the router this tree's
# ratelimit_proxy (named: another tree's control file may be installed).
control_version() { sed -n "s/^default_version = '\(.*\)'$/\1/p" "$1"; }
API_VERSION=$(control_version ratelimit.control)
ROUTER_VERSION=$(control_version ratelimit_proxy.control)
# The ratelimit_proxy and ratelimit releases the mixed-version upgrade
# checks start from: the oldest, and the one before this tree's.
OLD_VERSION=0.4.0
PREVIOUS_VERSION=0.7.0
PART_DIRS=()   # host paths of the partition clusters' directories
PART_HOSTS=()  # the same as their servers see them: the partitions' sockets
OWN_CLUSTER=0
WORK=""
trap cleanup EXIT

if [ -z "${CLUSTER_DIR:-}" ]; then
  start_cluster
  OWN_CLUSTER=1
fi
WORK=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-plproxy.XXXXXX")
chmod 755 "$WORK"

# The main cluster's socket directory as its server sees it.
MAIN_HOST=$(server_path "$PGHOST")

failed=0

MAJOR=$(in_server_root "$PG_BINDIR/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
say "PostgreSQL $MAJOR, PL/Proxy $(in_server_root dpkg-query -W -f='${Version}' "postgresql-$MAJOR-plproxy"), ratelimit $API_VERSION on the partitions, ratelimit_proxy $ROUTER_VERSION"
say "case 1: router and $PARTITIONS partition databases in one cluster"
one_cluster=()
for i in $(seq 0 $((PARTITIONS - 1))); do
  create_partition_db "$i" "$MAIN_HOST"
  one_cluster+=("$MAIN_HOST")
done
create_router_db router "${one_cluster[@]}"

say "case 2: $PARTITIONS partitions in separate clusters"
start_partition_clusters
for i in "${!PART_HOSTS[@]}"; do create_partition_db "$i" "${PART_HOSTS[$i]}"; done
create_router_db router_clusters "${PART_HOSTS[@]}"

for case in router router_clusters; do
  if [ $case = router ]; then hosts=("${one_cluster[@]}"); else hosts=("${PART_HOSTS[@]}"); fi
  # Only the partitions of case 2 have shared memory (shared_preload_libraries).
  skip=()
  [ $case = router ] && skip=(--skip=router_shared)
  say "$case: pg_regress test/regress/router (scripts/regress.sh), partition clocks frozen"
  set_partition_clock '2026-01-01 00:00:00+00' "${hosts[@]}"
  scripts/regress.sh --running --dbname=$case "${skip[@]}" router || failed=1
  set_partition_clock '' "${hosts[@]}"
  say "$case: hot key through the router, exact bound"
  run_hot_key $case "${hosts[@]}"
done

say "router: its own connections to the partitions"
run_transport
say "router: its own connections, when partitions fail them"
run_transport_failures

say "resharding: 2 partitions doubled to 4 (docs/scale-out.md)"
run_reshard

say "the router's schema: a fresh ratelimit_proxy against the router updated from every release"
run_fresh_vs_upgraded

for old in $OLD_VERSION $PREVIOUS_VERSION; do
  say "upgrade with mixed versions: a ratelimit_proxy $old router over ratelimit $old and $API_VERSION partitions"
  run_mixed_upgrade "$old"
done

say "router_clusters: two partition databases of one server"
run_same_server

say "router_clusters: a stopped partition"
run_stopped_partition 2

for dir in "${PART_DIRS[@]}"; do
  CLUSTER_DIR=$dir check_server_log_for_crashes || failed=1
done

[ $failed -eq 0 ] && say "PL/Proxy router: all checks passed"
exit $failed

