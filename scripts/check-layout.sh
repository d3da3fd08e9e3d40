#!/usr/bin/env bash
# Checks the source layout "Code layout" in docs/internals.md describes:
#   - every src/core and src/pg module x.cpp has its header x.h (the entry
#     points, which nothing calls, excepted);
#   - in every src/pg file, C++ standard headers (<...>) come before the
#     project's ("..."), which bring PostgreSQL's in (STYLE: C++ first);
#   - no two modules of src/pg depend on each other, directly or through
#     others: the graph "x.cpp or x.h includes y.h" (y another module) has
#     no cycle;
#   - every name or key an error quotes with %.*s is cut by the one echo
#     helper, EchoLength (errors.h): a statement of src/pg with n %.*s in its
#     strings calls EchoLength( at least n times, so no raw cut such as
#     std::min(len, 64) can end a message in half a multibyte character.
# Prints what is wrong and exits 1; needs only coreutils (tsort) and perl.
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

# Comments and character literals blanked, each string literal reduced to
# one \001 per %.*s it holds, statements split at ';'.
unechoed=$(perl -0777 -ne '
  s{(//[^\n]*|/\*.*?\*/|\x27(?:\\.|[^\x27\\])*\x27|"(?:\\.|[^"\\])*")}{
    my $t = $1;
    $t =~ /^"/ ? "\"" . ("\001" x (() = $t =~ /%\.\*s/g)) . "\"" : "\n" x ($t =~ tr/\n//)
  }gse;
  my $line = 1;
  for my $statement (split /;/) {
    my $quoted = () = $statement =~ /\001/g;
    my $echoed = () = $statement =~ /\bEchoLength\(/g;
    if ($quoted > $echoed) {
      my $at = $line + (($statement =~ /^(\s*)/)[0] =~ tr/\n//);
      print "$ARGV:$at: $quoted %.*s, $echoed EchoLength\n";
    }
    $line += ($statement =~ tr/\n//);
  }' src/pg/*.cpp)
if [ -n "$unechoed" ]; then
  echo "check-layout: a name or key quoted with %.*s but not cut by EchoLength (errors.h):" >&2
  echo "$unechoed" >&2
  status=1
fi

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
[ $status -eq 0 ] && echo "check-layout: $(ls src/core/*.cpp src/pg/*.cpp | wc -l) modules, each with its header; no dependency cycle; every %.*s cut by EchoLength"
exit $status
