// Single-row decisions (limiter.cpp): take, read, refund and jitter for a
// limit stored in one row. Sharded decisions are in shards.h, the config's
// rules in config.h, the per-row helpers in row.h.
//
// The pure rate-limit core: plain structs in, plain structs out. No
// PostgreSQL header may be seen in src/core (see core_guard.h). Every
// function is noexcept: nothing here allocates or throws.
#pragma once

#include "config.h"
#include "row.h"
#include "types.h"

namespace ratelimit {

// Decides one request at clock `now` (the raw clock; the effective now is
// max(now, state.ts)). config and request must have been validated.
Decision Decide(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                const Request& request) noexcept;

// The tokens available at clock `now`, without consuming.
Reading ValueAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept;

// Gives `count` tokens back: capped at capacity, never below the current
// value. ok is always true; next is the state to store.
Decision Refund(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                double count) noexcept;

// Gives back a grant of `count` taken when its window started at `taken`
// (the decision's next.ts), as a rolled-back grant is: Refund's answer, or
// ok false (nothing to store) for a window kind whose window that was is
// over (its grant went with it). A kind without windows always gives back.
Decision RefundTaken(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                     double count, Micros taken) noexcept;

// Adds a random delay in [0, jitter) to a refused decision's retry time;
// `unit` is a uniform random number in [0, 1). Grants and reservations are
// returned unchanged: their times are exact.
Decision ApplyJitter(const LimitConfig& config, const Decision& decision, double unit) noexcept;

}  // namespace ratelimit
