# shellcheck shell=bash
# Shared helpers for bench/*.sh: pinning a build of the extension's library.
# Source it after scripts/lib.sh, with PSQL set to the psql command (an
# array); it defines functions only.

# Copies the library $1 to $2 once it is stable (not being rewritten by a
# concurrent make install: the same md5 a second after the copy).
copy_stable_library() {
  local src=$1 dst=$2
  mkdir -p "$(dirname "$dst")"
  chmod 755 "$(dirname "$dst")"
  for _ in $(seq 20); do
    cp "$src" "$dst"
    sleep 1
    [ "$(md5sum < "$src")" = "$(md5sum < "$dst")" ] && break
  done
  chmod 755 "$dst"
}

# Creates the extension in database $1 with its functions pointing at the
# library file $2 (pg_proc.probin), and checks that a backend of that
# database loads exactly that file. The SQL install script is the installed
# one; check_function_bodies = off keeps CREATE FUNCTION from loading the
# installed library.
create_pinned_extension() {
  local db=$1 so=$2 loaded
  "${PSQL[@]}" -d "$db" -At -c "SET check_function_bodies = off" -c "CREATE EXTENSION ratelimit" \
    -c "UPDATE pg_catalog.pg_proc SET probin = '$so' WHERE probin = '\$libdir/ratelimit'"
  loaded=$("${PSQL[@]}" -d "$db" -At \
    -c "SELECT ratelimit_check('pin', NULL, '{\"kind\": \"token bucket\", \"rate\": 1, \"period\": 1000}') IS NOT NULL" \
    -c "SELECT substring(pg_read_file('/proc/self/maps') from '/\S*ratelimit\.so')" | tail -1)
  if [ "$loaded" != "$so" ]; then
    echo "FAIL: database $db loaded '$loaded', not the pinned $so" >&2
    return 1
  fi
}

# One call of ratelimit_limit($1, key) for every g from $2 to $3, where key
# is the SQL expression $5 of g (default g::text), in statements of at most
# 1,000,000 calls each (the calls in FROM, so each is made once), spread over
# $4 parallel sessions (default 1) of the database PGDATABASE,
# synchronous_commit off. Prints "<granted> <refused>" summed over every
# call; fails if a session failed. bench/footprint.sh and bench/tenmillion.sh
# fill a memory limit with it, and check it.
limit_each_key() {
  local name=$1 from=$2 to=$3 jobs=${4:-1} key=${5:-g::text} chunk=1000000 j lo hi dir rc=0
  local pids=()
  dir=$(mktemp -d /tmp/ratelimit-bench-keys.XXXXXX)
  for ((j = 0; j < jobs; j++)); do
    {
      echo "SET synchronous_commit = off;"
      for ((lo = from + j * chunk; lo <= to; lo += jobs * chunk)); do
        hi=$((lo + chunk - 1 < to ? lo + chunk - 1 : to))
        echo "SELECT count(*) FILTER (WHERE r.ok), count(*) FILTER (WHERE NOT r.ok)
                FROM generate_series($lo, $hi) g, ratelimit_limit('$name', $key) r;"
      done
    } | "${PSQL[@]}" -At -F ' ' > "$dir/$j.out" 2> "$dir/$j.err" &
    pids+=($!)
  done
  for j in "${!pids[@]}"; do
    wait "${pids[$j]}" || { rc=1; echo "limit_each_key: session $j failed: $(head -3 "$dir/$j.err")" >&2; }
  done
  [ "$rc" -eq 0 ] && awk '{ok += $1; refused += $2} END {print ok + 0, refused + 0}' "$dir"/*.out
  rm -rf "$dir"
  return "$rc"
}

# Makes WORK_DIR (a temp dir named after $1) and has the script, on exit,
# Ctrl-C or TERM, stop its throwaway cluster (if started) and remove WORK_DIR.
work_dir_removed_on_exit() {
  WORK_DIR=$(mktemp -d "/tmp/ratelimit-$1.XXXXXX")
  CLUSTER_DIR=""
  trap 'stop_cluster; rm -rf "$WORK_DIR"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Builds bench/noop_limit.c (the no-op comparator with ratelimit_limit's
# signature, issue 38) with the server's pg_config flags into the cluster
# directory, once, and creates it in database $1 as bench_noop_limit(name,
# key, config, count, reserve, throws) RETURNS ratelimit_result, declared as
# ratelimit_limit is (the extension must exist there). Never installed.
create_noop_function() {
  local db=$1 so=$CLUSTER_DIR/noop/noop_limit.so cc cflags
  if [ ! -f "$so" ]; then
    mkdir -p "$(dirname "$so")"
    chmod 755 "$(dirname "$so")"
    cc=$("$PG_BINDIR/pg_config" --cc)
    cflags="$("$PG_BINDIR/pg_config" --cflags) $("$PG_BINDIR/pg_config" --cflags_sl)"
    # shellcheck disable=SC2086  # the compiler and its flags are words
    $cc $cflags -Wextra -Werror -shared -isystem "$("$PG_BINDIR/pg_config" --includedir-server)" \
      -o "$so" bench/noop_limit.c || { echo "FAIL: bench/noop_limit.c did not build" >&2; return 1; }
    chmod 755 "$so"
  fi
  "${PSQL[@]}" -d "$db" -c "CREATE FUNCTION bench_noop_limit(name text, key text DEFAULT NULL,
      config jsonb DEFAULT NULL, count double precision DEFAULT 1, reserve boolean DEFAULT false,
      throws boolean DEFAULT false) RETURNS ratelimit_result AS '$so', 'bench_noop_limit'
      LANGUAGE C VOLATILE PARALLEL UNSAFE" \
    -c "COMMENT ON FUNCTION bench_noop_limit(text, text, jsonb, double precision, boolean, boolean) IS
      'bench/noop_limit.c: ratelimit_limit''s signature, no decision, a formed ratelimit_result row'" >/dev/null
}
