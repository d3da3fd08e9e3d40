#!/usr/bin/env bash
# Checks the source layout the README's "Code layout" describes:
#   - every src/core and src/pg module x.cpp has its header x.h (the entry
#     points, which nothing calls, excepted);
#   - in every src/pg file, C++ standard headers (<...>) come before the
#     project's ("..."), which bring PostgreSQL's in (STYLE: C++ first);
#   - no two modules of src/pg depend on each other, directly or through
#     others: the graph "x.cpp or x.h includes y.h" (y another module) has
#     no cycle.
# Prints what is wrong and exits 1; needs only coreutils (tsort).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
for cpp in src/core/*.cpp src/pg/*.cpp; do
  base=${cpp%.cpp}
  [ "$cpp" = src/pg/entry_points.cpp ] && continue
  if [ ! -f "$base.h" ]; then
    echo "check-layout: $cpp has no header $base.h" >&2
    status=1
  fi
done

for file in src/pg/*.cpp src/pg/*.h; do
  late=$(awk '/^#include "/ { project = 1 } /^#include </ { if (project) print FILENAME ":" FNR ": " $0 }' "$file")
  if [ -n "$late" ]; then
    echo "check-layout: a C++ header after the project's (which include PostgreSQL's):" >&2
    echo "$late" >&2
    status=1
  fi
done

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for cpp in src/pg/*.cpp; do
  module=$(basename "$cpp" .cpp)
  echo "$module $module" >>"$edges"
  sources=("$cpp")
  if [ -f "src/pg/$module.h" ]; then sources+=("src/pg/$module.h"); fi
  cat "${sources[@]}" | grep -o '^#include "[a-z_]*\.h"' | sed 's/^#include "\(.*\)\.h"$/\1/' | while read -r header; do
    if [ "$header" != "$module" ] && [ -f "src/pg/$header.cpp" ]; then echo "$module $header"; fi
  done >>"$edges"
done
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
  echo "check-layout: modules of src/pg depend on each other in a cycle:" >&2
  cat "$edges.err" >&2
  status=1
fi
rm -f "$edges.err"
[ $status -eq 0 ] && echo "check-layout: $(ls src/core/*.cpp src/pg/*.cpp | wc -l) modules, each with its header; no dependency cycle"
exit $status
