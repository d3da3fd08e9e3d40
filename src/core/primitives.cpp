// The per-row helpers no kind needs to know of: a row's size, its deepest
// deficit and first state (row.h), from its kind's flags and operations,
// and the reservation rounding and full-limit test every kind shares.
// Single-row decisions (limiter.cpp) and sharded decisions (shards.cpp)
// are built from these and the kinds' operations (primitives.h).
#include "primitives.h"
#include "row.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ratelimit {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

double Capacity(const LimitConfig& config) noexcept {
  return KindOf(config.kind).takes_capacity && config.has_capacity ? config.capacity : config.rate;
}

double MaxDeficit(const LimitConfig& config) noexcept {
  double given = config.has_max_reserved ? config.max_reserved : kInfinity;
  return std::min({given, KindOf(config.kind).refillable(config), kMaxMagnitude});
}

LimitState InitialState(const LimitConfig& config, Micros now, Micros origin) noexcept {
  return KindOf(config.kind).initial(config, now, origin);
}

namespace detail {

bool CanEverTake(const LimitConfig& config, const Request& request) noexcept {
  View full = ViewAt(config, LimitState{}, 0, 0);
  return CanTake(config, full, request.count, request.reserve ? MaxDeficit(config) : 0);
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

}  // namespace detail
}  // namespace ratelimit
