#!/usr/bin/env bash
# Checks the PGXN metadata (META.json) against the extension itself: valid
# JSON in PGXN's meta-spec 1.0.0 shape, its version and the provided
# extension's version equal to ratelimit.control's default_version (and
# ratelimit_proxy's to ratelimit_proxy.control's), the license, each provided
# file the complete install script of that version (sql/EXT--VERSION.sql),
# and the documentation files present.
# Parses the JSON with the running throwaway cluster's jsonb (PGHOST etc. set,
# as scripts/test.sh does), so it needs no JSON tool on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

control_version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit.control)
proxy_control_version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" ratelimit_proxy.control)
fields=$("$PG_BINDIR/psql" -X -At -v meta="$(cat META.json)" <<'SQL'
SELECT concat_ws('|', m->>'name', m->>'version', m->'provides'->'ratelimit'->>'version',
                 m->'meta-spec'->>'version', m->>'license', m->>'abstract' IS NOT NULL,
                 m->'provides'->'ratelimit'->>'file', coalesce(m->'provides'->'ratelimit'->>'docfile', ''),
                 coalesce(m->'provides'->'ratelimit_proxy'->>'docfile', ''),
                 m->'provides'->'ratelimit_proxy'->>'version', m->'provides'->'ratelimit_proxy'->>'file')
FROM (SELECT :'meta'::jsonb AS m) s;
SQL
)
IFS='|' read -r name version provided spec license has_abstract file docfile proxy_docfile proxy_provided proxy_file <<<"$fields"
fail=0
check() { if [ "$2" != "$3" ]; then echo "META.json: $1 is '$2', expected '$3'" >&2; fail=1; fi; }
check name "$name" ratelimit
check version "$version" "$control_version"
check "provides.ratelimit.version" "$provided" "$control_version"
check "meta-spec.version" "$spec" 1.0.0
check license "$license" postgresql
check abstract "$has_abstract" t
check "provides.ratelimit_proxy.version" "$proxy_provided" "$proxy_control_version"
# The file a provided extension is: its complete install script.
check "provides.ratelimit.file" "$file" "sql/ratelimit--$control_version.sql"
check "provides.ratelimit_proxy.file" "$proxy_file" "sql/ratelimit_proxy--$proxy_control_version.sql"
[ -f "$file" ] || { echo "META.json: provides.ratelimit.file $file does not exist" >&2; fail=1; }
[ -f "$proxy_file" ] || { echo "META.json: provides.ratelimit_proxy.file $proxy_file does not exist" >&2; fail=1; }
[ -n "$docfile" ] && [ -f "$docfile" ] || { echo "META.json: provides.ratelimit.docfile '$docfile' does not exist" >&2; fail=1; }
[ -n "$proxy_docfile" ] && [ -f "$proxy_docfile" ] || {
  echo "META.json: provides.ratelimit_proxy.docfile '$proxy_docfile' does not exist" >&2
  fail=1
}
[ $fail -eq 0 ] && echo "META.json: ratelimit $version, meta-spec $spec, license $license"
exit $fail
