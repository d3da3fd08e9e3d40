// Per-row building blocks shared by single-row, sharded and refund decisions
// (the kind's operations, reached through the registry, and the searches
// and window arithmetic the kinds share; primitives.cpp also defines the
// public per-row helpers of row.h). Internal to src/core: limiter.cpp,
// shards.cpp and the kinds (src/core/kinds) build on this.
#pragma once

#include <algorithm>

#include "core_guard.h"
#include "kinds/registry.h"
#include "row.h"
#include "types.h"

namespace ratelimit {
namespace detail {

// floor(a / b) for b > 0, correct for negative a.
inline Micros FloorDiv(Micros a, Micros b) {
  Micros q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The start of the window containing `now` for windows aligned to `origin`.
inline Micros WindowStartFor(Micros now, Micros origin, Micros period) {
  return origin + FloorDiv(now - origin, period) * period;
}

// A view's stored part: the state (a missing row: the kind's initial
// state, made only then) and the effective now, max(now, its ts). Every
// kind's view_at starts from it.
template <typename MakeInitial>
View ViewBase(const LimitState& state, Micros now, MakeInitial initial) {
  View v;
  v.base = state.exists ? state : initial();
  v.eff = std::max(now, v.base.ts);
  return v;
}

// The per-row operations, each the config's kind's (kinds/kind.h says what
// each does): one indexed load and one call through the kind's table.
inline View ViewAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept {
  return KindOf(config.kind).view_at(config, state, now, origin);
}

// Whether `count` can be taken now leaving at most `deficit` below zero.
// This one test is used by validation, decisions and retry searches alike,
// so they can never disagree by a rounding step.
inline bool CanTake(const LimitConfig& config, const View& view, double count, double deficit) noexcept {
  return KindOf(config.kind).can_take(config, view, count, deficit);
}

// Whether `count` more fits now without a deficit.
inline bool Fits(const LimitConfig& config, const View& view, double count) noexcept {
  return CanTake(config, view, count, 0);
}

// The state to store after taking `take` tokens (may leave a deficit).
inline LimitState TakeFrom(const LimitConfig& config, const View& view, double take) noexcept {
  return KindOf(config.kind).take(config, view, take);
}

// The state to store when the row should be left with exactly `level`
// tokens (balanced shard takes: both shards end at the level checked).
inline LimitState LeaveAt(const LimitConfig& config, const View& view, double level) noexcept {
  return KindOf(config.kind).leave_at(config, view, level);
}

// The state to store after giving back up to `amount` tokens.
inline LimitState GiveBack(const LimitConfig& config, const View& view, double amount) noexcept {
  return KindOf(config.kind).give_back(config, view, amount);
}

// A reservation's state raised by the rounding steps (if any) it needs to
// be out of deficit at `by`, the moment the same call without reserve would
// be granted. Taking now and refilling later rounds differently from
// refilling first and taking then (by a whole window for a windowed kind),
// and a reservation must never be told to wait longer than that call.
LimitState OutOfDeficitBy(const LimitConfig& config, const LimitState& stored, Micros by,
                          Micros origin) noexcept;

// The earliest moment >= view.eff at which CanTake(count, deficit) holds,
// computed from the stored state exactly as a later call would compute it.
inline Micros WhenAvailable(const LimitConfig& config, const View& view, double count,
                            double deficit = 0) noexcept {
  return KindOf(config.kind).when_available(config, view, count, deficit);
}

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
