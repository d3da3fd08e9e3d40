// Reservations never answer worse than the same call without reserve, and a
// sharded limit's check (CheckShards) and take (DecideShards) give the same
// answer: worked examples. reservation_property_test.cpp checks the same
// rules over random limits.
#include <gtest/gtest.h>

#include "limiter.h"
#include "shards.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// {"kind":"token bucket","rate":2,"period":1000,"capacity":4,"shards":2}:
// each shard holds up to 2 tokens and refills 1 token per second.
LimitConfig TwoPerSecondOverTwo() { return WithShards(WithCapacity(TokenBucket(2, kSecond), 4), 2); }

// Both shards of the limit, shard i at index i.
struct TwoShards {
  ShardInput all[2];
};

TwoShards BothAt(double value, Micros ts) {
  return TwoShards{{{0, Stored(value, ts)}, {1, Stored(value, ts)}}};
}

TEST(ShardedReservation, OneTokenInEachShardGrantsAtOnceFromBoth) {
  const LimitConfig c = TwoPerSecondOverTwo();
  const LimitConfig s = ShardConfig(c);
  ASSERT_EQ(Capacity(s), 2.0);
  ASSERT_EQ(s.rate, 1.0);
  const TwoShards shards = BothAt(1, kT0);  // the clock is frozen at kT0

  for (Request r : {Reserve(2), Take(2)}) {
    SCOPED_TRACE(r.reserve ? "reserve" : "no reserve");
    const ShardDecision take = DecideShards(s, shards.all, 2, kT0, 0, r, 2);
    ASSERT_TRUE(take.summary.ok);
    EXPECT_FALSE(take.summary.has_retry);  // granted now, no wait
    // No shard holds 2 alone: 1 from each, both left at 0.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(take.writes[i].write) << "shard " << i;
      EXPECT_EQ(take.writes[i].next.value, 0.0) << "shard " << i;
    }
    EXPECT_EQ(take.summary.remaining, 0.0);

    const Decision check = CheckShards(s, shards.all, 2, kT0, 0, r);
    EXPECT_TRUE(check.ok);
    EXPECT_FALSE(check.has_retry);
  }

  // One shard alone could only reserve it by going 1 into deficit and
  // waiting 1 s: it grants only with a wait, so it must not be used alone.
  const ShardDecision alone = DecideShards(s, &shards.all[0], 1, kT0, 0, Reserve(2), 2);
  ASSERT_TRUE(alone.summary.ok);
  EXPECT_TRUE(alone.summary.has_retry);
  EXPECT_EQ(alone.summary.retry_at, kT0 + kSecond);
}

// 2 tokens are needed and the limit refills rate 2 per second: 1 s. Spread
// over the shards, each owes 1 and refills rate / shards = 1 per second: 1 s.
TEST(ShardedReservation, EmptyShardsWaitTheSameOneSecondInCheckAndTake) {
  const LimitConfig s = ShardConfig(TwoPerSecondOverTwo());
  const TwoShards shards = BothAt(0, kT0);

  const ShardDecision take = DecideShards(s, shards.all, 2, kT0, 0, Reserve(2), 2);
  ASSERT_TRUE(take.summary.ok);
  ASSERT_TRUE(take.summary.has_retry);
  EXPECT_EQ(take.summary.retry_at, kT0 + kSecond);
  EXPECT_EQ(take.summary.retry_after, 1.0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(take.writes[i].write) << "shard " << i;
    EXPECT_EQ(take.writes[i].next.value, -1.0) << "shard " << i;
    EXPECT_EQ(take.writes[i].full_at, kT0 + 3 * kSecond) << "shard " << i;  // -1 to 2 at 1 per second
  }
  EXPECT_EQ(take.summary.remaining, -2.0);
  EXPECT_EQ(take.summary.reset_after, 3.0);

  const Decision check = CheckShards(s, shards.all, 2, kT0, 0, Reserve(2));
  EXPECT_TRUE(check.ok);
  EXPECT_TRUE(check.has_retry);
  EXPECT_EQ(check.retry_at, take.summary.retry_at);
  EXPECT_EQ(check.retry_after, 1.0);

  // Without reserve: refused, and granted after the same 1 s.
  const ShardDecision unreserved = DecideShards(s, shards.all, 2, kT0, 0, Take(2), 2);
  EXPECT_FALSE(unreserved.summary.ok);
  EXPECT_EQ(unreserved.summary.retry_at, kT0 + kSecond);
  EXPECT_EQ(CheckShards(s, shards.all, 2, kT0, 0, Take(2)).retry_at, kT0 + kSecond);

  // Taking all 2 from one shard would owe 2 there and wait 2 s.
  const ShardDecision alone = DecideShards(s, &shards.all[0], 1, kT0, 0, Reserve(2), 2);
  EXPECT_EQ(alone.summary.retry_at, kT0 + 2 * kSecond);
}

// A shard written by a call whose clock was ahead has a ts after now. The
// pair is seen at that later moment (as one row is seen at max(now, ts)):
// the other shard has refilled 0.5 by then, so each owes 0.75 and is out of
// deficit 0.75 s later, at now + 1.25 s, when the same call without reserve
// is granted. Seen at two moments, the reservation was told now + 1.5 s.
TEST(ShardedReservation, AShardAheadOfTheClockIsSeenAtTheSameMomentAsTheOther) {
  const LimitConfig s = ShardConfig(TwoPerSecondOverTwo());
  const Micros ahead = kT0 + kSecond / 2;
  const ShardInput pair[2] = {{0, Stored(0, ahead)}, {1, Stored(0, kT0)}};

  const ShardDecision reserved = DecideShards(s, pair, 2, kT0, 0, Reserve(2), 2);
  ASSERT_TRUE(reserved.summary.ok);
  EXPECT_EQ(reserved.summary.retry_at, kT0 + 1250 * kMicrosPerMilli);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(reserved.writes[i].next.value, -0.75) << "shard " << i;
    EXPECT_EQ(reserved.writes[i].next.ts, ahead) << "shard " << i;
  }

  const ShardDecision unreserved = DecideShards(s, pair, 2, kT0, 0, Take(2), 2);
  EXPECT_FALSE(unreserved.summary.ok);
  EXPECT_EQ(unreserved.summary.retry_at, kT0 + 1250 * kMicrosPerMilli);
  EXPECT_EQ(CheckShards(s, pair, 2, kT0, 0, Reserve(2)).retry_at, reserved.summary.retry_at);
}

// Fixed window, 0.1 per second, capacity 1. After taking 0.8 the row holds
// 0.19999999999999996; in the next window 0.29999999999999993. Reserving
// 0.5 then stores -0.20000000000000007, which two more windows of 0.1 leave
// at -5.6e-17: computed from the stored state, out of deficit only after a
// third window (2.5 s), while the same call without reserve is granted after
// two (1.5 s). The reservation is stored rounded toward the caller instead.
TEST(Reservation, FixedWindowRoundingNeverWaitsAWindowLonger) {
  const LimitConfig c = WithCapacity(FixedWindow(0.1, kSecond), 1);
  const Decision first = Decide(c, Missing(), kW0, 0, Take(0.8));
  ASSERT_TRUE(first.ok);
  const Micros now = kW0 + 1500 * kMicrosPerMilli;

  const Decision unreserved = Decide(c, first.next, now, 0, Take(0.5));
  ASSERT_FALSE(unreserved.ok);
  EXPECT_EQ(unreserved.retry_at, kW0 + 3 * kSecond);

  const Decision reserved = Decide(c, first.next, now, 0, Reserve(0.5));
  ASSERT_TRUE(reserved.ok);
  ASSERT_TRUE(reserved.has_retry);
  EXPECT_EQ(reserved.retry_at, kW0 + 3 * kSecond);
  EXPECT_EQ(reserved.retry_after, 1.5);
  // The stored state agrees: out of deficit at retry_at, owing one µs (one
  // window) before, and within a rounding step of 0.3 - 0.5.
  EXPECT_GE(ValueAt(c, reserved.next, reserved.retry_at, 0).value, 0.0);
  EXPECT_LT(ValueAt(c, reserved.next, reserved.retry_at - 1, 0).value, 0.0);
  EXPECT_NEAR(reserved.next.value, -0.2, 1e-15);
  EXPECT_EQ(reserved.remaining, reserved.next.value);

  // A sharded limit of two such rows decides the same.
  const LimitConfig sharded = WithShards(WithCapacity(FixedWindow(0.2, kSecond), 2), 2);
  const LimitConfig s = ShardConfig(sharded);
  ASSERT_EQ(s.rate, 0.1);
  ASSERT_EQ(Capacity(s), 1.0);
  const ShardInput one{0, first.next};
  const ShardDecision shard = DecideShards(s, &one, 1, now, 0, Reserve(0.5), 2);
  ASSERT_TRUE(shard.summary.ok);
  EXPECT_EQ(shard.summary.retry_at, kW0 + 3 * kSecond);
}

}  // namespace
}  // namespace ratelimit
