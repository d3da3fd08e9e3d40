// Sliding window (approximation): weighting of the previous window, rollover,
// clock skew, extreme rates and exact retry times.
#include <gtest/gtest.h>

#include <cmath>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

LimitConfig TenPerMinute() { return SlidingWindow(10, kMinute); }

TEST(SlidingWindow, MissingStateStartsEmpty) {
  LimitConfig c = TenPerMinute();
  Decision d = DecideAt(c, Missing(), kW0 + 15 * kSecond, Take(1));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 9);
  EXPECT_TRUE(d.next.exists);
  EXPECT_DOUBLE_EQ(d.next.value, 1);
  EXPECT_EQ(d.next.ts, kW0);
  EXPECT_EQ(d.next.prev, 0.0);
  EXPECT_FALSE(d.has_retry);
  // The 1 counts fully until the next window opens, then floor(1 * weight) = 0.
  EXPECT_DOUBLE_EQ(d.reset_after, 45.000001);

  Reading r = ValueAt(c, Missing(), kW0 + 15 * kSecond, 0);
  EXPECT_DOUBLE_EQ(r.value, 10);
  EXPECT_EQ(r.ts, kW0);
}

TEST(SlidingWindow, MissingStateUsesTheOrigin) {
  Decision d = DecideAt(TenPerMinute(), Missing(), kW0 + 15 * kSecond, Take(1), 20 * kSecond);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.next.ts, kW0 - 40 * kSecond);
}

TEST(SlidingWindow, PreviousWindowIsWeightedAndFloored) {
  LimitConfig c = TenPerMinute();
  LimitState s = Stored(2, kW0, 10);
  const Micros now = kW0 + 30 * kSecond;  // weight 0.5: used = floor(5) + 2 = 7

  Reading r = ValueAt(c, s, now, 0);
  EXPECT_DOUBLE_EQ(r.value, 3);
  EXPECT_EQ(r.ts, kW0);

  Decision ok = DecideAt(c, s, now, Take(3));
  ASSERT_TRUE(ok.ok);
  EXPECT_EQ(ok.remaining, 0.0);
  EXPECT_DOUBLE_EQ(ok.next.value, 5);
  EXPECT_EQ(ok.next.ts, kW0);
  EXPECT_DOUBLE_EQ(ok.next.prev, 10);
  EXPECT_FALSE(ok.has_retry);
  EXPECT_DOUBLE_EQ(ok.reset_after, 78.000001);  // floor(5 * w) = 0 once w < 0.2 in the next window

  Decision refused = DecideAt(c, s, now, Take(5));
  EXPECT_FALSE(refused.ok);
  EXPECT_DOUBLE_EQ(refused.remaining, 3);
  EXPECT_TRUE(refused.has_retry);
  EXPECT_EQ(refused.retry_at, kW0 + 36 * kSecond + 1);  // floor(10 * w) <= 3 needs w < 0.4
  EXPECT_DOUBLE_EQ(refused.retry_after, 6.000001);
  EXPECT_DOUBLE_EQ(refused.reset_after, 60.000001);
  ExpectRetryIsExact(c, s, now, Take(5));

  // An earlier clock within the window weighs the previous window more.
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + 20 * kSecond, 0).value, 2);  // floor(6.67) + 2 = 8
}

TEST(SlidingWindow, AtTheWindowBoundaryThePreviousWindowCountsFully) {
  LimitConfig c = TenPerMinute();
  LimitState s = Stored(10, kW0, 0);
  Decision at = DecideAt(c, s, kW0 + kMinute, Take(1));
  EXPECT_FALSE(at.ok);
  EXPECT_EQ(at.remaining, 0.0);
  EXPECT_EQ(at.retry_at, kW0 + kMinute + 1);
  EXPECT_DOUBLE_EQ(at.retry_after, 1e-6);
  ExpectRetryIsExact(c, s, kW0 + kMinute, Take(1));

  Decision before = DecideAt(c, s, kW0 + kMinute - 1, Take(1));
  EXPECT_FALSE(before.ok);
  EXPECT_EQ(before.retry_at, kW0 + kMinute + 1);
  EXPECT_DOUBLE_EQ(before.retry_after, 2e-6);
}

TEST(SlidingWindow, RolloverByOneWindow) {
  LimitConfig c = TenPerMinute();
  Decision d = DecideAt(c, Stored(6, kW0, 3), kW0 + 90 * kSecond, Take(7));  // floor(6 * 0.5) = 3
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_DOUBLE_EQ(d.next.value, 7);
  EXPECT_EQ(d.next.ts, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(d.next.prev, 6);
}

TEST(SlidingWindow, RolloverBySeveralWindowsForgetsEverything) {
  LimitConfig c = TenPerMinute();
  Decision d = DecideAt(c, Stored(10, kW0, 10), kW0 + 2 * kMinute, Take(10));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_DOUBLE_EQ(d.next.value, 10);
  EXPECT_EQ(d.next.ts, kW0 + 2 * kMinute);
  EXPECT_EQ(d.next.prev, 0.0);

  Reading far = ValueAt(c, Stored(10, kW0, 10), kW0 + 5 * kMinute + 7, 0);
  EXPECT_DOUBLE_EQ(far.value, 10);
  EXPECT_EQ(far.ts, kW0 + 5 * kMinute);
}

TEST(SlidingWindow, ClockGoingBackwardsKeepsTheStoredWindow) {
  LimitConfig c = TenPerMinute();
  const Micros stored = kW0 + kMinute;
  Decision d = DecideAt(c, Stored(3, stored, 0), kW0 + 10 * kSecond, Take(1));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 6);
  EXPECT_DOUBLE_EQ(d.next.value, 4);
  EXPECT_EQ(d.next.ts, stored);

  Decision refused = DecideAt(c, Stored(10, stored, 0), kW0 + 10 * kSecond, Take(1));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.retry_at, stored + kMinute + 1);
  EXPECT_DOUBLE_EQ(refused.retry_after, 110.000001);

  Reading r = ValueAt(c, Stored(3, stored, 0), kW0 + 10 * kSecond, 0);
  EXPECT_DOUBLE_EQ(r.value, 7);
  EXPECT_EQ(r.ts, stored);
}

TEST(SlidingWindow, FractionalCounts) {
  LimitConfig c = TenPerMinute();
  LimitState s = Stored(0, kW0, 1.5);
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + 30 * kSecond, 0).value, 10);  // floor(0.75) = 0
  Decision d = DecideAt(c, s, kW0 + 30 * kSecond, Take(0.5));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 9.5);
  EXPECT_DOUBLE_EQ(d.next.value, 0.5);
  EXPECT_DOUBLE_EQ(d.next.prev, 1.5);

  LimitConfig frac = SlidingWindow(2.5, kMinute);
  Decision all = DecideAt(frac, Missing(), kW0, Take(2.5));
  ASSERT_TRUE(all.ok);
  EXPECT_EQ(all.remaining, 0.0);
  Decision more = DecideAt(frac, all.next, kW0, Take(0.1));
  EXPECT_FALSE(more.ok);
  EXPECT_EQ(more.retry_at, kW0 + kMinute);  // floor(2.5 * 1) + 0.1 <= 2.5
  ExpectRetryIsExact(frac, all.next, kW0, Take(0.1));
}

TEST(SlidingWindow, CountZeroAndCountEqualToRate) {
  LimitConfig c = TenPerMinute();
  Decision zero = DecideAt(c, Stored(10, kW0, 0), kW0 + kSecond, Take(0));
  ASSERT_TRUE(zero.ok);
  EXPECT_EQ(zero.remaining, 0.0);
  EXPECT_DOUBLE_EQ(zero.next.value, 10);

  Decision full = DecideAt(c, Missing(), kW0, Take(10));
  ASSERT_TRUE(full.ok);
  EXPECT_EQ(full.remaining, 0.0);
  EXPECT_DOUBLE_EQ(full.reset_after, 114.000001);  // floor(10 * w) = 0 once w < 0.1
  ExpectRetryIsExact(c, full.next, kW0, Take(10));
}

TEST(SlidingWindow, RetryAtIsExactForAwkwardRates) {
  struct Case {
    double rate;
    Micros period;
    double current;
    double prev;
    Micros into;
    double count;
  };
  const Case cases[] = {
      {10, kMinute, 4, 8, 15 * kSecond, 1}, {7.5, 13, 3.25, 7.5, 5, 2},
      {1000, kHour, 1, 999, kMinute, 100},  {3, 1, 3, 3, 0, 1},
      {0.3, kSecond, 0.1, 0.3, 10, 0.25},   {1e6, kDay, 5e5, 4e5, 7 * kHour, 4e5},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "rate " << k.rate << " period " << k.period << " into " << k.into);
    LimitConfig c = SlidingWindow(k.rate, k.period);
    ASSERT_TRUE(ValidateConfig(c).ok());
    ExpectRetryIsExact(c, Stored(k.current, kW0, k.prev), kW0 + k.into, Take(k.count));
  }
}

TEST(SlidingWindow, HugeAndTinyRates) {
  LimitConfig huge = SlidingWindow(kMaxMagnitude, kMinute);
  ASSERT_TRUE(ValidateConfig(huge).ok());
  Decision d = DecideAt(huge, Missing(), kW0, Take(1e300));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_EQ(d.next.value, 1e300);
  Decision again = DecideAt(huge, d.next, kW0, Take(1e300));
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.remaining, 0.0);
  EXPECT_EQ(again.retry_at, kW0 + 2 * kMinute);
  EXPECT_TRUE(std::isfinite(again.reset_after));
  ExpectRetryIsExact(huge, d.next, kW0, Take(1e300));
  // Half of it is free once 1e300 * weight <= 0.5e300: half-way into the next window.
  EXPECT_EQ(DecideAt(huge, d.next, kW0, Take(0.5e300)).retry_at, kW0 + 90 * kSecond);
  ExpectRetryIsExact(huge, d.next, kW0, Take(0.5e300));

  // 1e300 per µs: the previous window's weight steps every µs.
  LimitConfig per_micro = SlidingWindow(kMaxMagnitude, 1);
  ASSERT_TRUE(ValidateConfig(per_micro).ok());
  Decision p = DecideAt(per_micro, Missing(), kW0, Take(1e300));
  ASSERT_TRUE(p.ok);
  ExpectRetryIsExact(per_micro, p.next, kW0, Take(1e300));
  EXPECT_EQ(ValueAt(per_micro, p.next, kW0 + 2, 0).value, 1e300);

  LimitConfig tiny = SlidingWindow(1e-9, kMinute);
  ASSERT_TRUE(ValidateConfig(tiny).ok());
  Decision t = DecideAt(tiny, Missing(), kW0, Take(1e-9));
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.remaining, 0.0);
  Decision t2 = DecideAt(tiny, t.next, kW0, Take(1e-9));
  EXPECT_FALSE(t2.ok);
  EXPECT_EQ(t2.retry_at, kW0 + kMinute);  // floor(1e-9 * weight) = 0
  ExpectRetryIsExact(tiny, t.next, kW0, Take(1e-9));
}

}  // namespace
}  // namespace ratelimit
