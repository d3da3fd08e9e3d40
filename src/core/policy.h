// Limits as data: whether two parsed configs are the same limit, the state a
// stored row carries over into a changed config (its tokens stay, capped at
// the new capacity, never refilled by the change), and what a shadow limit
// answers.
#pragma once

#include "core_guard.h"
#include "limiter.h"
#include "shards.h"

namespace ratelimit {

// Whether two valid configs describe the same limit: the same kind, rate,
// period, capacity (absent means rate), maxReserved, start, shards, jitter
// and shadow. {"period": 60000} and {"period": "1 minute"} are the same.
bool SameLimit(const LimitConfig& a, const LimitConfig& b) noexcept;

// The state of one row of `to` that holds `tokens` at the effective now
// `eff`, as its kind holds them (kinds/kind.h's holding: a windowed kind's
// in the window containing eff).
LimitState StateWithTokens(const LimitConfig& to, Micros to_origin, Micros eff, double tokens) noexcept;

// A row of `from` (same kind as `to`) brought up to clock `now` under
// `from`, then carried into `to`: the tokens it has at that moment stay,
// capped at `to`'s capacity (a larger capacity does not refill it). So a
// new rate never applies to the time before the change.
LimitState CarryOver(const LimitConfig& from, Micros from_origin, const LimitConfig& to, Micros to_origin,
                     const LimitState& state, Micros now) noexcept;

// A window row written on another grid (under the period written_period,
// or under a start that puts its windows elsewhere) carried onto config's
// grid at `now` as a change of config carries it (CarryOver, its old
// window's origin being its ts); any other row as it is. For a storage whose
// rows a change of config leaves to be read under the config in force at
// their next call.
LimitState Realigned(const LimitConfig& config, Micros origin, const LimitState& state, Micros written_period,
                     Micros now) noexcept;

// A stored row as calls read it at clock `now`: once its idle_at has
// passed (when it became the same as no row under the config that wrote
// it) it is no row, whatever config reads it now. So deleting exactly such
// rows (ratelimit_cleanup) never changes an answer, even after the config
// changes.
LimitState LiveState(const LimitState& stored, bool has_idle_at, Micros idle_at, Micros now) noexcept;

// A row as stored: its state and when it becomes the same as no row.
struct StoredRow {
  LimitState state;
  Micros idle_at = 0;
};

// What a change of config writes for a row of `from` (its live state at
// `now`, LiveState): the carried tokens (CarryOver) settled under `to` at
// `now`, with the idle time they give under `to`. A live state that is no
// row becomes `to`'s initial state, idle at once. `from` and `to` are one
// row's configs (a shard's share when sharded).
StoredRow CarryRow(const LimitConfig& from, Micros from_origin, const LimitConfig& to, Micros to_origin,
                   const LimitState& live, Micros now) noexcept;

// What a change of the shard count writes for a key (from.shards !=
// to.shards, one kind): its tokens under `from` at `now` (TotalValueAt over
// all[0..from.shards), all[i] shard i, a missing row full), spread evenly
// over `to`'s shards, each capped at a shard's capacity, as a row of `to`
// holding them at `eff` (the newest live row's ts, or now: StateWithTokens)
// settled at `now`, with its idle time. Every shard of `to` gets that row;
// state.exists false: the key is full, the same as no rows.
StoredRow SpreadRow(const LimitConfig& from, Micros from_origin, const ShardInput* all, const LimitConfig& to,
                    Micros to_origin, Micros eff, Micros now) noexcept;

// A config its owner set (a definition or an override) as calls apply it:
// without maxReserved, reservations may go at most `rate` deep (one
// period's refill), so no caller can hold an owner's limit empty for more
// than about one period by reserving; an explicit maxReserved is kept.
LimitConfig OwnerBounded(const LimitConfig& config) noexcept;

// A row's state read under `config` (one row's config: a shard's share
// when sharded): no deficit deeper than the config allows (MaxDeficit). A
// reservation made under another config (a caller's inline one before the
// owner defined the name) never holds the limit longer than this config's
// bound. No row, and a kind that never reserves, are unchanged.
LimitState WithinMaxDeficit(const LimitConfig& config, const LimitState& state) noexcept;

// Whether a valid request can never be granted under `config` (its count
// exceeds what one call can ever take: MostGrantable).
bool NeverGrantable(const LimitConfig& config, const Request& request) noexcept;

// What a limit with "shadow": true answers instead of a refusal: granted
// now (no retry time), remaining and reset_after as the refusal had them.
// Nothing is consumed: the refusal's state is never stored.
Decision ShadowGrant(const Decision& refused) noexcept;

}  // namespace ratelimit
