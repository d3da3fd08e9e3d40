#!/usr/bin/env bash
# Tests the main job's demo: runs scripts/demo.sh --installed (a throwaway
# cluster with shared_preload_libraries = 'ratelimit', scripts/demo.sql with
# ON_ERROR_STOP, against the installed extension) and checks its output:
# the exit status, only the two errors the story shows (PT429 of a failed
# login, 25006 of a table limit in a READ ONLY transaction), and the
# answers that do not depend on the real clock, compared with
# test/demo/expected.txt: the three algorithms' rows of dots and their
# counts (ratelimit_simulate), every one of those answers the same through
# ratelimit_limit with the test clock, the shadow mode's stats, the override, the memory
# limit's grants inside the READ ONLY transaction and its value after the
# rollback. Needs the extension installed (make install).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mktemp "${TMPDIR:-/tmp}/ratelimit-demo.XXXXXX")
trap 'rm -f "$OUT"' EXIT
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

start=$(date +%s)
rc=0
scripts/demo.sh --installed >"$OUT" 2>&1 || rc=$?
elapsed=$(($(date +%s) - start))
echo "scripts/demo.sh --installed: exit $rc in ${elapsed}s"
[ $rc -eq 0 ] || fail "scripts/demo.sh exited with $rc"

# The errors the story shows on purpose, and no other.
errors=$(grep -c 'ERROR:' "$OUT" || true)
grep -q 'ERROR:  rate limit "failedLogins" exceeded' "$OUT" || fail "no PT429 for the 4th failed login"
grep -q 'ERROR:  cannot execute ratelimit_limit() in a read-only transaction' "$OUT" ||
  fail "no 25006 for a table limit in the READ ONLY transaction"
[ "$errors" -eq 2 ] || fail "$errors errors in the demo's output, not the 2 it shows on purpose"

# Each block of test/demo/expected.txt (blocks are separated by blank lines)
# must appear in the output as consecutive lines, trailing blanks ignored; a
# '*' in an expected line matches any text (the few numbers that depend on
# the real clock: a refill while the demo runs).
sed -e 's/[[:space:]]*$//' "$OUT" >"$OUT.trimmed"
trap 'rm -f "$OUT" "$OUT.trimmed"' EXIT
python3 - "$OUT.trimmed" test/demo/expected.txt <<'PY' || failed=1
import re, sys
def matches(line, pattern):
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), line) is not None
out = open(sys.argv[1], encoding="utf-8").read().split("\n")
blocks = [b.split("\n") for b in open(sys.argv[2], encoding="utf-8").read().strip("\n").split("\n\n")]
missing = 0
for block in blocks:
    block = [line.rstrip() for line in block]
    if not any(len(out) - i >= len(block) and all(matches(o, e) for o, e in zip(out[i:i + len(block)], block))
               for i in range(len(out))):
        missing += 1
        print("FAIL: the demo's output lacks these lines:\n" + "\n".join(block) + "\n", file=sys.stderr)
print(f"{len(blocks) - missing} of {len(blocks)} expected blocks found in the demo's output")
sys.exit(1 if missing else 0)
PY

if [ $failed -ne 0 ]; then
  echo "--- the demo's output:"
  cat "$OUT"
fi
exit $failed
