// Per-row building blocks: one row's state rolled forward to a clock, the
// one take test, the states a take, a level or a refund leaves, and when a
// row will hold enough. Single-row decisions (limiter.cpp) and sharded
// decisions (shards.cpp) are both built from these and from nothing else.
#include "primitives.h"
#include "row.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ratelimit {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The start of the window containing `now` for windows aligned to `origin`.
Micros WindowStartFor(Micros now, Micros origin, Micros period) {
  return origin + detail::FloorDiv(now - origin, period) * period;
}

// Token bucket: tokens after `elapsed` microseconds of refill from `value`, capped.
double RefillTokens(const LimitConfig& config, double value, Micros elapsed) {
  // elapsed / period first: this only overflows when the refill is far above any capacity.
  double refill = static_cast<double>(elapsed) / static_cast<double>(config.period) * config.rate;
  return std::min(value + refill, Capacity(config));
}

// Fixed window: tokens a window stored as `base` holds `windows` windows later.
double FixedWindowTokens(const LimitConfig& config, const LimitState& base, Micros windows) {
  return std::min(base.value + config.rate * static_cast<double>(windows), Capacity(config));
}

// Sliding window: floor(previous * weight) + current for the sliding window
// ending at `t`, the stored windows shifted forward as time passes.
double SlidingUsed(const LimitConfig& config, const LimitState& base, Micros t) {
  Micros windows = (t - base.ts) / config.period;
  double current = windows == 0 ? base.value : 0;
  double previous = windows == 0 ? base.prev : (windows == 1 ? base.value : 0);
  Micros into = (t - base.ts) - windows * config.period;
  double weight = static_cast<double>(config.period - into) / static_cast<double>(config.period);
  return std::floor(previous * weight) + current;
}

// Fills the window fields of a view: the current window and, for sliding
// windows, the counts shifted into it.
void RollWindows(const LimitConfig& config, detail::View* v) {
  Micros windows = (v->eff - v->base.ts) / config.period;
  v->window_start = v->base.ts + windows * config.period;
  if (config.kind == Kind::kFixedWindow) {
    v->avail = FixedWindowTokens(config, v->base, windows);
    return;
  }
  v->current = windows == 0 ? v->base.value : 0;
  v->previous = windows == 0 ? v->base.prev : (windows == 1 ? v->base.value : 0);
  v->used = SlidingUsed(config, v->base, v->eff);
  v->avail = std::max(0.0, config.rate - v->used);
}

}  // namespace

double Capacity(const LimitConfig& config) noexcept {
  if (config.kind == Kind::kSlidingWindow) return config.rate;
  return config.has_capacity ? config.capacity : config.rate;
}

double MaxDeficit(const LimitConfig& config) noexcept {
  double horizon = static_cast<double>(kHorizonMicros);
  double period = static_cast<double>(config.period);
  double refillable = 0;
  if (config.kind == Kind::kTokenBucket) refillable = horizon / period * config.rate;
  if (config.kind == Kind::kFixedWindow) refillable = config.rate * std::floor(horizon / period);
  double given = config.has_max_reserved ? config.max_reserved : kInfinity;
  return std::min({given, refillable, kMaxMagnitude});
}

LimitState InitialState(const LimitConfig& config, Micros now, Micros origin) noexcept {
  switch (config.kind) {
    case Kind::kTokenBucket:
      return LimitState{true, Capacity(config), now, 0};
    case Kind::kFixedWindow:
      return LimitState{true, Capacity(config), WindowStartFor(now, origin, config.period), 0};
    case Kind::kSlidingWindow:
      break;
  }
  return LimitState{true, 0, WindowStartFor(now, origin, config.period), 0};
}

namespace detail {

View ViewAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept {
  View v;
  v.base = state.exists ? state : InitialState(config, now, origin);
  v.eff = std::max(now, v.base.ts);
  if (config.kind == Kind::kTokenBucket) {
    v.avail = RefillTokens(config, v.base.value, v.eff - v.base.ts);
    v.window_start = v.eff;
    return v;
  }
  RollWindows(config, &v);
  return v;
}

bool CanTake(const LimitConfig& config, const View& view, double count, double deficit) noexcept {
  if (config.kind == Kind::kSlidingWindow) return view.used + count <= config.rate;
  return view.avail - count >= -deficit;
}

bool CanEverTake(const LimitConfig& config, const Request& request) noexcept {
  View full = ViewAt(config, LimitState{}, 0, 0);
  return CanTake(config, full, request.count, request.reserve ? MaxDeficit(config) : 0);
}

LimitState TakeFrom(const LimitConfig& config, const View& view, double take) noexcept {
  switch (config.kind) {
    case Kind::kTokenBucket:
      return LimitState{true, view.avail - take, view.eff, 0};
    case Kind::kFixedWindow:
      return LimitState{true, view.avail - take, view.window_start, 0};
    case Kind::kSlidingWindow:
      break;
  }
  return LimitState{true, view.current + take, view.window_start, view.previous};
}

LimitState LeaveAt(const LimitConfig& config, const View& view, double level) noexcept {
  if (config.kind == Kind::kSlidingWindow) return TakeFrom(config, view, view.avail - level);
  Micros ts = config.kind == Kind::kTokenBucket ? view.eff : view.window_start;
  return LimitState{true, level, ts, 0};
}

LimitState GiveBack(const LimitConfig& config, const View& view, double amount) noexcept {
  if (config.kind == Kind::kSlidingWindow)
    return LimitState{true, std::max(0.0, view.current - amount), view.window_start, view.previous};
  double value = std::max(view.avail, std::min(view.avail + amount, Capacity(config)));
  Micros ts = config.kind == Kind::kTokenBucket ? view.eff : view.window_start;
  return LimitState{true, value, ts, 0};
}

LimitState OutOfDeficitBy(const LimitConfig& config, const LimitState& stored, Micros by,
                          Micros origin) noexcept {
  LimitState raised = stored;
  // The first step adds what is missing at `by`; that sum rounds too, so a
  // few more steps of at least one ulp may follow.
  for (int step = 0; step < 8; ++step) {
    double missing = -ViewAt(config, raised, by, origin).avail;
    if (!(missing > 0)) break;
    raised.value = std::max(raised.value + missing, std::nextafter(raised.value, kInfinity));
  }
  return raised;
}

Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit) noexcept {
  const LimitState& base = view.base;
  if (config.kind == Kind::kTokenBucket) {
    // The refill is linear: the moment it reaches what is needed is the
    // guess (a search of the whole range takes some 54 steps).
    double elapsed = (count - deficit - base.value) / config.rate * static_cast<double>(config.period);
    Micros guess = std::isfinite(elapsed) && elapsed > 0 && elapsed < 1e18
                       ? base.ts + static_cast<Micros>(std::ceil(elapsed))
                       : view.eff;
    return FirstWhereNear(view.eff, SearchLimit(view.eff), guess, [&](Micros t) {
      return RefillTokens(config, base.value, t - base.ts) - count >= -deficit;
    });
  }
  if (config.kind == Kind::kFixedWindow) {
    Micros first = (view.window_start - base.ts) / config.period;
    Micros windows = FirstWhere(first, first + SearchLimit(0) / config.period, [&](Micros w) {
      return FixedWindowTokens(config, base, w) - count >= -deficit;
    });
    return std::max(view.eff, base.ts + windows * config.period);
  }
  Micros slid_out = view.window_start + 2 * config.period;  // both windows are empty by then
  return FirstWhere(view.eff, std::max(view.eff, slid_out),
                    [&](Micros t) { return SlidingUsed(config, base, t) + count <= config.rate; });
}

}  // namespace detail
}  // namespace ratelimit
