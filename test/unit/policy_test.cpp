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
  other.kind = kSlidingWindow;
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

TEST(Realigned, RowOnTheGridStaysAsItIs) {
  LimitConfig config = FixedWindow(10, kHour);
  LimitState state{true, 3, kW0, 0};
  LimitState same = Realigned(config, 0, state, kHour, kW0 + kMinute);
  EXPECT_EQ(same.value, 3);
  EXPECT_EQ(same.ts, kW0);
  // A token bucket, no row, and a row whose writing period is not kept: as they are.
  LimitState bucket{true, 3, kT0, 0};
  EXPECT_EQ(Realigned(TokenBucket(10, kHour), 0, bucket, 0, kT0 + kSecond).ts, kT0);
  EXPECT_FALSE(Realigned(config, 0, LimitState{}, kMinute, kW0).exists);
  EXPECT_EQ(Realigned(config, 0, LimitState{true, 3, kW0 + kMinute, 0}, 0, kW0 + kMinute).ts, kW0 + kMinute);
}

TEST(Realigned, AnotherPeriodIsCarriedOntoTheNewGrid) {
  // Written under 15-minute windows at 00:15; read under hourly ones at 00:20.
  LimitConfig config = FixedWindow(3, kHour);
  LimitState state{true, 0, kW0 + 15 * kMinute, 0};
  LimitState realigned = Realigned(config, 0, state, 15 * kMinute, kW0 + 20 * kMinute);
  EXPECT_EQ(realigned.ts, kW0);  // the hour's window, as a table row carried by the change
  EXPECT_EQ(realigned.value, 0);
  // The old window over: its tokens are back (capped at the new capacity).
  LimitState later = Realigned(config, 0, state, 15 * kMinute, kW0 + 40 * kMinute);
  EXPECT_EQ(later.value, 3);
}

TEST(Realigned, AnotherStartIsCarriedOntoTheNewGrid) {
  LimitConfig config = FixedWindow(3, kHour);
  LimitState state{true, 1, kW0, 0};
  Micros origin = 30 * kMinute;  // windows start at half past
  LimitState realigned = Realigned(config, origin, state, kHour, kW0 + 40 * kMinute);
  EXPECT_EQ(realigned.ts, kW0 + 30 * kMinute);
  EXPECT_EQ(realigned.value, 1);
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
