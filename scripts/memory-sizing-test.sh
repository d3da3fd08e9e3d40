#!/usr/bin/env bash
# Checks the shared-memory numbers docs/memory.md gives for memory limits against
# pg_shmem_allocations: three clusters of their own, one without the
# preload, one with shared_preload_libraries = 'ratelimit' at the default
# ratelimit.memory_max_keys (10,000) and one at 1,000,000. The extension's
# share is its rows (named 'ratelimit%'), which must be all that the preload
# adds (every other row the same within 1 %). docs/memory.md's sentence "about N MB
# with the default and about M MB for 1,000,000 keys: about B bytes per
# key" (MB: 2^20 bytes; B: the extension's bytes at 1,000,000 keys over
# 1,000,000, everything it reserves counted) fails the test if a number is
# off by more than 20 %; the test prints what to write. B above 160 (issue
# 27's footprint: Redis's for the same keys) fails it too, and so does the
# README's "about B bytes of shared memory per key" off by more than 20 %.
#
# Needs the extension installed (make install). With RATELIMIT_CHROOT,
# PG_BINDIR and MAJOR_SRC set (scripts/pgmajors.sh's enter_major), the
# clusters are another major's, in its root.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# Not the cluster of the caller (scripts/test.sh exports its CLUSTER_DIR):
# this script stops only clusters it started.
CLUSTER_DIR=""
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
trap stop_cluster EXIT

# The bytes of pg_shmem_allocations' rows of a cluster started with options
# "$@": "<extension's rows> <every other named row>" (scripts/lib.sh's
# shmem_allocation_bytes; bench/footprint.sh counts with it too).
shmem_bytes() {
  start_cluster "$@" >/dev/null
  shmem_allocation_bytes
  stop_cluster
}

# The document that gives the numbers ("Sizing" in the memory limits' page).
SIZING_DOC=docs/memory.md

# The number $SIZING_DOC gives in the sentence matched by $1 (a sed -E
# pattern whose group 1 is the number), without thousands separators.
doc_number() {
  sed -nE "s/.*$1.*/\\1/p" "$SIZING_DOC" | tr -d ',' | head -1
}

# Fails unless the document's number $2 is within 20 % of the measured $3
# ($1 names it; $4: what the document should say).
within_20_percent() {
  if [ -z "$2" ]; then
    fail "$SIZING_DOC has no number for $1 (write: $4)"
  elif ! awk -v r="$2" -v m="$3" 'BEGIN { exit !(r >= 0.8 * m && r <= 1.2 * m) }'; then
    fail "$SIZING_DOC says $2 for $1, measured $3: more than 20 % off (write: $4)"
  else
    echo "ok - $SIZING_DOC's $1 ($2) is within 20 % of the measured $3"
  fi
}

PRELOAD=(-c shared_preload_libraries=ratelimit)
read -r plain_ext plain_other < <(shmem_bytes)
read -r default_ext default_other < <(shmem_bytes "${PRELOAD[@]}")
read -r million_ext million_other < <(shmem_bytes "${PRELOAD[@]}" -c ratelimit.memory_max_keys=1000000)

[ "$plain_ext" = 0 ] || fail "without the preload pg_shmem_allocations has $plain_ext bytes in rows named 'ratelimit%'"
for other in "$default_other" "$million_other"; do
  awk -v a="$other" -v b="$plain_other" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b) }' ||
    fail "the preload changed pg_shmem_allocations' other rows: $other bytes, $plain_other without it (count them too)"
done

mb() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
default_mb=$(mb "$default_ext")
million_mb=$(mb "$million_ext")
per_key=$(awk -v b="$million_ext" 'BEGIN { printf "%.0f", b / 1000000 }')
default_per_key=$(awk -v a="$default_ext" 'BEGIN { printf "%.0f", a / 10000 }')
echo "# measured: $default_ext bytes (${default_mb} MB, $default_per_key bytes per key) at memory_max_keys = 10000," \
  "$million_ext bytes (${million_mb} MB, $per_key bytes per key) at 1000000"
echo "# $SIZING_DOC should say: \"about $per_key bytes per key\", \"about $default_mb MB with the default\"," \
  "\"about $million_mb MB for 1,000,000 keys\""

within_20_percent "shared memory at the default" "$(doc_number 'about ([0-9,.]+) MB with the default')" "$default_mb" \
  "about $default_mb MB with the default"
within_20_percent "shared memory for 1,000,000 keys" "$(doc_number 'about ([0-9,.]+) MB for 1,000,000 keys')" "$million_mb" \
  "about $million_mb MB for 1,000,000 keys"
within_20_percent "shared memory per key" "$(doc_number 'about ([0-9,]+) bytes per key')" "$per_key" \
  "about $per_key bytes per key"
# The README quotes the same figure.
SIZING_DOC=README.md within_20_percent "shared memory per key" \
  "$(SIZING_DOC=README.md doc_number 'about ([0-9,]+) bytes of shared memory per key')" "$per_key" \
  "about $per_key bytes of shared memory per key"
if [ "$per_key" -gt 160 ]; then
  fail "memory limits take $per_key bytes of shared memory per key at 1,000,000 keys: more than 160"
else
  echo "ok - $per_key bytes of shared memory per key at 1,000,000 keys (at most 160)"
fi
exit $failed
