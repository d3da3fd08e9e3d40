// Sharded limits: totals (TotalValueAt, CheckShards). Shared helpers:
// shards_support.h.
#include "shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "limiter.h"
#include "shards_support.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// ---- TotalValueAt and CheckShards -----------------------------------------

TEST(TotalValueAt, MissingShardsCountAsFull) {
  const LimitConfig s = ShardConfig(FortyOverFour());
  ShardInput all[4] = {
      {0, Missing()}, {1, Stored(3, kT0)}, {2, Stored(0, kT0 - 30 * kSecond)}, {3, Missing()}};
  Reading r = TotalValueAt(s, all, 4, kT0, 0);
  EXPECT_DOUBLE_EQ(r.value, 10 + 3 + 5 + 10);
  EXPECT_EQ(r.ts, kT0);

  ShardInput none[4] = {{0, Missing()}, {1, Missing()}, {2, Missing()}, {3, Missing()}};
  EXPECT_EQ(TotalValueAt(s, none, 4, kT0, 0).value, 40.0);

  // A ts after the clock (clock skew): no refill, reported at that ts.
  all[3].state = Stored(2, kT0 + 5 * kSecond);
  Reading skewed = TotalValueAt(s, all, 4, kT0, 0);
  EXPECT_DOUBLE_EQ(skewed.value, 10 + 3 + 5 + 2);
  EXPECT_EQ(skewed.ts, kT0 + 5 * kSecond);

  // Reservations count negative.
  all[0].state = Stored(-7, kT0);
  EXPECT_DOUBLE_EQ(TotalValueAt(s, all, 4, kT0, 0).value, -7 + 3 + 5 + 2);
}

TEST(TotalValueAt, WindowKindsReportTheWindowStart) {
  const LimitConfig fw = ShardConfig(WithShards(WithCapacity(FixedWindow(20, kMinute), 40), 2));
  ShardInput f[2] = {{0, Stored(3, kW0)}, {1, Missing()}};
  Reading r = TotalValueAt(fw, f, 2, kW0 + 70 * kSecond, 0);
  EXPECT_EQ(r.value, 13.0 + 20.0);
  EXPECT_EQ(r.ts, kW0 + kMinute);

  const LimitConfig sw = ShardConfig(WithShards(SlidingWindow(20, kMinute), 2));
  ShardInput w[2] = {{0, Stored(4, kW0, 6)}, {1, Missing()}};
  Reading sr = TotalValueAt(sw, w, 2, kW0 + 30 * kSecond, 0);
  EXPECT_EQ(sr.value, (10 - (3 + 4)) + 10.0);  // floor(6 * 0.5) + 4 used in shard 0
  EXPECT_EQ(sr.ts, kW0);
}

TEST(TotalValueAt, IsTheSumOfEveryShardsValue) {
  std::mt19937_64 rng(0x5eed0104);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 300; ++i) {
    const int n = 1 + static_cast<int>(rng() % 64);
    const LimitConfig s = ShardConfig(WithShards(WithMaxReserved(TokenBucket(7.5 * n, kMinute), n), n));
    std::vector<ShardInput> all(n);
    double want = 0;
    Micros ts = 0;
    const Micros now = kT0 + static_cast<Micros>(rng() % kMinute);
    for (int k = 0; k < n; ++k) {
      all[k].shard = k;
      if (unit(rng) < 0.8)
        all[k].state = Stored(unit(rng) * 8.5 - 1, kT0 + static_cast<Micros>(rng() % kMinute));
      Reading one = ValueAt(s, all[k].state, now, 0);
      want += one.value;
      ts = k == 0 ? one.ts : std::max(ts, one.ts);
    }
    Reading got = TotalValueAt(s, all.data(), n, now, 0);
    EXPECT_NEAR(got.value, want, 1e-12 * n * 10);
    EXPECT_EQ(got.ts, ts);
  }
}

TEST(CheckShards, DecidesWithTheBestTwoShardsAndReportsTheExactTotal) {
  const LimitConfig s = ShardConfig(WithShards(TokenBucket(50, kMinute), 5));  // 5 shards of 10
  ShardInput all[5] = {{0, Stored(1, kT0)},
                       {1, Stored(7, kT0)},
                       {2, Stored(3, kT0)},
                       {3, Stored(9, kT0)},
                       {4, Stored(2, kT0)}};
  // 9 + 7 = 16 fit 15, which no other pair does.
  Decision ok = CheckShards(s, all, 5, kT0, 0, Take(15));
  EXPECT_TRUE(ok.ok);
  EXPECT_FALSE(ok.has_retry);
  EXPECT_EQ(ok.remaining, 22.0);              // the total now: a check consumes nothing
  EXPECT_EQ(ok.full_at, kT0 + 57 * kSecond);  // shards 3 and 1 at 0.5 each after taking 15
  ShardInput best[2] = {all[3], all[1]};
  Decision pair = DecideShards(s, best, 2, kT0, 0, Take(15), 5).summary;
  EXPECT_EQ(ok.full_at, pair.full_at);
  EXPECT_EQ(ok.reset_after, pair.reset_after);

  Decision refused = CheckShards(s, all, 5, kT0, 0, Take(17));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.remaining, 22.0);
  EXPECT_EQ(refused.retry_at, kT0 + 3 * kSecond);  // 0.5 more in shards 3 and 1
  EXPECT_DOUBLE_EQ(refused.retry_after, 3.0);
  EXPECT_EQ(refused.retry_at, DecideShards(s, best, 2, kT0, 0, Take(17), 5).summary.retry_at);
  EXPECT_TRUE(CheckShards(s, all, 5, refused.retry_at, 0, Take(17)).ok);
  EXPECT_FALSE(CheckShards(s, all, 5, refused.retry_at - 1, 0, Take(17)).ok);

  // The best pair may be anywhere, including missing (full) shards.
  ShardInput gaps[5] = {
      {0, Missing()}, {1, Stored(7, kT0)}, {2, Missing()}, {3, Stored(9, kT0)}, {4, Stored(2, kT0)}};
  Decision full = CheckShards(s, gaps, 5, kT0, 0, Take(20));
  EXPECT_TRUE(full.ok);
  EXPECT_EQ(full.remaining, 38.0);
  ShardInput last[3] = {{0, Stored(0, kT0)}, {1, Stored(1, kT0)}, {2, Stored(6, kT0)}};
  EXPECT_TRUE(CheckShards(s, last, 3, kT0, 0, Take(7)).ok);
  EXPECT_FALSE(CheckShards(s, last, 3, kT0, 0, Take(7.5)).ok);
}

TEST(CheckShards, OneShardIsASingleRowCheck) {
  const LimitConfig c = WithShards(TokenBucket(10, kMinute), 1);
  const LimitConfig s = ShardConfig(c);
  ShardInput one[1] = {{0, Stored(3, kT0)}};
  Decision want = Decide(c, one[0].state, kT0, 0, Take(5));
  Decision got = CheckShards(s, one, 1, kT0, 0, Take(5));
  EXPECT_FALSE(got.ok);
  EXPECT_EQ(got.retry_at, want.retry_at);
  EXPECT_EQ(got.remaining, want.remaining);
  EXPECT_EQ(got.full_at, want.full_at);
  EXPECT_TRUE(CheckShards(s, one, 1, kT0, 0, Take(3)).ok);
}

}  // namespace
}  // namespace ratelimit
