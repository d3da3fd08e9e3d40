// FirstWhereNear (the token bucket's guessed search) gives exactly what the
// whole range's FirstWhere gives, for monotone predicates of the kind the
// token bucket uses, whatever the guess: right, off by a little or a lot,
// outside the range.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "primitives.h"

namespace ratelimit::detail {
namespace {

TEST(SearchTest, GuessedSearchEqualsWholeSearch) {
  std::mt19937_64 rng(20261126);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 200000; ++i) {
    double rate = std::pow(10.0, unit(rng) * 12 - 6);
    Micros period = 1 + static_cast<Micros>(std::pow(10.0, unit(rng) * 12));
    double capacity = rate * (0.5 + unit(rng) * 3);
    double value = capacity * (unit(rng) * 2 - 1);
    // Sometimes more than capacity (never true); sometimes a token or two
    // above value (an answer microseconds away).
    double need = i % 3 == 0 ? value + rate / static_cast<double>(period) * (1 + unit(rng) * 3)
                             : capacity * unit(rng) * 1.2;
    Micros ts = static_cast<Micros>(unit(rng) * 1e15);
    // lo: now, from just after the stored ts (an answer a microsecond or two
    // away) to a second later.
    Micros lo = ts + (i % 2 == 0 ? static_cast<Micros>(unit(rng) * 3) : static_cast<Micros>(unit(rng) * 1e6));
    Micros hi = SearchLimit(lo);
    auto pred = [&](Micros t) {
      double refill = static_cast<double>(t - ts) / static_cast<double>(period) * rate;
      return std::min(value + refill, capacity) >= need;
    };
    double elapsed = (need - value) / rate * static_cast<double>(period);
    Micros exact = std::isfinite(elapsed) && elapsed > 0 && elapsed < 1e18
                       ? ts + static_cast<Micros>(std::ceil(elapsed))
                       : lo;
    Micros off = static_cast<Micros>(unit(rng) * 10) - 5;
    Micros wild = static_cast<Micros>(unit(rng) * 4e18) - 2e18;
    Micros whole = FirstWhere(lo, hi, pred);
    ASSERT_EQ(FirstWhereNear(lo, hi, exact, pred), whole) << i;
    ASSERT_EQ(FirstWhereNear(lo, hi, exact + off, pred), whole) << i;
    ASSERT_EQ(FirstWhereNear(lo, hi, wild, pred), whole) << i;
  }
}

}  // namespace
}  // namespace ratelimit::detail
