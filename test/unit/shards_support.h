// What the tests of sharded limits share (shard_config_test.cpp,
// decide_shards_test.cpp, shard_totals_test.cpp, refund_shards_test.cpp):
// a sharded config, a decision on two shards, and the checks of an exact
// retry time and of a decision that writes nothing.
#pragma once

#include <gtest/gtest.h>

#include "limiter.h"
#include "shards.h"
#include "test_support.h"

namespace ratelimit {
namespace testing_support {

// 40 per minute over 4 shards: each shard 10 per minute with capacity 10, so
// one token per shard every 6 s.
inline LimitConfig FortyOverFour() { return WithShards(TokenBucket(40, kMinute), 4); }

inline ShardDecision DecidePair(const LimitConfig& shard, const LimitState& a, const LimitState& b,
                                Micros now, const Request& r, int total_shards, Micros origin = 0) {
  ShardInput inputs[2] = {{0, a}, {1, b}};
  return DecideShards(shard, inputs, 2, now, origin, r, total_shards);
}

// A refused pair is granted at retry_at and still refused one µs earlier.
inline void ExpectShardRetryIsExact(const LimitConfig& shard, const LimitState& a, const LimitState& b,
                                    Micros now, const Request& r, int total_shards, Micros origin = 0) {
  ShardDecision d = DecidePair(shard, a, b, now, r, total_shards, origin);
  ASSERT_FALSE(d.summary.ok);
  ASSERT_TRUE(d.summary.has_retry);
  ASSERT_GT(d.summary.retry_at, now);
  EXPECT_DOUBLE_EQ(d.summary.retry_after, static_cast<double>(d.summary.retry_at - now) / kSecond);
  EXPECT_TRUE(DecidePair(shard, a, b, d.summary.retry_at, r, total_shards, origin).summary.ok)
      << "retry_at " << d.summary.retry_at;
  EXPECT_FALSE(DecidePair(shard, a, b, d.summary.retry_at - 1, r, total_shards, origin).summary.ok)
      << "retry_at - 1 " << d.summary.retry_at - 1;
}

inline void ExpectNoWrites(const ShardDecision& d) {
  for (int i = 0; i < d.count; ++i) EXPECT_FALSE(d.writes[i].write) << "write " << i;
}

}  // namespace testing_support
}  // namespace ratelimit
