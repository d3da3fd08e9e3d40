# What changes a router's deployment: resharding from 2 to 4 partitions,
# the router's schema (a fresh ratelimit_proxy against the router updated
# from every release), and upgrades with mixed versions.
# Sourced by scripts/plproxy-test.sh (after scripts/lib.sh); defines
# functions only, which use the driver's variables (SRC, WORK, MAIN_HOST,
# PARTITIONS, PART_DIRS, PART_HOSTS, API_VERSION, ROUTER_VERSION, failed).
# shellcheck shell=bash

# Doubles the partitions of a router from 2 to 4 by the procedure of
# docs/scale-out.md (each old partition copied to its twin, the server's new
# options added, then each partition deletes the rows it no longer owns,
# with the hash computed on the partition), in the main cluster, and checks
# through the router that every limit kept its state on exactly one
# partition, its own.
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
  psql_in -d "$db" -c "ALTER EXTENSION ratelimit_proxy UPDATE TO '$ROUTER_VERSION'" -f test/regress/router/api.sql
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
