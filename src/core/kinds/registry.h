// The registry of kinds (registry.cpp): every kind a config may name, by
// KindId, its index. Callers loop over it or look a kind up by id (one
// indexed load, then the kind's function pointers); nothing outside
// src/core/kinds names a kind. Also how a stored row's prev column tags
// the kind that wrote it, declared by the kinds' tables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kinds/kind.h"

namespace ratelimit {

// The most kinds the registry holds (the built-in ones and any registered).
constexpr int kMaxKinds = 16;

namespace detail {
// The registry's table: ops[id] for the `count` registered kinds. Read
// through KindCount and KindOf; written only by RegisterKind.
struct KindTable {
  const KindOps* ops[kMaxKinds];
  int count;
};
extern KindTable kind_table;
}  // namespace detail

// How many kinds are registered: their ids are 0 .. KindCount() - 1.
inline int KindCount() noexcept { return detail::kind_table.count; }

inline KindId KindAt(int index) noexcept { return static_cast<KindId>(index); }

// A registered kind's table (id must be registered).
inline const KindOps& KindOf(KindId id) noexcept {
  return *detail::kind_table.ops[static_cast<std::uint8_t>(id)];
}

inline const char* KindName(KindId id) noexcept { return KindOf(id).name; }

// Parses a config "kind" string: exactly the name of a registered kind.
bool ParseKind(const char* text, std::size_t len, KindId* kind) noexcept;

// Adds a kind to the registry, after checking its table: a name and every
// operation given, a detail for what does not apply, the name unused, its
// stored tag unlike every other kind's. On success *id is its KindId. The
// built-in kinds are listed in registry.cpp; this is for a kind added at
// run time (the unit tests' toy kind).
Status RegisterKind(const KindOps* ops, KindId* id) noexcept;

// Writes into out the registered kinds' names (only those that can
// reserve, when can_reserve_only), each in `quote`s, joined by ", " and by
// `last` before the last one: "a", "b" or "c". Truncated to `size`.
void ListKindNames(char* out, std::size_t size, const char* quote, const char* last,
                   bool can_reserve_only) noexcept;
// The sentence naming every kind a config may use: Use "a", "b" or "c".
void DescribeKindChoice(char* out, std::size_t size) noexcept;

// The prev column of a stored row: NULL, or a value.
struct PrevColumn {
  bool is_null;
  double value;
};

// Which kind a stored row's prev column says wrote it: one kind, a row
// written before kinds were tagged (any kind that reads_untagged_rows), or
// a tag no registered kind claims (no kind's row).
struct RowKind {
  enum class Is : std::uint8_t { kKind, kUntagged, kUnknown };
  Is is;
  KindId kind;  // when is == kKind
};

// The prev written by the update to 0.5.0 on rows whose kind it could not
// tell (written by a name without a definition before kinds were tagged).
constexpr double kUntaggedRowTag = -2;

// The prev column a row of `kind` holding `next` is written with: NULL for
// a kNull tag, the tag for a kConstant one, else next.prev (is_null false).
// The value is next.prev for NULL too, so a storage that keeps the value
// keeps what it did.
PrevColumn PrevColumnOf(KindId kind, const LimitState& next) noexcept;

// Which kind wrote a row with this prev column; kinds_tagged: the rows tag
// their kind (from 0.5.0; before, a NULL prev is untagged).
RowKind RowKindOf(PrevColumn prev, bool kinds_tagged) noexcept;

// Whether a row the tag says `row` wrote is a row of `kind`.
bool RowKindFits(RowKind row, KindId kind) noexcept;

}  // namespace ratelimit
