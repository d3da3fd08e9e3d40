#!/usr/bin/env bash
# Checks the source layout docs/internals.md's "Code layout" describes:
#   - every src/core and src/pg module x.cpp has its header: x.h beside it,
#     or, for a module spread over files (pgvector's hnswbuild.c, hnswscan.c
#     behind hnsw.h), the header of its first word, prefix.h for
#     prefix_part.cpp (the entry points, which nothing calls, excepted); a
#     kind's file in src/core/kinds is behind kinds/kind.h, its table;
#   - the algorithms are modules: no file of src/ outside src/core/kinds
#     names a kind (its name as its table in src/core/kinds gives it, in
#     any case, its words joined by a space, '_', '-' or nothing, as in
#     kFixedWindowTag), uses a Kind:: enumerator, switches on a kind or
#     picks one by its number (KindAt(2)): everything else reaches a kind
#     through the registry (src/core/kinds/registry.h);
#   - src/pg's files live in its layer folders, and every include of the
#     adapter's own names its folder ("storage/table/row_write.h"); no such
#     path is also a PostgreSQL server header's (both are found with
#     "...", so one would hide the other);
#   - in every src/pg file, C++ standard headers (<...>) come before the
#     project's ("..."), which bring PostgreSQL's in (STYLE: C++ first);
#   - no two modules of src/pg depend on each other, directly or through
#     others: the graph "x.cpp or x.h includes y.h" (y another module) has
#     no cycle;
#   - no two layer folders depend on each other, and none includes a folder
#     above it in the layer order
#       support < shmem < storage < config < decide < route < api
#     (storage/table and storage/memory are storage's: neither includes the
#     other, and above storage only storage/storage.h, which picks a storage,
#     storage/seam.h, the interface, and storage/row_codec.h, the rows,
#     are included; storage.cpp alone picks a storage);
#   - the adapter's pure pieces (PURE below: unit-tested in test/unit
#     without a server) include only C++ standard headers (<...>), so no
#     PostgreSQL header, nor one of the adapter's that brings it in;
#   - a storage is its folder: no file of src/ outside
#     src/pg/storage/<storage>/ names a storage's own things (STORAGE_NAMES
#     below: its folder's headers, its identifiers, its table), in code or
#     comments, but those STORAGE_NAME_EXCEPTIONS lists with their reason;
#     every folder under src/pg/storage has its entry in STORAGE_NAMES;
#   - the core knows no storage: no file of src/core names a config's
#     storage options (CORE_STORAGE_WORDS below: "storage", "on_rollback",
#     "memoryKeys" and the adapter's names for them), in code or comments;
#     the adapter keeps them beside the core's config (StorageOptions in
#     support/limit_call.h) and checks them (config/config_json.cpp);
#   - every name or key an error quotes with %.*s is cut by the one echo
#     helper, EchoLength (errors.h): a statement of src/pg with n %.*s in its
#     strings calls EchoLength( at least n times, so no raw cut such as
#     std::min(len, 64) can end a message in half a multibyte character.
# Prints what is wrong and exits 1; needs only coreutils (tsort) and perl
# (and pg_config, if on PATH or given as PG_CONFIG, for the name clash).
# CHECK_LAYOUT_ROOT=dir checks a copy of the tree (the self-test).
set -euo pipefail
cd "${CHECK_LAYOUT_ROOT:-$(dirname "$0")/..}"

ORDER="support < shmem < storage < config < decide < route < api"
read -r -a LAYERS <<<"${ORDER//</}"
# What, above src/pg/storage, may be included from inside it.
STORAGE_OPEN="storage/storage.h storage/seam.h storage/row_codec.h"

# Each storage's own names, as "folder:pattern" (an extended regex): what
# only src/pg/storage/<folder>/ may say.
STORAGE_NAMES=(
  'memory:storage/memory/|\bmemory_[a-z]|\bMemory[A-Z]'
  'table:storage/table/|\bratelimit_state\b|\bStateTable|\bStateColumns|\bTidOf\b'
)
# Where, outside its folder, a storage's name may appear anyway, as
# "file|reason" (the file may name every storage).
STORAGE_NAME_EXCEPTIONS=(
  "src/pg/storage/storage.cpp|the one list of storages: it includes each one's header and names its Storage"
)
# Words that match a storage's pattern but are not its, removed before the
# search: memory_full (ratelimit_stats' released column, counted for any
# storage) and PostgreSQL's MemoryContext and MemoryChunk names.
STORAGE_NAME_NOT_OURS='\bmemory_full\b|\bMemory(Context|Chunk)\w*'

# The storage options' names (the JSON fields, the adapter's fields, read
# as members too, and its type), which no file of src/core may say.
CORE_STORAGE_WORDS='"storage"|\.storage\b|on_rollback|[Mm]emory_?[Kk]eys|name_rows|StorageOptions'

# The adapter's pure pieces: no PostgreSQL, compiled into core_tests too.
PURE="src/pg/decide/grant_records.h src/pg/shmem/quota_rule.h"

status=0
fail() {
  echo "check-layout: $*" >&2
  status=1
}

mapfile -t pg_cpp < <(find src/pg -name '*.cpp' | sort)
mapfile -t pg_files < <(find src/pg -name '*.cpp' -o -name '*.h' | sort)

# The folder a src/pg file belongs to: its first path component.
layer_of() {
  local rel=${1#src/pg/}
  echo "${rel%%/*}"
}
rank_of() {
  local i
  for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && echo "$i" && return; done
  echo -1
}

for file in "${pg_files[@]}"; do
  rel=${file#src/pg/}
  if [ "$rel" = "${rel%%/*}" ] || [ "$(rank_of "$(layer_of "$file")")" -lt 0 ]; then
    fail "$file is not in a layer folder (${LAYERS[*]})"
  fi
done

for cpp in src/core/*.cpp src/core/kinds/*.cpp "${pg_cpp[@]}"; do
  base=${cpp%.cpp}
  [ "$cpp" = src/pg/api/entry_points.cpp ] && continue
  [[ "$cpp" == src/core/kinds/* ]] && [ -f src/core/kinds/kind.h ] && [ ! -f "$base.h" ] &&
    grep -q 'const KindOps ' "$cpp" && continue
  [ -f "$base.h" ] && continue
  name=$(basename "$base")
  [ "$name" != "${name%%_*}" ] && [ -f "$(dirname "$cpp")/${name%%_*}.h" ] && continue
  fail "$cpp has no header $base.h (nor $(dirname "$cpp")/${name%%_*}.h)"
done

for file in "${pg_files[@]}"; do
  late=$(awk '/^#include "/ { project = 1 } /^#include </ { if (project) print FILENAME ":" FNR ": " $0 }' "$file")
  [ -z "$late" ] || fail "a C++ header after the project's (which include PostgreSQL's):"$'\n'"$late"
done

for file in $PURE; do
  if [ ! -f "$file" ]; then
    fail "$file, a pure piece of the adapter, is missing"
    continue
  fi
  project=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*[^<[:space:]]' "$file" || true)
  [ -z "$project" ] || fail "$file is pure (unit-tested without PostgreSQL) but includes more than C++ standard headers:"$'\n'"$project"
done

# Every include of the adapter's own headers, as "file header" lines; a
# quoted include naming a header of src/pg by its bare name is an error.
includes=$(mktemp)
edges=$(mktemp)
folder_edges=$(mktemp)
trap 'rm -f "$includes" "$edges" "$folder_edges" "$edges.err"' EXIT
for file in "${pg_files[@]}"; do
  { grep -o '^#include "[^"]*"' "$file" || true; } | sed 's/^#include "\(.*\)"$/\1/' | while read -r header; do
    if [ -f "src/pg/$header" ]; then
      echo "$file src/pg/$header"
    elif [ "$header" = "${header#*/}" ] && [ -n "$(find src/pg -name "$header" -print -quit)" ]; then
      echo "BARE $file $header"
    fi
  done
done >"$includes"
while read -r _ file header; do
  fail "$file includes \"$header\" without its folder"
done < <(grep '^BARE ' "$includes" || true)
sed -i '/^BARE /d' "$includes"

pg_config=${PG_CONFIG:-$(command -v pg_config || true)}
if [ -n "$pg_config" ] && server=$("$pg_config" --includedir-server 2>/dev/null); then
  for file in "${pg_files[@]}"; do
    [ "${file%.h}" != "$file" ] || continue
    [ ! -f "$server/${file#src/pg/}" ] || fail "$file has the path of PostgreSQL's $server/${file#src/pg/}"
  done
fi

# Layers: folder edges, no folder reaching up, storage's own rules.
while read -r file header; do
  from=$(layer_of "$file")
  to=$(layer_of "$header")
  [ "$from" = "$to" ] || echo "$from $to" >>"$folder_edges"
  if [ "$(rank_of "$to")" -gt "$(rank_of "$from")" ]; then
    fail "$file ($from) includes $header ($to): a layer above it ($ORDER)"
  fi
  h=${header#src/pg/}
  f=${file#src/pg/}
  case "$f" in
    storage/table/*) [[ "$h" != storage/memory/* ]] || fail "$file (the table storage) includes the memory storage's $h" ;;
    storage/memory/*) [[ "$h" != storage/table/* ]] || fail "$file (the memory storage) includes the table storage's $h" ;;
    storage/storage.cpp) ;;
    storage/*) [[ "$h" != storage/*/* ]] || fail "$file includes a storage's own $h: storages are reached through storage.h" ;;
    *) [[ " $STORAGE_OPEN " == *" $h "* || "$h" != storage/* ]] ||
      fail "$file includes $h: above src/pg/storage only $STORAGE_OPEN" ;;
  esac
done <"$includes"
sort -u "$folder_edges" -o "$folder_edges"
for layer in "${LAYERS[@]}"; do echo "$layer $layer"; done >>"$folder_edges"
if ! tsort "$folder_edges" >/dev/null 2>"$edges.err"; then
  fail "the layer folders of src/pg depend on each other in a cycle:"$'\n'"$(cat "$edges.err")"
fi

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
  }' "${pg_cpp[@]}")
[ -z "$unechoed" ] || fail "a name or key quoted with %.*s but not cut by EchoLength (errors.h):"$'\n'"$unechoed"

# Storages: each one's names searched in every file of src/ outside its
# folder and the exceptions.
mapfile -t all_src < <(find src -name '*.cpp' -o -name '*.h' | sort)
for storage_dir in src/pg/storage/*/; do
  storage=$(basename "$storage_dir")
  [[ " ${STORAGE_NAMES[*]%%:*} " == *" $storage "* ]] ||
    fail "the storage folder $storage_dir has no entry in check-layout.sh's STORAGE_NAMES (its own names)"
done
for entry in "${STORAGE_NAMES[@]}"; do
  storage=${entry%%:*}
  pattern=${entry#*:}
  outside=()
  for file in "${all_src[@]}"; do
    [[ "$file" == "src/pg/storage/$storage/"* ]] && continue
    excepted=0
    for exception in "${STORAGE_NAME_EXCEPTIONS[@]}"; do [ "${exception%%|*}" = "$file" ] && excepted=1; done
    [ $excepted -eq 1 ] || outside+=("$file")
  done
  named=$(NOT_OURS=$STORAGE_NAME_NOT_OURS PATTERN=$pattern perl -ne '
    BEGIN { $not = qr/$ENV{NOT_OURS}/; $pat = qr/$ENV{PATTERN}/ }
    (my $line = $_) =~ s/$not//g;
    print "$ARGV:$.: $_" if $line =~ $pat;
    close ARGV if eof' "${outside[@]}")
  [ -z "$named" ] || fail "the $storage storage's own names are named outside src/pg/storage/$storage (reach it through storage/seam.h):"$'\n'"$named"
done

# The core: no storage option named in any of its files.
mapfile -t core_files < <(find src/core -name '*.cpp' -o -name '*.h' | sort)
optioned=$(grep -n -E -- "$CORE_STORAGE_WORDS" "${core_files[@]}" || true)
[ -z "$optioned" ] || fail "src/core names a storage option (the adapter's: support/limit_call.h's StorageOptions):"$'\n'"$optioned"

# Kinds: their names from their tables (const KindOps kXKind = {"name", ...),
# each a pattern matching any spelling of its words; then every file of
# src/ outside src/core/kinds searched for them and for a kind's switch.
mapfile -t kind_names < <(perl -0777 -ne 'print "$1\n" while /\bconst\s+KindOps\s+\w+\s*=\s*\{\s*"([^"]+)"/g' \
  src/core/kinds/*.cpp 2>/dev/null)
[ ${#kind_names[@]} -gt 0 ] || fail "no kind's table (const KindOps kXKind = {\"name\", ...) in src/core/kinds/*.cpp"
mapfile -t outside_kinds < <(find src -name '*.cpp' -o -name '*.h' | grep -v '^src/core/kinds/' | sort)
for name in "${kind_names[@]}"; do
  pattern=$(sed 's/[^[:alnum:] ]//g; s/ \+/[ _-]?/g' <<<"$name")
  named=$(grep -n -i -E -- "$pattern" "${outside_kinds[@]}" || true)
  [ -z "$named" ] || fail "the kind \"$name\" is named outside src/core/kinds (reach it through the registry):"$'\n'"$named"
done
switched=$(grep -n -E '\bKind::|switch *\([^)]*\b[Kk]ind *\)|\bKindAt\( *[0-9]' "${outside_kinds[@]}" || true)
[ -z "$switched" ] || fail "a Kind:: enumerator, a switch on a kind or a kind by its number outside src/core/kinds (ask its table instead):"$'\n'"$switched"

# Modules: a module is a .cpp and its header (x.h, or prefix.h for
# prefix_part.cpp); an edge from each to every module whose header it
# includes. A header without a .cpp (a module of types only) is no node.
module_of() {
  local file=$1 base
  base=${file%.*}
  if [ -f "$base.cpp" ]; then
    echo "${base#src/pg/}"
  elif [ "${file%.h}" != "$file" ] && [ -n "$(find "$(dirname "$file")" -maxdepth 1 -name "$(basename "$base")_*.cpp" -print -quit)" ]; then
    echo "${base#src/pg/}"
  fi
}
while read -r file header; do
  from=$(module_of "$file")
  if [ -z "$from" ] && [ "${file%.cpp}" != "$file" ]; then from=${file#src/pg/}; fi
  name=$(basename "${file%.*}")
  if [ "${file%.cpp}" != "$file" ] && [ ! -f "${file%.cpp}.h" ] && [ "$name" != "${name%%_*}" ] &&
    [ -f "$(dirname "$file")/${name%%_*}.h" ]; then
    from=${file#src/pg/}
    from="$(dirname "$from")/${name%%_*}"
  fi
  to=$(module_of "$header")
  [ -n "$from" ] && [ -n "$to" ] || continue
  echo "$from $from" >>"$edges"
  [ "$from" = "$to" ] || echo "$from $to" >>"$edges"
done <"$includes"
if [ -s "$edges" ] && ! tsort "$edges" >/dev/null 2>"$edges.err"; then
  fail "modules of src/pg depend on each other in a cycle:"$'\n'"$(cat "$edges.err")"
fi

# No source file over MAX_LINES lines: a file that grows past it holds two
# concerns, and is split by them (docs/internals.md's code layout).
MAX_LINES=450
while IFS= read -r file; do
  lines=$(wc -l <"$file")
  [ "$lines" -le $MAX_LINES ] || fail "$file has $lines lines, over $MAX_LINES: split it by concern"
done < <(find src -name '*.cpp' -o -name '*.h' | sort)

[ $status -eq 0 ] && echo "check-layout: $(echo src/core/*.cpp src/core/kinds/*.cpp "${pg_cpp[@]}" | wc -w) source files, each with its module's header; includes name their folder; no dependency cycle between modules or folders; no folder includes one above it ($ORDER); the pure pieces include no PostgreSQL; every %.*s cut by EchoLength; no kind (${#kind_names[@]}: ${kind_names[*]}) named or switched on outside src/core/kinds; no storage (${#STORAGE_NAMES[@]}: ${STORAGE_NAMES[*]%%:*}) named outside its folder; no storage option named in src/core; no file over $MAX_LINES lines"
[ $status -eq 0 ] && [ -z "${CHECK_LAYOUT_ROOT:-}" ] || exit $status

# The check can fail: each of these plants, in a copy of src/, must be found.
copy=$(mktemp -d)
trap 'rm -rf "$copy" "$includes" "$edges" "$folder_edges" "$edges.err"' EXIT
plant() {
  local what=$1 file=$2 line=$3 expect=$4
  rm -rf "$copy/src" && cp -r src "$copy/src"
  mkdir -p "$(dirname "$copy/$file")" && echo "$line" >>"$copy/$file"
  if out=$(CHECK_LAYOUT_ROOT=$copy "$0" 2>&1); then
    echo "check-layout: the self-test's $what was not found" >&2
    status=1
  elif ! grep -q -- "$expect" <<<"$out"; then
    echo "check-layout: the self-test's $what was not reported as \"$expect\":"$'\n'"$out" >&2
    status=1
  fi
}
plant "layer reaching up" src/pg/support/clock.h '#include "api/functions.h"' "a layer above it"
plant "include without its folder" src/pg/shmem/stats.cpp '#include "clock.h"' "without its folder"
plant "file outside the layers" src/pg/stray.h '#pragma once' "not in a layer folder"
plant "storage reached past the seam" src/pg/decide/decide.cpp '#include "storage/memory/memory_storage.h"' "above src/pg/storage only"
plant "table storage reaching the memory one" src/pg/storage/table/row_codec_x.h '#include "storage/memory/memory_storage.h"' "includes the memory storage"
plant "module cycle" src/pg/support/clock.h '#include "support/errors.h"' "in a cycle"
plant "PostgreSQL in a pure piece" src/pg/decide/grant_records.h '#include "postgres.h"' "is pure"
plant "raw %.*s" src/pg/support/clock.cpp 'void F() { elog(LOG, "%.*s", 3, "abc"); }' "EchoLength"
plant "kind named outside its module" src/pg/storage/row_codec.cpp 'constexpr double kFixedWindowTag = -1;' "is named outside src/core/kinds"
plant "kind named in a comment" src/core/limiter.h '// A Token-Bucket row refills.' "is named outside src/core/kinds"
plant "switch on a kind" src/core/policy.cpp 'int F(const LimitConfig& c) { switch (c.kind) { default: return 0; } }' "a switch on a kind"
plant "Kind:: enumerator" src/pg/decide/decide.cpp 'bool G(KindId k) { return k == Kind::kGcra; }' "a switch on a kind"
plant "kind table without its header" src/core/kinds/stray.cpp 'int Stray();' "has no header"
plant "memory storage named in a comment" src/pg/decide/decide.cpp '// memory_entries keep these rows.' "named outside src/pg/storage/memory"
plant "memory storage's type outside it" src/pg/shmem/stats.cpp 'struct MemoryHeader;' "named outside src/pg/storage/memory"
plant "the state table named outside the table storage" src/pg/config/config_rows.cpp 'const char* kStray = "ratelimit_state";' "named outside src/pg/storage/table"
plant "table storage header outside it" src/pg/support/catalog.h '// see storage/table/state_table.h' "named outside src/pg/storage/table"
plant "storage folder without its names" src/pg/storage/unlogged/unlogged_storage.h '#pragma once' "no entry in check-layout.sh's STORAGE_NAMES"
plant "storage option in the core" src/core/types.h '// "memoryKeys": the most rows a name may hold.' "src/core names a storage option"
plant "file over 450 lines" src/core/too_long.h "$(printf '#pragma once'; printf '\n// a line%.0s' $(seq 1 451))" "over 450: split it"
[ $status -eq 0 ] && echo "check-layout: the self-test's 20 planted faults were each found"
exit $status
