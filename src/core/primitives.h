// Per-row building blocks shared by single-row, sharded and refund decisions
// (defined in primitives.cpp, which also defines the public per-row helpers
// of row.h). Internal to src/core: limiter.cpp and shards.cpp both build on
// this and on nothing else.
#pragma once

#include "core_guard.h"
#include "row.h"
#include "types.h"

namespace ratelimit {
namespace detail {

// floor(a / b) for b > 0, correct for negative a.
inline Micros FloorDiv(Micros a, Micros b) {
  Micros q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

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

// A reservation's state raised by the rounding steps (if any) it needs to
// be out of deficit at `by`, the moment the same call without reserve would
// be granted. Taking now and refilling later rounds differently from
// refilling first and taking then (by a whole window for fixed windows),
// and a reservation must never be told to wait longer than that call.
LimitState OutOfDeficitBy(const LimitConfig& config, const LimitState& stored, Micros by,
                          Micros origin) noexcept;

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

// FirstWhere(lo, hi, pred) for a monotone pred, starting from a guess of
// the answer: when pred is false at max(lo, guess - 2) and true at
// min(hi, guess + 2), the answer lies between them and a search of those
// few microseconds finds it, the same answer as the whole range's search
// gives; else the whole range is searched.
template <typename Pred>
Micros FirstWhereNear(Micros lo, Micros hi, Micros guess, Pred pred) {
  if (pred(lo)) return lo;
  Micros a = guess - 2 > lo ? guess - 2 : lo;
  Micros b = guess + 2 < hi ? guess + 2 : hi;
  if (b > a && (a == lo || !pred(a)) && pred(b)) return FirstWhere(a, b, pred);
  return FirstWhere(lo, hi, pred);
}

// The latest moment any search may return, keeping timestamps finite.
inline Micros SearchLimit(Micros from) { return from + 3 * kHorizonMicros; }

inline double Seconds(Micros micros) { return static_cast<double>(micros) / kMicrosPerSecond; }

}  // namespace detail
}  // namespace ratelimit
