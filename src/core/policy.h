// Limits as data: whether two parsed configs are the same limit, the state a
// stored row carries over into a changed config (its tokens stay, capped at
// the new capacity, never refilled by the change), and what a shadow limit
// answers.
#pragma once

#include "core_guard.h"
#include "limiter.h"

namespace ratelimit {

// Whether two valid configs describe the same limit: the same kind, rate,
// period, capacity (absent means rate), maxReserved, start, shards, jitter
// and shadow. {"period": 60000} and {"period": "1 minute"} are the same.
bool SameLimit(const LimitConfig& a, const LimitConfig& b) noexcept;

// The state of one row of `to` that holds `tokens` at the effective now
// `eff` (a token bucket: at eff; a window kind: in the window containing
// eff, a sliding window's count set so that `tokens` remain, its previous
// window empty).
LimitState StateWithTokens(const LimitConfig& to, Micros to_origin, Micros eff, double tokens) noexcept;

// A row of `from` (same kind as `to`) brought up to clock `now` under
// `from`, then carried into `to`: the tokens it has at that moment stay,
// capped at `to`'s capacity (a larger capacity does not refill it). So a
// new rate never applies to the time before the change.
LimitState CarryOver(const LimitConfig& from, Micros from_origin, const LimitConfig& to, Micros to_origin,
                     const LimitState& state, Micros now) noexcept;

// What a limit with "shadow": true answers instead of a refusal: granted
// now (no retry time), remaining and reset_after as the refusal had them.
// Nothing is consumed: the refusal's state is never stored.
Decision ShadowGrant(const Decision& refused) noexcept;

}  // namespace ratelimit
