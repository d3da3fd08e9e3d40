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

// Whether `count` can be taken now leaving at most `deficit` below zero.
// This one expression is used by validation, decisions and retry searches
// alike, so they can never disagree by a rounding step. Sliding windows
// have no deficit: their test is floor(previous * weight) + current + count <= rate.
bool CanTake(const LimitConfig& config, const View& view, double count, double deficit) noexcept;

// Whether `count` more fits now without a deficit.
inline bool Fits(const LimitConfig& config, const View& view, double count) noexcept {
  return CanTake(config, view, count, 0);
}

// The state to store after taking `take` tokens (may leave a deficit).
LimitState TakeFrom(const LimitConfig& config, const View& view, double take) noexcept;

// The state to store when the row should be left with exactly `level`
// tokens (balanced shard takes: both shards end at the level checked).
LimitState LeaveAt(const LimitConfig& config, const View& view, double level) noexcept;

// The state to store after giving back up to `amount` tokens.
LimitState GiveBack(const LimitConfig& config, const View& view, double amount) noexcept;

// The earliest moment >= view.eff at which CanTake(count, deficit) holds,
// computed from the stored state exactly as a later call would compute it.
Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit = 0) noexcept;

// Whether a request could ever be granted on a full limit (one row).
bool CanEverTake(const LimitConfig& config, const Request& request) noexcept;

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
