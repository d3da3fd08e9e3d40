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
#   - pg_regress runs test/plproxy/sql/router.sql (the catalog comparison:
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
trap cleanup EXIT

if [ -z "${CLUSTER_DIR:-}" ]; then
  start_cluster
  OWN_CLUSTER=1
fi
WORK=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-plproxy.XXXXXX")
chmod 755 "$WORK"

# Prints a progress line with the seconds since the script started.
say() { echo "-- [${SECONDS}s] $*"; }

# psql, from the top of the source tree (the files it reads are relative to it).
psql_in() {
  run_pg_client PGOPTIONS="-c client_min_messages=warning" /usr/bin/env -C "$SRC" "$PG_BINDIR/psql" -X -q \
    -v ON_ERROR_STOP=1 "$@"
}
# The main cluster's socket directory as its server sees it.
MAIN_HOST=$(server_path "$PGHOST")

failed=0
# Records one check: its name, the value expected and the value found.
check() {
  if [ "$2" = "$3" ]; then
    echo "   ok   $1"
  else
    echo "   FAIL $1: expected '$2', got '$3'"
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
    -f test/plproxy/api.sql
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
  psql_in -d "$db" -f test/plproxy/api.sql -f - <<SQL
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

# Runs the pg_regress tests of test/plproxy named after $1 against router
# database $1.
run_regress() {
  local db=$1 out="$WORK/regress-$1"
  shift
  local pg_regress
  pg_regress=$(server_pgxs_program pg_regress)
  # From test/plproxy: pg_regress 16 and later read the expected files from
  # the current directory's expected/ (15: the input directory's).
  if ! run_pg_client /usr/bin/env -C "$SRC/test/plproxy" "$pg_regress" --use-existing --dbname="$db" --bindir="$PG_BINDIR" \
       --host="$MAIN_HOST" --port="$PGPORT" --inputdir="$SRC/test/plproxy" --outputdir="$(server_path "$out")" "$@"; then
    cat "$out/regression.diffs" 2>/dev/null || true
    # RATELIMIT_PLPROXY_RESULTS=dir keeps the outputs (to review, or to
    # refresh test/plproxy/expected).
    if [ -n "${RATELIMIT_PLPROXY_RESULTS:-}" ]; then
      mkdir -p "$RATELIMIT_PLPROXY_RESULTS/$db" && cp "$out"/results/*.out "$RATELIMIT_PLPROXY_RESULTS/$db/"
    fi
    failed=1
  fi
}

# The hot-key exact bound through router database $1, whose partitions are
# at the socket dirs given as the other arguments.
run_hot_key() {
  local db=$1 capacity=200 clients=16 per_client=25
  shift
  local hosts=("$@")
  local config="{\"kind\": \"token bucket\", \"rate\": 250, \"period\": \"36500 days\", \"capacity\": $capacity}"
  psql_in -d "$db" -c "CREATE TABLE hot_calls (ok boolean NOT NULL)"
  echo "INSERT INTO hot_calls SELECT r.ok FROM ratelimit_limit('hot', 'key', '$config') AS r;" >"$WORK/hot.sql"
  if ! run_pg_client "$PG_BINDIR/pgbench" -n -c $clients -j 2 -t $per_client -f "$(server_path "$WORK")/hot.sql" "$db" \
    >"$WORK/pgbench.log" 2>&1; then
    cat "$WORK/pgbench.log"
    check "pgbench through the router ($db)" "exit 0" "failed"
    return
  fi
  local calls granted owner
  calls=$(psql_in -At -d "$db" -c "SELECT count(*) FROM hot_calls")
  granted=$(psql_in -At -d "$db" -c "SELECT count(*) FILTER (WHERE ok) FROM hot_calls")
  owner=$(psql_in -At -d "$db" -c "SELECT ratelimit_partition('hot', 'key')")
  check "hot key: $((clients * per_client)) calls made" $((clients * per_client)) "$calls"
  check "hot key: $capacity granted, exactly the capacity" $capacity "$granted"
  # Per partition: the owner holds one row of the key with less than one
  # token (200 taken), the others none.
  local i rows
  for i in "${!hosts[@]}"; do
    rows=$(psql_in -At -h "${hosts[$i]}" -d "rl_p$i" \
      -c "SELECT count(*) || ' ' || coalesce(bool_and(value < 1 AND value >= 0), false) FROM ratelimit_state WHERE name = 'hot'")
    if [ "$i" = "$owner" ]; then
      check "hot key: partition $i (its owner) holds its emptied row" "1 true" "$rows"
    else
      check "hot key: partition $i holds no row of it" "0 false" "$rows"
    fi
  done
}

# Stops partition $1 of the separate clusters and checks that only its
# keys fail, with a connection error naming it, in a router session whose
# connections were open and in a new one; then restarts it.
run_stopped_partition() {
  local down=$1 db=router_clusters
  # psql runs pg_ctl (\!) where the servers run, as their OS user.
  local dir=${PART_HOSTS[$down]}
  local ctl="$PG_BINDIR/pg_ctl -D $dir/data -l $dir/server.log -w"
  [ "$(id -u)" -eq 0 ] && ctl="runuser -u postgres -- $ctl"
  local config='{"kind": "token bucket", "rate": 1000, "period": 1000}'
  # One pass: each of 40 keys once; prints the verdict and one message.
  local pass="
TRUNCATE outcomes RESTART IDENTITY;
DO \$\$
DECLARE k text;
BEGIN
  FOR g IN 1..40 LOOP
    k := 'k' || g;
    BEGIN
      PERFORM ratelimit_limit('down', k, '$config');
      INSERT INTO outcomes (key, partition) VALUES (k, ratelimit_partition('down', k));
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO outcomes (key, partition, error) VALUES (k, ratelimit_partition('down', k), SQLSTATE || ': ' || SQLERRM);
    END;
  END LOOP;
END \$\$;
SELECT 'verdict', count(*) FILTER (WHERE partition = $down),
       count(*) FILTER (WHERE partition = $down AND error LIKE '%[rl_p$down]%'),
       count(*) FILTER (WHERE partition <> $down),
       count(*) FILTER (WHERE partition <> $down AND error IS NULL)
FROM outcomes;
SELECT 'message', error FROM outcomes WHERE partition = $down ORDER BY id LIMIT 1;
SELECT 'states', string_agg(DISTINCT left(error, 5) || CASE WHEN error LIKE '%] could not connect: %' THEN ' could not connect' ELSE '' END, ',')
FROM outcomes WHERE partition = $down;"
  local out
  out=$(psql_in -At -F '|' -d "$db" 2>&1 <<SQL
SET client_min_messages = warning;
CREATE TEMP TABLE outcomes (id serial, key text, partition integer, error text);
SELECT 'warm', count(*) FROM generate_series(1, 40) AS g, ratelimit_limit('down', 'k' || g, '$config') AS r WHERE r.ok;
\! $ctl -m fast stop >/dev/null
$pass
$pass
DO \$\$
BEGIN
  PERFORM ratelimit_define('down', '$config');
  RAISE NOTICE 'defined';
EXCEPTION WHEN OTHERS THEN
  INSERT INTO outcomes (key, error) VALUES ('define', SQLERRM);
END \$\$;
SELECT 'define', error LIKE '%[rl_p$down]%' FROM outcomes WHERE key = 'define';
\! $ctl start -o "-c listen_addresses='' -k $dir -p 5432 -c shared_preload_libraries=ratelimit" >/dev/null
$pass
SQL
  ) || { echo "$out"; check "stopped partition session" "exit 0" "failed"; return; }
  local verdicts
  verdicts=$(echo "$out" | awk -F'|' '$1 == "verdict" { print $2 " " $3 " " $4 " " $5 }')
  echo "$out" | awk -F'|' '$1 == "message" { print "     partition '"$down"' down: " $2 }' | head -2
  local owned others
  owned=$(echo "$verdicts" | head -1 | cut -d' ' -f1)
  others=$(echo "$verdicts" | head -1 | cut -d' ' -f3)
  check "warm session before the stop: all 40 granted" "warm|40" "$(echo "$out" | grep '^warm')"
  check "stopped partition $down: both passes' errors are connection errors" 2 \
    "$(echo "$out" | grep -c '^message|.*connection')"
  check "stopped partition $down, session with open connections: its $owned keys fail naming it, the other $others work" \
    "$owned $owned $others $others" "$(echo "$verdicts" | sed -n 1p)"
  check "stopped partition $down, next attempt (reconnecting): the same" \
    "$owned $owned $others $others" "$(echo "$verdicts" | sed -n 2p)"
  check "stopped partition $down, next attempt: every error is 08001, could not connect" \
    "states|08001 could not connect" "$(echo "$out" | grep '^states|' | sed -n 2p)"
  check "stopped partition $down: ratelimit_define (on every partition) fails naming it" \
    "define|t" "$(echo "$out" | grep '^define')"
  check "partition $down restarted: every key works again in the same session" \
    "$owned 0 $others $others" "$(echo "$verdicts" | sed -n 3p)"
}

# Doubles the partitions of a router from 2 to 4 by the procedure of
# docs/scale-out.md (each old partition copied to its twin, the server's new
# options added, then each partition deletes the rows it no longer owns,
# with the hash computed on the partition), in the main cluster, and checks
# through the router that every limit kept its state on exactly one
# partition, its own.
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

run_reshard() {
  local config='{"kind": "token bucket", "rate": 1, "period": "3650 days", "capacity": 5}'
  local i
  fresh_databases rl_r 4 router_reshard
  psql_in -d router_reshard -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=rl_r0 host=$MAIN_HOST port=$PGPORT', p1 'dbname=rl_r1 host=$MAIN_HOST port=$PGPORT')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" \
    -c "SELECT ratelimit_define('r', '$config')" \
    -c "SELECT count(*) FROM generate_series(1, 40) AS g, ratelimit_limit('r', 'k' || g, count => 2) AS r WHERE r.ok" \
    -c "SELECT ratelimit_limit('r', NULL, count => 3)" >/dev/null
  # 1. Each old partition i copied to i + 2 (calls stopped: none are made).
  for i in 0 1; do
    for table in ratelimit_state ratelimit_definition; do
      psql_in -d "rl_r$i" -c "COPY $table TO STDOUT" | psql_in -d "rl_r$((i + 2))" -c "COPY $table FROM STDIN"
    done
  done
  # 2. The router switched to 4 partitions.
  psql_in -d router_reshard -c "ALTER SERVER ratelimit OPTIONS (ADD p2 'dbname=rl_r2 host=$MAIN_HOST port=$PGPORT', ADD p3 'dbname=rl_r3 host=$MAIN_HOST port=$PGPORT')"
  # 3. Each partition deletes the rows it no longer owns.
  for i in 0 1 2 3; do
    psql_in -d "rl_r$i" -c "DELETE FROM ratelimit_state
      WHERE (('x' || left(md5(octet_length(name) || ':' || name || coalesce('=' || key, '')), 8))::bit(32)::integer & 3) <> $i"
  done
  local rows
  rows=$(psql_in -At -d router_reshard <<'SQL'
CREATE FUNCTION pg_temp.rows_where() RETURNS TABLE (db text, name text, key text, value double precision)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, s.name, s.key, s.value FROM public.ratelimit_state AS s;
$$;
SELECT ratelimit_partitions(), count(*), count(DISTINCT db),
       count(*) FILTER (WHERE db = 'rl_r' || ratelimit_partition(name, key)),
       count(*) FILTER (WHERE value = CASE WHEN key IS NULL THEN 2 ELSE 3 END)
FROM pg_temp.rows_where();
SELECT count(*) FILTER (WHERE floor(v.value) = 3) FROM generate_series(1, 40) AS g, ratelimit_value('r', 'k' || g) AS v;
SQL
  )
  check "resharding 2 -> 4: partitions, rows, partitions used, rows on their own partition, state kept" \
    "4|41|4|41|41" "$(echo "$rows" | sed -n 1p)"
  check "resharding 2 -> 4: every key's value through the router (its defined config, copied too)" \
    "40" "$(echo "$rows" | sed -n 2p)"
}

# The router's schema, in a database of its own: the ratelimit_proxy releases
# PostgreSQL offers are the tree's (sql/ratelimit_proxy--*.sql and the control
# file), and a fresh install (the default version's complete script) has, object
# by object, the catalog of the router installed at every release and updated
# (test/sql_support/extension_catalog.sql, as sql/upgrade.sql does for
# ratelimit); every member has its comment; a comment, a privilege and a
# function body planted in the fresh one are each found.
run_fresh_vs_upgraded() {
  local db=router_releases out
  psql_in -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  out=$(psql_in -At -F ' | ' -d "$db" -v files="$(cd sql && md5sum ratelimit_proxy--*.sql)" \
    -v control="$(cat ratelimit_proxy.control)" 2>&1 <<'SQL'
CREATE EXTENSION plproxy;
\i test/sql_support/extension_catalog.sql
SELECT 'problem', p FROM pg_temp.release_files_problems('ratelimit_proxy', :'files', :'control') AS p;
SELECT 'difference', d.* FROM pg_temp.fresh_vs_upgraded('ratelimit_proxy') AS d;
SELECT 'uncommented', m FROM pg_temp.members_without_comment('ratelimit_proxy') AS m;
SELECT 'compared', count(*) = (SELECT count(DISTINCT snapshot) FROM pg_temp.catalog_snapshots WHERE snapshot LIKE 'from %'),
       count(*) >= 4
FROM pg_temp.starting_points('ratelimit_proxy');
SELECT 'planted',
  pg_temp.planted_difference_found('ratelimit_proxy', 'COMMENT ON FUNCTION ratelimit_hash(text, text) IS NULL',
                                   'function ratelimit_hash(text,text)', 'comment'),
  pg_temp.planted_difference_found('ratelimit_proxy', 'GRANT EXECUTE ON FUNCTION ratelimit_proxy_define(text, jsonb) TO PUBLIC',
                                   'function ratelimit_proxy_define(text,jsonb)', 'privileges'),
  pg_temp.planted_difference_found('ratelimit_proxy',
    'CREATE OR REPLACE FUNCTION ratelimit_cleanup() RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN RETURN 0; END $$',
    'function ratelimit_cleanup()', 'source');
SQL
  ) || { echo "$out"; check "the router's schema: the comparison ran" "exit 0" "failed"; return; }
  # A difference's value (a function's definition) spans lines: print it all.
  grep -qE '^(problem|difference) ' <<<"$out" && echo "$out"
  check "the router's schema: PostgreSQL offers the tree's releases, the default one with its complete script" \
    "" "$(grep '^problem ' <<<"$out" || true)"
  check "the router's schema: a fresh ratelimit_proxy $ROUTER_VERSION is the router updated from every release" \
    "" "$(grep '^difference ' <<<"$out" || true)"
  check "the router's schema: every member has its COMMENT ON" "" "$(grep '^uncommented ' <<<"$out" || true)"
  check "the router's schema: every release compared" "compared | t | t" "$(grep '^compared ' <<<"$out" || true)"
  check "the router's schema: a planted comment, privilege and body are each found" "planted | t | t | t" \
    "$(grep '^planted ' <<<"$out" || true)"
}

# An upgrade with mixed versions, in the main cluster, from release $1:
# partitions rl_m<tag>_0 and _1 at ratelimit $1, _2 and _3 at this tree's,
# behind a ratelimit_proxy $1 router. Its API works over both (a refusal
# with throws => true too); then the old partitions are updated (ALTER
# EXTENSION ratelimit UPDATE) and it still works; then the router is updated
# and the whole current API works, with the same catalog as a router
# created at the current version. From 0.7.0, before the partitions are
# updated, a router at the current version beside it routes ratelimit_limit
# to every partition, and fails the calls new in this version (here
# ratelimit_value) routed to an old partition with PL/Proxy's error naming
# that partition and the missing function (42883), and works for the
# others: the order is partitions first (docs/scale-out.md).
run_mixed_upgrade() {
  local old=$1 tag=${1//./}
  local config='{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 5}'
  local i version options="" db=router_mixed$tag
  for i in 0 1 2 3; do
    version=$API_VERSION
    [ "$i" -lt 2 ] && version=$old
    psql_in -d postgres -c "DROP DATABASE IF EXISTS rl_m${tag}_$i" -c "CREATE DATABASE rl_m${tag}_$i"
    psql_in -d "rl_m${tag}_$i" -c "CREATE EXTENSION ratelimit VERSION '$version'"
    options+="${options:+, }p$i 'dbname=rl_m${tag}_$i host=$MAIN_HOST port=$PGPORT'"
  done
  local router_db
  for router_db in "$db" "${db}_new"; do
    version=$old
    [ "$router_db" = "${db}_new" ] && version=$ROUTER_VERSION
    psql_in -d postgres -c "DROP DATABASE IF EXISTS $router_db" -c "CREATE DATABASE $router_db"
    psql_in -d "$router_db" -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$version'" \
      -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS ($options)" \
      -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" >/dev/null
  done
  # The old router's API: calls on every partition, headers, definitions,
  # limit_all, cleanup, the SQLSTATE of a refusal with throws. One line of
  # results.
  local old_api="
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS \$f\$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END \$f\$;
SELECT concat_ws(' ',
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 40) AS g, ratelimit_limit('mixed', 'k' || g, '$config') AS r),
  (SELECT count(DISTINCT ratelimit_partition('mixed', 'k' || g)) FROM generate_series(1, 40) AS g),
  (SELECT ratelimit_headers('mixed', r, '$config') ->> 'RateLimit-Policy' FROM ratelimit_check('mixed', 'k1', '$config') AS r),
  (SELECT ok::text FROM ratelimit_limit_all(jsonb_build_array(jsonb_build_object('name', 'mixed', 'key', 'k1', 'config', '$config'::jsonb)))),
  (SELECT floor(value)::text FROM ratelimit_value('mixed', 'k1', '$config')),
  pg_temp.state_of(\$s\$SELECT ratelimit_limit('mixed', 'k1', '$config', 5, throws => true)\$s\$));
SELECT ratelimit_define('mixed_def', '$config');
SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 12) AS g, ratelimit_limit('mixed_def', 'k' || g) AS r;
SELECT ratelimit_undefine('mixed_def');"
  local out
  out=$(psql_in -At -d "$db" <<<"$old_api" 2>&1) || { echo "$out"; out=failed; }
  check "mixed: router $old over partitions at $old and $API_VERSION: its API works" \
    "$(printf '40 4 \"mixed\";q=10;w=3600 true 3 PT429\n\n12\nt')" "$out"
  if [ "$old" != "$OLD_VERSION" ]; then
    # A router newer than some partitions: the calls routed there fail,
    # naming the partition; the others work.
    out=$(psql_in -At -F ' ' -d "${db}_new" 2>&1 <<SQL
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS \$f\$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END \$f\$;
SELECT ratelimit_partition('mixed_new', 'k' || g) < 2 AS old_partition,
       count(*) FILTER (WHERE s = 'ok' AND l = 'ok') AS ok,
       count(*) FILTER (WHERE l = 'ok' AND s LIKE '42883 public.ratelimit_proxy_value(4): [rl_m${tag}_' || ratelimit_partition('mixed_new', 'k' || g)
                              || '] REMOTE ERROR: function public.ratelimit_proxy_value(%) does not exist') AS named
FROM generate_series(1, 40) AS g,
     pg_temp.state_of(format('SELECT ratelimit_limit(%L, %L, %L)', 'mixed_new', 'k' || g, '$config')) AS l,
     pg_temp.state_of(format('SELECT ratelimit_value(%L, %L, %L)', 'mixed_new', 'k' || g, '$config')) AS s
GROUP BY 1 ORDER BY 1;
SQL
    ) || { echo "$out"; out=failed; }
    local expected_new
    expected_new=$(psql_in -At -F ' ' -d "$db" -c "SELECT ratelimit_partition('mixed_new', 'k' || g) < 2,
        count(*) FILTER (WHERE ratelimit_partition('mixed_new', 'k' || g) >= 2), count(*) FILTER (WHERE ratelimit_partition('mixed_new', 'k' || g) < 2)
      FROM generate_series(1, 40) AS g GROUP BY 1 ORDER BY 1")
    check "mixed: router $ROUTER_VERSION over partitions at $old and $API_VERSION: ratelimit_limit works on all, the old partitions' ratelimit_value fails naming them (42883), the others work" \
      "$expected_new" "$out"
  fi
  psql_in -d "rl_m${tag}_0" -c "ALTER EXTENSION ratelimit UPDATE"
  psql_in -d "rl_m${tag}_1" -c "ALTER EXTENSION ratelimit UPDATE"
  out=$(psql_in -At -d "$db" <<<"$old_api" 2>&1) || { echo "$out"; out=failed; }
  check "mixed: router $old over partitions all updated to $API_VERSION: its API works" \
    "$(printf '40 4 \"mixed\";q=10;w=3600 true 1 PT429\n\n12\nt')" "$out"
  psql_in -d "$db" -c "ALTER EXTENSION ratelimit_proxy UPDATE TO '$ROUTER_VERSION'" -f test/plproxy/api.sql
  out=$(psql_in -At -d "$db" 2>&1 <<SQL
SELECT ratelimit_override('mixed', 'k2', '{"kind": "token bucket", "rate": 60, "period": "1 hour", "capacity": 60}');
SELECT concat_ws(' ',
  (SELECT ratelimit_headers('mixed', r, NULL, 'k2') ->> 'RateLimit-Policy' FROM ratelimit_check('mixed', 'k2') AS r),
  (SELECT count(*) FROM ratelimit_status WHERE name = 'mixed'),
  (SELECT ratelimit_unoverride('mixed', 'k2')::text),
  (SELECT count(*) FROM ratelimit_stats WHERE false),
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 40) AS g, ratelimit_limit('mixed', 'k' || g, '$config') AS r),
  (SELECT string_agg(s.ok::text, ',' ORDER BY s.at) FROM ratelimit_simulate('$config', ARRAY(SELECT '2026-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, 6) AS g)) AS s));
SQL
  ) || { echo "$out"; out=failed; }
  check "mixed: router updated to $ROUTER_VERSION: overrides, keyed headers, status, stats, calls on every partition, a simulation" \
    "$(printf '\n\"mixed\";q=60;w=3600 40 true 0 40 true,true,true,true,true,false')" "$out"
  local fresh updated
  fresh=$(psql_in -At -d router -c "SELECT md5(string_agg(a::text, ',' ORDER BY a::text)) FROM extension_api('ratelimit_proxy') AS a")
  updated=$(psql_in -At -d "$db" -c "SELECT md5(string_agg(a::text, ',' ORDER BY a::text)) FROM extension_api('ratelimit_proxy') AS a")
  check "mixed: the router updated from $old has a fresh $ROUTER_VERSION router's catalog" "$fresh" "$updated"
}

# Two partitions that are databases of one server (partition 0's cluster,
# whose shared memory holds the counters of ratelimit_stats and the memory
# limits of both): the router's ratelimit_stats counts its calls once, and
# its ratelimit_status shows each memory entry once.
run_same_server() {
  local host=${PART_HOSTS[0]} i
  local table_config='{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 5}'
  local memory_config='{"kind": "token bucket", "rate": 10, "period": "1 hour", "capacity": 5, "storage": "memory"}'
  for i in 0 1; do
    psql_in -h "$host" -d postgres -c "DROP DATABASE IF EXISTS rl_s$i" -c "CREATE DATABASE rl_s$i"
    psql_in -h "$host" -d "rl_s$i" -c "CREATE EXTENSION ratelimit VERSION '$API_VERSION'"
  done
  psql_in -d postgres -c "DROP DATABASE IF EXISTS router_same" -c "CREATE DATABASE router_same"
  psql_in -d router_same -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=rl_s0 host=$host port=5432', p1 'dbname=rl_s1 host=$host port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" >/dev/null
  local out
  out=$(psql_in -At -d router_same 2>&1 <<SQL
SELECT ratelimit_stats_reset();
SELECT concat_ws(' ',
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 20) AS g, ratelimit_limit('same', 'k' || g, '$table_config') AS r),
  (SELECT count(*) FILTER (WHERE r.ok) FROM generate_series(1, 20) AS g, ratelimit_limit('same_memory', 'k' || g, '$memory_config') AS r),
  (SELECT count(DISTINCT ratelimit_partition('same', 'k' || g)) FROM generate_series(1, 20) AS g),
  (SELECT granted FROM ratelimit_stats WHERE name = 'same'),
  (SELECT granted FROM ratelimit_stats WHERE name = 'same_memory'),
  (SELECT count(*) FROM ratelimit_status WHERE name = 'same' AND storage = 'table'),
  (SELECT count(*) FROM ratelimit_status WHERE name = 'same_memory' AND storage = 'memory'));
SQL
  ) || { echo "$out"; out=failed; }
  check "one server, 2 partition databases: grants, partitions used, stats and status count the server once" \
    "$(printf '\n20 20 2 20 20 20 20')" "$out"
}

# The router's own connections (ratelimit_proxy 0.9.0, src/pg/route), in
# router database "router" (its partitions in the main cluster, whose
# pg_stat_activity shows them as application ratelimit_proxy): USAGE on
# the server is needed; a session keeps its connections, and opens new
# ones when the server changes; a routed call cancelled (statement_timeout)
# or timed out (the server's query_timeout) while its partition waits for a
# row lock cancels the partition's statement, and the session's next call
# works.
# What both groups of router checks below share: a statement's outcome as
# text, and a bounded wait (60 seconds) for a session to appear or go.
ROUTED_HELPERS="
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS OR query_canceled THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END \$\$;
-- Waits (up to 60 s) until whether a session of application app runs a
-- statement like pattern is present.
CREATE FUNCTION pg_temp.wait_until(app text, pattern text, present boolean) RETURNS boolean
LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN present = EXISTS (SELECT FROM pg_stat_activity WHERE application_name = app AND query LIKE pattern);
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN true;
END \$\$;"
TRANSPORT_HELPERS="
SET client_min_messages = warning;
$ROUTED_HELPERS
CREATE FUNCTION pg_temp.routed() RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT string_agg(datname || ':' || pid, ',' ORDER BY datname, pid) FROM pg_stat_activity
          WHERE application_name = 'ratelimit_proxy');
END \$\$;
-- The routed connections once they are want (after up to 5 seconds: a
-- closed connection's backend exits on its own time).
CREATE FUNCTION pg_temp.settle(want text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..100 LOOP
    EXIT WHEN pg_temp.routed() IS NOT DISTINCT FROM want;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.routed();
END \$\$;
-- How many routed statements wait for a lock, once none does (or after 2 seconds).
CREATE FUNCTION pg_temp.waiting() RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE n bigint;
BEGIN
  FOR i IN 1..40 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity WHERE application_name = 'ratelimit_proxy' AND wait_event_type = 'Lock';
    EXIT WHEN n = 0;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN n;
END \$\$;
-- Waits (up to 60 seconds) until the holder holds its row (its sleep
-- runs), or until it is gone.
CREATE FUNCTION pg_temp.holder(holding boolean) RETURNS boolean LANGUAGE sql AS \$\$
  SELECT pg_temp.wait_until('ratelimit_holder', CASE WHEN holding THEN '%pg_sleep%' ELSE '%' END, holding)
\$\$;
"
run_transport() {
  local db=router config='{"kind": "token bucket", "rate": 1000, "period": 1000}' part out holder
  local call="SELECT ratelimit_limit('held', 'k', '$config')"
  part=$(psql_in -At -d "$db" -c "SELECT ratelimit_partition('held', 'k')")
  psql_in -d "$db" -c "DROP ROLE IF EXISTS rl_transport" -c "CREATE ROLE rl_transport"
  out=$(psql_in -At -F ' ' -d "$db" 2>&1 <<SQL
$TRANSPORT_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.routed() AS first \gset
SELECT 'connections', cardinality(string_to_array(:'first', ','));
SELECT count(*) FILTER (WHERE NOT (ratelimit_limit('kept', 'k' || g, '$config')).ok) FROM generate_series(1, 40) AS g;
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'kept:', pg_temp.settle(:'first') = :'first';
SET ROLE rl_transport;
SELECT 'no usage:', pg_temp.state_of(\$s\$$call\$s\$);
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER ratelimit TO rl_transport;
SET ROLE rl_transport;
SELECT 'usage:', pg_temp.state_of(\$s\$$call\$s\$);
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER ratelimit FROM rl_transport;
SELECT pg_temp.routed() AS first \gset
ALTER SERVER ratelimit OPTIONS (ADD connection_lifetime '3600');
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'server changed, new:', cardinality(string_to_array(pg_temp.routed(), ',')),
       NOT (string_to_array(pg_temp.settle('none'), ',') && string_to_array(:'first', ','));
ALTER SERVER ratelimit OPTIONS (DROP connection_lifetime);
-- A cluster the router cannot use (in a transaction rolled back: a wrapper
-- without PL/Proxy's validator lets a bad partition list through).
BEGIN;
ALTER SERVER ratelimit RENAME TO ratelimit_real;
SELECT 'no server:', pg_temp.state_of(\$s\$$call\$s\$);
CREATE FOREIGN DATA WRAPPER rl_no_validator;
CREATE SERVER ratelimit FOREIGN DATA WRAPPER rl_no_validator OPTIONS (p0 'dbname=rl_p0', p2 'dbname=rl_p2');
SELECT 'no user mapping:', left(pg_temp.state_of(\$s\$$call\$s\$), 32);
CREATE USER MAPPING FOR PUBLIC SERVER ratelimit;
SELECT 'missing partition:', pg_temp.state_of(\$s\$$call\$s\$);
ALTER SERVER ratelimit OPTIONS (ADD p1 'dbname=rl_p1');
SELECT 'three partitions:', pg_temp.state_of(\$s\$$call\$s\$);
ROLLBACK;
SELECT 'back:', pg_temp.state_of(\$s\$$call\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: one per partition, USAGE on the server needed, kept by the session, new ones after the server changed; an unusable cluster's errors" \
    "$(printf '%s\n' 'connections 4' 0 'kept: t' 'no usage: 42501 permission denied for foreign server ratelimit' \
         'usage: no error' 'server changed, new: 4 t' 'no server: 42704 ratelimit_proxy: there is no server "ratelimit"' \
         'no user mapping: 42704 user mapping not found for' \
         'missing partition: HV00D ratelimit_proxy: the partitions of server "ratelimit" are not valid: a number is missing or repeated' \
         'three partitions: HV00D ratelimit_proxy: the partitions of server "ratelimit" are not valid: their number is not a power of 2' \
         'back: no error')" \
    "$(echo "$out" | grep -v '^t$')"

  # A row of the partition locked for 6 seconds by a transaction there
  # (application ratelimit_holder: the router's session waits until it
  # holds the row, and until it is gone, whatever the machine's speed).
  hold() {
    psql_in -h "$MAIN_HOST" -d "rl_p$part" -c "SET application_name = 'ratelimit_holder'" -c "BEGIN" -c "$call" \
      -c "SELECT pg_sleep(6)" -c "COMMIT" >/dev/null
  }
  local what
  for what in statement_timeout query_timeout; do
    hold &
    holder=$!
    out=$(psql_in -At -F ' ' -d "$db" 2>&1 <<SQL
$TRANSPORT_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.holder(true);
$(if [ $what = statement_timeout ]; then echo "SET statement_timeout = '300ms';";
  else echo "ALTER SERVER ratelimit OPTIONS (ADD query_timeout '1');"; fi)
SELECT 'call:', pg_temp.state_of(\$s\$$call\$s\$);
RESET statement_timeout;
SELECT 'waiting:', pg_temp.waiting();
$([ $what = query_timeout ] && echo "ALTER SERVER ratelimit OPTIONS (DROP query_timeout);")
SELECT pg_temp.holder(false);
SELECT 'next call:', pg_temp.state_of(\$s\$$call\$s\$);
SQL
    ) || { echo "$out"; out=failed; }
    wait "$holder"
    local expected='57014 canceling statement due to statement timeout'
    [ $what = query_timeout ] && expected="57014 public.ratelimit_limit(6): [rl_p$part] query timeout"
    check "router connections: a call stopped by $what while its partition waits cancels the partition's statement; the next call works" \
      "$(printf 'call: %s\nwaiting: 0\nnext call: no error' "$expected")" "$(echo "$out" | grep -v '^t$\|^$')"
  done
}

# What the router's own connections do when a partition fails them, in
# router database router_failures over partition databases rl_f0 and rl_f1
# of the main cluster (thrown away after: one of them is altered):
#   - connection_lifetime: a connection is kept while it is younger than the
#     server's connection_lifetime (every call begun within that many
#     seconds of the first one keeps its partition backend), and replaced
#     at the first call after it (that call begun that late), the old
#     backend gone;
#   - an idle connection the partition terminated is replaced at the next
#     call, without an error;
#   - a connection lost during a RUN ON ALL call (ratelimit_define, while
#     its statement waits for a row lock on the second partition, the
#     first one's answer already read): 08006 naming the partition, and
#     the next call works, one connection per partition left;
#   - a partition's notice and warning: passed to the client, in order,
#     before the answer, the connection kept;
#   - a partition that answers another row shape (its ratelimit_stats view
#     given one more column): 42804 naming it, the first partition's
#     answer already read; the next calls on both partitions work, on the
#     same partition backends;
#   - calls whose plan a function change in another session invalidates
#     while they run: every one answered;
#   - calls that time out on the second partition after the first one
#     answered: no libpq memory left behind (the resident size);
#   - a partition whose ratelimit_proxy_value answers two rows: the
#     router's one-row call routed there fails naming it (21000).
# Waits are for conditions (bounded, 60 seconds), never for a fixed time.
FAILURE_HELPERS="
SET client_min_messages = warning;
$ROUTED_HELPERS
-- The router's partition backends in database db, as 'pid,pid'.
CREATE FUNCTION pg_temp.pids(db text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_stat_clear_snapshot();
  RETURN (SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
          WHERE application_name = 'ratelimit_proxy' AND datname = db);
END \$\$;
-- The router's partition backends in db once they are want (up to 60 s).
CREATE FUNCTION pg_temp.settle(db text, want text) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN pg_temp.pids(db) IS NOT DISTINCT FROM want;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN pg_temp.pids(db);
END \$\$;
-- Whether the router has (after up to 60 s) one backend in db: the ones
-- it closed are gone.
CREATE FUNCTION pg_temp.one_left(db text) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..1200 LOOP
    EXIT WHEN strpos(pg_temp.pids(db), ',') = 0;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN strpos(pg_temp.pids(db), ',') = 0;
END \$\$;
-- Waits (up to 60 s) until a session of application app runs a statement like pattern.
CREATE FUNCTION pg_temp.wait_for(app text, pattern text) RETURNS boolean LANGUAGE sql AS \$\$
  SELECT pg_temp.wait_until(app, pattern, true)
\$\$;
-- With connection_lifetime lifetime (seconds): routed calls on every
-- partition, 50 ms apart, until rl_f0's backend is replaced (up to 60 s):
-- whether any call begun less than lifetime after the first one (before
-- it began) kept the first backend, and whether the first call that found
-- another (every call before it kept the first) had begun at least
-- lifetime after.
CREATE FUNCTION pg_temp.lifetime(lifetime integer) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
  started timestamptz := clock_timestamp();
  first text;
  now_pids text;
  call_start timestamptz;
  kept integer := 0;
BEGIN
  PERFORM count(*) FROM ratelimit_proxy_stats();
  first := pg_temp.pids('rl_f0');
  FOR i IN 1..1200 LOOP
    PERFORM pg_sleep(0.05);
    call_start := clock_timestamp();
    PERFORM count(*) FROM ratelimit_proxy_stats();
    now_pids := pg_temp.pids('rl_f0');
    IF now_pids IS DISTINCT FROM first THEN
      RETURN format('kept before: %s, replaced after: %s', kept > 0,
                    call_start >= started + make_interval(secs => lifetime));
    END IF;
    IF call_start < started + make_interval(secs => lifetime) THEN kept := kept + 1; END IF;
  END LOOP;
  RETURN 'not replaced';
END \$\$;"
run_transport_failures() {
  local host=$MAIN_HOST config='{"kind": "token bucket", "rate": 10, "period": "1 hour"}' i out holder columns
  fresh_databases rl_f 2 router_failures
  psql_in -d router_failures -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION ratelimit_proxy VERSION '$ROUTER_VERSION'" \
    -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=rl_f0 host=$host port=5432', p1 'dbname=rl_f1 host=$host port=5432')" \
    -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit OPTIONS (user 'postgres')" >/dev/null
  # Its key on each partition.
  local key0 key1
  key0=$(psql_in -At -d router_failures -c "SELECT 'k' || g FROM generate_series(1, 100) AS g WHERE ratelimit_partition('f', 'k' || g) = 0 LIMIT 1")
  key1=$(psql_in -At -d router_failures -c "SELECT 'k' || g FROM generate_series(1, 100) AS g WHERE ratelimit_partition('f', 'k' || g) = 1 LIMIT 1")
  local call0="SELECT ratelimit_limit('f', '$key0', '$config')" call1="SELECT ratelimit_limit('f', '$key1', '$config')"

  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
ALTER SERVER ratelimit OPTIONS (ADD connection_lifetime '3');
SELECT pg_temp.lifetime(3);
SELECT 'old one gone:', pg_temp.one_left('rl_f0');
ALTER SERVER ratelimit OPTIONS (DROP connection_lifetime);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: kept while younger than connection_lifetime, replaced at a call after it, the old backend gone" \
    "$(printf '%s\n' 'kept before: t, replaced after: t' 'old one gone: t')" "$(echo "$out" | grep -v '^$')"

  # The second partition's backend waits for a row lock its holder took
  # (redefining the same name), which terminates it once it waits.
  held() {
    psql_in -d rl_f1 -c "SET application_name = 'ratelimit_lost_holder'" -c "BEGIN" \
      -c "SELECT ratelimit_define('lost', '$config')" -f - -c "COMMIT" >/dev/null <<'SQL'
DO $$
BEGIN
  FOR i IN 1..1200 LOOP
    PERFORM pg_stat_clear_snapshot();
    PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE application_name = 'ratelimit_proxy' AND datname = 'rl_f1' AND wait_event_type = 'Lock';
    EXIT WHEN FOUND;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SQL
  }
  held &
  holder=$!
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT pg_temp.pids('rl_f1') AS idle \gset
SELECT pg_terminate_backend(:idle);
SELECT pg_temp.settle('rl_f1', NULL) IS NULL;
SELECT 'idle one terminated:', pg_temp.state_of(\$s\$SELECT count(*) FROM ratelimit_proxy_stats()\$s\$),
       pg_temp.pids('rl_f1') <> :'idle';
SELECT pg_temp.wait_for('ratelimit_lost_holder', 'DO%');
SELECT 'lost during the call:', pg_temp.state_of(\$s\$SELECT ratelimit_define('lost', '$config')\$s\$);
SELECT 'next call:', pg_temp.state_of(\$s\$SELECT ratelimit_define('lost', '$config')\$s\$);
SELECT 'connections:', pg_temp.one_left('rl_f0'), pg_temp.one_left('rl_f1');
SQL
  ) || { echo "$out"; out=failed; }
  wait "$holder" || { echo "the holder on rl_f1 failed"; out=failed; }
  # The first line of each answer (libpq's message goes on: the partition's
  # context, "server closed the connection unexpectedly").
  check "router connections: an idle one terminated is replaced at the next call; one lost during a RUN ON ALL call fails it naming the partition (08006), the next call works, one connection per partition" \
    "$(printf '%s\n' 'idle one terminated: no error t' \
         'lost during the call: 08006 public.ratelimit_proxy_define(2): [rl_f1] connection lost: FATAL:  terminating connection due to administrator command' \
         'next call: no error' 'connections: t t')" \
    "$(echo "$out" | grep '^[a-z ]*:' | grep -v '^CONTEXT:')"

  # A partition's notices and warnings reach the router's client as
  # PL/Proxy passes them (rl_f0's ratelimit_stats raises them at its first
  # call in a partition backend, while public.noise has a row), in order,
  # before the answer; the connection stays.
  psql_in -d rl_f0 -f - >/dev/null <<'SQL'
CREATE TABLE public.noise (level text);
INSERT INTO public.noise VALUES ('on');
CREATE FUNCTION public.noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM public.noise) AND current_setting('rl_test.noisy', true) IS NULL THEN
    PERFORM set_config('rl_test.noisy', 'done', false);
    RAISE NOTICE 'first from %', current_database() USING HINT = 'a hint';
    RAISE WARNING 'then from %', current_database();
  END IF;
  RETURN true;
END $$;
DO $$ BEGIN
  EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_stats AS SELECT s.* FROM (%s) AS s WHERE (SELECT public.noisy())',
                 rtrim(pg_get_viewdef('public.ratelimit_stats'::regclass), ';'));
END $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SET client_min_messages = notice;
SELECT 'answered:', count(*) >= 0 FROM ratelimit_proxy_stats();
SET client_min_messages = warning;
SELECT pg_temp.pids('rl_f0') AS p0 \gset
SELECT 'quiet after:', count(*) >= 0 FROM ratelimit_proxy_stats();
SELECT 'same backend:', pg_temp.pids('rl_f0') = :'p0';
SQL
  ) || { echo "$out"; out=failed; }
  psql_in -d rl_f0 -c "DELETE FROM public.noise" >/dev/null
  check "router connections: a partition's notice and warning reach the client as PL/Proxy passes them, in order, before the answer; the connection stays" \
    "$(printf '%s\n' 'NOTICE:  public.ratelimit_proxy_stats(0): [rl_f0] REMOTE NOTICE: first from rl_f0' 'HINT:  Remote hint: a hint' \
         'WARNING:  public.ratelimit_proxy_stats(0): [rl_f0] REMOTE WARNING: then from rl_f0' 'answered: t' \
         'quiet after: t' 'same backend: t')" \
    "$(echo "$out" | grep -v '^t$\|^$\|^CONTEXT:\|^PL/pgSQL\|^SQL statement')"

  # rl_f1's ratelimit_stats with one column more than the router's
  # statement expects (the router's ratelimit_proxy_stats: the server, then
  # the view's columns).
  columns=$(psql_in -At -d rl_f1 -c "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.ratelimit_stats'::regclass AND attnum > 0 AND NOT attisdropped")
  psql_in -d rl_f1 -c "DO \$\$ BEGIN EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_stats AS SELECT s.*, 0 AS extra FROM (%s) AS s', rtrim(pg_get_viewdef('public.ratelimit_stats'::regclass), ';')); END \$\$"
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT count(*) >= 0 FROM ratelimit_proxy_status();
SELECT pg_temp.pids('rl_f0') AS p0, pg_temp.pids('rl_f1') AS p1 \gset
SELECT 'other shape:', pg_temp.state_of(\$s\$SELECT count(*) FROM ratelimit_stats\$s\$);
SELECT 'first partition:', pg_temp.state_of(\$s\$$call0\$s\$);
SELECT 'second partition:', pg_temp.state_of(\$s\$$call1\$s\$);
SELECT 'same backends:', pg_temp.pids('rl_f0') = :'p0', pg_temp.pids('rl_f1') = :'p1';
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering another row shape fails the call naming it (42804); the next calls work, on the same partition backends" \
    "$(printf '%s\n' "other shape: 42804 public.ratelimit_proxy_stats(0): [rl_f1] the partition answered $((columns + 2)) columns, not $((columns + 1))" \
         'first partition: no error' 'second partition: no error' 'same backends: t t')" \
    "$(echo "$out" | grep -v '^t$\|^$')"

  # A function changed in another session is seen by the router backend
  # whenever it next reads a catalog, in the middle of a call too: here
  # each call reads the cluster again (another role: its user mapping is
  # looked up), while another session commits a new definition of a
  # function, 3,000 times. Before 0.10.0 that freed the plan the call was
  # using: garbage in its statement, errors such as "(null)(-197131880):
  # [rl_f1] connection lost: number of parameters must be between 0 and
  # 65535", or a crash; now every call is answered.
  psql_in -d router_failures -c "GRANT USAGE ON FOREIGN SERVER ratelimit TO PUBLIC" \
    -c "DO \$\$ BEGIN FOR i IN 1..200 LOOP EXECUTE format('CREATE ROLE rl_churn%s', i); END LOOP; END \$\$" >/dev/null
  local churner
  ( echo "SET synchronous_commit = off;"
    for i in $(seq 1 3000); do
      echo "CREATE OR REPLACE FUNCTION public.rl_churn() RETURNS integer LANGUAGE sql AS 'SELECT $i';"
    done ) | psql_in -d router_failures >/dev/null &
  churner=$!
  out=$(for i in $(seq 1 200); do
          echo "SET ROLE rl_churn$i; SELECT ok FROM ratelimit_limit('churn', 'k$i', '$config'); RESET ROLE;"
        done | psql_in -At -v ON_ERROR_STOP=0 -d router_failures 2>&1 | sort | uniq -c | sed 's/^ *//') || out=failed
  wait "$churner" || { echo "the session changing a function failed"; out=failed; }
  psql_in -d router_failures -c "DO \$\$ BEGIN FOR i IN 1..200 LOOP EXECUTE format('DROP ROLE rl_churn%s', i); END LOOP; END \$\$" \
    -c "REVOKE USAGE ON FOREIGN SERVER ratelimit FROM PUBLIC" >/dev/null
  check "router connections: 200 calls, each reading the cluster again, while another session changes a function: every call answered" \
    "200 t" "$out"

  # libpq's memory is malloc'd: a PGresult left behind by an error is seen
  # only in the router backend's resident size. rl_f0 answers
  # ratelimit_proxy_status with 20,000 rows (about 6 MB in libpq), rl_f1
  # only after 5 seconds, past the server's query_timeout: each call fails
  # (57014) after rl_f0's answer was read (one that reached rl_f0's
  # deadline first would name rl_f0 and leak nothing). Before 0.10.0 each
  # failure left rl_f0's answer behind (the resident size grew by about 6
  # MB a failure); now it grows by less than 1 MB over all 10. The size is
  # the server's /proc/self/status: skipped in a root without /proc.
  psql_in -d rl_f0 -c "SELECT count(*) FROM generate_series(1, 20000) AS g, ratelimit_limit('big', 'key' || g, '$config')" >/dev/null
  psql_in -d rl_f1 -c "CREATE FUNCTION public.slow() RETURNS boolean LANGUAGE plpgsql AS \$\$BEGIN PERFORM pg_sleep(5); RETURN true; END\$\$" \
    -c "DO \$\$ BEGIN EXECUTE format('CREATE OR REPLACE VIEW public.ratelimit_status AS SELECT s.* FROM (%s) AS s WHERE (SELECT public.slow())', rtrim(pg_get_viewdef('public.ratelimit_status'::regclass), ';')); END \$\$" >/dev/null
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<'SQL'
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.rss() RETURNS bigint LANGUAGE sql AS $$
  SELECT substring(pg_read_file('/proc/self/status') FROM 'VmRSS:\s+(\d+)')::bigint $$;
CREATE FUNCTION pg_temp.state_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS OR query_canceled THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
SELECT (pg_stat_file('/proc/self/status', true)).size IS NOT NULL AS have_proc \gset
\if :have_proc
ALTER SERVER ratelimit OPTIONS (ADD query_timeout '2');
SELECT pg_temp.state_of('SELECT count(*) FROM ratelimit_proxy_status()') IS NOT NULL;
SELECT pg_temp.rss() AS before \gset
CREATE TEMP TABLE failures AS
SELECT pg_temp.state_of('SELECT count(*) FROM ratelimit_proxy_status() WHERE ' || g || ' > 0') AS failure
FROM generate_series(1, 10) AS g;
SELECT 'timed out:', count(*) FILTER (WHERE failure LIKE '57014 public.ratelimit_proxy_status(0): [rl_f_] query timeout') FROM failures;
SELECT 'resident size grew less than 1 MB a failure:', pg_temp.rss() - :before < 10 * 1024;
\echo note: of the 10 timeouts, on rl_f1 (after rl_f0 answered):
SELECT count(*) FILTER (WHERE failure LIKE '%[rl_f1]%') FROM failures;
ALTER SERVER ratelimit OPTIONS (DROP query_timeout);
\else
\echo note: skipped: the server has no /proc
\endif
SQL
  ) || { echo "$out"; out=failed; }
  echo "$out" | grep -A1 '^note:' | grep -v '^--$' | paste -d ' ' - - | sed 's/^/   /'
  if ! echo "$out" | grep -q 'note: skipped'; then
    check "router connections: a RUN ON ALL call that fails after a partition answered leaves no libpq memory behind (the router backend's resident size)" \
      "$(printf '%s\n' 'timed out: 10' 'resident size grew less than 1 MB a failure: t')" \
      "$(echo "$out" | grep -v '^t$\|^$\|^note:\|^[0-9]*$')"
  fi

  # rl_f1's ratelimit_proxy_value replaced by a set-returning function of
  # the same arguments that answers two rows (last: rl_f1 keeps it): the
  # router's one-row call routed there fails naming the function (21000);
  # the other partition's works.
  psql_in -d rl_f1 -f - >/dev/null <<'SQL'
ALTER EXTENSION ratelimit DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
CREATE FUNCTION public.ratelimit_proxy_value(name text, key text, config jsonb, OUT value double precision,
    OUT ts timestamp with time zone, OUT error_state text, OUT error_message text, OUT error_detail text,
    OUT error_hint text)
RETURNS SETOF record LANGUAGE sql
AS $$ VALUES (1::float8, now(), NULL::text, NULL::text, NULL::text, NULL::text), (2, now(), NULL, NULL, NULL, NULL) $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT 'two rows:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key1', '$config')\$s\$);
SELECT 'other partition:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key0', '$config')\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering two rows to a one-row call fails it naming the function (21000); the other partition's call works" \
    "$(printf '%s\n' 'two rows: 21000 public.ratelimit_proxy_value: the partition answered 2 rows, not one' 'other partition: no error')" \
    "$(echo "$out" | grep '^[a-z ]*:' | grep -v '^CONTEXT:')"

  # rl_f0's ratelimit_proxy_value answering its value as numeric (the same
  # columns, one of another type): the call fails naming the partition and
  # the column (42804), before any value is read.
  psql_in -d rl_f0 -f - >/dev/null <<'SQL'
ALTER EXTENSION ratelimit DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
DROP FUNCTION public.ratelimit_proxy_value(text, text, jsonb);
CREATE FUNCTION public.ratelimit_proxy_value(name text, key text, config jsonb, OUT value numeric,
    OUT ts timestamp with time zone, OUT error_state text, OUT error_message text, OUT error_detail text,
    OUT error_hint text)
LANGUAGE sql AS $$ VALUES (1.5::numeric, now(), NULL::text, NULL::text, NULL::text, NULL::text) $$;
SQL
  out=$(psql_in -At -F ' ' -d router_failures 2>&1 <<SQL
$FAILURE_HELPERS
SELECT 'other type:', pg_temp.state_of(\$s\$SELECT ratelimit_value('f', '$key0', '$config')\$s\$);
SQL
  ) || { echo "$out"; out=failed; }
  check "router connections: a partition answering a column of another type fails the call naming it and the column (42804)" \
    'other type: 42804 public.ratelimit_proxy_value(4): [rl_f0] the partition answered column 1 as type 1700, not 701 (double precision)' \
    "$(echo "$out" | grep '^other type:')"
}

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
  tests=(router postgrest app_pattern no_reconnect routed_settings hostile_callers)
  # The partitions of case 2 have shared memory (shared_preload_libraries).
  [ $case = router_clusters ] && tests+=(router_shared)
  say "$case: pg_regress test/plproxy (${tests[*]}), partition clocks frozen"
  set_partition_clock '2026-01-01 00:00:00+00' "${hosts[@]}"
  run_regress $case "${tests[@]}"
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
