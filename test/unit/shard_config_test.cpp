// Sharded limits: ShardConfig, PickCandidates and validation of sharded
// requests (ShardsCanEverGrant). Shared helpers: shards_support.h.
#include "shards.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "limiter.h"
#include "shards_support.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// ---- ShardConfig -----------------------------------------------------------

// A row of an unsharded limit holds the config itself; a shard's row its share.
TEST(RowConfig, IsTheConfigUnshardedAndTheShardsShareSharded) {
  LimitConfig config{};
  config.kind = kTokenBucket;
  config.rate = 100;
  config.period = 60 * ratelimit::kMicrosPerSecond;
  config.shards = 1;
  LimitConfig row = ratelimit::RowConfig(config);
  EXPECT_EQ(row.rate, 100);
  EXPECT_FALSE(row.has_capacity);
  config.shards = 4;
  row = ratelimit::RowConfig(config);
  EXPECT_EQ(row.shards, 1);
  EXPECT_EQ(row.rate, 25);
  EXPECT_EQ(row.capacity, ratelimit::ShardConfig(config).capacity);
}

TEST(ShardConfig, DividesRateCapacityAndMaxReservedByN) {
  LimitConfig c = WithShards(WithMaxReserved(WithCapacity(TokenBucket(40, kMinute), 80), 20), 4);
  ASSERT_TRUE(ValidateConfig(c).ok());
  LimitConfig s = ShardConfig(c);
  EXPECT_EQ(s.kind, kTokenBucket);
  EXPECT_EQ(s.period, kMinute);
  EXPECT_EQ(s.rate, 10.0);
  EXPECT_TRUE(s.has_capacity);
  EXPECT_EQ(s.capacity, 20.0);
  EXPECT_TRUE(s.has_max_reserved);
  EXPECT_EQ(s.max_reserved, 5.0);
  EXPECT_EQ(s.shards, 1);
  EXPECT_EQ(Capacity(s), 20.0);
  EXPECT_EQ(MaxDeficit(s), 5.0);
  EXPECT_TRUE(ValidateConfig(s).ok());
}

TEST(ShardConfig, CapacityDefaultsToRateOverN) {
  LimitConfig s = ShardConfig(FortyOverFour());
  EXPECT_TRUE(s.has_capacity);
  EXPECT_EQ(s.capacity, 10.0);
  EXPECT_EQ(Capacity(s), 10.0);
  EXPECT_FALSE(s.has_max_reserved);
  // Unlimited reserve: what one shard refills in 100 years, 1/4 of the whole.
  EXPECT_DOUBLE_EQ(MaxDeficit(s), MaxDeficit(TokenBucket(40, kMinute)) / 4);

  LimitConfig fw = ShardConfig(WithShards(WithStart(FixedWindow(30, kHour), 7), 3));
  EXPECT_EQ(fw.kind, kFixedWindow);
  EXPECT_EQ(fw.rate, 10.0);
  EXPECT_EQ(Capacity(fw), 10.0);
  EXPECT_TRUE(fw.has_start);
  EXPECT_EQ(fw.start, 7);
  EXPECT_TRUE(ValidateConfig(fw).ok());
}

TEST(ShardConfig, SlidingWindowDividesTheRateOnly) {
  LimitConfig s = ShardConfig(WithShards(SlidingWindow(40, kMinute), 4));
  EXPECT_EQ(s.rate, 10.0);
  EXPECT_FALSE(s.has_capacity);  // not a field a sliding window may have
  EXPECT_FALSE(s.has_max_reserved);
  EXPECT_EQ(Capacity(s), 10.0);
  EXPECT_TRUE(ValidateConfig(s).ok());
}

TEST(ShardConfig, OneShardIsTheConfigItself) {
  LimitConfig c = WithMaxReserved(TokenBucket(7.5, kSecond), 3);
  LimitConfig s = ShardConfig(c);
  EXPECT_EQ(s.rate, 7.5);
  EXPECT_EQ(Capacity(s), 7.5);
  EXPECT_EQ(s.max_reserved, 3.0);
  EXPECT_EQ(MaxDeficit(s), MaxDeficit(c));
}

// ---- PickCandidates --------------------------------------------------------

void ExpectValidPair(int n, double u1, double u2) {
  int out[2] = {-1, -1};
  PickCandidates(n, u1, u2, out);
  EXPECT_GE(out[0], 0) << "n " << n << " u1 " << u1 << " u2 " << u2;
  EXPECT_LT(out[0], out[1]) << "n " << n << " u1 " << u1 << " u2 " << u2;
  EXPECT_LT(out[1], n) << "n " << n << " u1 " << u1 << " u2 " << u2;
}

TEST(PickCandidates, TwoDistinctShardsInRangeAscending) {
  const double below_one[] = {std::nextafter(1.0, 0.0), 1 - std::ldexp(1.0, -52), 1 - 1e-12, 0.999999};
  std::vector<double> units = {0.0, std::numeric_limits<double>::denorm_min(), 1e-300, 0.25, 0.5, 0.75};
  units.insert(units.end(), std::begin(below_one), std::end(below_one));
  std::mt19937_64 rng(0x5eed0101);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int n = 2; n <= kMaxShards; ++n) {
    for (double u1 : units)
      for (double u2 : units) ExpectValidPair(n, u1, u2);
    for (int i = 0; i < 100; ++i) ExpectValidPair(n, unit(rng), unit(rng));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PickCandidates, ExtremeUnitsPickTheEnds) {
  for (int n : {2, 3, 16, 1000, kMaxShards}) {
    SCOPED_TRACE(n);
    const double top = std::nextafter(1.0, 0.0);
    int out[2];
    PickCandidates(n, 0, 0, out);
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[1], 1);
    PickCandidates(n, top, top, out);
    EXPECT_EQ(out[0], n - 2);
    EXPECT_EQ(out[1], n - 1);
    PickCandidates(n, 0, top, out);
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[1], n - 1);
    PickCandidates(n, top, 0, out);
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[1], n - 1);
  }
}

// Uniform units give uniform pairs: over a grid of N x (N - 1) unit pairs,
// every unordered pair of shards comes up exactly twice.
TEST(PickCandidates, EveryPairEquallyLikely) {
  for (int n = 2; n <= 64; ++n) {
    std::vector<int> seen(n * n, 0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n - 1; ++j) {
        int out[2];
        PickCandidates(n, (i + 0.5) / n, (j + 0.5) / (n - 1), out);
        ASSERT_LT(out[0], out[1]);
        ++seen[out[0] * n + out[1]];
      }
    }
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) ASSERT_EQ(seen[a * n + b], 2) << "n " << n << " pair " << a << "," << b;
  }
}

TEST(PickCandidates, OneShardGivesZeroTwice) {
  for (double u1 : {0.0, 0.5, std::nextafter(1.0, 0.0)}) {
    for (double u2 : {0.0, 0.5, std::nextafter(1.0, 0.0)}) {
      int out[2] = {-1, -1};
      PickCandidates(1, u1, u2, out);
      EXPECT_EQ(out[0], 0);
      EXPECT_EQ(out[1], 0);
    }
  }
}

// ---- ShardsCanEverGrant and ValidateRequest with shards -------------------

TEST(ShardsCanEverGrant, TwoFullShardsHoldTwoNthsOfCapacity) {
  for (int n : {2, 3, 4, 7, 16, 1024}) {
    SCOPED_TRACE(n);
    for (LimitConfig base : {TokenBucket(100, kMinute), WithCapacity(FixedWindow(100, kMinute), 300),
                             SlidingWindow(100, kMinute), WithCapacity(TokenBucket(100, kMinute), 0.3)}) {
      SCOPED_TRACE(KindName(base.kind));
      LimitConfig c = WithShards(base, n);
      ASSERT_TRUE(ValidateConfig(c).ok());
      const double two = 2 * (Capacity(base) / n);
      EXPECT_EQ(MostGrantable(c, false), two);
      EXPECT_TRUE(ShardsCanEverGrant(c, Take(two)));
      EXPECT_TRUE(ShardsCanEverGrant(c, Take(Capacity(base) / n)));
      EXPECT_TRUE(ShardsCanEverGrant(c, Take(0)));
      EXPECT_FALSE(ShardsCanEverGrant(c, Take(std::nextafter(two, 1e300))));
      EXPECT_TRUE(ValidateRequest(c, Take(two)).ok());
      Status s = ValidateRequest(c, Take(std::nextafter(two, 1e300)));
      EXPECT_EQ(s.code, StatusCode::kInvalidParameter);
      EXPECT_TRUE(MessageHas(s, "can never succeed")) << s.message;
      if (n > 2) {
        // What one row of the whole limit would take is too much for two shards.
        EXPECT_EQ(ValidateRequest(c, Take(Capacity(base))).code, StatusCode::kInvalidParameter);
      }
    }
  }
}

TEST(ShardsCanEverGrant, ValidationMessageNamesTwoShards) {
  LimitConfig c = WithShards(TokenBucket(100, kMinute), 4);  // shards of 25
  EXPECT_TRUE(ValidateRequest(c, Take(50)).ok());
  Status s = ValidateRequest(c, Take(50.5));
  EXPECT_EQ(s.code, StatusCode::kInvalidParameter);
  EXPECT_TRUE(MessageHas(s, "count 50.5 can never succeed: at most 50 fits")) << s.message;
  EXPECT_GT(std::strlen(s.detail), 0u);
}

TEST(ShardsCanEverGrant, ReserveAllowsTwoNthsOfCapacityPlusMaxReserved) {
  LimitConfig c = WithShards(WithMaxReserved(TokenBucket(100, kMinute), 40), 4);  // 25 + 10 per shard
  EXPECT_EQ(MostGrantable(c, true), 70.0);
  EXPECT_TRUE(ValidateRequest(c, Reserve(70)).ok());
  EXPECT_TRUE(ShardsCanEverGrant(c, Reserve(70)));
  EXPECT_FALSE(ShardsCanEverGrant(c, Reserve(std::nextafter(70.0, 71.0))));
  Status s = ValidateRequest(c, Reserve(70.5));
  EXPECT_EQ(s.code, StatusCode::kInvalidParameter);
  EXPECT_TRUE(MessageHas(s, "at most 70 fits")) << s.message;
  EXPECT_EQ(ValidateRequest(c, Take(50.5)).code, StatusCode::kInvalidParameter);

  for (int n : {2, 3, 7, 1024}) {
    SCOPED_TRACE(n);
    LimitConfig awkward = WithShards(WithMaxReserved(WithCapacity(FixedWindow(10, kMinute), 33.3), 7.7), n);
    LimitConfig shard = ShardConfig(awkward);
    const double most = 2 * (Capacity(shard) + MaxDeficit(shard));
    EXPECT_DOUBLE_EQ(most, 2 * (33.3 + 7.7) / n);
    // Up to one rounding step below: MostGrantable itself may round one ulp
    // too high (see ValidateRequest.MostGrantableIsGranted).
    EXPECT_TRUE(ValidateRequest(awkward, Reserve(std::nextafter(most, 0.0))).ok());
    EXPECT_FALSE(ValidateRequest(awkward, Reserve(std::nextafter(most, 1e300))).ok());
    EXPECT_FALSE(ValidateRequest(awkward, Reserve(most * (1 + 1e-15))).ok());
  }

  // Unlimited reserve: each shard may owe what it refills in 100 years.
  LimitConfig unlimited = WithShards(TokenBucket(100, kMinute), 4);
  const double most = 2 * (25 + MaxDeficit(TokenBucket(25, kMinute)));
  EXPECT_TRUE(ValidateRequest(unlimited, Reserve(most)).ok());
  EXPECT_FALSE(ValidateRequest(unlimited, Reserve(most + 1)).ok());
}

// A request validation accepts is granted by two full (missing) shards.
TEST(ShardsCanEverGrant, AgreesWithDecideShardsOnFullShards) {
  std::mt19937_64 rng(0x5eed0102);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 3000; ++i) {
    const int n = 2 + static_cast<int>(rng() % 30);
    const KindId kind = kBuiltInKinds[rng() % std::size(kBuiltInKinds)];
    LimitConfig c = Config(kind, std::pow(10.0, unit(rng) * 8 - 2), kMinute);
    if (kind != kSlidingWindow && unit(rng) < 0.5) c = WithCapacity(c, c.rate * unit(rng) * 3);
    if (kind != kSlidingWindow && unit(rng) < 0.5) c = WithMaxReserved(c, c.rate * unit(rng) * 3);
    c = WithShards(c, n);
    ASSERT_TRUE(ValidateConfig(c).ok());
    const bool reserve = kind != kSlidingWindow && unit(rng) < 0.5;
    const double most = MostGrantable(c, reserve);
    for (double count : {most, std::nextafter(most, 0.0), std::nextafter(most, 1e300), most * unit(rng)}) {
      Request r{count, reserve};
      bool valid = ValidateRequest(c, r).ok();
      ShardDecision d = DecidePair(ShardConfig(c), Missing(), Missing(), kW0, r, n);
      ASSERT_EQ(valid, d.summary.ok) << KindName(kind) << " n " << n << " rate " << c.rate << " count "
                                     << count << (reserve ? " reserve" : "");
    }
  }
}

}  // namespace
}  // namespace ratelimit
