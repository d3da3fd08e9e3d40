# Shared helpers for scripts/*.sh: Debian packages and a throwaway cluster.
# Source it; it defines functions only.

PG_MAJOR=15
# The server's programs: the host's PostgreSQL 15 (RATELIMIT_PG_BINDIR: a
# relocated copy of it, for a developer's run that must not install into the
# system's), unless RATELIMIT_CHROOT is set (below) and PG_BINDIR with it, as
# scripts/pgmajors.sh's enter_major exports them for the scripts a test
# command runs against another major.
if [ -z "${RATELIMIT_CHROOT:-}" ] || [ -z "${PG_BINDIR:-}" ]; then
  PG_BINDIR=${RATELIMIT_PG_BINDIR:-/usr/lib/postgresql/$PG_MAJOR/bin}
fi
RATELIMIT_PACKAGES=(build-essential postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpqxx-dev
                    cmake libgtest-dev pkg-config libcpp-httplib-dev nlohmann-json3-dev wrk valgrind pgbouncer
                    postgresql-$PG_MAJOR-plproxy prometheus-postgres-exporter curl chromium iproute2)

# Installs the Debian packages the build and tests need, if any is missing.
ensure_packages() {
  local missing=()
  for pkg in "${RATELIMIT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Builds the extension with PGXS and installs it into the server's directories:
# the pg_config in PATH (the system's PostgreSQL), or PG_CONFIG when set; with
# RATELIMIT_PG_BINDIR (a relocated copy, above), that copy's pg_config, so a
# developer's run never installs into the system's server.
build_and_install_extension() {
  echo "== building and installing the extension"
  local make_args=()
  [ -n "${RATELIMIT_PG_BINDIR:-}" ] && make_args+=("PG_CONFIG=$RATELIMIT_PG_BINDIR/pg_config")
  make -s -j2 "${make_args[@]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo make -s install "${make_args[@]}"
}

# The OS user the throwaway cluster runs as (PostgreSQL refuses root).
cluster_os_user() {
  if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi
}

# RATELIMIT_CHROOT, when set, is the root directory of another Debian suite
# (scripts/pgmajors.sh) in which the cluster's server and tools run: the
# cluster functions below then run PG_BINDIR's programs (a path inside that
# root) in it, as its postgres user, while CLUSTER_DIR and PGHOST stay host
# paths (below ROOT/tmp), so that programs on the host reach the socket. Unset,
# everything runs on the host as before.

# Runs a command as root where the cluster's PostgreSQL is installed: in
# RATELIMIT_CHROOT when set, with a clean environment (the host's compiler
# flags or library paths mean nothing there; pass NAME=value arguments first,
# as to env), otherwise on the host.
in_server_root() {
  if [ -n "${RATELIMIT_CHROOT:-}" ]; then
    chroot "$RATELIMIT_CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
  else
    env "$@"
  fi
}

# Runs a client program of the cluster's PostgreSQL (psql, pg_regress,
# pg_isready, ...) with the cluster's PGHOST (as seen there), PGPORT, PGUSER
# and PGDATABASE, as far as they are set: in RATELIMIT_CHROOT or on the host
# (in_server_root).
run_pg_client() {
  local vars=() name
  [ -n "${PGHOST:-}" ] && vars+=("PGHOST=$(server_path "$PGHOST")")
  for name in PGPORT PGUSER PGDATABASE; do
    [ -n "${!name:-}" ] && vars+=("$name=${!name}")
  done
  in_server_root "${vars[@]}" "$@"
}

# The top of the source tree as the cluster's programs see it: with
# RATELIMIT_CHROOT, the copy scripts/pgmajors.sh's enter_major made in the
# root (MAJOR_SRC); otherwise the current directory.
server_source_dir() {
  if [ -z "${RATELIMIT_CHROOT:-}" ]; then
    pwd
  elif [ -n "${MAJOR_SRC:-}" ] && [ -d "$MAJOR_SRC" ]; then
    server_path "$MAJOR_SRC"
  else
    echo "RATELIMIT_CHROOT is set but MAJOR_SRC (the source tree's copy in it) is not: use enter_major" >&2
    return 1
  fi
}

# Fails, saying what is missing, unless $1 (a path, or a command name looked
# up in PATH) can be run on the host; $2 says what it is for. A test stage
# whose program is missing fails: it is never skipped.
require_program() {
  if [[ $1 == */* ]]; then
    [ -f "$1" ] && [ -x "$1" ] && return 0
  else
    command -v "$1" >/dev/null && return 0
  fi
  echo "FAIL: $1 is missing${2:+ ($2)}" >&2
  return 127
}

# The same for a program of the cluster's installation ($1, an absolute path
# as seen there): in RATELIMIT_CHROOT when set.
require_server_program() {
  [ -f "${RATELIMIT_CHROOT:-}$1" ] && [ -x "${RATELIMIT_CHROOT:-}$1" ] && return 0
  echo "FAIL: $1 is missing${RATELIMIT_CHROOT:+ in $RATELIMIT_CHROOT}${2:+ ($2)}" >&2
  return 127
}

# The pg_regress (pg_regress) or isolation tester (pg_isolation_regress) of
# the cluster's PGXS, as a path where it runs (run_pg_client); fails if it is
# missing.
server_pgxs_program() {
  local pkglibdir path
  pkglibdir=$(in_server_root "$PG_BINDIR/pg_config" --pkglibdir) || return 1
  case "$1" in
    pg_regress) path=$pkglibdir/pgxs/src/test/regress/pg_regress ;;
    pg_isolation_regress) path=$pkglibdir/pgxs/src/test/isolation/pg_isolation_regress ;;
    *) echo "server_pgxs_program: unknown program $1" >&2; return 2 ;;
  esac
  require_server_program "$path" "PostgreSQL's PGXS: postgresql-server-dev" >&2 || return 1
  echo "$path"
}

# Runs a command as the cluster's OS user (in RATELIMIT_CHROOT when set, with
# PGHOST as seen there).
as_cluster_user() {
  if [ -n "${RATELIMIT_CHROOT:-}" ]; then
    PGHOST=$(server_path "${PGHOST:-}") chroot --userspec=postgres:postgres "$RATELIMIT_CHROOT" "$@"
  elif [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# A host path as the cluster's programs see it: below RATELIMIT_CHROOT, the
# path inside that root; otherwise the path itself.
server_path() {
  local root=${RATELIMIT_CHROOT:-}
  if [ -n "$root" ] && [ "${1#"$root"/}" != "$1" ]; then echo "/${1#"$root"/}"; else echo "$1"; fi
}

# The data directory of the cluster in $1 (a host path), as the cluster's
# programs see it.
data_dir() { echo "$(server_path "$1")/data"; }

# Gives a directory (a host path) to the cluster's OS user.
chown_to_cluster_user() {
  if [ -n "${RATELIMIT_CHROOT:-}" ]; then
    chroot "$RATELIMIT_CHROOT" chown postgres: "$(server_path "$1")"
  elif [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$1"
  fi
}

# Starts a throwaway cluster in a temp dir, on a unix socket only, and
# exports PGHOST/PGPORT/PGUSER/PGDATABASE for clients. Extra server settings
# may be passed as arguments ("-c name=value" pairs).
start_cluster() {
  local template="${RATELIMIT_CHROOT:-}/tmp/ratelimit-cluster.XXXXXX"
  # A unix socket's path has at most 107 bytes, "/.s.PGSQL.5432" included.
  if [ $((${#template} + 14)) -gt 107 ]; then
    echo "the socket path under $template is too long for a unix socket (set RATELIMIT_CACHE shorter)" >&2
    return 1
  fi
  CLUSTER_DIR=$(mktemp -d "$template")
  chmod 755 "$CLUSTER_DIR"
  chown_to_cluster_user "$CLUSTER_DIR"
  local dir
  dir=$(server_path "$CLUSTER_DIR")
  as_cluster_user "$PG_BINDIR/initdb" -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
  # The server's options, kept so that start_cluster_server can start it again.
  echo "-c listen_addresses='' -k $dir -p 5432 $*" >"$CLUSTER_DIR/server.opts"
  start_cluster_server
  export PGHOST=$CLUSTER_DIR PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
  echo "== throwaway cluster running in $CLUSTER_DIR"
}

# Starts (again) the server of the throwaway cluster in $CLUSTER_DIR, with the
# options start_cluster gave it, and waits until it accepts connections (after
# an immediate shutdown: until crash recovery is done).
start_cluster_server() {
  local dir
  dir=$(server_path "$CLUSTER_DIR")
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
    -o "$(cat "$CLUSTER_DIR/server.opts")" >/dev/null
}

# Stops the throwaway cluster's server the way a crash would: every server
# process exits at once (SIGQUIT), nothing is flushed or checkpointed, and the
# next start runs crash recovery.
stop_cluster_server_immediate() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m immediate -w stop >/dev/null
}

# Whether the throwaway cluster's server is running.
cluster_server_running() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" status >/dev/null 2>&1
}

# Stops the throwaway cluster (if started) and removes its directory (also
# when start_cluster was interrupted before initdb had made the data).
stop_cluster() {
  [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR" ] || return 0
  if [ -d "$CLUSTER_DIR/data" ]; then
    as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w stop >/dev/null 2>&1 || true
  fi
  # A backend under valgrind (bench/profile.sh) may still be writing its
  # output for a moment after the server stopped.
  local try
  for try in 1 2 3 4 5; do rm -rf "$CLUSTER_DIR" 2>/dev/null && break; sleep 1; done
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=""
}

# The bytes of the running throwaway cluster's pg_shmem_allocations rows that
# have a name: "<the extension's rows (named 'ratelimit%')> <every other named
# row>" (the free space, the row without a name, is neither). How
# scripts/memory-sizing-test.sh and bench/footprint.sh count what the
# extension reserves.
shmem_allocation_bytes() {
  run_pg_client "$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1 -c "
    SELECT coalesce(sum(allocated_size) FILTER (WHERE name LIKE 'ratelimit%'), 0) || ' ' ||
           coalesce(sum(allocated_size) FILTER (WHERE name NOT LIKE 'ratelimit%'), 0)
    FROM pg_shmem_allocations WHERE name IS NOT NULL"
}

# Fails if the server log shows a crashed backend. What a crash logs: the
# postmaster's "server process (PID n) was terminated by signal 11" (or "exited
# with exit code n" for an abnormal exit, followed by "terminating any other
# active server processes" and "all server processes terminated;
# reinitializing"), and PANIC. Deliberate stops are not crashes and match none
# of these: pg_ctl stop -m immediate logs "received immediate shutdown request"
# and, at the next start, "database system was interrupted" and "automatic
# recovery in progress"; pg_terminate_backend logs "FATAL: terminating
# connection due to administrator command".
check_server_log_for_crashes() {
  local crash="terminated by signal|server process .* was terminated|PANIC"
  crash+="|terminating any other active server processes|all server processes terminated; reinitializing"
  if grep -E "$crash" "$CLUSTER_DIR/server.log"; then
    echo "FAIL: the server log shows a crash" >&2
    return 1
  fi
}

# Starts a throwaway cluster (as start_cluster does, in RATELIMIT_CHROOT too)
# whose postmaster runs under valgrind's memcheck; every backend it forks is
# traced too, and each process writes its report to
# $CLUSTER_DIR/valgrind.<pid>.log. Source paths in the reports are printed in
# full (--fullpath-after=), so frames of the extension's code can be told
# from PostgreSQL's.
start_valgrind_cluster() {
  require_server_program /usr/bin/valgrind "Debian package valgrind" || return 1
  CLUSTER_DIR=$(mktemp -d "${RATELIMIT_CHROOT:-}/tmp/ratelimit-valgrind.XXXXXX")
  chmod 755 "$CLUSTER_DIR"
  chown_to_cluster_user "$CLUSTER_DIR"
  local dir
  dir=$(server_path "$CLUSTER_DIR")
  as_cluster_user "$PG_BINDIR/initdb" -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
  echo "-c listen_addresses='' -k $dir -p 5432 $*" >"$CLUSTER_DIR/server.opts"
  as_valgrind_user bash -c "valgrind --quiet --trace-children=yes --track-origins=yes --error-limit=no \
    --fullpath-after= --num-callers=30 --log-file='$dir/valgrind.%p.log' \
    '$PG_BINDIR/postgres' -D '$dir/data' $(cat "$CLUSTER_DIR/server.opts") \
    > '$dir/server.log' 2>&1 &"
  export PGHOST=$CLUSTER_DIR PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
  local _
  for _ in $(seq 1 180); do run_pg_client "$PG_BINDIR/pg_isready" -q && return 0; sleep 1; done
  echo "the server under valgrind did not start" >&2
  return 1
}

# as_cluster_user for valgrind, which reads /proc/self/maps at start. In
# RATELIMIT_CHROOT (which has no /proc: nothing is mounted in a root while
# tests run) the command runs in a mount namespace of its own, where /proc
# is mounted in the root: that mount is never seen by the host and goes away
# with the namespace's last process, so nothing is left to unmount.
as_valgrind_user() {
  if [ -z "${RATELIMIT_CHROOT:-}" ]; then
    as_cluster_user "$@"
    return
  fi
  unshare --mount --propagation private -- sh -c 'mount -t proc proc "$0/proc" && exec "$@"' "$RATELIMIT_CHROOT" \
    chroot --userspec=postgres:postgres "$RATELIMIT_CHROOT" "$@"
}

# Prints every memcheck error record of $CLUSTER_DIR/valgrind.*.log that has
# a frame in the extension's code (a source file under src/core or src/pg, or
# ratelimit.so when it has no debug info) and fails if there is any. Errors
# wholly inside PostgreSQL do not count: the Debian build has no valgrind
# suppressions of its own.
memcheck_errors_in_extension() {
  local found
  found=$(awk '
    /^==[0-9]+== *$/ { if (ours) { print rec; n++ } rec = ""; ours = 0; next }
    /^==[0-9]+==/ {
      rec = rec $0 "\n"
      if ($0 ~ /(at|by) 0x[0-9A-F]+: / && ($0 ~ /\/src\/(core|pg)\/([A-Za-z0-9_]+\/)*[A-Za-z0-9_]+\.(cpp|h):[0-9]+\)/ || $0 ~ /ratelimit\.so\)/)) ours = 1
    }
    END { if (ours) { print rec; n++ } exit n > 0 }' "$CLUSTER_DIR"/valgrind.*.log) && return 0
  echo "memcheck reported errors in the extension's code:"
  printf '%s\n' "$found" | head -150
  return 1
}

# Stops the server of start_valgrind_cluster (fast shutdown; up to five
# minutes, as every process writes its report) and waits until it is down.
stop_valgrind_server() {
  as_cluster_user "$PG_BINDIR/pg_ctl" -D "$(data_dir "$CLUSTER_DIR")" -m fast -w -t 300 stop >/dev/null
}

# Stops a server started by start_valgrind_cluster (if still running) and
# removes its directory.
stop_valgrind_cluster() {
  [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR/data" ] || return 0
  stop_valgrind_server 2>/dev/null || true
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=""
}

# Kills a backend of the current cluster with SIGKILL (a psql session that
# prints its pg_backend_pid() and sleeps: its pid, checked to be that
# sleeping backend's) and waits until the postmaster has reinitialized and
# accepts connections again. Prints "FAIL: ..." and fails otherwise. The
# server log's size before the kill is left in KILLED_BACKEND_LOG_OFFSET.
kill_a_backend() {
  local pid out=$CLUSTER_DIR/victim.out psql_pid _ log=$CLUSTER_DIR/server.log
  local psql=("$PG_BINDIR/psql" -X -At -v ON_ERROR_STOP=1)
  KILLED_BACKEND_LOG_OFFSET=$(stat -c %s "$log")
  : >"$out"
  run_pg_client "${psql[@]}" -c "SELECT pg_backend_pid()" -c "SELECT pg_sleep(600)" >"$out" 2>&1 &
  psql_pid=$!
  for _ in $(seq 1 600); do
    pid=$(head -1 "$out")
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [[ $pid =~ ^[0-9]+$ ]] || { echo "FAIL: no backend pid to kill: $pid" >&2; return 1; }
  # The pid must be the sleeping backend's, a process of this cluster.
  [ "$(run_pg_client "${psql[@]}" -c "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND query = 'SELECT pg_sleep(600)'")" = 1 ] ||
    { echo "FAIL: backend $pid is not the sleeping one" >&2; return 1; }
  kill -KILL "$pid"
  wait "$psql_pid" || true
  for _ in $(seq 1 600); do
    tail -c +"$((KILLED_BACKEND_LOG_OFFSET + 1))" "$log" | grep -q "database system is ready to accept connections" &&
      run_pg_client "${psql[@]}" -c "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.5
  done
  tail -c +"$((KILLED_BACKEND_LOG_OFFSET + 1))" "$log" | grep -q "terminated by signal 9" ||
    { echo "FAIL: the server log does not show backend $pid killed" >&2; return 1; }
}
