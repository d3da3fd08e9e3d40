// ValidateConfig, ValidateRequest, Capacity, MaxDeficit, ParseKind, KindName.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDoubleMax = std::numeric_limits<double>::max();

// Finite magnitudes just above the largest accepted (kMaxMagnitude = 1e300).
const double kTooBig[] = {std::nextafter(kMaxMagnitude, kInf), 1e301, 1e308, kDoubleMax};

void ExpectInvalid(const Status& status, const char* needle) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code, StatusCode::kInvalidParameter);
  EXPECT_TRUE(MessageHas(status, needle)) << "message: \"" << status.message << "\" lacks " << needle;
  EXPECT_GT(std::strlen(status.detail), 0u);
}

void ExpectValid(const Status& status) {
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(status.code, StatusCode::kOk);
}

TEST(ValidateConfig, AcceptsMinimalConfigsOfEachKind) {
  ExpectValid(ValidateConfig(TokenBucket(10, kMinute)));
  ExpectValid(ValidateConfig(FixedWindow(10, kMinute)));
  ExpectValid(ValidateConfig(SlidingWindow(10, kMinute)));
  ExpectValid(ValidateConfig(WithMaxReserved(WithCapacity(TokenBucket(10, kMinute), 20), 5)));
  ExpectValid(ValidateConfig(WithStart(WithMaxReserved(WithCapacity(FixedWindow(10, kMinute), 20), 5), -7)));
  ExpectValid(ValidateConfig(WithStart(SlidingWindow(10, kMinute), kW0)));
}

TEST(ValidateConfig, RequiredFields) {
  LimitConfig c = TokenBucket(10, kMinute);
  c.has_kind = false;
  ExpectInvalid(ValidateConfig(c), "\"kind\"");
  c = TokenBucket(10, kMinute);
  c.has_rate = false;
  ExpectInvalid(ValidateConfig(c), "\"rate\"");
  c = TokenBucket(10, kMinute);
  c.has_period = false;
  ExpectInvalid(ValidateConfig(c), "\"period\"");
  ExpectInvalid(ValidateConfig(LimitConfig{}), "\"kind\"");
}

TEST(ValidateConfig, RateMustBeFiniteAndPositive) {
  for (double rate : {0.0, -0.0, -1.0, kNaN, kInf, -kInf, -std::numeric_limits<double>::denorm_min()}) {
    SCOPED_TRACE(rate);
    ExpectInvalid(ValidateConfig(TokenBucket(rate, kMinute)), "\"rate\"");
    ExpectInvalid(ValidateConfig(FixedWindow(rate, kMinute)), "\"rate\"");
    ExpectInvalid(ValidateConfig(SlidingWindow(rate, kMinute)), "\"rate\"");
  }
  ExpectValid(ValidateConfig(TokenBucket(kMaxMagnitude, kMinute)));
  ExpectValid(ValidateConfig(TokenBucket(kMaxMagnitude, 1)));
  ExpectValid(ValidateConfig(FixedWindow(kMaxMagnitude, 1)));
  ExpectValid(ValidateConfig(SlidingWindow(kMaxMagnitude, kMinute)));
}

TEST(ValidateConfig, RateAtMostMaxMagnitude) {
  ASSERT_EQ(kMaxMagnitude, 1e300);
  for (double rate : kTooBig) {
    SCOPED_TRACE(rate);
    for (LimitConfig c :
         {TokenBucket(rate, kMinute), FixedWindow(rate, kMinute), SlidingWindow(rate, kMinute),
          TokenBucket(rate, kHorizonMicros), WithCapacity(TokenBucket(rate, 1), 1)}) {
      SCOPED_TRACE(KindName(c.kind));
      ExpectInvalid(ValidateConfig(c),
                    "config field \"rate\" must be a number greater than zero and at most 1e300");
    }
  }
  // The same message for the other invalid rates.
  ExpectInvalid(ValidateConfig(TokenBucket(0, kMinute)), "greater than zero and at most 1e300");
  ExpectInvalid(ValidateConfig(TokenBucket(kInf, kMinute)), "greater than zero and at most 1e300");
}

TEST(ValidateConfig, RateTooSmallPerMicrosecond) {
  ExpectValid(ValidateConfig(TokenBucket(1e-300, 1)));
  ExpectInvalid(ValidateConfig(TokenBucket(1e-300, 2)), "\"rate\"");
  ExpectInvalid(ValidateConfig(TokenBucket(std::numeric_limits<double>::denorm_min(), 1)), "\"rate\"");
}

TEST(ValidateConfig, PeriodRange) {
  for (Micros period : {Micros{0}, Micros{-1}, kHorizonMicros + 1, std::numeric_limits<Micros>::min(),
                        std::numeric_limits<Micros>::max()}) {
    SCOPED_TRACE(period);
    ExpectInvalid(ValidateConfig(TokenBucket(1, period)), "\"period\"");
    ExpectInvalid(ValidateConfig(FixedWindow(1, period)), "\"period\"");
    ExpectInvalid(ValidateConfig(SlidingWindow(1, period)), "\"period\"");
  }
  ExpectValid(ValidateConfig(TokenBucket(1, 1)));
  ExpectValid(ValidateConfig(TokenBucket(1, kHorizonMicros)));
  ExpectValid(ValidateConfig(FixedWindow(1, kHorizonMicros)));
}

TEST(ValidateConfig, CapacityMustBeFiniteAndNotNegative) {
  for (double capacity : {-1.0, -1e-300, kNaN, kInf, -kInf}) {
    SCOPED_TRACE(capacity);
    ExpectInvalid(ValidateConfig(WithCapacity(TokenBucket(10, kMinute), capacity)), "\"capacity\"");
    ExpectInvalid(ValidateConfig(WithCapacity(FixedWindow(10, kMinute), capacity)), "\"capacity\"");
  }
  ExpectValid(ValidateConfig(WithCapacity(TokenBucket(10, kMinute), 0)));
  ExpectValid(ValidateConfig(WithCapacity(FixedWindow(10, kMinute), 0)));
  ExpectValid(ValidateConfig(WithCapacity(TokenBucket(kMaxMagnitude, 1), kMaxMagnitude)));
  ExpectValid(ValidateConfig(WithCapacity(FixedWindow(kMaxMagnitude, kMinute), kMaxMagnitude)));
}

TEST(ValidateConfig, CapacityAtMostMaxMagnitude) {
  for (double capacity : kTooBig) {
    SCOPED_TRACE(capacity);
    // Rejected for its range, before the refill horizon is looked at.
    ExpectInvalid(ValidateConfig(WithCapacity(TokenBucket(kMaxMagnitude, 1), capacity)),
                  "config field \"capacity\" is out of range");
    ExpectInvalid(ValidateConfig(WithCapacity(FixedWindow(kMaxMagnitude, 1), capacity)),
                  "config field \"capacity\" is out of range");
    ExpectInvalid(ValidateConfig(WithCapacity(TokenBucket(10, kMinute), capacity)),
                  "config field \"capacity\" is out of range");
  }
}

TEST(ValidateConfig, MaxReservedMustBeFiniteAndNotNegative) {
  for (double max_reserved : {-1.0, -1e-300, kNaN, kInf, -kInf}) {
    SCOPED_TRACE(max_reserved);
    ExpectInvalid(ValidateConfig(WithMaxReserved(TokenBucket(10, kMinute), max_reserved)), "\"maxReserved\"");
    ExpectInvalid(ValidateConfig(WithMaxReserved(FixedWindow(10, kMinute), max_reserved)), "\"maxReserved\"");
  }
  ExpectValid(ValidateConfig(WithMaxReserved(TokenBucket(10, kMinute), 0)));
  ExpectValid(ValidateConfig(WithMaxReserved(TokenBucket(10, kMinute), kMaxMagnitude)));
  ExpectValid(ValidateConfig(WithMaxReserved(FixedWindow(kMaxMagnitude, 1), kMaxMagnitude)));
}

TEST(ValidateConfig, MaxReservedAtMostMaxMagnitude) {
  for (double max_reserved : kTooBig) {
    SCOPED_TRACE(max_reserved);
    ExpectInvalid(ValidateConfig(WithMaxReserved(TokenBucket(10, kMinute), max_reserved)),
                  "config field \"maxReserved\" is out of range");
    ExpectInvalid(ValidateConfig(WithMaxReserved(FixedWindow(kMaxMagnitude, 1), max_reserved)),
                  "config field \"maxReserved\" is out of range");
  }
}

TEST(ValidateConfig, FieldsThatDoNotApplyToTheKind) {
  ExpectInvalid(ValidateConfig(WithStart(TokenBucket(10, kMinute), 0)), "\"start\"");
  ExpectInvalid(ValidateConfig(WithCapacity(SlidingWindow(10, kMinute), 10)), "\"capacity\"");
  ExpectInvalid(ValidateConfig(WithMaxReserved(SlidingWindow(10, kMinute), 0)), "\"maxReserved\"");
  // The kind is named too.
  EXPECT_TRUE(MessageHas(ValidateConfig(WithStart(TokenBucket(10, kMinute), 0)), "token bucket"));
  EXPECT_TRUE(MessageHas(ValidateConfig(WithCapacity(SlidingWindow(10, kMinute), 10)), "sliding window"));
}

TEST(ValidateConfig, RefillFromEmptyToFullMustFitInOneHundredYears) {
  // Token bucket: capacity / rate * period.
  ExpectValid(ValidateConfig(WithCapacity(TokenBucket(1, kSecond), 3155760000.0)));
  ExpectInvalid(ValidateConfig(WithCapacity(TokenBucket(1, kSecond), 3155760001.0)), "100 years");
  ExpectInvalid(ValidateConfig(WithCapacity(TokenBucket(1e-9, kHorizonMicros), 2e-9)), "100 years");
  // Fixed window: whole windows, ceil(capacity / rate) * period.
  ExpectValid(ValidateConfig(WithCapacity(FixedWindow(1, kSecond), 3155760000.0)));
  ExpectInvalid(ValidateConfig(WithCapacity(FixedWindow(1, kSecond), 3155760000.5)), "100 years");
  ExpectInvalid(ValidateConfig(WithCapacity(FixedWindow(1, kHorizonMicros), 1.5)), "100 years");
  // Sliding window: a count is forgotten two periods later.
  ExpectValid(ValidateConfig(SlidingWindow(1, kHorizonMicros / 2)));
  ExpectInvalid(ValidateConfig(SlidingWindow(1, kHorizonMicros / 2 + 1)), "100 years");
  Status s = ValidateConfig(WithCapacity(TokenBucket(1, kSecond), 1e308));
  EXPECT_EQ(s.code, StatusCode::kInvalidParameter);
}

TEST(ValidateRequest, CountMustBeFiniteAndNotNegative) {
  LimitConfig c = TokenBucket(10, kMinute);
  for (double count : {-1.0, -1e-300, kNaN, kInf, -kInf}) {
    SCOPED_TRACE(count);
    ExpectInvalid(ValidateRequest(c, Take(count)), "count");
    ExpectInvalid(ValidateRequest(c, Reserve(count)), "count");
    ExpectInvalid(ValidateRequest(SlidingWindow(10, kMinute), Take(count)), "count");
  }
  ExpectValid(ValidateRequest(c, Take(0)));
  ExpectValid(ValidateRequest(c, Take(0.5)));
  ExpectValid(ValidateRequest(c, Take(-0.0)));
}

TEST(ValidateRequest, CountAtMostMaxMagnitude) {
  LimitConfig huge = WithMaxReserved(TokenBucket(kMaxMagnitude, 1), kMaxMagnitude);
  ExpectValid(ValidateRequest(huge, Take(kMaxMagnitude)));
  ExpectValid(ValidateRequest(huge, Reserve(kMaxMagnitude)));
  ExpectValid(ValidateAmount(kMaxMagnitude));
  for (double count : kTooBig) {
    SCOPED_TRACE(count);
    // capacity + maxReserved is 2e300, yet the count itself is out of range.
    ExpectInvalid(ValidateRequest(huge, Reserve(count)), "count must be a number between 0 and 1e300");
    ExpectInvalid(ValidateRequest(huge, Take(count)), "count must be a number between 0 and 1e300");
    ExpectInvalid(ValidateRequest(TokenBucket(10, kMinute), Take(count)),
                  "count must be a number between 0 and 1e300");
    ExpectInvalid(ValidateRequest(SlidingWindow(kMaxMagnitude, kMinute), Take(count)),
                  "count must be a number between 0 and 1e300");
    ExpectInvalid(ValidateAmount(count), "count must be a number between 0 and 1e300");
  }
  for (double count : {-1.0, kNaN, kInf})
    ExpectInvalid(ValidateAmount(count), "count must be a number between 0 and 1e300");
  ExpectValid(ValidateAmount(0));
}

TEST(ValidateRequest, ReserveDoesNotApplyToSlidingWindows) {
  ExpectInvalid(ValidateRequest(SlidingWindow(10, kMinute), Reserve(1)), "reserve");
  ExpectInvalid(ValidateRequest(SlidingWindow(10, kMinute), Reserve(0)), "reserve");
  ExpectValid(ValidateRequest(TokenBucket(10, kMinute), Reserve(1)));
  ExpectValid(ValidateRequest(FixedWindow(10, kMinute), Reserve(1)));
}

TEST(ValidateRequest, CountAboveCapacityCanNeverSucceed) {
  for (LimitConfig c : {TokenBucket(10, kMinute), FixedWindow(10, kMinute), SlidingWindow(10, kMinute)}) {
    SCOPED_TRACE(KindName(c.kind));
    ExpectValid(ValidateRequest(c, Take(10)));
    ExpectInvalid(ValidateRequest(c, Take(std::nextafter(10.0, 11.0))), "can never succeed");
    ExpectInvalid(ValidateRequest(c, Take(11)), "count");
  }
  LimitConfig twenty = WithCapacity(FixedWindow(10, kMinute), 20);
  ExpectValid(ValidateRequest(twenty, Take(20)));
  ExpectInvalid(ValidateRequest(twenty, Take(20.5)), "can never succeed");
  LimitConfig zero = WithCapacity(TokenBucket(10, kMinute), 0);
  ExpectValid(ValidateRequest(zero, Take(0)));
  ExpectInvalid(ValidateRequest(zero, Take(1e-300)), "can never succeed");
}

TEST(ValidateRequest, ReserveAllowsCapacityPlusMaxReserved) {
  LimitConfig c = WithMaxReserved(TokenBucket(10000, kMinute), 5000);
  ExpectValid(ValidateRequest(c, Reserve(15000)));
  ExpectInvalid(ValidateRequest(c, Reserve(15001)), "can never succeed");
  ExpectInvalid(ValidateRequest(c, Take(10001)), "can never succeed");

  LimitConfig fw = WithMaxReserved(FixedWindow(10, kMinute), 25);
  ExpectValid(ValidateRequest(fw, Reserve(35)));
  ExpectInvalid(ValidateRequest(fw, Reserve(35.5)), "can never succeed");

  // Unlimited: bounded by what refills within 100 years.
  LimitConfig unlimited = TokenBucket(10, kMinute);
  ExpectValid(ValidateRequest(unlimited, Reserve(525960010)));
  ExpectInvalid(ValidateRequest(unlimited, Reserve(525960011)), "can never succeed");
}

// MostGrantable is the largest count validation accepts, found with the same
// test decisions use. capacity + maxReserved may round a step above it (here
// 33.3 + 7.7 rounds to 41, yet 33.3 - 41 < -7.7), so it steps down: the count
// an error message names is always granted, and the next double is not.
TEST(ValidateRequest, MostGrantableIsGranted) {
  LimitConfig c = WithMaxReserved(WithCapacity(FixedWindow(10, kMinute), 33.3), 7.7);
  EXPECT_FALSE(ValidateRequest(c, Reserve(41)).ok());
  for (LimitConfig k : {c, WithMaxReserved(TokenBucket(0.1, kSecond), 0.2), WithShards(c, 2),
                        WithShards(c, 7), TokenBucket(10, kMinute)}) {
    const double most = MostGrantable(k, true);
    Status named = ValidateRequest(k, Reserve(most));
    EXPECT_TRUE(named.ok()) << "most " << most << ": " << named.message;
    EXPECT_FALSE(ValidateRequest(k, Reserve(std::nextafter(most, 1e301))).ok()) << "most " << most;
  }
  EXPECT_TRUE(Decide(c, Missing(), kW0, 0, Reserve(MostGrantable(c, true))).ok);
}

TEST(Capacity, DefaultsToRateAndSlidingIsAlwaysRate) {
  EXPECT_DOUBLE_EQ(Capacity(TokenBucket(10, kMinute)), 10);
  EXPECT_DOUBLE_EQ(Capacity(WithCapacity(TokenBucket(10, kMinute), 20)), 20);
  EXPECT_DOUBLE_EQ(Capacity(WithCapacity(TokenBucket(10, kMinute), 0)), 0);
  EXPECT_DOUBLE_EQ(Capacity(FixedWindow(2.5, kMinute)), 2.5);
  EXPECT_DOUBLE_EQ(Capacity(WithCapacity(FixedWindow(10, kMinute), 5)), 5);
  EXPECT_DOUBLE_EQ(Capacity(SlidingWindow(7, kMinute)), 7);
  EXPECT_DOUBLE_EQ(Capacity(WithCapacity(SlidingWindow(7, kMinute), 99)), 7);
}

TEST(MaxDeficit, BoundedByWhatRefillsInOneHundredYears) {
  EXPECT_DOUBLE_EQ(MaxDeficit(TokenBucket(10, kMinute)), 525960000);
  EXPECT_DOUBLE_EQ(MaxDeficit(FixedWindow(10, kMinute)), 525960000);
  // 100 years is 450822857.14 periods of 7 s: the token bucket counts the
  // fraction, the fixed window only whole windows.
  EXPECT_DOUBLE_EQ(MaxDeficit(TokenBucket(10, 7 * kSecond)), 10 * (3155760000.0 / 7));
  EXPECT_DOUBLE_EQ(MaxDeficit(FixedWindow(10, 7 * kSecond)), 4508228570.0);
  EXPECT_DOUBLE_EQ(MaxDeficit(WithMaxReserved(TokenBucket(10, kMinute), 5000)), 5000);
  EXPECT_EQ(MaxDeficit(WithMaxReserved(TokenBucket(10, kMinute), 0)), 0.0);
  EXPECT_DOUBLE_EQ(MaxDeficit(WithMaxReserved(TokenBucket(10, kMinute), 1e12)), 525960000);
  EXPECT_DOUBLE_EQ(MaxDeficit(WithMaxReserved(FixedWindow(1, kHorizonMicros), 5)), 1);
  EXPECT_EQ(MaxDeficit(SlidingWindow(10, kMinute)), 0.0);
}

TEST(MaxDeficit, ClampedToMaxMagnitude) {
  // What refills in 100 years: +inf at 1e300 per µs, 5.3e307 at 1e300 per minute.
  EXPECT_EQ(MaxDeficit(TokenBucket(kMaxMagnitude, 1)), kMaxMagnitude);
  EXPECT_EQ(MaxDeficit(FixedWindow(kMaxMagnitude, 1)), kMaxMagnitude);
  EXPECT_EQ(MaxDeficit(TokenBucket(kMaxMagnitude, kMinute)), kMaxMagnitude);
  EXPECT_EQ(MaxDeficit(FixedWindow(kMaxMagnitude, kMinute)), kMaxMagnitude);
  EXPECT_EQ(MaxDeficit(TokenBucket(1e295, kMinute)), kMaxMagnitude);  // 5.3e302 refills
  EXPECT_EQ(MaxDeficit(WithMaxReserved(TokenBucket(kMaxMagnitude, 1), kMaxMagnitude)), kMaxMagnitude);
  EXPECT_EQ(MaxDeficit(WithMaxReserved(TokenBucket(kMaxMagnitude, 1), 0.5e300)), 0.5e300);
  // Below the clamp, what refills in 100 years still bounds it.
  EXPECT_DOUBLE_EQ(MaxDeficit(TokenBucket(1e280, kHorizonMicros)), 1e280);
  EXPECT_DOUBLE_EQ(MaxDeficit(WithMaxReserved(TokenBucket(1e280, kHorizonMicros), kMaxMagnitude)), 1e280);
  // Capacity plus the clamped deficit is what one reservation can ever take.
  EXPECT_EQ(MostGrantable(TokenBucket(kMaxMagnitude, 1), true), 2e300);
  EXPECT_EQ(MostGrantable(TokenBucket(kMaxMagnitude, 1), false), 1e300);
}

TEST(ParseKind, AcceptsExactlyTheThreeNames) {
  KindId kind = kSlidingWindow;
  ASSERT_TRUE(ParseKind("token bucket", 12, &kind));
  EXPECT_EQ(kind, kTokenBucket);
  ASSERT_TRUE(ParseKind("fixed window", 12, &kind));
  EXPECT_EQ(kind, kFixedWindow);
  ASSERT_TRUE(ParseKind("sliding window", 14, &kind));
  EXPECT_EQ(kind, kSlidingWindow);
  // The length bounds the text: no terminating zero needed.
  ASSERT_TRUE(ParseKind("fixed windowXYZ", 12, &kind));
  EXPECT_EQ(kind, kFixedWindow);

  kind = kFixedWindow;
  for (const char* bad :
       {"Token Bucket", "token bucket ", "token", "tokenbucket", "token_bucket", "", "sliding"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseKind(bad, std::strlen(bad), &kind));
    EXPECT_EQ(kind, kFixedWindow);  // untouched on failure
  }
  EXPECT_FALSE(ParseKind("token bucket", 11, &kind));
}

TEST(KindName, RoundTripsThroughParseKind) {
  for (KindId k : {kTokenBucket, kFixedWindow, kSlidingWindow}) {
    const char* name = KindName(k);
    KindId parsed = k == kTokenBucket ? kSlidingWindow : kTokenBucket;
    ASSERT_TRUE(ParseKind(name, std::strlen(name), &parsed)) << name;
    EXPECT_EQ(parsed, k);
  }
  EXPECT_STREQ(KindName(kTokenBucket), "token bucket");
  EXPECT_STREQ(KindName(kFixedWindow), "fixed window");
  EXPECT_STREQ(KindName(kSlidingWindow), "sliding window");
}

}  // namespace
}  // namespace ratelimit
