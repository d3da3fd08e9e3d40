// A state row's columns: the state in value, ts and prev, and the tag of
// the kind that wrote it, so that a row is never read as another kind's
// state. The tags are the kinds' own (src/core/kinds); this file only
// moves them between the columns and the core.
#include "storage/row_codec.h"

#include "policy.h"
#include "support/clock.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace ratelimit_pg {

StoredState StoredStateFromValues(Datum value, Datum ts, Datum prev, bool prev_is_null, bool kinds_tagged) {
  StoredState out{};
  out.state.exists = true;
  out.state.value = DatumGetFloat8(value);
  out.state.ts = UnixFromTimestamptz(DatumGetTimestampTz(ts));
  out.state.prev = prev_is_null ? 0 : DatumGetFloat8(prev);
  out.kind = ratelimit::RowKindOf(ratelimit::PrevColumn{prev_is_null, out.state.prev}, kinds_tagged);
  return out;
}

StoredState StoredStateOfWrite(const RowWrite& row) {
  StoredState out{};
  out.state = row.next;
  out.state.exists = true;
  if (!row.keep_prev) out.state.prev = 0;
  out.kind = ratelimit::RowKindOf(ratelimit::PrevColumn{!row.keep_prev, row.next.prev}, true);
  out.has_idle_at = true;
  out.idle_at = row.idle_at;
  out.period = row.period;
  out.version = RowVersion{};  // none
  return out;
}

StoredState NoStoredRow() {
  StoredState out{};
  out.version = RowVersion{};  // none
  return out;
}

bool StoredKindFits(ratelimit::RowKind stored, ratelimit::KindId kind) {
  return ratelimit::RowKindFits(stored, kind);
}

LimitState StateForKind(const StoredState& stored, ratelimit::KindId kind, Micros now) {
  if (!stored.state.exists) return stored.state;
  if (!StoredKindFits(stored.kind, kind)) return LimitState{};  // another kind's row
  return ratelimit::LiveState(stored.state, stored.has_idle_at, stored.idle_at, now);
}

RowWrite TaggedRow(const LimitConfig& config, const LimitState& next, Micros idle_at) {
  ratelimit::PrevColumn prev = ratelimit::PrevColumnOf(config.kind, next);
  bool windowed = ratelimit::KindOf(config.kind).windowed;
  RowWrite row{next, !prev.is_null, idle_at, windowed ? config.period : 0};
  row.next.prev = prev.value;
  return row;
}

}  // namespace ratelimit_pg
