// The slot quota's rule (src/pg/shmem/quota_rule.h), without a server, over
// std::atomic: the bounds of the quota and of the callers' share, nothing
// counted by a refused reservation, exact under threads, and the owner's
// last free slot never refused while callers flood a full share.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "shmem/quota_rule.h"

namespace {

using Counter = std::atomic<std::uint32_t>;

struct StdOps {
  static std::uint32_t Load(Counter* counter) { return counter->load(); }
  static bool CompareExchange(Counter* counter, std::uint32_t* expected, std::uint32_t desired) {
    return counter->compare_exchange_strong(*expected, desired);
  }
  static void SubOne(Counter* counter) { counter->fetch_sub(1); }
};

struct Quota {
  Counter used{0};
  Counter shared_used{0};
  std::uint32_t most;
  std::uint32_t shared_most;
  Quota(std::uint32_t m, std::uint32_t s) : most(m), shared_most(s) {}
  bool Reserve(bool shared) {
    return ratelimit_pg::ReserveWithin<StdOps>(&used, &shared_used, most, shared_most, shared);
  }
  void Release(bool shared) {
    used.fetch_sub(1);
    if (shared) shared_used.fetch_sub(1);
  }
};

TEST(QuotaRuleTest, TheShareAndTheQuotaAreBounds) {
  Quota quota(4, 2);
  EXPECT_TRUE(quota.Reserve(true));
  EXPECT_TRUE(quota.Reserve(true));
  EXPECT_FALSE(quota.Reserve(true)) << "the callers' share is full";
  EXPECT_EQ(quota.shared_used.load(), 2u);
  EXPECT_EQ(quota.used.load(), 2u);
  EXPECT_TRUE(quota.Reserve(false));
  EXPECT_TRUE(quota.Reserve(false));
  EXPECT_FALSE(quota.Reserve(false)) << "the quota is full";
  EXPECT_EQ(quota.used.load(), 4u);
  quota.Release(true);
  EXPECT_TRUE(quota.Reserve(false)) << "a slot given back by the share is anyone's";
  EXPECT_FALSE(quota.Reserve(true));
  EXPECT_EQ(quota.used.load(), 4u);
  EXPECT_EQ(quota.shared_used.load(), 1u);
}

TEST(QuotaRuleTest, ARefusalCountsNothing) {
  Quota quota(2, 1);
  ASSERT_TRUE(quota.Reserve(false));
  ASSERT_TRUE(quota.Reserve(false));
  // The quota is full and the share empty: the share slot a caller's
  // reservation takes first is given back.
  EXPECT_FALSE(quota.Reserve(true));
  EXPECT_EQ(quota.used.load(), 2u);
  EXPECT_EQ(quota.shared_used.load(), 0u);
  Quota none(0, 0);
  EXPECT_FALSE(none.Reserve(false));
  EXPECT_FALSE(none.Reserve(true));
  EXPECT_EQ(none.used.load(), 0u);
  EXPECT_EQ(none.shared_used.load(), 0u);
}

TEST(QuotaRuleTest, ThreadsTakeExactlyTheQuota) {
  constexpr std::uint32_t kMost = 1000;
  Quota quota(kMost, kMost / 2);
  std::atomic<std::uint32_t> taken{0}, shared_taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool shared = t % 2 == 0;
      for (int i = 0; i < 2000; ++i)
        if (quota.Reserve(shared)) {
          taken.fetch_add(1);
          if (shared) shared_taken.fetch_add(1);
        }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(taken.load(), kMost);
  EXPECT_LE(shared_taken.load(), kMost / 2);
  EXPECT_EQ(quota.used.load(), kMost);
  EXPECT_EQ(quota.shared_used.load(), shared_taken.load());
}

// The owner's last free slot while callers try, and fail, to take more than
// their full share: every one of the owner's reservations succeeds.
TEST(QuotaRuleTest, AFloodOfRefusedCallersNeverTakesTheOwnersLastSlot) {
  constexpr std::uint32_t kMost = 8;
  Quota quota(kMost, kMost / 2);
  for (std::uint32_t i = 0; i < kMost / 2; ++i) ASSERT_TRUE(quota.Reserve(true));
  for (std::uint32_t i = 0; i < kMost / 2 - 1; ++i) ASSERT_TRUE(quota.Reserve(false));
  std::atomic<bool> stop{false};
  std::atomic<long> caller_grants{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t)
    callers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed))
        if (quota.Reserve(true)) caller_grants.fetch_add(1);
    });
  long refused = 0;
  for (int i = 0; i < 200000; ++i) {
    if (quota.Reserve(false))
      quota.Release(false);
    else
      ++refused;
  }
  stop = true;
  for (auto& thread : callers) thread.join();
  EXPECT_EQ(refused, 0) << "the owner's free slot was refused while callers' reservations were being refused";
  EXPECT_EQ(caller_grants.load(), 0);
  EXPECT_EQ(quota.used.load(), kMost - 1);
  EXPECT_EQ(quota.shared_used.load(), kMost / 2);
}

}  // namespace
