// The token bucket: tokens refill continuously at rate per period up to
// the capacity, and a call takes them. Its rows are tagged by a NULL prev
// (it keeps nothing there), at no cost in storage.
#include <algorithm>
#include <cmath>

#include "kinds/kind.h"
#include "primitives.h"

namespace ratelimit {
namespace {

using detail::FirstWhereNear;
using detail::SearchLimit;
using detail::View;

// The bucket size: capacity when given, else rate.
double BucketSize(const LimitConfig& config) { return config.has_capacity ? config.capacity : config.rate; }

// Tokens after `elapsed` microseconds of refill from `value`, capped.
double RefillTokens(const LimitConfig& config, double value, Micros elapsed) {
  // elapsed / period first: this only overflows when the refill is far above any capacity.
  double refill = static_cast<double>(elapsed) / static_cast<double>(config.period) * config.rate;
  return std::min(value + refill, BucketSize(config));
}

// Empty to full: capacity / rate periods.
double RefillMicros(const LimitConfig& config) {
  return BucketSize(config) / config.rate * static_cast<double>(config.period);
}

// A deficit refills continuously: rate per period over the whole horizon.
double Refillable(const LimitConfig& config) {
  return static_cast<double>(kHorizonMicros) / static_cast<double>(config.period) * config.rate;
}

// Full, at now.
LimitState Initial(const LimitConfig& config, Micros now, Micros) {
  return LimitState{true, BucketSize(config), now, 0};
}

// Refilled from the stored value up to now; the "window" is now itself.
View ViewOf(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) {
  View v = detail::ViewBase(state, now, [&] { return Initial(config, now, origin); });
  v.avail = RefillTokens(config, v.base.value, v.eff - v.base.ts);
  v.window_start = v.eff;
  return v;
}

// What is left may go down to -deficit.
bool CanTake(const LimitConfig&, const View& view, double count, double deficit) {
  return view.avail - count >= -deficit;
}

// The tokens left, at the effective now.
LimitState Take(const LimitConfig&, const View& view, double take) {
  return LimitState{true, view.avail - take, view.eff, 0};
}

// Exactly `level` tokens, at the effective now.
LimitState LeaveAt(const LimitConfig&, const View& view, double level) {
  return LimitState{true, level, view.eff, 0};
}

// Up to capacity, never below what is there now.
LimitState GiveBack(const LimitConfig& config, const View& view, double amount) {
  double value = std::max(view.avail, std::min(view.avail + amount, BucketSize(config)));
  return LimitState{true, value, view.eff, 0};
}

// Up to capacity.
double RefundRoom(const LimitConfig& config, const View& view) { return BucketSize(config) - view.avail; }

// The first microsecond the refill reaches count - deficit.
Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit) {
  const LimitState& base = view.base;
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

// `tokens` at eff.
LimitState Holding(const LimitConfig& config, Micros origin, Micros eff, double tokens) {
  LimitState state = Initial(config, eff, origin);
  state.value = tokens;
  return state;
}

}  // namespace

// The token bucket's table (kinds/kind.h's fields in order; registry.cpp lists it).
extern const KindOps kTokenBucketKind;
const KindOps kTokenBucketKind = {
    "token bucket",       // name
    {TagForm::kNull, 0},  // tag: its rows' prev is NULL
    true,                 // reads_untagged_rows: written before 0.5.0 tagged kinds
    false,                // windowed
    true,                 // takes_capacity
    true,                 // can_reserve
    nullptr,              // no_capacity_detail
    nullptr,              // no_reserve_detail
    RefillMicros,         // refill_micros
    Refillable,           // refillable
    Initial,              // initial
    ViewOf,               // view_at
    CanTake,              // can_take
    Take,                 // take
    LeaveAt,              // leave_at
    GiveBack,             // give_back
    RefundRoom,           // refund_room
    WhenAvailable,        // when_available
    Holding,              // holding
};

}  // namespace ratelimit
