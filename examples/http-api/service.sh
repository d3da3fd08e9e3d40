# Helpers for scripts that build and run the example service (run-e2e.sh,
# bench/wrk.sh). Source it from the repository's root; it defines functions only.

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
