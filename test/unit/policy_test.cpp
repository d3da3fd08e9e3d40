// Limits as data (policy.h): SameLimit, the carry-over of a row into a
// changed config, and shadow answers.
#include <gtest/gtest.h>

#include "policy.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;

TEST(SameLimit, WrittenAnotherWayIsTheSameLimit) {
  LimitConfig a = TokenBucket(10, kMinute);
  LimitConfig b = TokenBucket(10, kMinute);
  b.has_capacity = true;
  b.capacity = 10;  // absent capacity means rate
  EXPECT_TRUE(SameLimit(a, b));
  b.capacity = 11;
  EXPECT_FALSE(SameLimit(a, b));
}

TEST(SameLimit, EveryFieldCounts) {
  LimitConfig base = FixedWindow(10, kMinute);
  LimitConfig other = base;
  other.rate = 9;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.period = kHour;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.kind = Kind::kSlidingWindow;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.has_max_reserved = true;
  other.max_reserved = 1e300;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.has_start = true;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.shards = 4;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.has_jitter = true;
  other.jitter_is_period = true;
  EXPECT_FALSE(SameLimit(base, other));
  other = base;
  other.shadow = true;
  EXPECT_FALSE(SameLimit(base, other));
  EXPECT_TRUE(SameLimit(base, base));
}

TEST(CarryOver, TokenBucketIsBroughtUpToNowThenCapped) {
  LimitConfig from = TokenBucket(60, kMinute);  // 1 per second
  LimitState state{true, 2, kT0, 0};
  LimitConfig to = TokenBucket(6, kMinute);
  to.has_capacity = true;
  to.capacity = 1000;
  LimitState carried = CarryOver(from, 0, to, 0, state, kT0 + 10 * kSecond);
  EXPECT_EQ(carried.value, 12);  // 2 + 10 s at the old rate; not refilled to 1000
  EXPECT_EQ(carried.ts, kT0 + 10 * kSecond);
  to.capacity = 5;
  EXPECT_EQ(CarryOver(from, 0, to, 0, state, kT0 + 10 * kSecond).value, 5);
}

TEST(CarryOver, DeficitStays) {
  LimitConfig from = TokenBucket(60, kMinute);
  LimitState state{true, -30, kT0, 0};
  LimitState carried = CarryOver(from, 0, TokenBucket(1, kMinute), 0, state, kT0 + 10 * kSecond);
  EXPECT_EQ(carried.value, -20);
}

TEST(CarryOver, FixedWindowIsAlignedToTheNewWindows) {
  LimitConfig from = FixedWindow(10, kHour);
  LimitState state{true, 3, kW0, 0};
  LimitState carried = CarryOver(from, 0, FixedWindow(2, kMinute), 0, state, kW0 + 90 * kSecond);
  EXPECT_EQ(carried.value, 2);  // 3 left, capped at 2
  EXPECT_EQ(carried.ts, kW0 + kMinute);
  EXPECT_EQ(ValueAt(FixedWindow(2, kMinute), carried, kW0 + 90 * kSecond, 0).value, 2);
}

TEST(CarryOver, SlidingWindowKeepsItsAvailableTokens) {
  LimitConfig from = SlidingWindow(10, kMinute);
  LimitState state{true, 7, kW0, 0};  // 7 used in the current window: 3 available
  LimitConfig to = SlidingWindow(20, kMinute);
  LimitState carried = CarryOver(from, 0, to, 0, state, kW0 + kSecond);
  EXPECT_EQ(ValueAt(to, carried, kW0 + kSecond, 0).value, 3);  // not refilled by the larger rate
  EXPECT_EQ(carried.prev, 0);
}

TEST(CarryOver, NoRowStaysNoRow) {
  LimitState none;
  EXPECT_FALSE(CarryOver(TokenBucket(1, kMinute), 0, TokenBucket(2, kMinute), 0, none, kT0).exists);
}

TEST(ShadowGrant, GrantedWithoutRetryKeepingTheRest) {
  Decision refused;
  refused.ok = false;
  refused.has_retry = true;
  refused.retry_at = kT0 + kSecond;
  refused.retry_after = 1;
  refused.remaining = 0.5;
  refused.reset_after = 30;
  Decision shadow = ShadowGrant(refused);
  EXPECT_TRUE(shadow.ok);
  EXPECT_FALSE(shadow.has_retry);
  EXPECT_EQ(shadow.remaining, 0.5);
  EXPECT_EQ(shadow.reset_after, 30);
}

}  // namespace
}  // namespace ratelimit

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// An owner's config without maxReserved reserves at most one period's
// refill (rate), whatever its capacity; an explicit one is kept.
TEST(OwnerBounded, ReservesAtMostOnePeriod) {
  LimitConfig burst = WithCapacity(TokenBucket(1, kHour), 100);
  LimitConfig bounded = OwnerBounded(burst);
  EXPECT_TRUE(bounded.has_max_reserved);
  EXPECT_EQ(bounded.max_reserved, 1);
  EXPECT_EQ(MostGrantable(bounded, true), 101);
  EXPECT_EQ(OwnerBounded(WithMaxReserved(burst, 500)).max_reserved, 500);
  EXPECT_FALSE(OwnerBounded(SlidingWindow(5, kMinute)).has_max_reserved);
}

// A deficit deeper than the config allows reads as the deepest it allows;
// anything else, and sliding windows, are unchanged.
TEST(WithinMaxDeficit, CutsOnlyDeeperDeficits) {
  LimitConfig c = WithMaxReserved(TokenBucket(10, kHour), 10);
  EXPECT_EQ(WithinMaxDeficit(c, Stored(-875990, kT0)).value, -10);
  EXPECT_EQ(WithinMaxDeficit(c, Stored(-4, kT0)).value, -4);
  EXPECT_EQ(WithinMaxDeficit(c, Stored(7, kT0)).value, 7);
  EXPECT_FALSE(WithinMaxDeficit(c, Missing()).exists);
  EXPECT_EQ(WithinMaxDeficit(SlidingWindow(5, kMinute), Stored(3, kW0, 2)).value, 3);
}

// Whether a count can never be granted, reserving or not.
TEST(NeverGrantable, CountsAboveWhatOneCallCanTake) {
  LimitConfig c = TokenBucket(10, kMinute);
  EXPECT_FALSE(NeverGrantable(c, Take(10)));
  EXPECT_TRUE(NeverGrantable(c, Take(10.5)));
  EXPECT_FALSE(NeverGrantable(WithMaxReserved(c, 5), Reserve(15)));
  EXPECT_TRUE(NeverGrantable(WithMaxReserved(c, 5), Reserve(15.5)));
}

}  // namespace
}  // namespace ratelimit
