// A toy kind, "counter", written as a kind of src/core/kinds is: its file
// gives one table of operations, and registering the table is all it
// takes (counter_kind_test.cpp registers it). A counter counts the tokens
// taken in the current window of one period and grants while the count
// stays at most rate; every window starts from zero. It takes no capacity
// and cannot reserve, and its rows are tagged by the constant -3 in prev.
#include <algorithm>

#include "kinds/kind.h"
#include "primitives.h"

namespace ratelimit {
namespace testing_support {
namespace {

using detail::View;
using detail::WindowStartFor;

constexpr double kCounterTag = -3;

// Rate per period: the count of one window, never more.
double RefillMicros(const LimitConfig& config) { return static_cast<double>(config.period); }

// It cannot reserve: nothing to go into deficit against.
double Refillable(const LimitConfig&) { return 0; }

// Nothing counted yet, in the window containing now.
LimitState Initial(const LimitConfig& config, Micros now, Micros origin) {
  return LimitState{true, 0, WindowStartFor(now, origin, config.period), 0};
}

// The count stands within its window; a later window counts from zero.
View ViewOf(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) {
  View v = detail::ViewBase(state, now, [&] { return Initial(config, now, origin); });
  Micros windows = (v.eff - v.base.ts) / config.period;
  v.window_start = v.base.ts + windows * config.period;
  v.used = windows == 0 ? v.base.value : 0;
  v.avail = std::max(0.0, config.rate - v.used);
  return v;
}

// No deficit: the count plus this one stays at most rate.
bool HasRoom(const LimitConfig& config, const View& view, double count, double) {
  return view.used + count <= config.rate;
}

// The count goes up by what is taken.
LimitState Take(const LimitConfig&, const View& view, double take) {
  return LimitState{true, view.used + take, view.window_start, 0};
}

// Counted so that `level` tokens remain.
LimitState LeaveAt(const LimitConfig& config, const View& view, double level) {
  return LimitState{true, config.rate - level, view.window_start, 0};
}

// The count goes down, never below zero.
LimitState GiveBack(const LimitConfig&, const View& view, double amount) {
  return LimitState{true, std::max(0.0, view.used - amount), view.window_start, 0};
}

// Only what this window counted can come back.
double RefundRoom(const LimitConfig&, const View& view) { return view.used; }

// Now if it fits, else when the next window starts (a count above rate never fits).
Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit) {
  if (HasRoom(config, view, count, deficit)) return view.eff;
  if (count > config.rate) return detail::SearchLimit(view.eff);
  return view.window_start + config.period;
}

// Counted so that `tokens` remain, in the window containing eff.
LimitState Holding(const LimitConfig& config, Micros origin, Micros eff, double tokens) {
  LimitState state = Initial(config, eff, origin);
  state.value = std::max(0.0, config.rate - tokens);
  return state;
}

}  // namespace

extern const KindOps kCounterKind;
const KindOps kCounterKind = {
    "counter",                                    // name
    {TagForm::kConstant, kCounterTag},            // tag
    false,                                        // reads_untagged_rows
    true,                                         // windowed
    false,                                        // takes_capacity
    false,                                        // can_reserve
    "A counter counts at most rate per window.",  // no_capacity_detail
    "A counter cannot reserve.",                  // no_reserve_detail
    RefillMicros,                                 // refill_micros
    Refillable,                                   // refillable
    Initial,                                      // initial
    ViewOf,                                       // view_at
    HasRoom,                                      // can_take
    Take,                                         // take
    LeaveAt,                                      // leave_at
    GiveBack,                                     // give_back
    RefundRoom,                                   // refund_room
    WhenAvailable,                                // when_available
    Holding,                                      // holding
};

}  // namespace testing_support
}  // namespace ratelimit
