#!/usr/bin/env bash
# The one runner of the pg_regress suites that need a server configured
# otherwise than `make installcheck`'s (which runs sql/ and test/isolation
# against any server). Each such suite is a folder test/regress/CONFIG/: its
# pg_regress tests (sql/NAME.sql), isolation specs (specs/NAME.spec), their
# expected outputs (expected/NAME.out) and regress.conf, which says the
# server's settings and which tests and specs run, in order:
#
#   scripts/regress.sh CONFIG [NAME...]      run CONFIG's tests and specs (or
#                                            only the NAMEs) on a throwaway
#                                            cluster started with its settings
#   scripts/regress.sh --running [--dbname=DB] [--skip=NAME]... CONFIG [NAME...]
#                                            the same against the server that
#                                            PGHOST and PGPORT name (a cluster
#                                            the caller started with CONFIG's
#                                            settings, a pooler, a router)
#   scripts/regress.sh --settings CONFIG     print CONFIG's settings as
#                                            start_cluster's "-c name=value"
#   scripts/regress.sh --list                the configurations
#
# regress.conf: one "key = value" a line, # starts a comment; "setting",
# "tests" and "specs" may repeat, their values adding up:
#   server = own | running    own: this script can start the cluster itself;
#                             running: the server is one a driver sets up
#                             (pgbouncer, a router): --running is required
#   setting = name=value      a server setting (no spaces in it)
#   database = DB             pg_regress's database for the tests (and the
#                             specs, unless isolation_database names one)
#   isolation_database = DB
#   database_exists = yes     the caller made the database (its extensions
#                             too): pg_regress uses it as it is; otherwise it
#                             creates it afresh with the ratelimit extension
#   tests = NAME...           pg_regress tests, run in this order
#   specs = NAME...           isolation specs, run after the tests
# Every sql/*.sql and specs/*.spec of the folder must be listed, and every
# name listed must have its file.
#
# pg_regress and the isolation tester run from the top of the source tree
# (the files' \i paths start there), with the suite's folder as their input
# directory and (from PostgreSQL 16, where they read expected files from
# the current directory) their expected directory. On failure the diffs are
# printed; on a cluster of its own, the server log is checked for crashes
# too. RATELIMIT_REGRESS_RESULTS=DIR keeps every run's outputs in
# DIR/CONFIG (DIR/CONFIG-DB with --dbname), to review them or to refresh
# expected/. With RATELIMIT_CHROOT, PG_BINDIR and MAJOR_SRC set
# (scripts/pgmajors.sh's enter_major exports them), the cluster, pg_regress
# and the isolation tester are another major's, in its root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

usage() {
  echo "usage: scripts/regress.sh [--running] [--dbname=DB] [--skip=NAME]... CONFIG [NAME...]" >&2
  echo "       scripts/regress.sh --settings CONFIG | --list   (configurations: test/regress/*/regress.conf)" >&2
  exit 2
}

# Reads test/regress/$1/regress.conf into CONF_* variables; fails naming
# what is wrong.
read_config() {
  local dir=test/regress/$1 key value line n=0 words
  [ -f "$dir/regress.conf" ] || { echo "regress.sh: no configuration $1 ($dir/regress.conf)" >&2; return 2; }
  CONF_SERVER=own CONF_SETTINGS=() CONF_DATABASE="" CONF_ISO_DATABASE="" CONF_EXISTS=no CONF_TESTS=() CONF_SPECS=()
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    line=${line%%#*}
    [[ $line =~ ^[[:space:]]*$ ]] && continue
    if ! [[ $line =~ ^[[:space:]]*([a-z_]+)[[:space:]]*=[[:space:]]*(.*[^[:space:]])[[:space:]]*$ ]]; then
      echo "regress.sh: $dir/regress.conf:$n: not \"key = value\"" >&2
      return 2
    fi
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    case $key in
      server) CONF_SERVER=$value ;;
      setting) CONF_SETTINGS+=(-c "$value") ;;
      database) CONF_DATABASE=$value ;;
      isolation_database) CONF_ISO_DATABASE=$value ;;
      database_exists) CONF_EXISTS=$value ;;
      tests) read -ra words <<<"$value"; CONF_TESTS+=("${words[@]}") ;;
      specs) read -ra words <<<"$value"; CONF_SPECS+=("${words[@]}") ;;
      *) echo "regress.sh: $dir/regress.conf:$n: unknown key $key" >&2; return 2 ;;
    esac
  done <"$dir/regress.conf"
  case $CONF_SERVER in own | running) ;; *) echo "regress.sh: $dir/regress.conf: server is own or running" >&2; return 2 ;; esac
  case $CONF_EXISTS in yes | no) ;; *) echo "regress.sh: $dir/regress.conf: database_exists is yes or no" >&2; return 2 ;; esac
  files_match_config "$dir"
}

# Fails unless the tests and specs listed are exactly the folder $1's files
# (a file left out would never run).
files_match_config() {
  local dir=$1 name file rc=0 listed=" "
  for name in "${CONF_TESTS[@]}"; do listed+="sql/$name.sql "; done
  for name in "${CONF_SPECS[@]}"; do listed+="specs/$name.spec "; done
  for file in $listed; do
    [ -f "$dir/$file" ] || { echo "regress.sh: $dir/regress.conf lists $file, which does not exist" >&2; rc=2; }
  done
  for file in "$dir"/sql/*.sql "$dir"/specs/*.spec; do
    [ -e "$file" ] || continue
    [[ $listed == *" ${file#"$dir"/} "* ]] || { echo "regress.sh: $dir/regress.conf does not list $file" >&2; rc=2; }
  done
  return $rc
}

# Keeps only the names of $1 (an array's name) that the arguments select
# (SELECTED, when any was given) and --skip did not (SKIPPED).
select_names() {
  local -n names=$1
  local kept=() name
  for name in "${names[@]}"; do
    [ ${#SELECTED[@]} -eq 0 ] || [[ " ${SELECTED[*]} " == *" $name "* ]] || continue
    [[ " ${SKIPPED[*]} " == *" $name "* ]] && continue
    kept+=("$name")
  done
  names=("${kept[@]}")
}

# Fails unless every name in "$@" is one of the configuration's tests or specs.
known_names() {
  local name rc=0
  for name in "$@"; do
    [[ " ${CONF_TESTS[*]} ${CONF_SPECS[*]} " == *" $name "* ]] ||
      { echo "regress.sh: $CONFIG has no test or spec $name" >&2; rc=2; }
  done
  return $rc
}

# The pg_regress options every run shares: the server (as its programs see
# it), the input and expected directories, the database ($1) and how it is
# made; the output directory is $2 (a host path).
common_options() {
  local db=$1 out=$2 suite
  suite=$(server_source_dir)/test/regress/$CONFIG
  OPTIONS=(--bindir="$PG_BINDIR" --host="$(server_path "$PGHOST")" --port="$PGPORT" --inputdir="$suite"
           --outputdir="$(server_path "$out")" --dbname="$db")
  [ "$MAJOR" -lt 16 ] || OPTIONS+=(--expecteddir="$suite")
  if [ "$CONF_EXISTS" = yes ]; then OPTIONS+=(--use-existing); else OPTIONS+=(--load-extension=ratelimit); fi
}

# Runs pg_regress or the isolation tester ($1: pg_regress or
# pg_isolation_regress) on the names that follow, writing to $2 (a host
# path), against database $3; prints the diffs on failure.
run_suite() {
  local program=$1 out=$2 db=$3
  shift 3
  [ $# -gt 0 ] || return 0
  program=$(server_pgxs_program "$program") || return 1
  mkdir -p "$out"
  chown_to_cluster_user "$out"
  common_options "$db" "$out"
  run_pg_client /usr/bin/env -C "$(server_source_dir)" "$program" "${OPTIONS[@]}" "$@" || {
    cat "$out/regression.diffs" 2>/dev/null || true
    return 1
  }
}

# Copies the outputs in $1 to RATELIMIT_REGRESS_RESULTS, when it is set.
keep_results() {
  [ -n "${RATELIMIT_REGRESS_RESULTS:-}" ] || return 0
  local dest=$RATELIMIT_REGRESS_RESULTS/$CONFIG${DBNAME:+-$DBNAME}
  mkdir -p "$dest"
  cp -r "$1"/. "$dest"/
  echo "-- the outputs are in $dest"
}

# Runs the configuration's tests, then its specs, writing below $1.
run_config() {
  local out=$1 tests=("${CONF_TESTS[@]}") specs=("${CONF_SPECS[@]}") db iso_db rc=0
  select_names tests
  select_names specs
  db=${DBNAME:-$CONF_DATABASE}
  iso_db=${DBNAME:-${CONF_ISO_DATABASE:-$db}}
  [ -n "$db" ] || { echo "regress.sh: $CONFIG names no database: give --dbname" >&2; return 2; }
  echo "== $CONFIG: ${tests[*]:+pg_regress ${tests[*]}}${specs[*]:+; isolation ${specs[*]}} ($db)"
  run_suite pg_regress "$out" "$db" "${tests[@]}" || rc=1
  run_suite pg_isolation_regress "$out/iso" "$iso_db" "${specs[@]}" || rc=1
  keep_results "$out"
  return $rc
}

RUNNING=0 DBNAME="" SKIPPED=() MODE=run
while [ $# -gt 0 ]; do
  case $1 in
    --running) RUNNING=1 ;;
    --dbname=*) DBNAME=${1#*=} ;;
    --skip=*) SKIPPED+=("${1#*=}") ;;
    --settings) MODE=settings ;;
    --list) ls test/regress; exit 0 ;;
    -*) usage ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || usage
CONFIG=$1
shift
SELECTED=("$@")
read_config "$CONFIG"
if [ "$MODE" = settings ]; then
  echo "${CONF_SETTINGS[*]}"
  exit 0
fi
known_names "${SELECTED[@]}" "${SKIPPED[@]}"
MAJOR=$(in_server_root "$PG_BINDIR/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')

if [ $RUNNING -eq 1 ]; then
  : "${PGHOST:?regress.sh --running: PGHOST is not set}" "${PGPORT:?regress.sh --running: PGPORT is not set}"
  OUT=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-regress.XXXXXX")
  chmod 755 "$OUT"
  trap 'rm -rf "$OUT"' EXIT
  run_config "$OUT" || exit 1
  exit 0
fi
if [ "$CONF_SERVER" != own ]; then
  echo "regress.sh: $CONFIG runs against a server its driver sets up: use --running (test/regress/$CONFIG/regress.conf)" >&2
  exit 2
fi
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR):
# this script stops only the cluster it started.
CLUSTER_DIR=""
trap stop_cluster EXIT
start_cluster "${CONF_SETTINGS[@]}"
failed=0
run_config "$CLUSTER_DIR/regress" || failed=1
check_server_log_for_crashes || failed=1
exit $failed
