// Which algorithm wrote a state row, so that a row is never read as another
// algorithm's state. The kind is carried by the prev column, at no cost in
// storage for a token bucket: NULL is a token bucket's row, -1 a fixed
// window's, -2 a token bucket's or fixed window's written before 0.5.0 (the
// update to 0.5.0 marks the rows of names it cannot tell), and any other
// value a sliding window's previous-window count (never negative).
#include "storage/row_codec.h"

#include "policy.h"
#include "support/clock.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

constexpr double kFixedWindowTag = -1;
constexpr double kEitherTag = -2;

StoredKind KindOfPrev(bool prev_is_null, double prev, bool kinds_tagged) {
  // Before ALTER EXTENSION UPDATE to 0.5.0 a fixed window's row has a NULL prev too.
  if (prev_is_null) return kinds_tagged ? StoredKind::kTokenBucket : StoredKind::kTokenBucketOrFixedWindow;
  if (prev == kFixedWindowTag) return StoredKind::kFixedWindow;
  if (prev == kEitherTag) return StoredKind::kTokenBucketOrFixedWindow;
  return StoredKind::kSlidingWindow;
}

}  // namespace

StoredState StoredStateFromValues(Datum value, Datum ts, Datum prev, bool prev_is_null, bool kinds_tagged) {
  StoredState out{};
  out.state.exists = true;
  out.state.value = DatumGetFloat8(value);
  out.state.ts = UnixFromTimestamptz(DatumGetTimestampTz(ts));
  out.state.prev = prev_is_null ? 0 : DatumGetFloat8(prev);
  out.kind = KindOfPrev(prev_is_null, out.state.prev, kinds_tagged);
  return out;
}

StoredState StoredStateOfWrite(const RowWrite& row) {
  StoredState out{};
  out.state = row.next;
  out.state.exists = true;
  if (!row.keep_prev) out.state.prev = 0;
  out.kind = KindOfPrev(!row.keep_prev, row.next.prev, true);
  out.has_idle_at = true;
  out.idle_at = row.idle_at;
  out.period = row.period;
  ItemPointerSetInvalid(&out.version.tid);
  return out;
}

StoredState NoStoredRow() {
  StoredState out{};
  ItemPointerSetInvalid(&out.version.tid);
  return out;
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
  if (!StoredKindFits(stored.kind, kind)) return LimitState{};  // another algorithm's row
  return ratelimit::LiveState(stored.state, stored.has_idle_at, stored.idle_at, now);
}

RowWrite TaggedRow(const LimitConfig& config, const LimitState& next, Micros idle_at) {
  bool window = config.kind != ratelimit::Kind::kTokenBucket;
  RowWrite row{next, window, idle_at, window ? config.period : 0};
  if (config.kind == ratelimit::Kind::kFixedWindow) row.next.prev = kFixedWindowTag;
  return row;
}

}  // namespace ratelimit_pg
