// The fixed window: time is cut into windows of one period aligned to the
// limit's origin; each new window adds rate tokens, up to the capacity.
// Its rows are tagged by the constant kFixedWindowTag in prev.
#include <algorithm>
#include <cmath>

#include "kinds/kind.h"
#include "primitives.h"

namespace ratelimit {
namespace {

using detail::FirstWhere;
using detail::SearchLimit;
using detail::View;
using detail::WindowStartFor;

// The prev a fixed window's row is written with (never a count: negative).
constexpr double kFixedWindowTag = -1;

// The most the window holds: capacity when given, else rate.
double WindowSize(const LimitConfig& config) { return config.has_capacity ? config.capacity : config.rate; }

// Tokens a window stored as `base` holds `windows` windows later.
double FixedWindowTokens(const LimitConfig& config, const LimitState& base, Micros windows) {
  return std::min(base.value + config.rate * static_cast<double>(windows), WindowSize(config));
}

// Empty to full: whole windows of rate each.
double RefillMicros(const LimitConfig& config) {
  return std::ceil(WindowSize(config) / config.rate) * static_cast<double>(config.period);
}

// A deficit refills by whole windows: rate per window the horizon holds.
double Refillable(const LimitConfig& config) {
  return config.rate * std::floor(static_cast<double>(kHorizonMicros) / static_cast<double>(config.period));
}

// Full, in the window containing now.
LimitState Initial(const LimitConfig& config, Micros now, Micros origin) {
  return LimitState{true, WindowSize(config), WindowStartFor(now, origin, config.period), 0};
}

// The stored window's tokens plus rate per window since, capped.
View ViewOf(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) {
  View v = detail::ViewBase(state, now, [&] { return Initial(config, now, origin); });
  Micros windows = (v.eff - v.base.ts) / config.period;
  v.window_start = v.base.ts + windows * config.period;
  v.avail = FixedWindowTokens(config, v.base, windows);
  return v;
}

// What is left may go down to -deficit.
bool CanTake(const LimitConfig&, const View& view, double count, double deficit) {
  return view.avail - count >= -deficit;
}

// The tokens left, in the current window.
LimitState Take(const LimitConfig&, const View& view, double take) {
  return LimitState{true, view.avail - take, view.window_start, 0};
}

// Exactly `level` tokens, in the current window.
LimitState LeaveAt(const LimitConfig&, const View& view, double level) {
  return LimitState{true, level, view.window_start, 0};
}

// Up to capacity, never below what is there now.
LimitState GiveBack(const LimitConfig& config, const View& view, double amount) {
  double value = std::max(view.avail, std::min(view.avail + amount, WindowSize(config)));
  return LimitState{true, value, view.window_start, 0};
}

// Up to capacity.
double RefundRoom(const LimitConfig& config, const View& view) { return WindowSize(config) - view.avail; }

// The start of the first window holding count - deficit (never before the effective now).
Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit) {
  const LimitState& base = view.base;
  Micros first = (view.window_start - base.ts) / config.period;
  Micros windows = FirstWhere(first, first + SearchLimit(0) / config.period, [&](Micros w) {
    return FixedWindowTokens(config, base, w) - count >= -deficit;
  });
  return std::max(view.eff, base.ts + windows * config.period);
}

// `tokens` in the window containing eff.
LimitState Holding(const LimitConfig& config, Micros origin, Micros eff, double tokens) {
  LimitState state = Initial(config, eff, origin);
  state.value = tokens;
  return state;
}

}  // namespace

// The fixed window's table (kinds/kind.h's fields in order; registry.cpp lists it).
extern const KindOps kFixedWindowKind;
const KindOps kFixedWindowKind = {
    "fixed window",                         // name
    {TagForm::kConstant, kFixedWindowTag},  // tag
    true,                                   // reads_untagged_rows: written before 0.5.0 tagged kinds
    true,                                   // windowed
    true,                                   // takes_capacity
    true,                                   // can_reserve
    nullptr,                                // no_capacity_detail
    nullptr,                                // no_reserve_detail
    RefillMicros,                           // refill_micros
    Refillable,                             // refillable
    Initial,                                // initial
    ViewOf,                                 // view_at
    CanTake,                                // can_take
    Take,                                   // take
    LeaveAt,                                // leave_at
    GiveBack,                               // give_back
    RefundRoom,                             // refund_room
    WhenAvailable,                          // when_available
    Holding,                                // holding
};

}  // namespace ratelimit
