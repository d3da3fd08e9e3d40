// The stored row format (row_codec.cpp): a row's state from the datums of
// its value, ts and prev columns, and the row to write for a state. Which
// kind wrote a row is carried by its prev column as the kind's table says
// (ratelimit::PrevColumnOf, RowKindOf in src/core/kinds/registry.h).
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// A stored state from the datums of value (float8), ts (timestamptz) and
// prev (float8); kinds_tagged: the rows tag their kind (RowKindsTagged,
// from 0.5.0). idle_at and the version are the reader's to fill.
StoredState StoredStateFromValues(Datum value, Datum ts, Datum prev, bool prev_is_null, bool kinds_tagged);
// The stored state a written row reads back as (a storage that keeps the
// RowWrite itself: the memory storage); has_idle_at is set.
StoredState StoredStateOfWrite(const RowWrite& row);
// A stored state with no row (its kind unknown).
StoredState NoStoredRow();

// Whether a stored row is one `kind` may read as its own.
bool StoredKindFits(ratelimit::RowKind stored, ratelimit::KindId kind);
// The state a call of `kind` decides on at clock `now`: the stored one, or
// no row (the initial state) when another kind wrote it or when its
// idle_at has passed. An idle row is the same as no row under the config
// that wrote it; reading it as no row under any config is what makes
// ratelimit_cleanup(), which deletes exactly those rows, never change an
// answer, whatever config changed since.
LimitState StateForKind(const StoredState& stored, ratelimit::KindId kind, Micros now);
// The row to write for `next` under `config`, its kind tagged.
RowWrite TaggedRow(const LimitConfig& config, const LimitState& next, Micros idle_at);

}  // namespace ratelimit_pg
