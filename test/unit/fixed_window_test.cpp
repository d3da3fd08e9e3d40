// Fixed window: alignment to the origin, rollover up to capacity, reserve,
// clock skew, extreme rates and exact retry times.
#include <gtest/gtest.h>

#include <cmath>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

LimitConfig TenPerMinute() { return FixedWindow(10, kMinute); }

TEST(FixedWindow, MissingStateStartsFullInTheCurrentWindow) {
  LimitConfig c = TenPerMinute();
  Decision d = DecideAt(c, Missing(), kW0 + 20 * kSecond, Take(1));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 9);
  EXPECT_TRUE(d.next.exists);
  EXPECT_DOUBLE_EQ(d.next.value, 9);
  EXPECT_EQ(d.next.ts, kW0);
  EXPECT_FALSE(d.has_retry);
  EXPECT_DOUBLE_EQ(d.reset_after, 40.0);  // full again when the next window opens

  Reading r = ValueAt(c, Missing(), kW0 + 20 * kSecond, 0);
  EXPECT_DOUBLE_EQ(r.value, 10);
  EXPECT_EQ(r.ts, kW0);
}

TEST(FixedWindow, ExhaustedWindowRetriesWhenTheNextOneOpens) {
  LimitConfig c = TenPerMinute();
  LimitState s = Stored(0, kW0);
  Decision d = DecideAt(c, s, kW0 + 20 * kSecond, Take(1));
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_TRUE(d.has_retry);
  EXPECT_EQ(d.retry_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(d.retry_after, 40.0);
  EXPECT_DOUBLE_EQ(d.reset_after, 40.0);

  EXPECT_FALSE(DecideAt(c, s, kW0 + kMinute - 1, Take(1)).ok);
  Decision next = DecideAt(c, s, kW0 + kMinute, Take(1));
  ASSERT_TRUE(next.ok);
  EXPECT_DOUBLE_EQ(next.next.value, 9);
  EXPECT_EQ(next.next.ts, kW0 + kMinute);
  ExpectRetryIsExact(c, s, kW0 + 20 * kSecond, Take(1));
}

TEST(FixedWindow, ExactlyZeroLeftAndCountEqualToCapacity) {
  LimitConfig c = TenPerMinute();
  Decision d = DecideAt(c, Stored(3, kW0), kW0 + 59 * kSecond, Take(3));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_FALSE(d.has_retry);
  EXPECT_DOUBLE_EQ(d.reset_after, 1.0);

  EXPECT_TRUE(DecideAt(c, Missing(), kW0, Take(10)).ok);
  Decision refused = DecideAt(c, Stored(9.5, kW0), kW0, Take(10));
  EXPECT_FALSE(refused.ok);
  EXPECT_DOUBLE_EQ(refused.remaining, 9.5);
  EXPECT_EQ(refused.retry_at, kW0 + kMinute);
}

TEST(FixedWindow, CountZeroOnAFullWindow) {
  Decision d = DecideAt(TenPerMinute(), Missing(), kW0 + 20 * kSecond, Take(0));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.next.value, 10);
  EXPECT_EQ(d.next.ts, kW0);
  EXPECT_EQ(d.reset_after, 0.0);
  EXPECT_FALSE(d.has_retry);
}

// Unused tokens roll over into later windows, up to capacity 20.
TEST(FixedWindow, RolloverUpToCapacityTwenty) {
  LimitConfig c = WithCapacity(TenPerMinute(), 20);
  EXPECT_DOUBLE_EQ(ValueAt(c, Missing(), kW0, 0).value, 20);
  LimitState s = Stored(0, kW0);
  Reading one = ValueAt(c, s, kW0 + kMinute, 0);
  EXPECT_DOUBLE_EQ(one.value, 10);
  EXPECT_EQ(one.ts, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + 2 * kMinute, 0).value, 20);
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + 5 * kMinute + 7, 0).value, 20);
  EXPECT_DOUBLE_EQ(ValueAt(c, Stored(4, kW0), kW0 + kMinute, 0).value, 14);

  Decision d = DecideAt(c, s, kW0 + 65 * kSecond, Take(15));
  EXPECT_FALSE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 10);
  EXPECT_EQ(d.retry_at, kW0 + 2 * kMinute);
  EXPECT_DOUBLE_EQ(d.retry_after, 55.0);
  EXPECT_DOUBLE_EQ(d.reset_after, 55.0);
  ExpectRetryIsExact(c, s, kW0 + 65 * kSecond, Take(15));

  Decision burst = DecideAt(c, Missing(), kW0, Take(20));
  ASSERT_TRUE(burst.ok);
  EXPECT_DOUBLE_EQ(burst.reset_after, 120.0);
}

TEST(FixedWindow, RolloverAcrossSeveralWindows) {
  LimitConfig c = WithCapacity(TenPerMinute(), 100);
  Decision d = DecideAt(c, Stored(3, kW0), kW0 + 3 * kMinute + 30 * kSecond, Take(1));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 32);  // 3 + 3 windows * 10 - 1
  EXPECT_EQ(d.next.ts, kW0 + 3 * kMinute);
  EXPECT_DOUBLE_EQ(d.reset_after, 390.0);  // 32 + 7 * 10 >= 100 at kW0 + 10 min

  // Far in the future the window start stays aligned.
  Reading far = ValueAt(c, Stored(3, kW0), kW0 + 1000 * kMinute + 59 * kSecond, 0);
  EXPECT_DOUBLE_EQ(far.value, 100);
  EXPECT_EQ(far.ts, kW0 + 1000 * kMinute);
}

// The article: failed logins, 10 per hour per user.
TEST(FixedWindow, FailedLoginsTenPerHour) {
  LimitConfig c = FixedWindow(10, kHour);
  const Micros origin = WindowOrigin(c, "login", 5, "alice", 5);
  ASSERT_EQ(origin, 670279390);        // FNV-1a("login\0alice") mod 1 h
  const Micros window = kW0 + origin;  // the hour window open at kW0 + 30 min
  const Micros now = kW0 + 30 * kMinute;

  LimitState s = Missing();
  for (int i = 1; i <= 10; ++i) {
    Decision d = DecideAt(c, s, now, Take(1), origin);
    ASSERT_TRUE(d.ok) << i;
    EXPECT_DOUBLE_EQ(d.remaining, 10 - i);
    EXPECT_EQ(d.next.ts, window);
    s = d.next;
  }
  Decision eleventh = DecideAt(c, s, now, Take(1), origin);
  EXPECT_FALSE(eleventh.ok);
  EXPECT_EQ(eleventh.remaining, 0.0);
  EXPECT_EQ(eleventh.retry_at, window + kHour);
  EXPECT_DOUBLE_EQ(eleventh.retry_after, 2470.27939);
  EXPECT_DOUBLE_EQ(eleventh.reset_after, 2470.27939);
  ExpectRetryIsExact(c, s, now, Take(1), origin);

  // Before the offset within the hour, the window began in the previous hour.
  Decision early = DecideAt(c, Missing(), kW0 + 5 * kMinute, Take(1), origin);
  EXPECT_EQ(early.next.ts, window - kHour);
}

TEST(FixedWindow, ReserveBorrowsFromFutureWindows) {
  LimitConfig c = WithMaxReserved(TenPerMinute(), 25);
  const Micros now = kW0 + 10 * kSecond;
  Decision first = DecideAt(c, Missing(), now, Reserve(30));
  ASSERT_TRUE(first.ok);
  EXPECT_DOUBLE_EQ(first.remaining, -20);
  EXPECT_DOUBLE_EQ(first.next.value, -20);
  EXPECT_EQ(first.next.ts, kW0);
  EXPECT_TRUE(first.has_retry);
  EXPECT_EQ(first.retry_at, kW0 + 2 * kMinute);  // -20 + 2 * 10 >= 0
  EXPECT_DOUBLE_EQ(first.retry_after, 110.0);
  EXPECT_DOUBLE_EQ(first.reset_after, 170.0);  // -20 + 3 * 10 >= 10

  Decision second = DecideAt(c, first.next, now, Reserve(5));
  ASSERT_TRUE(second.ok);
  EXPECT_DOUBLE_EQ(second.remaining, -25);
  EXPECT_EQ(second.retry_at, kW0 + 3 * kMinute);

  Decision third = DecideAt(c, second.next, now, Reserve(1));
  EXPECT_FALSE(third.ok);
  EXPECT_DOUBLE_EQ(third.remaining, -25);
  EXPECT_EQ(third.retry_at, kW0 + kMinute);  // -25 + 10 >= 1 - 25
  EXPECT_DOUBLE_EQ(third.retry_after, 50.0);
  ExpectRetryIsExact(c, second.next, now, Reserve(1));

  Decision plain = DecideAt(c, second.next, now, Take(1));
  EXPECT_FALSE(plain.ok);
  EXPECT_EQ(plain.retry_at, kW0 + 3 * kMinute);
  ExpectRetryIsExact(c, second.next, now, Take(1));
}

TEST(FixedWindow, ClockGoingBackwardsKeepsTheStoredWindow) {
  LimitConfig c = TenPerMinute();
  const Micros stored = kW0 + kMinute;
  Decision d = DecideAt(c, Stored(5, stored), kW0 + 10 * kSecond, Take(1));
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.remaining, 4);
  EXPECT_EQ(d.next.ts, stored);
  EXPECT_DOUBLE_EQ(d.reset_after, 110.0);

  Decision refused = DecideAt(c, Stored(0, stored), kW0 + 10 * kSecond, Take(1));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.retry_at, stored + kMinute);
  EXPECT_DOUBLE_EQ(refused.retry_after, 110.0);

  Reading r = ValueAt(c, Stored(5, stored), kW0 + 10 * kSecond, 0);
  EXPECT_DOUBLE_EQ(r.value, 5);
  EXPECT_EQ(r.ts, stored);
}

TEST(FixedWindow, StartGivenInTheConfig) {
  LimitConfig c = WithStart(TenPerMinute(), kW0 + 15 * kSecond);
  const Micros origin = WindowOrigin(c, "x", 1, nullptr, 0);
  ASSERT_EQ(origin, 15 * kSecond);
  EXPECT_EQ(WindowOrigin(c, "y", 1, "k", 1), origin);  // the name no longer matters

  Decision d = DecideAt(c, Missing(), kW0 + 10 * kSecond, Take(1), origin);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.next.ts, kW0 - 45 * kSecond);
  EXPECT_DOUBLE_EQ(d.reset_after, 5.0);
  EXPECT_EQ(DecideAt(c, Missing(), kW0 + 15 * kSecond - 1, Take(1), origin).next.ts, kW0 - 45 * kSecond);
  EXPECT_EQ(DecideAt(c, Missing(), kW0 + 15 * kSecond, Take(1), origin).next.ts, kW0 + 15 * kSecond);
}

TEST(FixedWindow, NegativeStartAndClockBeforeTheEpoch) {
  LimitConfig c = FixedWindow(1, 10 * kSecond);
  EXPECT_EQ(WindowOrigin(WithStart(c, -1), "n", 1, nullptr, 0), 10 * kSecond - 1);
  EXPECT_EQ(WindowOrigin(WithStart(c, -25 * kSecond), "n", 1, nullptr, 0), 5 * kSecond);
  EXPECT_EQ(WindowOrigin(WithStart(c, -10 * kSecond), "n", 1, nullptr, 0), 0);

  Decision epoch = DecideAt(c, Missing(), -3 * kSecond, Take(1), 0);
  ASSERT_TRUE(epoch.ok);
  EXPECT_EQ(epoch.next.ts, -10 * kSecond);
  Decision shifted = DecideAt(c, Missing(), -3 * kSecond, Take(1), 10 * kSecond - 1);
  ASSERT_TRUE(shifted.ok);
  EXPECT_EQ(shifted.next.ts, -10 * kSecond - 1);
  Decision refused = DecideAt(c, shifted.next, -3 * kSecond, Take(1), 10 * kSecond - 1);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.retry_at, -1);
  ExpectRetryIsExact(c, shifted.next, -3 * kSecond, Take(1), 10 * kSecond - 1);
}

TEST(FixedWindow, FractionalRate) {
  LimitConfig c = FixedWindow(2.5, kMinute);
  LimitState s = Missing();
  for (double want : {1.5, 0.5}) {
    Decision d = DecideAt(c, s, kW0, Take(1));
    ASSERT_TRUE(d.ok);
    EXPECT_DOUBLE_EQ(d.remaining, want);
    s = d.next;
  }
  Decision refused = DecideAt(c, s, kW0, Take(1));
  EXPECT_FALSE(refused.ok);
  EXPECT_DOUBLE_EQ(refused.remaining, 0.5);
  EXPECT_EQ(refused.retry_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + kMinute, 0).value, 2.5);  // 0.5 + 2.5 capped at 2.5
}

TEST(FixedWindow, OneMicrosecondWindows) {
  LimitConfig c = FixedWindow(1, 1);
  Decision d = DecideAt(c, Stored(0, kW0), kW0, Take(1));
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.retry_at, kW0 + 1);
  EXPECT_DOUBLE_EQ(d.retry_after, 1e-6);
  EXPECT_TRUE(DecideAt(c, Stored(0, kW0), kW0 + 1, Take(1)).ok);
}

TEST(FixedWindow, RetryAtIsExactForAwkwardRates) {
  struct Case {
    double rate;
    Micros period;
    double capacity;
    double value;
    double count;
  };
  const Case cases[] = {
      {0.3, 7, 0.9, 0, 0.8},         {7.77, 13 * kSecond, 100, 1.5, 99},  {1e6, kDay, 1e6, -3, 1e6},
      {1.0 / 3.0, kHour, 1, 0.1, 1}, {123.456, 999, 123.456, 0, 123.456},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "rate " << k.rate << " period " << k.period);
    LimitConfig c = WithCapacity(FixedWindow(k.rate, k.period), k.capacity);
    ASSERT_TRUE(ValidateConfig(c).ok());
    ASSERT_TRUE(ValidateRequest(c, Take(k.count)).ok());
    ExpectRetryIsExact(c, Stored(k.value, kW0), kW0 + 3, Take(k.count));
  }
}

TEST(FixedWindow, HugeAndTinyRates) {
  LimitConfig huge = FixedWindow(kMaxMagnitude, kMinute);
  ASSERT_TRUE(ValidateConfig(huge).ok());
  Decision d = DecideAt(huge, Missing(), kW0, Take(1e300));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.remaining, 0.0);
  EXPECT_EQ(ValueAt(huge, d.next, kW0 + kMinute, 0).value, 1e300);
  Decision again = DecideAt(huge, d.next, kW0 + 1, Take(1e300));
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.retry_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(again.reset_after, 60 - 1e-6);
  ExpectRetryIsExact(huge, d.next, kW0 + 1, Take(1e300));
  ExpectRetryIsExact(huge, d.next, kW0 + 1, Take(1e-300));

  LimitConfig tiny = FixedWindow(1e-9, kMinute);
  ASSERT_TRUE(ValidateConfig(tiny).ok());
  Decision t = DecideAt(tiny, Missing(), kW0, Take(1e-9));
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.remaining, 0.0);
  Decision t2 = DecideAt(tiny, t.next, kW0 + 1, Take(1e-9));
  EXPECT_FALSE(t2.ok);
  EXPECT_EQ(t2.retry_at, kW0 + kMinute);
  ExpectRetryIsExact(tiny, t.next, kW0 + 1, Take(1e-9));
}

// With capacity above the rate, a deficit is paid back one window at a time:
// nothing may round or overflow it away at the largest magnitudes accepted.
TEST(FixedWindow, HugeRateRolloverDoesNotOverflow) {
  LimitConfig c = WithMaxReserved(WithCapacity(FixedWindow(0.5e300, kMinute), 1e300), 1e300);
  ASSERT_TRUE(ValidateConfig(c).ok());
  ASSERT_TRUE(ValidateRequest(c, Take(0.75e300)).ok());
  LimitState s = Stored(-1e300, kW0);
  EXPECT_EQ(ValueAt(c, s, kW0 + kMinute, 0).value, -0.5e300);
  EXPECT_EQ(ValueAt(c, s, kW0 + 2 * kMinute, 0).value, 0.0);
  EXPECT_EQ(ValueAt(c, s, kW0 + 3 * kMinute, 0).value, 0.5e300);
  EXPECT_EQ(ValueAt(c, s, kW0 + 4 * kMinute, 0).value, 1e300);
  Decision d = DecideAt(c, s, kW0 + 3 * kMinute, Take(0.75e300));
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.remaining, 0.5e300);
  EXPECT_EQ(d.retry_at, kW0 + 4 * kMinute);
  ExpectRetryIsExact(c, s, kW0 + 3 * kMinute, Take(0.75e300));
  ExpectRetryIsExact(c, s, kW0 + 10 * kSecond, Take(1e300));
  EXPECT_EQ(DecideAt(c, s, kW0, Take(1e300)).retry_at, kW0 + 4 * kMinute);
}

// 1e300 per 1 µs window: rate * windows overflows to +inf after ~1.8e8
// windows, where the true value is far above capacity, so the cap is exact.
TEST(FixedWindow, HugeRateLongIdleIsCappedExactlyToCapacity) {
  LimitConfig c = WithMaxReserved(FixedWindow(kMaxMagnitude, 1), kMaxMagnitude);
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(MaxDeficit(c), 1e300);
  LimitState deficit = Stored(-1e300, kW0);
  EXPECT_EQ(ValueAt(c, deficit, kW0 + 1, 0).value, 0.0);
  EXPECT_EQ(ValueAt(c, deficit, kW0 + 2, 0).value, 1e300);
  for (Micros idle : {kHour, kDay, kHorizonMicros, 2 * kHorizonMicros}) {
    SCOPED_TRACE(idle);
    ASSERT_TRUE(std::isinf(static_cast<double>(idle) * kMaxMagnitude));
    for (double value : {-1e300, 0.0, 1e300}) {
      LimitState s = Stored(value, kW0);
      Reading r = ValueAt(c, s, kW0 + idle, 0);
      EXPECT_EQ(r.value, 1e300) << value;
      EXPECT_EQ(r.ts, kW0 + idle);
      Decision d = DecideAt(c, s, kW0 + idle, Reserve(1e300));
      ASSERT_TRUE(d.ok) << value;
      EXPECT_EQ(d.remaining, 0.0);
      EXPECT_FALSE(d.has_retry);
    }
  }
  Decision reserved = DecideAt(c, Stored(0, kW0), kW0, Reserve(1e300));
  ASSERT_TRUE(reserved.ok);
  EXPECT_EQ(reserved.next.value, -1e300);
  EXPECT_EQ(reserved.retry_at, kW0 + 1);
  EXPECT_EQ(reserved.full_at, kW0 + 2);
  ExpectRetryIsExact(c, reserved.next, kW0, Reserve(1e290));  // 1 would round away at 1e300
}

// Unlimited reserve at 1e300 per µs: MaxDeficit is clamped to 1e300, so the
// stored value stays finite and is paid back.
TEST(FixedWindow, UnlimitedReserveStaysFiniteForHugeRates) {
  LimitConfig c = FixedWindow(kMaxMagnitude, 1);
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(MaxDeficit(c), 1e300);
  Decision first = DecideAt(c, Missing(), kW0, Reserve(1e300));
  ASSERT_TRUE(first.ok);
  EXPECT_EQ(first.remaining, 0.0);
  Decision second = DecideAt(c, first.next, kW0, Reserve(1e300));
  ASSERT_TRUE(second.ok);
  EXPECT_EQ(second.remaining, -1e300);
  EXPECT_EQ(second.retry_at, kW0 + 1);
  Decision third = DecideAt(c, second.next, kW0, Reserve(1e300));
  EXPECT_FALSE(third.ok);
  EXPECT_EQ(third.remaining, -1e300);
  EXPECT_TRUE(std::isfinite(third.reset_after));
  EXPECT_EQ(ValueAt(c, second.next, kW0 + 2, 0).value, 1e300);
  EXPECT_EQ(ValueAt(c, second.next, kW0 + kHorizonMicros, 0).value, 1e300);
}

// BUG: need = count - MaxDeficit rounds up to the tokens available now, so a
// refused reservation gets a retry_at that is not in the future (retry_after
// <= 0), and retrying then is refused again.
TEST(FixedWindow, RefusedReservationNeverRetriesInThePast) {
  LimitConfig c = WithMaxReserved(FixedWindow(1, kMinute), std::ldexp(3.0, -55));
  ASSERT_TRUE(ValidateConfig(c).ok());
  ASSERT_TRUE(ValidateRequest(c, Reserve(1)).ok());
  LimitState s = Stored(1 - std::ldexp(1.0, -53), kW0);
  Decision d = DecideAt(c, s, kW0 + 30 * kSecond, Reserve(1));
  ASSERT_FALSE(d.ok);  // exactly: a deficit of 2^-53 > maxReserved = 0.75 * 2^-53
  ASSERT_TRUE(d.has_retry);
  EXPECT_EQ(d.retry_at, kW0 + kMinute);
  EXPECT_GT(d.retry_after, 0);
  EXPECT_TRUE(DecideAt(c, s, d.retry_at, Reserve(1)).ok);
}

// BUG: need = 1.1 - 1.0 rounds above capacity 0.1: retry_at is clamped to
// 300 years ahead, yet the reservation is granted when the next window opens.
TEST(FixedWindow, RefusedReservationRetriesWhenItFits) {
  LimitConfig c = WithMaxReserved(FixedWindow(0.1, kMinute), 1.0);
  ASSERT_TRUE(ValidateRequest(c, Reserve(1.1)).ok());
  LimitState empty = Stored(0, kW0);
  ASSERT_TRUE(DecideAt(c, empty, kW0 + kMinute, Reserve(1.1)).ok);
  Decision d = DecideAt(c, empty, kW0 + 10 * kSecond, Reserve(1.1));
  ASSERT_FALSE(d.ok);
  EXPECT_EQ(d.retry_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(d.retry_after, 50.0);
}

// BUG: count 0.1 + 0.2 passes ValidateRequest (capacity 0.1 + maxReserved 0.2)
// but is refused on a full window forever.
TEST(FixedWindow, ValidatedReservationSucceedsOnAFullWindow) {
  LimitConfig c = WithMaxReserved(FixedWindow(0.1, kMinute), 0.2);
  const Request r = Reserve(0.1 + 0.2);
  if (!ValidateRequest(c, r).ok()) return;  // rejecting it up front is fine too
  Decision d = DecideAt(c, Missing(), kW0, r);
  EXPECT_TRUE(d.ok) << "retry_after " << d.retry_after;
  EXPECT_LT(d.retry_after, 3 * 60.0);
}

}  // namespace
}  // namespace ratelimit
