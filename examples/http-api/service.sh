# Helpers for scripts that build and run the example service (run-e2e.sh,
# scripts/playground-test.sh, bench/wrk.sh). Source it from the repository's root; it defines functions only.

# Builds the service and its test into build-example/, quietly.
build_http_api() {
  cmake -S examples/http-api -B build-example -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-example -j2 >/dev/null
}

# Starts the service on a free loopback port with the extra flags given after
# LOG, writing its output to LOG.stdout and LOG.stderr. Returns once it
# listens, with HTTP_API_PID and HTTP_API_PORT set; fails (printing its
# stderr) if it exits or does not listen within 10 seconds.
start_http_api() {
  local log=$1
  shift
  build-example/ratelimit-http-api --port 0 "$@" >"$log.stdout" 2>"$log.stderr" &
  HTTP_API_PID=$!
  HTTP_API_PORT=""
  local line
  for _ in $(seq 1 200); do
    # The service's first line, once it accepts requests: "listening on 127.0.0.1:PORT".
    # (The file may not exist yet: the background shell creates it.)
    line=$(head -n 1 "$log.stdout" 2>/dev/null || true)
    if [[ "$line" == "listening on "* ]]; then
      HTTP_API_PORT=${line##*:}
      return 0
    fi
    kill -0 "$HTTP_API_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "the service did not start:" >&2
  cat "$log.stderr" >&2
  return 1
}

# Stops the service whose PID is $1, if any, and waits until it has exited.
stop_http_api() {
  [ -n "${1:-}" ] || return 0
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# Creates the fresh database $1 with the extension in the cluster PGHOST/PGPORT
# point to, starts the service against it with its logs under the new temp
# dir HTTP_API_WORKDIR, and sets a trap that stops the service and drops the
# database and the dir on exit, on failure too.
start_http_api_on_fresh_database() {
  HTTP_API_DB=$1
  HTTP_API_WORKDIR=$(mktemp -d /tmp/ratelimit-http-api.XXXXXX)
  HTTP_API_PID=""
  trap cleanup_http_api EXIT
  PGOPTIONS="-c client_min_messages=warning" dropdb --if-exists "$HTTP_API_DB"
  createdb "$HTTP_API_DB"
  export PGDATABASE=$HTTP_API_DB
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION ratelimit"
  start_http_api "$HTTP_API_WORKDIR/service"
  echo "-- service listening on 127.0.0.1:$HTTP_API_PORT (pid $HTTP_API_PID)"
}

# The trap of start_http_api_on_fresh_database.
cleanup_http_api() {
  stop_http_api "$HTTP_API_PID"
  PGOPTIONS="-c client_min_messages=warning" dropdb --if-exists "$HTTP_API_DB" || true
  rm -rf "$HTTP_API_WORKDIR"
}

# After a test against the service of start_http_api_on_fresh_database: prints
# what it logged on stderr and fails (naming the script $1) if it has died.
check_http_api_after_test() {
  if [ -s "$HTTP_API_WORKDIR/service.stderr" ]; then
    echo "-- service stderr:"
    cat "$HTTP_API_WORKDIR/service.stderr"
  fi
  if ! kill -0 "$HTTP_API_PID" 2>/dev/null; then
    echo "$1: the service died during the test" >&2
    return 1
  fi
}
