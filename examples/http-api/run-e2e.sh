#!/usr/bin/env bash
# End-to-end test of the example HTTP service: builds it (build-example/),
# creates a fresh database with the extension in the running cluster that
# PGHOST/PGPORT/PGUSER/PGDATABASE point to (as a superuser), starts the service
# on a free loopback port with small limits, runs its test (test/, built as
# build-example/http_api_e2e) against it, and
# stops the service and drops the database, on failure too. Exit status 0 only
# if everything passed. scripts/test.sh runs it against its throwaway cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."
source examples/http-api/service.sh

for var in PGHOST PGPORT PGUSER PGDATABASE; do
  [ -n "${!var:-}" ] || { echo "run-e2e.sh: $var is not set (start a cluster first)" >&2; exit 2; }
done
# The test reads the service's listen backlog with ss.
command -v ss >/dev/null || { echo "run-e2e.sh: ss is missing (Debian package iproute2; scripts/lib.sh installs it)" >&2; exit 2; }

echo "-- building examples/http-api (build-example)"
build_http_api

# Small limits, so that every path is reached in a few requests. The fixed
# window starts now, so that no window boundary (which would add tokens) falls
# inside the run. The service and the test both read these variables.
export HTTP_API_MESSAGES_LIMIT='{"kind": "token bucket", "rate": 3, "period": "1 hour", "capacity": 3}'
export HTTP_API_SIGNUP_LIMIT="{\"kind\": \"fixed window\", \"rate\": 3, \"period\": \"1 hour\", \"start\": $(date +%s%3N)}"
export HTTP_API_COMPLETIONS_LIMIT='{"kind": "token bucket", "rate": 100, "period": "1 hour", "maxReserved": 100}'
# New playground keys: a quota the playground tests reach, in a window that
# starts now (as the sign-up limit's).
export HTTP_API_PLAYGROUND_LIMIT="{\"kind\": \"fixed window\", \"rate\": 40, \"period\": \"1 hour\", \"start\": $(date +%s%3N)}"

start_http_api_on_fresh_database ratelimit_http_e2e

rc=0
HTTP_API_E2E_PORT=$HTTP_API_PORT HTTP_API_E2E_PID=$HTTP_API_PID build-example/http_api_e2e --gtest_brief=1 || rc=$?

# What the service logged: each 500 it answered (one is deliberate).
check_http_api_after_test run-e2e.sh || rc=1
exit $rc
