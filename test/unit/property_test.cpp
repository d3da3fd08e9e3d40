// Seeded random property tests: random valid configs and random sequences of
// (time step, count, reserve), simulating a caller that stores the state only
// when ok. Every decision is checked against the invariants of the core.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// The largest rate, capacity, maxReserved and count accepted.
constexpr double kLargest = kMaxMagnitude;

enum class Range { kOrdinary, kExtreme };

Micros RandomPeriod(Rng& rng, KindId kind) {
  const Micros most = kind == kSlidingWindow ? kHorizonMicros / 2 : kHorizonMicros;
  const Micros nice[] = {1,     7,    13,        1000,    kSecond,  7 * kSecond,
                         kHour, kDay, 30 * kDay, kMinute, most / 2, most};
  switch (rng() % 3) {
    case 0:
      return std::min(most, nice[rng() % (sizeof nice / sizeof nice[0])]);
    case 1:
      return UniformMicros(rng, 1, 10000);
    default:
      return std::min(most, static_cast<Micros>(LogUniform(rng, 1, static_cast<double>(most))));
  }
}

double RandomRate(Rng& rng, Range range, Micros period) {
  if (range == Range::kExtreme) {
    switch (rng() % 6) {
      case 0:
        return kLargest;
      case 1:
        return std::nextafter(kLargest, 0.0);
      case 2:
        return 1e-300 * static_cast<double>(period);  // the smallest rate accepted
      case 3:
        return LogUniform(rng, 1e250, kLargest);
      default:
        return LogUniform(rng, 1e-300 * static_cast<double>(period), kLargest);
    }
  }
  switch (rng() % 3) {
    case 0:
      return static_cast<double>(1 + rng() % 100);
    case 1:
      return static_cast<double>(1 + rng() % 400) / 4;
    default:
      return LogUniform(rng, 1e-6, 1e9);
  }
}

LimitConfig RandomConfig(Rng& rng, KindId kind, Range range) {
  for (;;) {
    Micros period = RandomPeriod(rng, kind);
    LimitConfig c = Config(kind, RandomRate(rng, range, period), period);
    if (kind != kSlidingWindow) {
      static const double kCapacityFactor[] = {0, 0.5, 1, 2, 3.7, 100};
      if (Chance(rng, 0.6)) {
        c = WithCapacity(
            c, Chance(rng, 0.8) ? c.rate * kCapacityFactor[rng() % 6] : c.rate * Uniform(rng, 0, 5));
      }
      if (Chance(rng, 0.6)) c = WithMaxReserved(c, Chance(rng, 0.3) ? 0 : c.rate * Uniform(rng, 0, 5));
    }
    if (kind != kTokenBucket && Chance(rng, 0.3)) {
      c = WithStart(c, UniformMicros(rng, -Micros{100000000000000000}, Micros{100000000000000000}));
    }
    if (range == Range::kExtreme) {
      // Keep extreme configs at the largest magnitudes accepted rather than
      // losing them to validation: clamp, and often use the bound itself.
      if (c.has_capacity) c.capacity = Chance(rng, 0.3) ? kLargest : std::min(c.capacity, kLargest);
      if (c.has_max_reserved)
        c.max_reserved = Chance(rng, 0.3) ? kLargest : std::min(c.max_reserved, kLargest);
    }
    if (ValidateConfig(c).ok()) return c;
  }
}

Request RandomRequest(Rng& rng, const LimitConfig& c, bool allow_reserve) {
  Request r;
  r.reserve = allow_reserve && c.kind != kSlidingWindow && Chance(rng, 0.3);
  const double capacity = Capacity(c);
  double most = capacity;
  if (r.reserve) most += std::min(MaxDeficit(c), 2 * std::max(capacity, c.rate));
  most = std::min(most, kLargest);
  const int pick = static_cast<int>(rng() % 100);
  if (pick < 10) {
    r.count = 0;
  } else if (pick < 30) {
    r.count = std::min(1.0, most);
  } else if (pick < 42) {
    r.count = capacity;
  } else if (pick < 55) {
    r.count = most;
  } else if (pick < 70) {
    r.count = Uniform(rng, 0, 0.1) * most;
  } else if (pick < 82) {
    r.count = std::floor(Uniform(rng, 0, 1) * most);
  } else {
    r.count = Uniform(rng, 0, 1) * most;
  }
  return r;
}

// The next clock reading: mostly forwards, sometimes exactly at the last
// retry_at, sometimes backwards.
Micros NextNow(Rng& rng, Micros now, Micros period, const Decision& last) {
  const Micros longest = 2 * kHorizonMicros;
  const int pick = static_cast<int>(rng() % 100);
  Micros next = now;
  if (pick < 20) {
    next = now;
  } else if (pick < 32) {
    next = now + 1;
  } else if (pick < 50) {
    next = now + UniformMicros(rng, 0, std::max<Micros>(1, period / 10));
  } else if (pick < 65) {
    next = now + UniformMicros(rng, 0, std::min(2 * period, longest));
  } else if (pick < 70) {
    next = now + UniformMicros(rng, 0, std::min(10 * period, longest));
  } else if (pick < 88 && last.has_retry) {
    next = last.retry_at - (Chance(rng, 0.2) ? 1 : 0);
  } else {
    next = now - UniformMicros(rng, 0, std::min(period, kHorizonMicros));
  }
  const Micros bound = Micros{2000000000000000000};
  return std::min(bound, std::max(-bound, next));
}

// Tokens at `now` computed from the documented formulas in long double, where
// nothing overflows for any double inputs.
long double ReferenceValue(const LimitConfig& c, const LimitState& s, Micros now) {
  const long double capacity = Capacity(c);
  if (!s.exists) return capacity;
  const Micros eff = std::max(now, s.ts);
  if (c.kind == kTokenBucket) {
    long double refill = static_cast<long double>(eff - s.ts) * c.rate / static_cast<long double>(c.period);
    return std::min(static_cast<long double>(s.value) + refill, capacity);
  }
  const Micros windows = (eff - s.ts) / c.period;
  return std::min(static_cast<long double>(s.value) + static_cast<long double>(c.rate) * windows, capacity);
}

struct Step {
  const LimitConfig* config;
  Micros origin;
  const LimitState* state;
  Micros now;
  Request request;
  const Decision* decision;
  std::uint64_t seed;
  int scenario;
  int index;
};

std::string Describe(const Step& s) {
  std::ostringstream out;
  out.precision(17);
  const LimitConfig& c = *s.config;
  const Decision& d = *s.decision;
  out << "  seed " << s.seed << " scenario " << s.scenario << " step " << s.index << "\n  config {kind "
      << KindName(c.kind) << ", rate " << c.rate << ", period " << c.period;
  if (c.has_capacity) out << ", capacity " << c.capacity;
  if (c.has_max_reserved) out << ", maxReserved " << c.max_reserved;
  if (c.has_start) out << ", start " << c.start;
  out << "} origin " << s.origin << "\n  state ";
  if (s.state->exists) {
    out << "{value " << s.state->value << ", ts " << s.state->ts << ", prev " << s.state->prev << "}";
  } else {
    out << "missing";
  }
  out << "\n  now " << s.now << " count " << s.request.count << (s.request.reserve ? " reserve" : "")
      << "\n  decision {ok " << d.ok << ", remaining " << d.remaining << ", has_retry " << d.has_retry
      << ", retry_at " << d.retry_at << ", retry_after " << d.retry_after << ", reset_after " << d.reset_after
      << ", next {value " << d.next.value << ", ts " << d.next.ts << ", prev " << d.next.prev << "}}";
  return out.str();
}

// Counts violations per property; prints the first few with a reproduction.
class Checker {
 public:
  void Expect(bool holds, const char* property, const Step& step) {
    if (holds) return;
    scenario_failed_ = true;
    if (++failures_[property] <= 3) {
      ADD_FAILURE() << "property violated: " << property << "\n" << Describe(step);
    }
  }
  bool TakeScenarioFailed() {
    bool failed = scenario_failed_;
    scenario_failed_ = false;
    return failed;
  }
  std::string Summary() const {
    std::ostringstream out;
    for (const auto& [property, count] : failures_) out << "  " << count << " x " << property << "\n";
    return out.str();
  }
  bool clean() const { return failures_.empty(); }

 private:
  std::map<std::string, long> failures_;
  bool scenario_failed_ = false;
};

bool IsAligned(Micros ts, Micros origin, Micros period) {
  Micros r = (ts - origin) % period;
  return r == 0;
}

void CheckDecision(const Step& step, Checker& check) {
  const LimitConfig& c = *step.config;
  const LimitState& s = *step.state;
  const Decision& d = *step.decision;
  const Request& r = step.request;
  const Micros now = step.now;
  const Micros origin = step.origin;
  const bool window = c.kind != kTokenBucket;
  const bool sliding = c.kind == kSlidingWindow;
  const double capacity = Capacity(c);

  check.Expect(std::isfinite(d.remaining) && std::isfinite(d.retry_after) && std::isfinite(d.reset_after),
               "no NaN/inf in remaining, retry_after, reset_after", step);
  check.Expect(d.reset_after >= 0, "reset_after >= 0", step);
  check.Expect(!d.has_retry || (d.retry_after > 0 && d.retry_at > now),
               r.reserve ? "reserve: has_retry => retry_after > 0" : "has_retry => retry_after > 0", step);
  check.Expect(d.ok || d.has_retry, "refused => has_retry", step);
  check.Expect(!d.ok || r.reserve || !d.has_retry, "ok without reserve => no retry", step);

  // What the caller would hold after this call.
  const LimitState& kept = d.ok ? d.next : s;
  if (d.ok) {
    check.Expect(d.next.exists, "ok => next.exists", step);
    check.Expect(std::isfinite(d.next.value) && std::isfinite(d.next.prev), "stored value finite", step);
    check.Expect(d.next.value <= capacity, "stored value never above capacity", step);
    if (!sliding) check.Expect(d.next.value >= -MaxDeficit(c), "stored deficit <= MaxDeficit", step);
    check.Expect(!s.exists || d.next.ts >= s.ts, "stored ts never decreases", step);
    check.Expect(d.next.ts <= std::max(now, s.exists ? s.ts : now), "stored ts not after effective now",
                 step);
    if (window) check.Expect(IsAligned(d.next.ts, origin, c.period), "window ts aligned to origin", step);
    if (sliding) {
      check.Expect(d.next.prev <= c.rate && d.next.prev >= 0, "sliding prev within [0, rate]", step);
    }
  }

  // Refused: nothing consumed, remaining is what is available now.
  // Ok: what is left is what the stored state reports now.
  Reading before = ValueAt(c, s, now, origin);
  check.Expect(std::isfinite(before.value), "ValueAt finite", step);
  if (!sliding) {
    long double ref = ReferenceValue(c, s, now);
    long double scale = std::max({std::fabs(static_cast<long double>(s.value)),
                                  static_cast<long double>(capacity), static_cast<long double>(1e-300)});
    check.Expect(std::fabs(static_cast<long double>(before.value) - ref) <= 1e-12L * scale,
                 "ValueAt matches the formula (long double reference)", step);
  }
  if (!d.ok) {
    check.Expect(d.remaining == before.value, "refused: remaining == ValueAt(state, now)", step);
  } else if (!sliding) {
    check.Expect(ValueAt(c, d.next, now, origin).value == d.remaining, "ok: remaining == ValueAt(next, now)",
                 step);
  } else {
    double after = ValueAt(c, d.next, now, origin).value;
    check.Expect(std::fabs(after - std::max(0.0, d.remaining)) <= 1e-12 * c.rate,
                 "ok: remaining ~= ValueAt(next, now)", step);
  }

  // Retrying at retry_at with the state unchanged succeeds; one µs earlier it
  // does not. Reported apart for reservations (retry_at from count - MaxDeficit).
  if (!d.ok && d.has_retry) {
    check.Expect(Decide(c, s, d.retry_at, origin, r).ok,
                 r.reserve ? "reserve: retry at retry_at succeeds" : "retry at retry_at succeeds", step);
    if (d.retry_at - 1 >= now) {
      check.Expect(
          !Decide(c, s, d.retry_at - 1, origin, r).ok,
          r.reserve ? "reserve: retry at retry_at - 1 is refused" : "retry at retry_at - 1 is refused", step);
    }
  }
  if (d.ok && d.has_retry) {
    check.Expect(ValueAt(c, d.next, d.retry_at, origin).value >= 0, "reserved: out of deficit at retry_at",
                 step);
    check.Expect(ValueAt(c, d.next, d.retry_at - 1, origin).value < 0, "reserved: in deficit at retry_at - 1",
                 step);
  }

  // reset_after points at the first µs at which the limit is full again.
  if (d.reset_after * 1e6 < 1e15) {
    const Micros full_at = now + std::llround(d.reset_after * 1e6);
    check.Expect(ValueAt(c, kept, full_at, origin).value >= capacity, "full at now + reset_after", step);
    if (kept.exists && d.reset_after > 0 && full_at - 1 >= std::max(now, kept.ts)) {
      check.Expect(ValueAt(c, kept, full_at - 1, origin).value < capacity, "not full 1 µs before reset",
                   step);
    }
  }
}

// Runs random scenarios of one kind until `decisions` Decide calls were made.
void RunProperties(KindId kind, Range range, bool allow_reserve, std::uint64_t seed, long decisions) {
  Rng rng(seed);
  Checker check;
  long made = 0;
  long huge = 0;  // decisions on a limit with capacity or rate near the largest accepted
  int scenario = 0;
  while (made < decisions) {
    ++scenario;
    const LimitConfig c = RandomConfig(rng, kind, range);
    const bool is_huge = std::max(Capacity(c), c.rate) >= 1e299;
    const std::string key = std::to_string(rng() % 1000);
    const bool global = Chance(rng, 0.3);
    const Micros origin = WindowOrigin(c, "prop", 4, global ? nullptr : key.data(), key.size());
    ASSERT_GE(origin, 0);
    ASSERT_LT(origin, c.period);
    Micros now = UniformMicros(rng, -Micros{315576000000000}, Micros{2000000000000000});
    LimitState state;
    Micros stored_ts = std::numeric_limits<Micros>::min();
    Decision last;
    const int steps = 50 + static_cast<int>(rng() % 200);
    for (int i = 0; i < steps && made < decisions; ++i) {
      now = NextNow(rng, now, c.period, last);
      Request r = RandomRequest(rng, c, allow_reserve);
      if (!ValidateRequest(c, r).ok()) continue;
      const Decision d = Decide(c, state, now, origin, r);
      ++made;
      if (is_huge) ++huge;
      Step step{&c, origin, &state, now, r, &d, seed, scenario, i};
      CheckDecision(step, check);
      if (d.ok) {
        check.Expect(d.next.ts >= stored_ts, "stored ts never decreases over a run", step);
        stored_ts = d.next.ts;
        state = d.next;  // a refused call stores nothing
      }
      last = d;
      if (check.TakeScenarioFailed()) break;  // the state may be garbage now
    }
  }
  EXPECT_TRUE(check.clean()) << "violations in " << scenario << " scenarios:\n" << check.Summary();
  // The extreme runs must really exercise the largest magnitudes.
  if (range == Range::kExtreme) {
    EXPECT_GT(huge, decisions / 5);
  }
}

// Validation, decisions and retry searches share one test (detail::CanTake):
// a request ValidateRequest accepts is granted on a full limit, and one it
// rejects as "can never succeed" is refused there, for counts at the edge.
void CheckValidationAgreesWithAFullLimit(KindId kind, Range range, std::uint64_t seed, int configs) {
  Rng rng(seed);
  long accepted = 0;
  long rejected = 0;
  for (int i = 0; i < configs; ++i) {
    const LimitConfig c = RandomConfig(rng, kind, range);
    const Micros now = UniformMicros(rng, -Micros{315576000000000}, Micros{2000000000000000});
    const Micros origin = UniformMicros(rng, 0, c.period - 1);
    for (bool reserve : {false, true}) {
      if (reserve && kind == kSlidingWindow) continue;
      const double most = std::min(MostGrantable(c, reserve), kLargest);
      double edge[] = {most,
                       std::nextafter(most, 0.0),
                       std::nextafter(most, kLargest),
                       most * (1 + 1e-15),
                       most * (1 - 1e-15),
                       Capacity(c) + Uniform(rng, 0, 1) * MaxDeficit(c)};
      for (double count : edge) {
        if (count < 0 || count > kLargest) continue;
        Request r{count, reserve};
        bool valid = ValidateRequest(c, r).ok();
        Decision d = Decide(c, LimitState{}, now, origin, r);
        (valid ? accepted : rejected)++;
        EXPECT_EQ(valid, d.ok) << KindName(kind) << " rate " << c.rate << " period " << c.period
                               << " capacity " << Capacity(c) << " maxReserved " << MaxDeficit(c) << " count "
                               << count << (reserve ? " reserve" : "");
      }
    }
  }
  EXPECT_GT(accepted, configs);  // both sides of the edge were tried
  EXPECT_GT(rejected, configs / 2);
}

TEST(Property, ValidationAgreesWithAFullLimit) {
  CheckValidationAgreesWithAFullLimit(kTokenBucket, Range::kOrdinary, 0x5eed0041, 3000);
  CheckValidationAgreesWithAFullLimit(kFixedWindow, Range::kOrdinary, 0x5eed0042, 3000);
  CheckValidationAgreesWithAFullLimit(kSlidingWindow, Range::kOrdinary, 0x5eed0043, 3000);
  CheckValidationAgreesWithAFullLimit(kTokenBucket, Range::kExtreme, 0x5eed0044, 3000);
  CheckValidationAgreesWithAFullLimit(kFixedWindow, Range::kExtreme, 0x5eed0045, 3000);
}

// Ordinary magnitudes, with reservations: together 1,020,000 Decide calls.
constexpr long kOrdinaryDecisions = 340000;

TEST(Property, TokenBucket) {
  RunProperties(kTokenBucket, Range::kOrdinary, true, 0x5eed0001, kOrdinaryDecisions);
}
TEST(Property, FixedWindow) {
  RunProperties(kFixedWindow, Range::kOrdinary, true, 0x5eed0002, kOrdinaryDecisions);
}
TEST(Property, SlidingWindow) {
  RunProperties(kSlidingWindow, Range::kOrdinary, true, 0x5eed0003, kOrdinaryDecisions);
}

// The same without reservations, so a reservation bug does not hide the rest.
constexpr long kNoReserveDecisions = 200000;

TEST(Property, TokenBucketWithoutReserve) {
  RunProperties(kTokenBucket, Range::kOrdinary, false, 0x5eed0021, kNoReserveDecisions);
}
TEST(Property, FixedWindowWithoutReserve) {
  RunProperties(kFixedWindow, Range::kOrdinary, false, 0x5eed0022, kNoReserveDecisions);
}

// Rates, capacities and maxReserved up to the largest accepted (1e300) and
// rates down to the smallest accepted.
constexpr long kExtremeDecisions = 100000;

TEST(Property, TokenBucketExtremeMagnitudes) {
  RunProperties(kTokenBucket, Range::kExtreme, true, 0x5eed0011, kExtremeDecisions);
}
TEST(Property, FixedWindowExtremeMagnitudes) {
  RunProperties(kFixedWindow, Range::kExtreme, true, 0x5eed0012, kExtremeDecisions);
}
TEST(Property, SlidingWindowExtremeMagnitudes) {
  RunProperties(kSlidingWindow, Range::kExtreme, true, 0x5eed0013, kExtremeDecisions);
}
TEST(Property, TokenBucketExtremeMagnitudesWithoutReserve) {
  RunProperties(kTokenBucket, Range::kExtreme, false, 0x5eed0031, kExtremeDecisions);
}
TEST(Property, FixedWindowExtremeMagnitudesWithoutReserve) {
  RunProperties(kFixedWindow, Range::kExtreme, false, 0x5eed0032, kExtremeDecisions);
}

}  // namespace
}  // namespace ratelimit
