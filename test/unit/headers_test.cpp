// HTTP header numbers (ComputeHeaderNumbers): the policy's quota and
// window, whole non-negative remaining, rounding of retry and reset times,
// and clamping to structured-field integers.
#include "headers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

HeaderAnswer Granted(double remaining, double reset_after) {
  HeaderAnswer a;
  a.ok = true;
  a.remaining = remaining;
  a.reset_after = reset_after;
  return a;
}

HeaderAnswer Refused(double retry_after, Micros now, double remaining, double reset_after) {
  HeaderAnswer a;
  a.ok = false;
  a.has_retry = true;
  a.retry_after = retry_after;
  a.has_retry_at = true;
  a.retry_at = now + static_cast<Micros>(std::llround(retry_after * kSecond));
  a.remaining = remaining;
  a.reset_after = reset_after;
  return a;
}

TEST(HeaderNumbers, PolicyIsRatePerPeriodInSeconds) {
  HeaderNumbers h = ComputeHeaderNumbers(FixedWindow(10, kMinute), Granted(9, 42.5), kW0);
  EXPECT_EQ(h.quota, 10);
  EXPECT_EQ(h.window, 60);
  EXPECT_EQ(h.limit, 10);
  EXPECT_EQ(h.remaining, 9);
  EXPECT_EQ(h.reset_seconds, 43);  // rounded up
  EXPECT_EQ(h.reset_epoch, kW0 / kSecond + 43);
  EXPECT_FALSE(h.has_retry_after);
}

TEST(HeaderNumbers, TokenBucketLimitIsCapacity) {
  HeaderNumbers h = ComputeHeaderNumbers(WithCapacity(TokenBucket(10, kMinute), 25), Granted(24.5, 3), kT0);
  EXPECT_EQ(h.quota, 10);
  EXPECT_EQ(h.window, 60);
  EXPECT_EQ(h.limit, 25);
  EXPECT_EQ(h.remaining, 24);  // never fractional
}

TEST(HeaderNumbers, SubSecondPeriodScalesQuotaToOneSecond) {
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(5, 500 * kMicrosPerMilli), Granted(4, 0.1), kT0);
  EXPECT_EQ(h.window, 1);
  EXPECT_EQ(h.quota, 10);
}

TEST(HeaderNumbers, FractionalPeriodRoundsWindowUpAndQuotaDown) {
  HeaderNumbers h = ComputeHeaderNumbers(FixedWindow(10, 1500 * kMicrosPerMilli), Granted(1, 1), kW0);
  EXPECT_EQ(h.window, 2);
  EXPECT_EQ(h.quota, 13);  // 10 * 2 / 1.5 = 13.3
}

TEST(HeaderNumbers, RateBelowOnePerWindowWidensTheWindow) {
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(0.5, kSecond), Granted(0, 2), kT0);
  EXPECT_EQ(h.window, 2);
  EXPECT_EQ(h.quota, 1);
  HeaderNumbers third = ComputeHeaderNumbers(FixedWindow(1.0 / 3, kSecond), Granted(0, 1), kW0);
  EXPECT_EQ(third.window, 3);
  EXPECT_EQ(third.quota, 1);
  HeaderNumbers daily = ComputeHeaderNumbers(TokenBucket(0.1, kDay), Granted(0, 1), kT0);
  EXPECT_EQ(daily.window, 864000);
  EXPECT_EQ(daily.quota, 1);
}

TEST(HeaderNumbers, RefusalSendsRetryAfterRoundedUp) {
  HeaderNumbers h = ComputeHeaderNumbers(FixedWindow(10, kMinute), Refused(12.2, kW0, 0, 12.2), kW0);
  EXPECT_TRUE(h.has_retry_after);
  EXPECT_EQ(h.retry_after, 13);
  EXPECT_EQ(h.reset_seconds, 13);
  EXPECT_EQ(h.reset_epoch, kW0 / kSecond + 13);
  EXPECT_EQ(h.remaining, 0);
}

TEST(HeaderNumbers, ReservationSendsRetryAfterAndNoNegativeRemaining) {
  HeaderAnswer a = Refused(2.000001, kT0, -3, 8);
  a.ok = true;  // reserved for later
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(1, kSecond), a, kT0);
  EXPECT_TRUE(h.has_retry_after);
  EXPECT_EQ(h.retry_after, 3);
  EXPECT_EQ(h.remaining, 0);
}

TEST(HeaderNumbers, ResetEpochUsesRetryAtWhenGiven) {
  HeaderAnswer a = Refused(1.5, kT0, 0, 10);
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(1, kSecond), a, kT0 + 400 * kMicrosPerMilli);
  EXPECT_EQ(h.reset_epoch, static_cast<std::int64_t>(std::ceil(static_cast<double>(a.retry_at) / kSecond)));
}

TEST(HeaderNumbers, TinyRetryIsAtLeastOneSecond) {
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(1000, kSecond), Refused(0.000001, kT0, 0, 0.001), kT0);
  EXPECT_EQ(h.retry_after, 1);
  EXPECT_EQ(h.reset_seconds, 1);
}

TEST(HeaderNumbers, HugeNumbersClampToFifteenDigits) {
  LimitConfig c = TokenBucket(1e300, kSecond);
  HeaderNumbers h = ComputeHeaderNumbers(c, Granted(1e299, 0), kT0);
  EXPECT_EQ(h.quota, kMaxHeaderInteger);
  EXPECT_EQ(h.limit, kMaxHeaderInteger);
  EXPECT_EQ(h.remaining, kMaxHeaderInteger);
  HeaderNumbers r = ComputeHeaderNumbers(TokenBucket(1, kDay), Refused(3e9, kT0, 0, 3e9), kT0);
  EXPECT_EQ(r.retry_after, 3000000000);
}

TEST(HeaderNumbers, NegativeTimesBecomeZero) {
  HeaderNumbers h = ComputeHeaderNumbers(TokenBucket(1, kSecond), Granted(-0.5, -2), kT0);
  EXPECT_EQ(h.remaining, 0);
  EXPECT_EQ(h.reset_seconds, 0);
  EXPECT_EQ(h.reset_epoch, static_cast<std::int64_t>(std::ceil(static_cast<double>(kT0) / kSecond)));
}

TEST(HeaderNumbers, FinitenessCheck) {
  EXPECT_TRUE(HeaderAnswerFinite(Granted(1, 1)));
  EXPECT_FALSE(HeaderAnswerFinite(Granted(std::numeric_limits<double>::infinity(), 1)));
  EXPECT_FALSE(HeaderAnswerFinite(Granted(1, std::nan(""))));
  HeaderAnswer a = Refused(1, kT0, 0, 1);
  a.retry_after = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(HeaderAnswerFinite(a));
  a.has_retry = false;  // an absent retry_after is not looked at
  EXPECT_TRUE(HeaderAnswerFinite(a));
}

}  // namespace
}  // namespace ratelimit
