// Limits as data: SameLimit, the carry-over of a row's tokens into a new
// config, and shadow answers. Built on the public per-row API (ValueAt,
// InitialState, Capacity) and the kinds' flags and holding (kinds/kind.h).
#include "policy.h"

#include <algorithm>

#include "kinds/registry.h"

namespace ratelimit {

namespace {

// The maxReserved a config allows, comparable whether given or not.
bool SameReserve(const LimitConfig& a, const LimitConfig& b) {
  if (a.has_max_reserved != b.has_max_reserved) return false;
  return !a.has_max_reserved || a.max_reserved == b.max_reserved;
}

// The window alignment a config gives, comparable whether given or not.
bool SameStart(const LimitConfig& a, const LimitConfig& b) {
  if (a.has_start != b.has_start) return false;
  return !a.has_start || a.start == b.start;
}

bool SameJitter(const LimitConfig& a, const LimitConfig& b) {
  if (a.has_jitter != b.has_jitter) return false;
  if (!a.has_jitter) return true;
  if (a.jitter_is_period != b.jitter_is_period) return false;
  return a.jitter_is_period || a.jitter == b.jitter;
}

}  // namespace

bool SameLimit(const LimitConfig& a, const LimitConfig& b) noexcept {
  return a.kind == b.kind && a.rate == b.rate && a.period == b.period && Capacity(a) == Capacity(b) &&
         SameReserve(a, b) && SameStart(a, b) && a.shards == b.shards && SameJitter(a, b) &&
         a.shadow == b.shadow;
}

LimitState StateWithTokens(const LimitConfig& to, Micros to_origin, Micros eff, double tokens) noexcept {
  return KindOf(to.kind).holding(to, to_origin, eff, tokens);
}

LimitState CarryOver(const LimitConfig& from, Micros from_origin, const LimitConfig& to, Micros to_origin,
                     const LimitState& state, Micros now) noexcept {
  if (!state.exists) return state;
  Micros eff = std::max(now, state.ts);
  double tokens = ValueAt(from, state, now, from_origin).value;
  return StateWithTokens(to, to_origin, eff, std::min(tokens, Capacity(to)));
}

LimitState Realigned(const LimitConfig& config, Micros origin, const LimitState& state, Micros written_period,
                     Micros now) noexcept {
  if (!state.exists || !KindOf(config.kind).windowed || written_period <= 0) return state;
  Micros offset = (state.ts - origin) % config.period;
  if (written_period == config.period && offset == 0) return state;
  LimitConfig from = config;
  from.period = written_period;
  return CarryOver(from, state.ts, config, origin, state, now);
}

LimitState LiveState(const LimitState& stored, bool has_idle_at, Micros idle_at, Micros now) noexcept {
  if (stored.exists && has_idle_at && idle_at <= now) return LimitState{};
  return stored;
}

StoredRow CarryRow(const LimitConfig& from, Micros from_origin, const LimitConfig& to, Micros to_origin,
                   const LimitState& live, Micros now) noexcept {
  LimitState carried = CarryOver(from, from_origin, to, to_origin, live, now);
  Decision settled = Refund(to, carried, now, to_origin, 0);
  return StoredRow{settled.next, settled.full_at};
}

StoredRow SpreadRow(const LimitConfig& from, Micros from_origin, const ShardInput* all, const LimitConfig& to,
                    Micros to_origin, Micros eff, Micros now) noexcept {
  double total = TotalValueAt(RowConfig(from), all, from.shards, now, from_origin).value;
  LimitConfig row = RowConfig(to);
  double level = std::min(total / to.shards, Capacity(row));
  if (level >= Capacity(row)) return StoredRow{};  // full: the same as no rows
  Decision settled = Refund(row, StateWithTokens(row, to_origin, eff, level), now, to_origin, 0);
  return StoredRow{settled.next, settled.full_at};
}

LimitConfig OwnerBounded(const LimitConfig& config) noexcept {
  if (config.has_max_reserved || !KindOf(config.kind).can_reserve) return config;
  LimitConfig bounded = config;
  bounded.has_max_reserved = true;
  bounded.max_reserved = config.rate;
  return bounded;
}

LimitState WithinMaxDeficit(const LimitConfig& config, const LimitState& state) noexcept {
  if (!state.exists || !KindOf(config.kind).can_reserve) return state;
  LimitState bounded = state;
  bounded.value = std::max(state.value, -MaxDeficit(config));
  return bounded;
}

bool NeverGrantable(const LimitConfig& config, const Request& request) noexcept {
  return request.count > MostGrantable(config, request.reserve);
}

Decision ShadowGrant(const Decision& refused) noexcept {
  Decision d = refused;
  d.ok = true;
  d.has_retry = false;
  d.retry_at = 0;
  d.retry_after = 0;
  return d;
}

}  // namespace ratelimit
