# The other supported PostgreSQL majors, for scripts/test.sh. Source it after
# scripts/lib.sh; apart from adding mmdebstrap to the packages
# ensure_packages installs, it defines functions only.
#
# The host (Debian 12, bookworm) has PostgreSQL 15. Debian carries 17 in
# trixie and 18 in sid, and their binaries need their own suite's libraries,
# so each extra major runs in a chroot of its suite, the way Debian's build
# daemons build for a suite: `mmdebstrap --variant=apt` with the server, its
# PGXS and a compiler, bootstrapped once and cached in
# ${RATELIMIT_CACHE:-/var/cache/ratelimit}/chroots/pgN-SUITE-KEY (KEY is a
# hash of the suite, the package list and the bootstrap options, so changing
# any of them bootstraps a new root and removes the old one). Nothing of the
# host's own apt configuration is touched; the roots' apt settings are their
# own. Delete the directory to start afresh (sid moves on; a cached root stays
# at the day it was made).
#
# In a root, the extension is built with that major's PGXS from a copy of the
# source tree in the root's /tmp, installed there, and tested with that
# major's pg_regress and isolation tester; the server (lib.sh's
# start_cluster, with RATELIMIT_CHROOT set) runs in the root as its postgres
# user, on a unix socket in the root's /tmp, which the host sees as
# ROOT/tmp: the host-built libpqxx test programs connect there. The stats,
# memcheck and pgbouncer scripts run their server-side programs (pg_regress,
# psql, valgrind, pgbouncer) in the root the same way (lib.sh's
# run_pg_client, server_source_dir; enter_major exports RATELIMIT_CHROOT,
# PG_BINDIR and MAJOR_SRC for them). Running the tests needs no /dev or other
# mount the host sees (mmdebstrap creates the device nodes); valgrind alone
# needs /proc, mounted in the root only inside a mount namespace of its own
# (lib.sh's as_valgrind_user), which goes with its processes. Only
# mmdebstrap mounts on the host, while it bootstraps, and unmounts itself.
# Needs root.

RATELIMIT_CACHE=${RATELIMIT_CACHE:-/var/cache/ratelimit}
MAJORS_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RATELIMIT_PACKAGES+=(mmdebstrap)

# How every root is bootstrapped (part of the cache key). The archive reached
# here may serve a sid whose Release file is past its 7-day Valid-Until:
# signatures are still checked. No main cluster is created at install (the
# tests make their own), dpkg does not fsync, and man pages, docs and
# translations are left out, which nothing here reads.
MAJOR_BOOTSTRAP_OPTS=(
  --variant=apt
  --aptopt='Acquire::Check-Valid-Until "false"'
  --dpkgopt=force-unsafe-io
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --essential-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/ratelimit.conf"'
)

# The Debian suite that carries PostgreSQL major $1 (sid has binary packages
# of 18, so nothing is built from source).
major_suite() {
  case "$1" in
    17) echo trixie ;;
    18) echo sid ;;
    *) echo "pgmajors.sh: no Debian suite known for PostgreSQL $1 (supported: 17, 18)" >&2; return 1 ;;
  esac
}

# The packages a root for major $1 holds besides the apt variant: the
# server (with its client, psql), its PGXS with pg_regress and the isolation
# tester, a compiler, and what the memcheck, pooler and router stages run
# in the root: valgrind (with glibc's debug symbols, as on the host),
# pgbouncer and PL/Proxy (postgresql-N-plproxy: 2.11.0 in trixie, 2.12.0 in
# sid).
major_packages() {
  echo "postgresql-$1 postgresql-server-dev-$1 g++ make valgrind libc6-dbg pgbouncer postgresql-$1-plproxy"
}

# The cached root of major $1: its suite, and a hash of suite, packages and
# bootstrap options.
major_root() {
  local suite key
  suite=$(major_suite "$1") || return 1
  key=$(printf '%s\n' "$suite" "$(major_packages "$1")" "${MAJOR_BOOTSTRAP_OPTS[@]}" | sha256sum | cut -c1-12)
  echo "$RATELIMIT_CACHE/chroots/pg$1-$suite-$key"
}

# Removes a root directory. mmdebstrap mounts /proc, /sys and /dev in a root
# while it installs packages; a bootstrap cut short might leave them, and
# rm must never reach the host's /dev through them.
remove_root() {
  local dir=$1 mnt
  for mnt in $(awk -v d="$dir/" 'index($2 "/", d) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount -l "$mnt" || true
  done
  if awk -v d="$dir/" 'index($2 "/", d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    echo "something is still mounted below $dir: not removing it" >&2
    return 1
  fi
  rm -rf --one-file-system "$dir"
}

# Bootstraps the root of major $1 unless it is cached. A root is used only
# once complete (built as ROOT.partial, then renamed); roots of the same
# major with another key are removed. Concurrent runs wait for each other.
ensure_major_root() {
  local major=$1 root suite
  root=$(major_root "$major") || return 1
  suite=$(major_suite "$major")
  [ -f "$root/.ratelimit-complete" ] && { echo "PG $major: cached root $root"; return 0; }
  mkdir -p "$RATELIMIT_CACHE/chroots"
  (
    flock 9
    [ -f "$root/.ratelimit-complete" ] && exit 0
    local old
    for old in "$RATELIMIT_CACHE/chroots/pg$major-"*; do
      [ -e "$old" ] && { remove_root "$old" || exit 1; }
    done
    echo "PG $major: bootstrapping $root: $suite with $(major_packages "$major") (mmdebstrap; once, then cached)"
    local log="$RATELIMIT_CACHE/chroots/pg$major.log" start=$SECONDS
    if ! mmdebstrap "${MAJOR_BOOTSTRAP_OPTS[@]}" --include="$(major_packages "$major" | tr ' ' ,)" \
      "$suite" "$root.partial" >"$log" 2>&1; then
      tail -30 "$log"
      echo "mmdebstrap failed (log: $log)" >&2
      remove_root "$root.partial"
      exit 1
    fi
    mv "$root.partial" "$root"
    touch "$root/.ratelimit-complete"
    echo "PG $major: bootstrapped in $((SECONDS - start)) s"
  ) 9>"$RATELIMIT_CACHE/chroots/pg$major.lock"
}

# Starts bootstrapping the roots of majors "$@" in the background, one after
# the other, so that downloads and dpkg overlap the host's test stages; the
# log is $RATELIMIT_CACHE/chroots/prefetch.log. ensure_major_root then waits
# for a root still being made (the lock) or uses it. Cached roots cost
# nothing. stop_major_prefetch ends it (mmdebstrap unmounts on SIGTERM).
prefetch_major_roots() {
  [ $# -gt 0 ] && [ "$(id -u)" -eq 0 ] || return 0
  mkdir -p "$RATELIMIT_CACHE/chroots"
  # Its own process group (setsid), so that stop_major_prefetch reaches mmdebstrap too.
  setsid bash -c 'source "$0/lib.sh" && source "$0/pgmajors.sh" &&
    for major in "$@"; do ensure_major_root "$major" || echo "PG $major: bootstrap failed"; done' \
    "$MAJORS_SCRIPT_DIR" "$@" </dev/null >"$RATELIMIT_CACHE/chroots/prefetch.log" 2>&1 &
  MAJOR_PREFETCH_PID=$!
}

# Ends a prefetch_major_roots still running, and waits (up to two minutes)
# until every process of its group has cleaned up and exited.
stop_major_prefetch() {
  [ -n "${MAJOR_PREFETCH_PID:-}" ] || return 0
  local group=$MAJOR_PREFETCH_PID _
  MAJOR_PREFETCH_PID=""
  kill -TERM -- "-$group" 2>/dev/null || return 0
  wait "$group" 2>/dev/null || true
  for _ in $(seq 1 120); do
    kill -0 -- "-$group" 2>/dev/null || return 0
    sleep 1
  done
  echo "the background bootstrap (process group $group) is still running" >&2
}

# Switches lib.sh's cluster functions to major $1's (cached) root, and copies
# the source tree (what git tracks or would track: no build output) into the
# root's /tmp as MAJOR_SRC. One run at a time uses a root (runs of other
# trees would install their builds over each other): a second waits, up to
# an hour. leave_major undoes it all.
enter_major() {
  [ "$(id -u)" -eq 0 ] || { echo "PostgreSQL $1 runs in a chroot: run as root, or set RATELIMIT_MAJORS= to skip" >&2; return 1; }
  RATELIMIT_CHROOT=$(major_root "$1") || return 1
  [ -f "$RATELIMIT_CHROOT/.ratelimit-complete" ] || { echo "no root for PostgreSQL $1: run ensure_major_root $1" >&2; return 1; }
  exec {MAJOR_LOCK_FD}>>"$RATELIMIT_CHROOT/.ratelimit-in-use"
  if ! flock -n "$MAJOR_LOCK_FD"; then
    echo "PG $1: another run is using $RATELIMIT_CHROOT; waiting for it"
    flock -w 3600 "$MAJOR_LOCK_FD" || return 1
  fi
  PG_BINDIR=/usr/lib/postgresql/$1/bin
  MAJOR_SRC=$(mktemp -d "$RATELIMIT_CHROOT/tmp/ratelimit-src.XXXXXX")
  # For the scripts a test command runs against this major (lib.sh).
  export RATELIMIT_CHROOT PG_BINDIR MAJOR_SRC
  # Files deleted from the work tree but still tracked are skipped.
  git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$MAJOR_SRC"
}

# Builds the extension in MAJOR_SRC with the current major's PGXS (same
# -Werror flags as on the host) and installs it into the root.
build_and_install_in_major() {
  local pg_config=$PG_BINDIR/pg_config src
  src=$(server_path "$MAJOR_SRC")
  in_server_root make -C "$src" -s -j2 PG_CONFIG="$pg_config" &&
    in_server_root make -C "$src" -s install PG_CONFIG="$pg_config"
}

# make installcheck (that major's pg_regress and isolation specs) in the
# root, against the running throwaway cluster; prints the diffs on failure.
installcheck_in_major() {
  local rc=0 diffs
  in_server_root PGHOST="$(server_path "$CLUSTER_DIR")" PGPORT="$PGPORT" PGUSER="$PGUSER" \
    make -C "$(server_path "$MAJOR_SRC")" -s installcheck PG_CONFIG="$PG_BINDIR/pg_config" || rc=$?
  if [ $rc -ne 0 ]; then
    for diffs in "$MAJOR_SRC/regression.diffs" "$MAJOR_SRC/output_iso/regression.diffs"; do
      [ -f "$diffs" ] && cat "$diffs"
    done
  fi
  return $rc
}

# Back to the host's PostgreSQL: removes MAJOR_SRC. Safe to call when no
# major was entered (test.sh's exit trap calls it).
leave_major() {
  [ -n "${MAJOR_SRC:-}" ] && rm -rf "$MAJOR_SRC"
  MAJOR_SRC=""
  if [ -n "${MAJOR_LOCK_FD:-}" ]; then
    exec {MAJOR_LOCK_FD}>&-
    MAJOR_LOCK_FD=""
  fi
  unset RATELIMIT_CHROOT
  PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
}
