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
