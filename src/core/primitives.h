// Per-row building blocks shared by single-row, sharded and refund decisions.
// Internal to src/core.
#pragma once

#include "core_guard.h"
#include "limiter.h"

namespace ratelimit {
namespace detail {

// One row's state rolled forward to the effective now.
struct View {
  Micros eff = 0;           // max(now, stored ts)
  Micros window_start = 0;  // window kinds: start of the current window
  double avail = 0;         // tokens available at eff
  double used = 0;          // sliding window: floor(previous * weight) + current
  double current = 0;       // sliding window: current window's count
  double previous = 0;      // sliding window: previous window's count
  LimitState base;          // the stored state (a missing row: its initial state)
};

View ViewAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept;

// Whether `count` more fits now without a deficit (the kind's own test).
bool Fits(const LimitConfig& config, const View& view, double count) noexcept;

// The state to store after taking `take` tokens (may leave a deficit).
LimitState TakeFrom(const LimitConfig& config, const View& view, double take) noexcept;

// The state to store after giving back up to `amount` tokens.
LimitState GiveBack(const LimitConfig& config, const View& view, double amount) noexcept;

// The earliest moment >= view.eff at which `target` tokens fit, computed
// from the stored state exactly as a later call would compute it.
Micros WhenAvailable(const LimitConfig& config, const View& view, double target) noexcept;

// The smallest t in [lo, hi] with pred(t) true for a monotone pred (false,
// then true); hi when pred(hi) is false too, so answers stay finite.
template <typename Pred>
Micros FirstWhere(Micros lo, Micros hi, Pred pred) {
  if (pred(lo)) return lo;
  while (hi - lo > 1) {
    Micros mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// The latest moment any search may return, keeping timestamps finite.
inline Micros SearchLimit(Micros from) { return from + 3 * kHorizonMicros; }

inline double Seconds(Micros micros) { return static_cast<double>(micros) / kMicrosPerSecond; }

}  // namespace detail
}  // namespace ratelimit
