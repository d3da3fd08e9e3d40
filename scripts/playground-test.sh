#!/usr/bin/env bash
# Browser test of the example service's playground (GET /playground):
# builds the service (build-example/), creates a fresh database with the
# extension in the running cluster that PGHOST/PGPORT/PGUSER/PGDATABASE point
# to (as a superuser), starts the service on a free loopback port, and drives
# the page with Debian's chromium, headless, through playwright-core from npm
# (examples/http-api/browser-test; no browser is downloaded). The test checks
# every dot against ratelimit_simulate in the database, hits the real limit
# past its capacity, and saves a screenshot (its path is printed). Stops the
# service and drops the database, on failure too. scripts/test.sh runs it
# against its throwaway cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
source examples/http-api/service.sh

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
for var in PGHOST PGPORT PGUSER PGDATABASE; do
  [ -n "${!var:-}" ] || { echo "playground-test.sh: $var is not set (start a cluster first)" >&2; exit 2; }
done
for program in "$CHROMIUM" node npm; do
  command -v "$program" >/dev/null || { echo "playground-test.sh: $program is missing (scripts/lib.sh installs it)" >&2; exit 2; }
done

echo "-- building examples/http-api (build-example)"
build_http_api

# The npm packages, installed from package-lock.json (npm ci) only when it
# changed since the last install: node_modules keeps the lock's checksum.
tests=examples/http-api/browser-test
lock_sum=$(sha256sum "$tests/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$tests/node_modules/.lock-sha256" 2>/dev/null)" != "$lock_sum" ]; then
  echo "-- npm ci ($tests)"
  (cd "$tests" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" >"$tests/node_modules/.lock-sha256"
fi

start_http_api_on_fresh_database ratelimit_playground_test

shots=$PWD/build-example
rc=0
(cd "$tests" && PLAYGROUND_URL="http://127.0.0.1:$HTTP_API_PORT" PLAYGROUND_SCREENSHOT_DIR="$shots" \
  CHROMIUM="$CHROMIUM" node --test-reporter=spec playground.test.js) || rc=$?

check_http_api_after_test playground-test.sh || rc=1
exit $rc
