// Which algorithm wrote a state row, so that a row is never read as another
// algorithm's state. The kind is carried by the prev column, at no cost in
// storage for a token bucket: NULL is a token bucket's row, -1 a fixed
// window's, -2 a token bucket's or fixed window's written before 0.5.0 (the
// update to 0.5.0 marks the rows of names it cannot tell), and any other
// value a sliding window's previous-window count (never negative).
#include "pg_adapter.h"
#include "policy.h"

namespace ratelimit_pg {
namespace {

constexpr double kFixedWindowTag = -1;
constexpr double kEitherTag = -2;

}  // namespace

StoredKind StoredKindOf(const StoredState& stored) {
  if (stored.prev_is_null)
    // Before ALTER EXTENSION UPDATE to 0.5.0 (no override table yet) a fixed
    // window's row has a NULL prev too.
    return OidIsValid(OverrideTableOid()) ? StoredKind::kTokenBucket : StoredKind::kTokenBucketOrFixedWindow;
  if (stored.state.prev == kFixedWindowTag) return StoredKind::kFixedWindow;
  if (stored.state.prev == kEitherTag) return StoredKind::kTokenBucketOrFixedWindow;
  return StoredKind::kSlidingWindow;
}

bool StoredKindFits(StoredKind stored, ratelimit::Kind kind) {
  switch (stored) {
    case StoredKind::kTokenBucket:
      return kind == ratelimit::Kind::kTokenBucket;
    case StoredKind::kFixedWindow:
      return kind == ratelimit::Kind::kFixedWindow;
    case StoredKind::kSlidingWindow:
      return kind == ratelimit::Kind::kSlidingWindow;
    case StoredKind::kTokenBucketOrFixedWindow:
      break;
  }
  return kind != ratelimit::Kind::kSlidingWindow;
}

LimitState StateForKind(const StoredState& stored, ratelimit::Kind kind, Micros now) {
  if (!stored.state.exists) return stored.state;
  if (!StoredKindFits(StoredKindOf(stored), kind)) return LimitState{};  // another algorithm's row
  return ratelimit::LiveState(stored.state, stored.has_idle_at, stored.idle_at, now);
}

RowWrite TaggedRow(const LimitConfig& config, const LimitState& next, Micros idle_at) {
  RowWrite row{next, config.kind != ratelimit::Kind::kTokenBucket, idle_at};
  if (config.kind == ratelimit::Kind::kFixedWindow) row.next.prev = kFixedWindowTag;
  return row;
}

}  // namespace ratelimit_pg
