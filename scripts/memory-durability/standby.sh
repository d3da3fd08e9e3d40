# A streaming standby of the cluster, for scripts/memory-test.sh,
# scripts/memory-durability-test.sh and scripts/memory-durability-redteam-test.sh
# (sourced after scripts/lib.sh; the caller defines psql_value): one at a
# time, in STANDBY_DIR, on port 5433 of its own socket directory.
STANDBY_DIR=""

# Stops the standby at once (if any) and removes its directory.
stop_standby() {
  [ -n "$STANDBY_DIR" ] && [ -d "$STANDBY_DIR" ] || return 0
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$STANDBY_DIR"
  STANDBY_DIR=""
}

# Makes a standby of the cluster in STANDBY_DIR (pg_basebackup -R) with
# server options $@ (server.opts; a caller may write its own after).
make_standby() {
  STANDBY_DIR=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-standby.XXXXXX")
  chmod 755 "$STANDBY_DIR"
  chown_to_cluster_user "$STANDBY_DIR"
  as_cluster_user "$PG_BINDIR/pg_basebackup" -h "$(server_path "$CLUSTER_DIR")" -p 5432 -U postgres \
    -D "$(data_dir "$STANDBY_DIR")" -R -X stream >/dev/null
  echo "-c listen_addresses='' -k $(server_path "$STANDBY_DIR") -p 5433 $*" >"$STANDBY_DIR/server.opts"
}

start_standby() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$STANDBY_DIR")" -l "$(server_path "$STANDBY_DIR")/server.log" \
    -w start -o "$(cat "$STANDBY_DIR/server.opts")" >/dev/null
}

# psql_value against the standby.
standby() { PGHOST=$STANDBY_DIR PGPORT=5433 psql_value "$@"; }
