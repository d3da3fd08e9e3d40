#!/usr/bin/env bash
# Tests limits with "storage": "memory" on clusters of their own:
#
# 1. A cluster started with test/regress/memory's settings
#    (shared_preload_libraries = 'ratelimit', ratelimit.memory_max_keys =
#    40, max_prepared_transactions = 2): that suite's pg_regress tests and
#    isolation specs (scripts/regress.sh; its regress.conf says what they
#    cover), the libpqxx contention tests' memory cases
#    (build/client_tests), a backend ended by
#    idle_in_transaction_session_timeout, then, with
#    ratelimit.memory_durability = off, restarts: a clean one (pg_ctl
#    restart -m fast) keeps the memory limits, an immediate stop and a
#    backend killed with SIGKILL lose them; then a hot standby made with
#    pg_basebackup -R: memory limits of its own, table limits 25006. (With
#    durability, the default: scripts/memory-durability-test.sh.)
# 2. From PostgreSQL 17, a cluster without the preload (the DSM registry):
#    the contention tests' memory cases again. (The main cluster of
#    scripts/test.sh runs sql/memory_storage.sql without the preload: 55000
#    on 15, the DSM registry from 17.)
#
# With --client PROGRAM, only the contention tests' memory cases, run by
# PROGRAM on a preloaded cluster (the ASan+UBSan build, from scripts/test.sh).
#
# Needs the extension installed and build/client_tests (CMake); a missing
# program fails the test. With RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set
# (scripts/pgmajors.sh's enter_major exports them), the clusters, psql,
# pg_regress and the isolation tester are another major's, in its root.
# The suite's pg_regress part alone: scripts/regress.sh memory [NAME...].
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/memory-durability/standby.sh
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR):
# this script stops only clusters it started.
CLUSTER_DIR=""
MAJOR=$(in_server_root "$PG_BINDIR/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
require_program build/client_tests "the libpqxx contention tests: cmake --build build" || failed=1

# psql against the current cluster: one value (-At), stopping on any error.
psql_value() {
  run_pg_client "$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1 "$@"
}

# A memory limit's value, as psql prints it ($1: name and key as SQL, e.g.
# "'r', 'k'"; $2: the config).
memory_value() {
  psql_value -c "SELECT value FROM ratelimit_value($1, '$2')"
}

# A backend ended by idle_in_transaction_session_timeout while its
# transaction holds a grant gives the grant back as it exits.
idle_session_timeout_gives_back() {
  local cfg='{"kind": "fixed window", "rate": 5, "period": "1 day", "storage": "memory"}' pid value
  psql_value -c "CREATE EXTENSION IF NOT EXISTS ratelimit" >/dev/null
  # The session takes 3, then sets the timeout (so a pause between the
  # statements before it, on a loaded machine, ends nothing early) and stays
  # idle in its transaction (psql waits for the shell) until the server ends it.
  { echo "BEGIN;"
    echo "SELECT pg_backend_pid();"
    echo "SELECT remaining FROM ratelimit_limit('idle', 'k', '$cfg', 3);"
    echo "SET idle_in_transaction_session_timeout = '100ms';"
    sleep 2
    echo "SELECT 1;"; } | psql_value -q -v ON_ERROR_STOP=0 >"$CLUSTER_DIR/idle.out" 2>&1 || true
  pid=$(head -1 "$CLUSTER_DIR/idle.out")
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(sed -n 2p "$CLUSTER_DIR/idle.out")" = 2 ] ||
    { echo "FAIL: the idle session did not take its grant: $(cat "$CLUSTER_DIR/idle.out")" >&2; return 1; }
  # Its exit is complete once its pid has left pg_stat_activity.
  psql_value -c "DO \$\$ BEGIN FOR i IN 1..3000 LOOP
      EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid); PERFORM pg_sleep(0.1);
    END LOOP; END \$\$" >/dev/null
  value=$(memory_value "'idle', 'k'" "$cfg")
  [ "$value" = 5 ] || { echo "FAIL: after idle_in_transaction_session_timeout the value is $value, not 5" >&2; return 1; }
  grep -q "terminating connection due to idle-in-transaction timeout" "$CLUSTER_DIR/server.log" ||
    { echo "FAIL: the server log does not show the idle-in-transaction timeout" >&2; return 1; }
  echo "ok - idle_in_transaction_session_timeout gives the grant back"
}

# The memory limits of the restart tests: three kinds, periods of a day
# whose windows start 12 hours ago (no window ends during the test), on the
# server's real clock (a shutdown writes the entries live at that clock).
RESTART_START=$(date -u -d '12 hours ago' '+%Y-%m-%d %H:%M:%S+00')
restart_limits() {
  local kind shape="'{\"kind\": \"%s\", \"rate\": 10, \"period\": \"1 day\", \"start\": \"$RESTART_START\", \"storage\": \"memory\"}'::jsonb"
  local tb fw sw
  tb=$(printf '%s' "'{\"kind\": \"token bucket\", \"rate\": 10, \"period\": \"1 day\", \"storage\": \"memory\"}'::jsonb")
  # shellcheck disable=SC2059
  fw=$(printf "$shape" "fixed window")
  # shellcheck disable=SC2059
  sw=$(printf "$shape" "sliding window")
  echo "('r', 'a-tb', $tb), ('r', 'b-fw', $fw), ('r', NULL, $sw)"
}

# Takes 3 of each restart limit.
take_restart_limits() {
  [ "$(psql_value -c "SELECT count(*) FILTER (WHERE (ratelimit_limit(n, k, c, 3)).ok) FROM (VALUES $(restart_limits)) v(n, k, c)")" = 3 ] ||
    { echo "FAIL: the restart limits did not grant" >&2; return 1; }
}

# What ratelimit_status stores of the restart limits (empty: nothing).
restart_limits_stored() {
  psql_value -c "SELECT string_agg(format('%s/%s: %s at %s', name, key, stored_value, ts), '; ' ORDER BY key NULLS FIRST)
                 FROM ratelimit_status WHERE name = 'r' AND storage = 'memory'"
}

# The restart limits' values now, rounded (a day's period refills nearly
# nothing during a test).
restart_limit_values() {
  psql_value -c "SELECT string_agg(round(v.value::numeric, 2)::text, ' ' ORDER BY l.k NULLS FIRST)
                 FROM (VALUES $(restart_limits)) l(n, k, c), ratelimit_value(l.n, l.k, l.c) v"
}

# Fails unless the restart limits are back in their initial state ($1 says after what).
restart_limits_initial() {
  local stored values
  stored=$(restart_limits_stored)
  values=$(restart_limit_values)
  if [ -n "$stored" ] || [ "$values" != "10.00 10.00 10.00" ]; then
    echo "FAIL: after $1 the memory limits are still stored: $stored (values $values)" >&2
    return 1
  fi
  echo "ok - after $1 every memory limit starts from its initial state"
}

# The server log from byte $1 on shows no crash but the SIGKILL this test
# sent (the postmaster logs "terminated by signal 9" and reinitializes).
log_free_of_other_crashes() {
  if tail -c +"$(($1 + 1))" "$CLUSTER_DIR/server.log" | grep -E "terminated by signal ([^9]|9[0-9])|PANIC|exited with exit code"; then
    echo "FAIL: the server log shows a crash" >&2
    return 1
  fi
}

# A clean restart keeps memory limits (the postmaster writes them to
# $PGDATA/ratelimit_memory.state as it exits after a clean shutdown and
# reads them back, then removes the file, before its first connection); an
# immediate stop and a backend killed with SIGKILL lose them. (The faults of
# that path: scripts/memory-restart-test.sh.)
restarts_keep_or_lose_memory() {
  local before after data written read_back f rc=0
  data=$(data_dir "$CLUSTER_DIR")
  psql_value -c "CREATE EXTENSION IF NOT EXISTS ratelimit" >/dev/null
  take_restart_limits || return 1
  before=$(restart_limits_stored)
  # pg_ctl restart -m fast, with the server's log where start_cluster_server puts it.
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  start_cluster_server
  after=$(restart_limits_stored)
  if [ -z "$before" ] || [ "$before" != "$after" ]; then
    echo "FAIL: pg_ctl restart -m fast did not keep the memory limits: before: $before; after: $after" >&2
    rc=1
  fi
  [ "$(restart_limit_values)" = "7.00 7.00 7.00" ] ||
    { echo "FAIL: after a clean restart the values are $(restart_limit_values), not 7 7 7" >&2; rc=1; }
  # The server logs how many it wrote and read back: the same number.
  written=$(sed -nE 's/.*ratelimit: ([0-9]+) memory limits written for the next start.*/\1/p' "$CLUSTER_DIR/server.log" | tail -1)
  read_back=$(sed -nE 's/.*ratelimit: ([0-9]+) memory limits read back from the last shutdown.*/\1/p' "$CLUSTER_DIR/server.log" | tail -1)
  if [ -z "$written" ] || [ "$written" -lt 3 ] || [ "$written" != "$read_back" ]; then
    echo "FAIL: the server wrote ${written:-no} memory limits at shutdown and read ${read_back:-none} back" >&2
    rc=1
  fi
  for f in ratelimit_memory.state ratelimit_memory.state.loading; do
    [ ! -e "$CLUSTER_DIR/data/$f" ] || { echo "FAIL: $f is left after the start" >&2; rc=1; }
  done
  [ $rc -ne 0 ] || echo "ok - pg_ctl restart -m fast keeps the memory limits ($after)"

  # An immediate stop writes nothing.
  take_restart_limits || return 1
  stop_cluster_server_immediate
  start_cluster_server
  restart_limits_initial "pg_ctl stop -m immediate" || rc=1

  # A backend killed with SIGKILL: the postmaster reinitializes shared memory.
  take_restart_limits || return 1
  kill_a_backend_alone || rc=1
  restart_limits_initial "a backend killed with SIGKILL" || rc=1
  return $rc
}

# A dropped database gives its memory limits and ratelimit_stats names
# back (a caller with PUBLIC's grants filled the inline half of
# memory_max_keys there, and the half of the stats names), and a dropped and
# re-created extension starts its memory limits afresh; a DROP rolled back
# forgets nothing.
dropped_database_frees_memory() {
  local cfg='{"kind": "fixed window", "rate": 1, "period": "36500 days", "storage": "memory"}' rc=0 out
  psql_value -c "CREATE DATABASE tenant" -c "CREATE ROLE tenant_caller LOGIN" >/dev/null
  PGDATABASE=tenant psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
  # The caller takes keys until the inline half is full (53200).
  PGDATABASE=tenant PGUSER=tenant_caller psql_value -c "DO \$\$ BEGIN FOR i IN 1..40 LOOP
      BEGIN PERFORM ratelimit_limit('century', i::text, '$cfg');
      EXCEPTION WHEN SQLSTATE '53200' THEN EXIT; END; END LOOP; END \$\$" >/dev/null
  [ "$(PGDATABASE=tenant psql_value -c "SELECT count(*) FROM ratelimit_status WHERE name = 'century'")" -ge 1 ] ||
    { echo "FAIL: the tenant's caller took no memory limit" >&2; return 1; }
  PGDATABASE=tenant psql_value -c "SELECT count(*) FROM generate_series(1, 500) g, ratelimit_limit('n' || g,
        config => '{\"kind\": \"token bucket\", \"rate\": 1, \"period\": \"1 day\"}')" >/dev/null
  out=$(psql_value -c "SELECT ratelimit_limit('elsewhere', 'k', '$cfg')" 2>&1 || true)
  [[ $out == *"no room for memory rate limit"* ]] || { echo "FAIL: the inline half was not full: $out" >&2; rc=1; }
  # Rolled back: nothing is forgotten.
  PGDATABASE=tenant psql_value -c "BEGIN" -c "DROP EXTENSION ratelimit" -c "ROLLBACK" >/dev/null
  out=$(psql_value -c "SELECT ratelimit_limit('elsewhere', 'k', '$cfg')" 2>&1 || true)
  [[ $out == *"no room for memory rate limit"* ]] || { echo "FAIL: a rolled-back DROP EXTENSION forgot memory limits" >&2; rc=1; }
  psql_value -c "DROP DATABASE tenant" >/dev/null
  [ "$(psql_value -c "SELECT ok FROM ratelimit_limit('elsewhere', 'k', '$cfg')")" = t ] ||
    { echo "FAIL: the dropped database's memory limits still hold the inline half" >&2; rc=1; }
  psql_value -c "SELECT ratelimit_limit('after-drop', config => '{\"kind\": \"token bucket\", \"rate\": 1, \"period\": \"1 day\"}')" >/dev/null
  [ "$(psql_value -c "SELECT count(*) FROM ratelimit_stats WHERE name = 'after-drop'")" = 1 ] ||
    { echo "FAIL: the dropped database's stats names still hold their half" >&2; rc=1; }
  # A dropped and re-created extension starts afresh.
  psql_value -c "SELECT ratelimit_limit('recreated', 'k', '$cfg')" >/dev/null
  psql_value -c "DROP EXTENSION ratelimit" -c "CREATE EXTENSION ratelimit" >/dev/null
  [ "$(psql_value -c "SELECT count(*) FROM ratelimit_status WHERE name = 'recreated'")" = 0 ] &&
    [ "$(psql_value -c "SELECT ok FROM ratelimit_limit('recreated', 'k', '$cfg')")" = t ] ||
    { echo "FAIL: a dropped and re-created extension kept its memory limits" >&2; rc=1; }
  psql_value -c "SELECT ratelimit_reset('elsewhere', 'k'), ratelimit_reset('recreated', 'k')" \
    -c "DROP ROLE tenant_caller" >/dev/null
  [ $rc -ne 0 ] || echo "ok - a dropped database gives back its memory limits and stats names; DROP and CREATE EXTENSION start afresh"
  return $rc
}

# Names and keys at the bounds of memory entries (56 bytes together: a
# compact entry, 57: a long one, 236: the longest), with the NULL key too,
# are each kept exactly by a clean restart; 237 bytes is 54000 and leaves
# nothing (test/regress/memory/sql/memory_identity.sql checks the answers).
IDENTITY_BOUNDS="(repeat('n', 16), repeat('k', 40)), (repeat('n', 16), repeat('k', 41)),
  (repeat('n', 16), repeat('k', 40) || 'x'), (repeat('m', 56), NULL), (repeat('m', 57), NULL),
  (repeat('n', 16), repeat('k', 220)), (repeat('m', 236), NULL)"
IDENTITY_CONFIG='{"kind": "token bucket", "rate": 10, "period": "1 day", "storage": "memory"}'
identity_bounds_stored() {
  psql_value -c "SELECT count(*) || ': ' || string_agg(format('%s+%s=%s', octet_length(s.name),
                   coalesce(octet_length(s.key)::text, 'NULL'), s.stored_value), ' ' ORDER BY s.name, s.key NULLS FIRST)
                 FROM ratelimit_status s JOIN (VALUES $IDENTITY_BOUNDS) v(n, k)
                   ON s.name = v.n AND s.key IS NOT DISTINCT FROM v.k
                 WHERE s.storage = 'memory'"
}
identity_bounds_survive_restart() {
  local before after data past rc=0
  data=$(data_dir "$CLUSTER_DIR")
  [ "$(psql_value -c "SELECT count(*) FILTER (WHERE (ratelimit_limit(n, k, '$IDENTITY_CONFIG', 4)).remaining = 6)
                      FROM (VALUES $IDENTITY_BOUNDS) v(n, k)")" = 7 ] ||
    { echo "FAIL: the identities at the bounds were not each granted exactly" >&2; return 1; }
  past=$(run_pg_client "$PG_BINDIR/psql" -X -At -c "SELECT ratelimit_limit(repeat('n', 16), repeat('k', 221), '$IDENTITY_CONFIG')" 2>&1 || true)
  case "$past" in
    *"at most 236 bytes together"*) ;;
    *) echo "FAIL: 237 bytes of name and key answered: $past" >&2; rc=1 ;;
  esac
  before=$(identity_bounds_stored)
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  start_cluster_server
  after=$(identity_bounds_stored)
  if [ "${before%%:*}" != 7 ] || [ "$before" != "$after" ]; then
    echo "FAIL: a clean restart did not keep the identities at the bounds: before: $before; after: $after" >&2
    rc=1
  fi
  # The next call of each sees the one before the restart.
  [ "$(psql_value -c "SELECT count(*) FILTER (WHERE (ratelimit_limit(n, k, '$IDENTITY_CONFIG', 4)).remaining < 3)
                      FROM (VALUES $IDENTITY_BOUNDS) v(n, k)")" = 7 ] ||
    { echo "FAIL: after the restart a call at the bounds did not see the call before it" >&2; rc=1; }
  psql_value -c "SELECT count(*) FROM (VALUES $IDENTITY_BOUNDS) v(n, k), ratelimit_reset(n, k)" >/dev/null
  [ $rc -ne 0 ] || echo "ok - names and keys of 56, 57 and 236 bytes are kept exactly by a clean restart ($after)"
  return $rc
}

# Long entries (a name and key of more than 56 bytes together) and distinct
# names are bounded by 1 % of ratelimit.memory_max_keys, at least 10,000
# (the main cluster's 40 keys never reach the long bound:
# memory_bounds.sql reaches the names'): on a cluster of 20,000 keys,
# 10,000 each, of which callers' inline configs take at most half. Past it
# a caller's new name or long entry is 53200 naming the bound (the whole
# error checked), while its short keys of a name it has still get entries.
# The owner's limits keep the other half, as docs/memory.md says: new
# names are theirs, and their long entries are shared by all of them, so a
# caller calling one defined limit (memoryKeys 5,000: half of
# memory_max_keys) with long keys takes them all, and another defined
# limit's new long key is then 53200 naming the long bound, its short keys
# still fitting.
part_bounds_hold() {
  local tb='{"kind": "token bucket", "rate": 10, "period": "1 day", "storage": "memory"}' out rc=0
  start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=20000
  psql_value -c "CREATE EXTENSION ratelimit; CREATE ROLE parts_app" >/dev/null
  # psql prints SET for the role's statement, and LOCATION (a source line)
  # for a verbose error: left out.
  as_app() { psql_value -v VERBOSITY=verbose -c "SET ROLE parts_app; $1" 2>&1 | grep -vx SET | grep -v '^LOCATION:' || true; }
  [ "$(as_app "SELECT count(*) FILTER (WHERE (ratelimit_limit('p' || i, repeat('k', 60), '$tb')).ok) FROM generate_series(1, 5000) i")" = 5000 ] ||
    { echo "FAIL: 5,000 inline long entries of new names did not fit" >&2; rc=1; }
  out=$(as_app "SELECT ratelimit_limit('p-new', 'k', '$tb')")
  [ "$out" = 'ERROR:  53200: no room for memory rate limit "p-new": the names memory limits may have are in use
DETAIL:  Every name memory limits may have, or every one of the half that limits called with inline configs may take, has an entry that is not back in its initial state.
HINT:  Raise ratelimit.memory_max_keys (memory limits may have 1% of it as names, at least 10000 or all of it), or use fewer names.' ] ||
    { echo "FAIL: a caller's 5,001st name answered: $out" >&2; rc=1; }
  out=$(as_app "SELECT ratelimit_limit('p1', repeat('k', 61), '$tb')")
  [ "$out" = 'ERROR:  53200: no room for memory rate limit "p1": the entries for a name and key of more than 56 bytes together are in use
DETAIL:  Every such entry, or every one of the half that limits called with inline configs may take, holds a limit that is not back in its initial state.
HINT:  Raise ratelimit.memory_max_keys (1% of it, at least 10000 or all of it, may be such entries), or pass a shorter key, such as a digest (md5(key)).' ] ||
    { echo "FAIL: a caller's 5,001st long entry answered: $out" >&2; rc=1; }
  [ "$(as_app "SELECT count(*) FILTER (WHERE (ratelimit_limit('p1', 'short' || i, '$tb')).ok) FROM generate_series(1, 100) i")" = 100 ] ||
    { echo "FAIL: a caller's short keys of a name it has found no room" >&2; rc=1; }
  [ "$(psql_value -c "SELECT sum(memory_full) FROM ratelimit_stats")" = 2 ] ||
    { echo "FAIL: ratelimit_stats.memory_full did not count the two refusals" >&2; rc=1; }
  # One defined limit, within its memoryKeys, takes the owner's long entries.
  psql_value -c "SELECT ratelimit_define('greedy', '${tb%\}}, \"memoryKeys\": 5000}')" >/dev/null
  [ "$(as_app "SELECT count(*) FILTER (WHERE (ratelimit_limit('greedy', repeat('g', 60) || i)).ok) FROM generate_series(1, 5000) i")" = 5000 ] ||
    { echo "FAIL: a defined limit's 5,000 long keys (its memoryKeys) did not fit beside the callers'" >&2; rc=1; }
  psql_value -c "SELECT count(*) FROM generate_series(1, 4999) i, ratelimit_define('own' || i, '$tb')" >/dev/null
  [ "$(as_app "SELECT count(*) FILTER (WHERE (ratelimit_limit('own' || i, 'k')).ok) FROM generate_series(1, 4999) i")" = 4999 ] ||
    { echo "FAIL: the owner's 4,999 other names did not fit beside the callers'" >&2; rc=1; }
  out=$(as_app "SELECT ratelimit_limit('own1', repeat('k', 60))")
  [ "$out" = 'ERROR:  53200: no room for memory rate limit "own1": the entries for a name and key of more than 56 bytes together are in use
DETAIL:  Every such entry holds a limit that is not back in its initial state.
HINT:  Raise ratelimit.memory_max_keys (1% of it, at least 10000 or all of it, may be such entries), or pass a shorter key, such as a digest (md5(key)).' ] ||
    { echo "FAIL: another defined limit's long key beside the greedy one's answered: $out" >&2; rc=1; }
  [ "$(as_app "SELECT (ratelimit_limit('own1', 'short')).ok")" = t ] ||
    { echo "FAIL: another defined limit's short key found no room" >&2; rc=1; }
  psql_value -c "SELECT ratelimit_define('own-more', '$tb')" >/dev/null
  out=$(psql_value -v VERBOSITY=verbose -c "SELECT ratelimit_limit('own-more', 'k')" 2>&1 | grep -v '^LOCATION:' || true)
  [ "$out" = 'ERROR:  53200: no room for memory rate limit "own-more": the names memory limits may have are in use
DETAIL:  Every name memory limits may have has an entry that is not back in its initial state.
HINT:  Raise ratelimit.memory_max_keys (memory limits may have 1% of it as names, at least 10000 or all of it), or use fewer names.' ] ||
    { echo "FAIL: a 10,001st name answered: $out" >&2; rc=1; }
  [ "$(psql_value -c "SELECT sum(memory_full) FROM ratelimit_stats")" = 4 ] ||
    { echo "FAIL: ratelimit_stats.memory_full did not count the four refusals" >&2; rc=1; }
  check_server_log_for_crashes || rc=1
  stop_cluster
  [ $rc -ne 0 ] || echo "ok - long entries and names are bounded at 1 % of memory_max_keys (at least 10,000), half for inline configs; the owner's limits share their long entries"
  return $rc
}

# The preloaded DSA holds every table at its bounds at once: on a cluster
# of 20,000 keys (the long bound and the names bound 10,000 each), 10,000
# names with a long key each (the long and names tables full) and 10,000
# compact entries; then a new key, compact or long, of a known name or a
# new one, is the counted 53200 naming memory_max_keys, never the DSA's
# own "out of memory" ("Failed on DSA request"); once entries are back in
# their initial state (refunded), new keys of each kind are swept room.
# (The area is sized by the same arithmetic at any memory_max_keys.)
full_area_refuses_cleanly() {
  local day='{"kind": "token bucket", "rate": 1, "period": "1 day", "storage": "memory"}' out rc=0
  start_cluster -c shared_preload_libraries=ratelimit -c ratelimit.memory_max_keys=20000
  psql_value -c "CREATE EXTENSION ratelimit" >/dev/null
  psql_value -c "SELECT count(*) FROM generate_series(1, 10001) i, ratelimit_define('full' || i, '$day')" >/dev/null
  [ "$(psql_value -c "SELECT count(*) FILTER (WHERE (ratelimit_limit('full' || i, repeat('k', 60))).ok) FROM generate_series(1, 10000) i")" = 10000 ] ||
    { echo "FAIL: 10,000 names with a long key each did not fit" >&2; rc=1; }
  [ "$(psql_value -c "SELECT count(*) FILTER (WHERE (ratelimit_limit('full' || i, 'c')).ok) FROM generate_series(1, 10000) i")" = 10000 ] ||
    { echo "FAIL: 10,000 compact entries did not fit beside them" >&2; rc=1; }
  out=$(psql_value -c "SELECT count(*) || ' ' || count(*) FILTER (WHERE octet_length(name) + octet_length(key) > 56)
                       FROM ratelimit_status WHERE storage = 'memory'")
  [ "$out" = "20000 10000" ] || { echo "FAIL: the full tables hold (entries, long entries) $out, not 20000 10000" >&2; rc=1; }
  for call in "'full1', 'new'" "'full1', repeat('n', 60)" "'full10001', 'k'"; do
    out=$(psql_value -c "SELECT ratelimit_limit($call)" 2>&1 || true)
    [[ "$out" == *'ERROR:  no room for memory rate limit "full1'*'": ratelimit.memory_max_keys entries are in use'* ]] ||
      { echo "FAIL: a new key ($call) of a full area answered: $out" >&2; rc=1; }
  done
  [ "$(psql_value -c "SELECT sum(memory_full) FROM ratelimit_stats")" = 3 ] ||
    { echo "FAIL: ratelimit_stats.memory_full did not count the three refusals" >&2; rc=1; }
  # Back in their initial state: full2's compact entry, full3's two (its name).
  psql_value -c "SELECT ratelimit_refund('full2', 'c'), ratelimit_refund('full3', 'c'),
                        ratelimit_refund('full3', repeat('k', 60))" >/dev/null
  [ "$(psql_value -c "SELECT (ratelimit_limit('full1', 'new')).ok AND (ratelimit_limit('full1', repeat('n', 60))).ok
                        AND (ratelimit_limit('full10001', 'k')).ok")" = t ] ||
    { echo "FAIL: new compact, long and name keys found no swept room in a full area" >&2; rc=1; }
  if grep -n "Failed on DSA request" "$CLUSTER_DIR/server.log"; then
    echo "FAIL: the full area raised the DSA's own out of memory" >&2
    rc=1
  fi
  check_server_log_for_crashes || rc=1
  stop_cluster
  [ $rc -ne 0 ] || echo "ok - an area full at memory_max_keys with the long and names tables full refuses with the counted 53200"
  return $rc
}

# A backend killed with SIGKILL (lib.sh), and no other crash in the log since.
kill_a_backend_alone() {
  kill_a_backend || return 1
  log_free_of_other_crashes "$KILLED_BACKEND_LOG_OFFSET"
}

# A hot standby (scripts/memory-durability/standby.sh: pg_basebackup -R
# from the cluster, its own socket directory, stopped on exit): memory limits
# work there, independent of the primary's; table limits are 25006.
hot_standby_has_its_own_memory() {
  local cfg tcfg out rc=0
  cfg='{"kind": "token bucket", "rate": 5, "period": "1 day", "storage": "memory"}'
  tcfg='{"kind": "token bucket", "rate": 5, "period": "1 day"}'
  psql_value -c "SELECT ratelimit_limit('standby', 'k', '$tcfg')" >/dev/null
  psql_value -c "SELECT ratelimit_limit('standby', 'm', '$cfg', 4)" >/dev/null
  make_standby "${PRELOAD[@]}"
  start_standby
  [ "$(standby -c "SELECT pg_is_in_recovery()")" = t ] || { echo "FAIL: the standby is not in recovery" >&2; rc=1; }
  # The primary's memory limit is not the standby's: full there.
  [ "$(standby -c "SELECT remaining FROM ratelimit_limit('standby', 'm', '$cfg', 2)")" = 3 ] ||
    { echo "FAIL: the standby's memory limit did not start full" >&2; rc=1; }
  [ "$(standby -c "SELECT ok FROM ratelimit_limit('standby', 'm', '$cfg', 4)")" = f ] ||
    { echo "FAIL: the standby's memory limit did not refuse" >&2; rc=1; }
  [ "$(standby -c "BEGIN" -c "SELECT ratelimit_limit('standby', 'm2', '$cfg', 5)" -c "ROLLBACK" -c "SELECT value FROM ratelimit_value('standby', 'm2', '$cfg')" | tail -1)" = 5 ] ||
    { echo "FAIL: a rolled-back grant on the standby was not given back" >&2; rc=1; }
  [ "$(standby -c "SELECT storage FROM ratelimit_status WHERE name = 'standby' AND key = 'm2'")" = memory ] ||
    { echo "FAIL: ratelimit_status on the standby does not list its memory limit" >&2; rc=1; }
  [ "$(standby -c "SELECT ratelimit_reset('standby', 'm')")" = t ] ||
    { echo "FAIL: ratelimit_reset of a memory limit failed on the standby" >&2; rc=1; }
  [ "$(standby -c "SELECT ratelimit_cleanup() >= 1")" = t ] ||
    { echo "FAIL: ratelimit_cleanup on the standby did not clean memory" >&2; rc=1; }
  # A table limit: 25006.
  standby -c "SELECT ratelimit_limit('standby', 'k', '$tcfg')" 2>"$STANDBY_DIR/table.err" && rc=1
  grep -q "cannot execute ratelimit_limit() in a read-only transaction" "$STANDBY_DIR/table.err" ||
    { echo "FAIL: a table limit on the standby was not 25006: $(cat "$STANDBY_DIR/table.err")" >&2; rc=1; }
  out=$(standby -c "DO \$\$ BEGIN PERFORM ratelimit_limit('standby', 'k', '$tcfg');
               EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'sqlstate %', SQLSTATE; END \$\$" 2>&1) || true
  [[ $out == *"sqlstate 25006"* ]] || { echo "FAIL: the standby's table-limit error is not SQLSTATE 25006: $out" >&2; rc=1; }
  # The primary's own memory limit is as it left it.
  [ "$(psql_value -c "SELECT round(value::numeric, 2) FROM ratelimit_value('standby', 'm', '$cfg')")" = 1.00 ] ||
    { echo "FAIL: the standby's calls changed the primary's memory limit" >&2; rc=1; }
  if grep -E "terminated by signal|PANIC" "$STANDBY_DIR/server.log"; then rc=1; fi
  stop_standby
  [ $rc -ne 0 ] || echo "ok - a hot standby has memory limits of its own; its table limits are 25006"
  return $rc
}

trap 'stop_standby; stop_cluster' EXIT
# The server settings of test/regress/memory (its regress.conf).
settings=$(scripts/regress.sh --settings memory)
read -ra PRELOAD <<<"$settings"
# --client PROGRAM: only the contention tests' memory cases, run by PROGRAM
# (scripts/test.sh: the ASan+UBSan build of build/client_tests), on a
# preloaded cluster of their own.
if [ "${1:-}" = "--client" ]; then
  require_program "$2" "the contention tests to run" || exit 1
  start_cluster "${PRELOAD[@]}"
  "$2" --gtest_brief=1 --gtest_filter='MemoryContentionTest.*:*/MemoryGiveBackTest.*' || failed=1
  check_server_log_for_crashes || failed=1
  exit $failed
fi
start_cluster "${PRELOAD[@]}"
scripts/regress.sh --running memory || failed=1
if [ -x build/client_tests ]; then
  build/client_tests --gtest_brief=1 --gtest_filter='MemoryContentionTest.*:*/MemoryGiveBackTest.*' || failed=1
fi
idle_session_timeout_gives_back || failed=1
dropped_database_frees_memory || failed=1
check_server_log_for_crashes || failed=1
# (From here on the log has this test's own SIGKILL: checked apart.)
# The restarts as without durability (ratelimit.memory_durability = off, as
# 0.10.0 kept them); with it, scripts/memory-durability-test.sh.
echo "-c ratelimit.memory_durability=off $(cat "$CLUSTER_DIR/server.opts")" >"$CLUSTER_DIR/server.opts"
as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w stop >/dev/null
start_cluster_server
restarts_keep_or_lose_memory || failed=1
identity_bounds_survive_restart || failed=1
hot_standby_has_its_own_memory || failed=1
stop_cluster
part_bounds_hold || failed=1
full_area_refuses_cleanly || failed=1
if [ "$MAJOR" -ge 17 ]; then
  # Without the preload, the memory comes from the DSM registry.
  start_cluster -c max_prepared_transactions=2
  if [ -x build/client_tests ]; then
    build/client_tests --gtest_brief=1 --gtest_filter='MemoryContentionTest.*:*/MemoryGiveBackTest.*' || failed=1
  fi
  psql_value -c "CREATE EXTENSION IF NOT EXISTS ratelimit" >/dev/null
  [ "$(psql_value -c "SELECT remaining FROM ratelimit_limit('dsm', 'k', '{\"kind\": \"token bucket\", \"rate\": 3, \"period\": \"1 day\", \"storage\": \"memory\"}', 2)")" = 1 ] ||
    fail "a memory limit without the preload (DSM registry) did not answer remaining = 1"
  check_server_log_for_crashes || failed=1
  stop_cluster
fi
exit $failed
