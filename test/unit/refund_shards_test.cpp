// Sharded limits: refunds that fill the emptiest shards first
// (RefundShards). Shared helpers: shards_support.h.
#include "shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "limiter.h"
#include "shards_support.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// ---- RefundShards ----------------------------------------------------------

struct RefundResult {
  Decision summary;
  std::vector<ShardWrite> writes;
};

RefundResult RefundAll(const LimitConfig& s, const std::vector<LimitState>& states, Micros now,
                       double amount) {
  std::vector<ShardInput> inputs(states.size());
  for (size_t i = 0; i < states.size(); ++i) inputs[i] = ShardInput{static_cast<int>(i), states[i]};
  RefundResult out;
  out.writes.resize(states.size());
  out.summary =
      RefundShards(s, inputs.data(), static_cast<int>(states.size()), now, 0, amount, out.writes.data());
  return out;
}

TEST(RefundShards, FillsTheEmptiestShardsFirst) {
  const LimitConfig s = ShardConfig(FortyOverFour());
  const std::vector<LimitState> states = {Stored(2, kT0), Stored(8, kT0), Stored(5, kT0), Missing()};
  // 3 lift shard 0 to 5; the other 3 lift shards 0 and 2 together to 6.5.
  RefundResult r = RefundAll(s, states, kT0, 6);
  EXPECT_TRUE(r.summary.ok);
  EXPECT_FALSE(r.summary.has_retry);
  ASSERT_TRUE(r.writes[0].write);
  EXPECT_FALSE(r.writes[1].write);
  ASSERT_TRUE(r.writes[2].write);
  EXPECT_FALSE(r.writes[3].write);
  EXPECT_EQ(r.writes[0].next.value, 6.5);
  EXPECT_EQ(r.writes[2].next.value, 6.5);
  EXPECT_EQ(r.writes[0].next.ts, kT0);
  EXPECT_EQ(r.writes[0].full_at, kT0 + 21 * kSecond);
  EXPECT_EQ(r.summary.remaining, 6.5 + 8 + 6.5 + 10);
  EXPECT_EQ(r.summary.full_at, kT0 + 21 * kSecond);
  EXPECT_DOUBLE_EQ(r.summary.reset_after, 21.0);

  // Exactly the room: every shard full.
  RefundResult exact = RefundAll(s, states, kT0, 15);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(exact.writes[i].next.value, 10.0) << i;
  EXPECT_FALSE(exact.writes[3].write);
  EXPECT_EQ(exact.summary.remaining, 40.0);
  EXPECT_EQ(exact.summary.reset_after, 0.0);

  // More than the room: capped at capacity.
  RefundResult more = RefundAll(s, states, kT0, 100);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(more.writes[i].next.value, 10.0) << i;
  EXPECT_EQ(more.summary.remaining, 40.0);

  // Nothing to give: nothing written.
  RefundResult none = RefundAll(s, states, kT0, 0);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(none.writes[i].write) << i;
  EXPECT_EQ(none.summary.remaining, 25.0);
  EXPECT_DOUBLE_EQ(none.summary.reset_after, 48.0);

  // Every shard full: nothing to give either.
  RefundResult full = RefundAll(s, {Missing(), Stored(10, kT0)}, kT0, 5);
  EXPECT_FALSE(full.writes[0].write);
  EXPECT_FALSE(full.writes[1].write);
  EXPECT_EQ(full.summary.remaining, 20.0);
}

TEST(RefundShards, PaysBackReservationsAndCountsRefill) {
  const LimitConfig s = ShardConfig(WithShards(WithMaxReserved(TokenBucket(40, kMinute), 20), 4));
  // Shard 2 has refilled from 0 to 5 in 30 s.
  RefundResult r = RefundAll(
      s, {Stored(-4, kT0), Stored(8, kT0), Stored(0, kT0 - 30 * kSecond), Stored(10, kT0)}, kT0, 12);
  // -4 -> 5 takes 9, then 3 lift both 5s to 6.5.
  EXPECT_EQ(r.writes[0].next.value, 6.5);
  EXPECT_FALSE(r.writes[1].write);
  EXPECT_EQ(r.writes[2].next.value, 6.5);
  EXPECT_EQ(r.writes[2].next.ts, kT0);
  EXPECT_FALSE(r.writes[3].write);
  EXPECT_EQ(r.summary.remaining, 6.5 + 8 + 6.5 + 10);

  // Fixed window: the refill of a new window counts, and the write is aligned.
  const LimitConfig fw = ShardConfig(WithShards(WithCapacity(FixedWindow(20, kMinute), 40), 2));  // 10 / 20
  RefundResult w = RefundAll(fw, {Stored(-5, kW0), Stored(12, kW0 + kMinute)}, kW0 + 70 * kSecond, 4);
  EXPECT_EQ(w.writes[0].next.value, 9.0);  // -5 + 10 + 4
  EXPECT_EQ(w.writes[0].next.ts, kW0 + kMinute);
  EXPECT_FALSE(w.writes[1].write);
}

// Random shards and amounts: the refund is water-filling.
TEST(RefundShards, WaterFillingProperties) {
  std::mt19937_64 rng(0x5eed0105);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int iter = 0; iter < 3000; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const KindId kind = rng() % 2 ? kTokenBucket : kFixedWindow;
    LimitConfig c =
        WithShards(WithMaxReserved(Config(kind, 10.0 * n * (0.5 + unit(rng)), kMinute), 5.0 * n), n);
    if (unit(rng) < 0.5) c = WithCapacity(c, Capacity(c) * (0.5 + unit(rng) * 2));
    const LimitConfig s = ShardConfig(c);
    const double cap = Capacity(s);
    const Micros now = kW0 + static_cast<Micros>(rng() % kMinute);
    std::vector<LimitState> states(n);
    std::vector<double> before(n);
    double room = 0;
    for (int i = 0; i < n; ++i) {
      const int pick = static_cast<int>(rng() % 10);
      if (pick == 0) {
        states[i] = Missing();
      } else if (pick <= 2) {
        states[i] = Stored(std::floor(unit(rng) * 4) * cap / 4, kW0);  // ties
      } else {
        states[i] = Stored(cap - unit(rng) * (cap + MaxDeficit(s)), kW0);
      }
      before[i] = ValueAt(s, states[i], now, 0).value;
      room += cap - before[i];
    }
    const double amount = rng() % 4 == 0 ? room * (1 + unit(rng)) : unit(rng) * room;
    RefundResult r = RefundAll(s, states, now, amount);
    SCOPED_TRACE(::testing::Message()
                 << "iter " << iter << " n " << n << " amount " << amount << " room " << room);
    const double tol = 1e-9 * (cap + MaxDeficit(s)) * n;
    double given = 0;
    double total = 0;
    double level = -1e300;  // the highest value a refilled shard ends at
    std::vector<double> after(n);
    for (int i = 0; i < n; ++i) {
      after[i] = r.writes[i].write ? ValueAt(s, r.writes[i].next, now, 0).value : before[i];
      if (r.writes[i].write) {
        EXPECT_GT(after[i], before[i]) << "shard " << i << " written without a refund";
        level = std::max(level, after[i]);
      }
      EXPECT_LE(after[i], cap) << "shard " << i;
      EXPECT_GE(after[i], before[i]) << "shard " << i;
      given += after[i] - before[i];
      total += after[i];
    }
    EXPECT_NEAR(given, std::min(amount, room), tol);
    EXPECT_NEAR(r.summary.remaining, total, tol);
    for (int i = 0; i < n; ++i) {
      if (r.writes[i].write) {
        // Every refilled shard ends at the same level (or full)...
        EXPECT_NEAR(after[i], level, tol) << "shard " << i;
      } else {
        // ...and no shard left out was below that level.
        EXPECT_GE(before[i], level - tol) << "shard " << i;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// BUG: RefundShards water-fills by each shard's available tokens, but a
// sliding window shard can only count down its current window's count. A
// shard whose tokens are held by the weighted previous window (current 0) is
// picked as the emptiest, GiveBack cannot lower its count below 0, and the
// refund is lost, although another shard could have counted down.
// Here: shard 0 {current 0, prev 10} has 10 - floor(10 * 0.5) = 5 available,
// shard 1 {current 3, prev 0} has 7. Refunding 2 gives shard 0 "2" (lost);
// shard 1 could have gone from 3 to 1. Expected total 12 -> 14, actual 12.
TEST(RefundShards, SlidingWindowRefundIsNotLost) {
  const LimitConfig s = ShardConfig(WithShards(SlidingWindow(20, kMinute), 2));
  const std::vector<LimitState> states = {Stored(0, kW0, 10), Stored(3, kW0, 0)};
  const Micros now = kW0 + 30 * kSecond;
  ShardInput all[2] = {{0, states[0]}, {1, states[1]}};
  ASSERT_EQ(TotalValueAt(s, all, 2, now, 0).value, 12.0);
  RefundResult r = RefundAll(s, states, now, 2);
  EXPECT_EQ(r.summary.remaining, 14.0);
  // An unsharded sliding window with the same counts gets the 2 back.
  EXPECT_EQ(Refund(SlidingWindow(20, kMinute), Stored(3, kW0, 10), now, 0, 2).remaining, 14.0);
}

// Sliding windows otherwise count down their current windows.
TEST(RefundShards, SlidingWindowCountsDown) {
  const LimitConfig s = ShardConfig(WithShards(SlidingWindow(20, kMinute), 2));
  const Micros now = kW0 + 30 * kSecond;
  RefundResult r = RefundAll(s, {Stored(8, kW0), Stored(4, kW0)}, now, 5);
  // Available 2 and 6: 4 lift shard 0 to 6, then 0.5 each.
  ASSERT_TRUE(r.writes[0].write);
  ASSERT_TRUE(r.writes[1].write);
  EXPECT_DOUBLE_EQ(r.writes[0].next.value, 3.5);
  EXPECT_DOUBLE_EQ(r.writes[1].next.value, 3.5);
  EXPECT_EQ(r.writes[0].next.ts, kW0);
  EXPECT_DOUBLE_EQ(r.summary.remaining, 13.0);
}

}  // namespace
}  // namespace ratelimit
