// The registry of kinds: the built-in kinds' tables in one list (a new
// kind is its file in this folder and one line here), names and the stored
// kind tags looked up by looping over it.
#include "kinds/registry.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "config.h"

namespace ratelimit {

// The built-in kinds, each defined in its own file of this folder.
extern const KindOps kTokenBucketKind;    // token_bucket.cpp
extern const KindOps kFixedWindowKind;    // fixed_window.cpp
extern const KindOps kSlidingWindowKind;  // sliding_window.cpp

namespace {

// The registry line: every built-in kind, its KindId its place (ids are
// never stored, so the order is free; the first is a config's default).
constexpr const KindOps* kBuiltInKinds[] = {&kTokenBucketKind, &kFixedWindowKind, &kSlidingWindowKind};
static_assert(sizeof kBuiltInKinds / sizeof kBuiltInKinds[0] <= kMaxKinds, "kMaxKinds is too small");

// The table the registry starts with: the built-in kinds, in their order.
constexpr detail::KindTable BuiltInTable() {
  detail::KindTable table{};
  for (const KindOps* ops : kBuiltInKinds) table.ops[table.count++] = ops;
  return table;
}

// Whether `ops` has every operation (a kind without one would crash a call).
bool HasEveryOperation(const KindOps& ops) {
  return ops.refill_micros && ops.refillable && ops.initial && ops.view_at && ops.can_take && ops.take &&
         ops.leave_at && ops.give_back && ops.refund_room && ops.when_available && ops.holding;
}

// Whether two tags could be mistaken for each other when a row is read.
bool TagsClash(const StoredTag& a, const StoredTag& b) {
  if (a.form != b.form) return false;
  return a.form != TagForm::kConstant || a.value == b.value;
}

// Why `ops` cannot join the registry (an ok Status: it can).
Status CheckNewKind(const KindOps& ops) {
  if (ops.name == nullptr || ops.name[0] == '\0' || !HasEveryOperation(ops))
    return Invalid("A kind needs a name and every operation.", "kind table is incomplete");
  if ((!ops.takes_capacity && !ops.no_capacity_detail) || (!ops.can_reserve && !ops.no_reserve_detail))
    return Invalid("Say why capacity or maxReserved does not apply.", "kind \"%s\" lacks a detail", ops.name);
  if (ops.tag.form == TagForm::kConstant && !(ops.tag.value < 0 && ops.tag.value != kUntaggedRowTag))
    return Invalid("A constant tag is negative and not the untagged rows' -2.",
                   "kind \"%s\" has an invalid stored tag", ops.name);
  for (int i = 0; i < KindCount(); ++i) {
    const KindOps& other = KindOf(KindAt(i));
    if (std::strcmp(other.name, ops.name) == 0)
      return Invalid(nullptr, "kind \"%s\" is already registered", ops.name);
    if (TagsClash(other.tag, ops.tag))
      return Invalid("Each kind's rows must be told apart by their prev column.",
                     "kind \"%s\" has the stored tag of kind \"%s\"", ops.name, other.name);
  }
  if (KindCount() == kMaxKinds) return Invalid(nullptr, "too many kinds (at most %d)", kMaxKinds);
  return Status{};
}

// The first registered kind whose tag has `form` (kConstant: and `value`).
bool FindTagged(TagForm form, double value, KindId* kind) {
  for (int i = 0; i < KindCount(); ++i) {
    const StoredTag& tag = KindOf(KindAt(i)).tag;
    if (tag.form == form && (form != TagForm::kConstant || tag.value == value)) {
      *kind = KindAt(i);
      return true;
    }
  }
  return false;
}

// A RowKind for a tag `form` (and `value`) claims, or kUnknown.
RowKind TaggedBy(TagForm form, double value) {
  RowKind row{RowKind::Is::kUnknown, KindId{}};
  if (FindTagged(form, value, &row.kind)) row.is = RowKind::Is::kKind;
  return row;
}

// Appends printf-style text at out[*used], never past `size`.
__attribute__((format(printf, 4, 5))) void Append(char* out, std::size_t size, std::size_t* used,
                                                  const char* format, ...) {
  if (*used >= size) return;
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(out + *used, size - *used, format, args);
  va_end(args);
  if (n > 0) *used = std::min(size - 1, *used + static_cast<std::size_t>(n));
}

}  // namespace

namespace detail {
KindTable kind_table = BuiltInTable();  // constant-initialized: ready before any call
}  // namespace detail

bool ParseKind(const char* text, std::size_t len, KindId* kind) noexcept {
  for (int i = 0; i < KindCount(); ++i) {
    const char* name = KindOf(KindAt(i)).name;
    if (std::strlen(name) == len && std::memcmp(name, text, len) == 0) {
      *kind = KindAt(i);
      return true;
    }
  }
  return false;
}

Status RegisterKind(const KindOps* ops, KindId* id) noexcept {
  if (ops == nullptr) return Invalid("A kind needs a name and every operation.", "kind table is incomplete");
  Status status = CheckNewKind(*ops);
  if (!status.ok()) return status;
  detail::kind_table.ops[detail::kind_table.count] = ops;
  *id = KindAt(detail::kind_table.count++);
  return Status{};
}

void ListKindNames(char* out, std::size_t size, const char* quote, const char* last,
                   bool can_reserve_only) noexcept {
  if (size == 0) return;
  out[0] = '\0';
  int listed[kMaxKinds];
  int count = 0;
  for (int i = 0; i < KindCount(); ++i)
    if (!can_reserve_only || KindOf(KindAt(i)).can_reserve) listed[count++] = i;
  std::size_t used = 0;
  for (int n = 0; n < count; ++n) {
    const char* separator = n == 0 ? "" : (n == count - 1 ? last : ", ");
    Append(out, size, &used, "%s%s%s%s", separator, quote, KindName(KindAt(listed[n])), quote);
  }
}

void DescribeKindChoice(char* out, std::size_t size) noexcept {
  char names[192];
  ListKindNames(names, sizeof names, "\"", " or ", false);
  std::snprintf(out, size, "Use %s.", names);
}

PrevColumn PrevColumnOf(KindId kind, const LimitState& next) noexcept {
  const StoredTag& tag = KindOf(kind).tag;
  if (tag.form == TagForm::kConstant) return PrevColumn{false, tag.value};
  return PrevColumn{tag.form == TagForm::kNull, next.prev};
}

RowKind RowKindOf(PrevColumn prev, bool kinds_tagged) noexcept {
  // Before ALTER EXTENSION UPDATE to 0.5.0 a NULL prev is any untagged kind's.
  if (prev.is_null)
    return kinds_tagged ? TaggedBy(TagForm::kNull, 0) : RowKind{RowKind::Is::kUntagged, KindId{}};
  if (prev.value == kUntaggedRowTag) return RowKind{RowKind::Is::kUntagged, KindId{}};
  RowKind constant = TaggedBy(TagForm::kConstant, prev.value);
  if (constant.is == RowKind::Is::kKind) return constant;
  return TaggedBy(TagForm::kData, 0);
}

bool RowKindFits(RowKind row, KindId kind) noexcept {
  if (row.is == RowKind::Is::kUntagged) return KindOf(kind).reads_untagged_rows;
  return row.is == RowKind::Is::kKind && row.kind == kind;
}

}  // namespace ratelimit
