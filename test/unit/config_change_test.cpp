// How a change of config carries a key's stored rows (policy.h), as
// src/pg/config/config_changes.cpp applies it: the same shard count carries
// each row (CarryRow: brought up to now under the old config, its tokens
// kept, capped at the new capacity, never refilled by the change); another
// shard count spreads the key's tokens evenly over the new shards
// (SpreadRow), a missing shard counting as full.
#include <gtest/gtest.h>

#include "policy.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;

double TokensAt(const LimitConfig& row, const LimitState& state, Micros now) {
  return ValueAt(row, state, now, 0).value;
}

TEST(CarryRow, TokensStayUnderANewRate) {
  LimitConfig from = TokenBucket(10, kMinute);
  LimitConfig to = TokenBucket(100, kMinute);
  StoredRow carried = CarryRow(from, 0, to, 0, Stored(3, kT0), kT0);
  ASSERT_TRUE(carried.state.exists);
  EXPECT_DOUBLE_EQ(TokensAt(to, carried.state, kT0), 3);
  // Refilled at the new rate from then on: full (100) 97 / 100 min later.
  EXPECT_NEAR(static_cast<double>(carried.idle_at - kT0), 0.97 * kMinute, 1);
}

TEST(CarryRow, BroughtUpToNowUnderTheOldConfigFirst) {
  LimitConfig from = TokenBucket(10, kMinute);
  LimitConfig to = TokenBucket(100, kMinute);
  // 0 tokens 30 s ago at 10/min: 5 now, whatever the new rate.
  StoredRow carried = CarryRow(from, 0, to, 0, Stored(0, kT0 - 30 * kSecond), kT0);
  EXPECT_DOUBLE_EQ(TokensAt(to, carried.state, kT0), 5);
}

TEST(CarryRow, CappedAtTheNewCapacityAndNotRefilled) {
  LimitConfig from = TokenBucket(10, kMinute);
  StoredRow smaller = CarryRow(from, 0, TokenBucket(4, kMinute), 0, Stored(7, kT0), kT0);
  EXPECT_DOUBLE_EQ(TokensAt(TokenBucket(4, kMinute), smaller.state, kT0), 4);
  EXPECT_LE(smaller.idle_at, kT0);  // full: the same as no row at once
  LimitConfig larger = WithCapacity(TokenBucket(10, kMinute), 50);
  StoredRow kept = CarryRow(from, 0, larger, 0, Stored(10, kT0), kT0);
  EXPECT_DOUBLE_EQ(TokensAt(larger, kept.state, kT0), 10);  // a larger capacity does not refill it
}

TEST(CarryRow, NoRowBecomesTheNewInitialState) {
  LimitConfig to = TokenBucket(100, kMinute);
  StoredRow carried = CarryRow(TokenBucket(10, kMinute), 0, to, 0, Missing(), kT0);
  EXPECT_DOUBLE_EQ(TokensAt(to, carried.state, kT0), 100);
  EXPECT_LE(carried.idle_at, kT0);
}

TEST(CarryRow, AWindowKeepsWhatItUsedInItsWindow) {
  LimitConfig from = FixedWindow(10, kMinute);
  LimitConfig to = FixedWindow(20, kMinute);
  // 6 of 10 left in the window starting at kW0: 14 of 20 left.
  StoredRow carried = CarryRow(from, 0, to, 0, Stored(6, kW0), kW0 + 10 * kSecond);
  EXPECT_DOUBLE_EQ(TokensAt(to, carried.state, kW0 + 10 * kSecond), 6);
  EXPECT_EQ(carried.idle_at, kW0 + kMinute);  // full at the next window
}

// Four shards of a 100/min bucket (25 each) into two (50 each).
TEST(SpreadRow, TheKeysTokensSpreadEvenly) {
  LimitConfig from = WithShards(TokenBucket(100, kMinute), 4);
  LimitConfig to = WithShards(TokenBucket(100, kMinute), 2);
  ShardInput all[4];
  for (int i = 0; i < 4; ++i) all[i].shard = i;
  all[0].state = Stored(5, kT0);
  all[1].state = Stored(10, kT0);
  // all[2]: no row, full (25)
  all[3].state = Stored(0, kT0);
  StoredRow spread = SpreadRow(from, 0, all, to, 0, kT0, kT0);
  ASSERT_TRUE(spread.state.exists);
  EXPECT_DOUBLE_EQ(TokensAt(RowConfig(to), spread.state, kT0), 20);  // 40 over 2
  // A shard of 50 at 50/min: full 30 / 50 min later.
  EXPECT_NEAR(static_cast<double>(spread.idle_at - kT0), 0.6 * kMinute, 1);
}

TEST(SpreadRow, RowsAreBroughtUpToNow) {
  LimitConfig from = WithShards(TokenBucket(100, kMinute), 2);  // 50/min each
  LimitConfig to = WithShards(TokenBucket(100, kMinute), 4);
  ShardInput all[2];
  all[0] = {0, Stored(0, kT0 - 30 * kSecond)};  // 25 now
  all[1] = {1, Stored(15, kT0)};
  StoredRow spread = SpreadRow(from, 0, all, to, 0, kT0, kT0);
  EXPECT_DOUBLE_EQ(TokensAt(RowConfig(to), spread.state, kT0), 10);  // 40 over 4
}

TEST(SpreadRow, AFullKeyIsNoRows) {
  LimitConfig from = WithShards(TokenBucket(100, kMinute), 2);
  LimitConfig to = WithShards(TokenBucket(100, kMinute), 4);
  ShardInput all[2] = {{0, Missing()}, {1, Missing()}};
  EXPECT_FALSE(SpreadRow(from, 0, all, to, 0, kT0, kT0).state.exists);
  // Capped: 80 tokens over one shard of a 50 limit is full.
  all[0].state = Stored(40, kT0);
  all[1].state = Stored(40, kT0);
  EXPECT_FALSE(SpreadRow(from, 0, all, WithShards(TokenBucket(50, kMinute), 1), 0, kT0, kT0).state.exists);
}

TEST(SpreadRow, ADeficitIsSpreadToo) {
  LimitConfig from = WithMaxReserved(WithShards(TokenBucket(100, kMinute), 2), 100);
  LimitConfig to = WithMaxReserved(WithShards(TokenBucket(100, kMinute), 4), 100);
  ShardInput all[2] = {{0, Stored(-20, kT0)}, {1, Stored(0, kT0)}};
  StoredRow spread = SpreadRow(from, 0, all, to, 0, kT0, kT0);
  EXPECT_DOUBLE_EQ(TokensAt(RowConfig(to), spread.state, kT0), -5);  // -20 over 4
}

TEST(SpreadRow, AWindowKeepsWhatItUsedInTheWindowOfEff) {
  LimitConfig from = WithShards(FixedWindow(100, kMinute), 2);  // 50 each
  LimitConfig to = WithShards(FixedWindow(100, kMinute), 4);    // 25 each
  Micros now = kW0 + 20 * kSecond;
  ShardInput all[2] = {{0, Stored(30, kW0)}, {1, Stored(50, kW0)}};  // 20 used of 100
  StoredRow spread = SpreadRow(from, 0, all, to, 0, kW0 + 10 * kSecond, now);
  ASSERT_TRUE(spread.state.exists);
  EXPECT_DOUBLE_EQ(TokensAt(RowConfig(to), spread.state, now), 20);  // 80 over 4
  EXPECT_EQ(spread.idle_at, kW0 + kMinute);
}

}  // namespace
}  // namespace ratelimit
