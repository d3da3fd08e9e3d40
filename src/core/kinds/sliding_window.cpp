// The sliding window (approximation): a call may take while
// floor(previous * weight) + current + count <= rate, where current and
// previous count what was taken in this window and the one before, and
// weight is the share of the previous window the sliding one still covers.
// It counts up, so it neither reserves nor takes a capacity. Its rows keep
// the previous window's count in prev (never negative: any value no other
// tag claims is its).
#include <algorithm>
#include <cmath>

#include "kinds/kind.h"
#include "primitives.h"

namespace ratelimit {
namespace {

using detail::FirstWhere;
using detail::View;
using detail::WindowStartFor;

// floor(previous * weight) + current for the sliding window ending at `t`,
// the stored windows shifted forward as time passes.
double SlidingUsed(const LimitConfig& config, const LimitState& base, Micros t) {
  Micros windows = (t - base.ts) / config.period;
  double current = windows == 0 ? base.value : 0;
  double previous = windows == 0 ? base.prev : (windows == 1 ? base.value : 0);
  Micros into = (t - base.ts) - windows * config.period;
  double weight = static_cast<double>(config.period - into) / static_cast<double>(config.period);
  return std::floor(previous * weight) + current;
}

// Both windows empty: two periods.
double RefillMicros(const LimitConfig& config) { return 2 * static_cast<double>(config.period); }

// It cannot reserve: no deficit.
double Refillable(const LimitConfig&) { return 0; }

// Nothing counted, in the window containing now.
LimitState Initial(const LimitConfig& config, Micros now, Micros origin) {
  return LimitState{true, 0, WindowStartFor(now, origin, config.period), 0};
}

// The counts shifted into the current window, and what they use now.
View ViewOf(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) {
  View v = detail::ViewBase(state, now, [&] { return Initial(config, now, origin); });
  Micros windows = (v.eff - v.base.ts) / config.period;
  v.window_start = v.base.ts + windows * config.period;
  v.current = windows == 0 ? v.base.value : 0;
  v.previous = windows == 0 ? v.base.prev : (windows == 1 ? v.base.value : 0);
  v.used = SlidingUsed(config, v.base, v.eff);
  v.avail = std::max(0.0, config.rate - v.used);
  return v;
}

// No deficit: the test is floor(previous * weight) + current + count <= rate.
bool CanTake(const LimitConfig& config, const View& view, double count, double) {
  return view.used + count <= config.rate;
}

// The current window counts `take` more.
LimitState Take(const LimitConfig&, const View& view, double take) {
  return LimitState{true, view.current + take, view.window_start, view.previous};
}

// Counted so that exactly `level` tokens remain.
LimitState LeaveAt(const LimitConfig& config, const View& view, double level) {
  return Take(config, view, view.avail - level);
}

// The current window counts less, never below zero.
LimitState GiveBack(const LimitConfig&, const View& view, double amount) {
  return LimitState{true, std::max(0.0, view.current - amount), view.window_start, view.previous};
}

// Only as much as the current window counted.
double RefundRoom(const LimitConfig&, const View& view) { return view.current; }

// The first microsecond the sliding window has room for count.
Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double) {
  Micros slid_out = view.window_start + 2 * config.period;  // both windows are empty by then
  return FirstWhere(view.eff, std::max(view.eff, slid_out),
                    [&](Micros t) { return SlidingUsed(config, view.base, t) + count <= config.rate; });
}

// Counted so that `tokens` remain, the previous window empty.
LimitState Holding(const LimitConfig& config, Micros origin, Micros eff, double tokens) {
  LimitState state = Initial(config, eff, origin);
  state.value = std::max(0.0, config.rate - tokens);
  state.prev = 0;
  return state;
}

}  // namespace

// The sliding window's table (kinds/kind.h's fields in order; registry.cpp lists it).
extern const KindOps kSlidingWindowKind;
const KindOps kSlidingWindowKind = {
    "sliding window",                                   // name
    {TagForm::kData, 0},                                // tag: prev is the previous window's count
    false,                                              // reads_untagged_rows: tagged from its start
    true,                                               // windowed
    false,                                              // takes_capacity
    false,                                              // can_reserve
    "A sliding window holds at most rate per period.",  // no_capacity_detail
    "A sliding window cannot reserve.",                 // no_reserve_detail
    RefillMicros,                                       // refill_micros
    Refillable,                                         // refillable
    Initial,                                            // initial
    ViewOf,                                             // view_at
    CanTake,                                            // can_take
    Take,                                               // take
    LeaveAt,                                            // leave_at
    GiveBack,                                           // give_back
    RefundRoom,                                         // refund_room
    WhenAvailable,                                      // when_available
    Holding,                                            // holding
};

}  // namespace ratelimit
