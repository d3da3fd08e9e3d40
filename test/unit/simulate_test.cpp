// The simulator: its answers are those of Decide with the state a grant
// stores carried to the next arrival; refusals and shadow grants keep
// nothing; a row idle since its full_at answers as none; the arrivals'
// order, size and counts are checked as calls check them.
#include <gtest/gtest.h>

#include <vector>

#include "config.h"
#include "policy.h"
#include "simulate.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

std::vector<Decision> Simulated(const LimitConfig& c, const std::vector<Arrival>& arrivals,
                                Micros origin = 0) {
  std::vector<Decision> out(arrivals.size());
  Simulate(c, origin, arrivals.data(), arrivals.size(), out.data());
  return out;
}

// Arrivals about as fast as the limit's rate, some at the same instant,
// some after a long idle time.
std::vector<Arrival> RandomArrivals(Rng& rng, const LimitConfig& c, int n, double max_count) {
  std::vector<Arrival> arrivals;
  Micros at = kT0;
  Micros gap = static_cast<Micros>(static_cast<double>(c.period) / c.rate);
  for (int i = 0; i < n; ++i) {
    if (Chance(rng, 0.05)) {
      at += 10 * c.period;
    } else if (!Chance(rng, 0.1)) {
      at += UniformMicros(rng, 0, 2 * gap);
    }
    double count = Chance(rng, 0.1) ? 0 : std::floor(Uniform(rng, 1, max_count + 1));
    arrivals.push_back(Arrival{at, count});
  }
  return arrivals;
}

// The answers a row stored and read back by every call would give: the
// state carried only by grants, through LiveState as the storage reads it.
std::vector<Decision> ByHand(const LimitConfig& c, const std::vector<Arrival>& arrivals, Micros origin) {
  std::vector<Decision> out;
  LimitState row;
  Micros idle_at = 0;
  for (const Arrival& a : arrivals) {
    Decision d = Decide(c, LiveState(row, true, idle_at, a.at), a.at, origin, Take(a.count));
    if (d.ok) {
      row = d.next;
      idle_at = d.full_at;
    }
    out.push_back(d);
  }
  return out;
}

void ExpectSameAnswers(const std::vector<Decision>& a, const std::vector<Decision>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ok, b[i].ok) << "arrival " << i;
    EXPECT_EQ(a[i].remaining, b[i].remaining) << "arrival " << i;
    EXPECT_EQ(a[i].has_retry, b[i].has_retry) << "arrival " << i;
    EXPECT_EQ(a[i].retry_after, b[i].retry_after) << "arrival " << i;
    EXPECT_EQ(a[i].reset_after, b[i].reset_after) << "arrival " << i;
  }
}

TEST(Simulate, EveryKindAnswersAsDecideWithTheStoredState) {
  Rng rng(2826);
  const LimitConfig configs[] = {TokenBucket(5, kSecond),   WithCapacity(TokenBucket(3, 2 * kSecond), 10),
                                 FixedWindow(5, kSecond),   WithCapacity(FixedWindow(3, kSecond), 7),
                                 SlidingWindow(5, kSecond), SlidingWindow(10, kMinute)};
  for (const LimitConfig& c : configs) {
    std::vector<Arrival> arrivals = RandomArrivals(rng, c, 500, Capacity(c));
    Micros origin = c.kind == kTokenBucket ? 0 : UniformMicros(rng, 0, c.period - 1);
    ASSERT_NO_FATAL_FAILURE(ExpectSameAnswers(Simulated(c, arrivals, origin), ByHand(c, arrivals, origin)));
  }
}

TEST(Simulate, NoArrivalsNoAnswers) {
  Simulate(TokenBucket(1, kSecond), 0, nullptr, 0, nullptr);
  std::size_t failed = 7;
  EXPECT_TRUE(ValidateArrivals(TokenBucket(1, kSecond), nullptr, 0, &failed).ok());
}

TEST(Simulate, FixedWindowRefusesUntilTheNextWindow) {
  std::vector<Arrival> arrivals;
  for (int i = 0; i < 9; ++i) arrivals.push_back(Arrival{kW0 + i * 10 * kSecond, 1});
  std::vector<Decision> d = Simulated(FixedWindow(3, kMinute), arrivals);
  const bool ok[] = {true, true, true, false, false, false, true, true, true};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(d[i].ok, ok[i]) << i;
  EXPECT_DOUBLE_EQ(d[3].retry_after, 30);
  EXPECT_DOUBLE_EQ(d[5].retry_after, 10);
  EXPECT_DOUBLE_EQ(d[6].remaining, 2);
}

TEST(Simulate, ARefusalTakesNothing) {
  // 2 per second: the third call is refused, the fourth (count 0) sees 0 left.
  std::vector<Decision> d = Simulated(TokenBucket(2, kSecond), {{kT0, 2}, {kT0, 1}, {kT0, 0}});
  EXPECT_TRUE(d[0].ok);
  EXPECT_FALSE(d[1].ok);
  EXPECT_TRUE(d[1].has_retry);
  EXPECT_DOUBLE_EQ(d[1].retry_after, 0.5);
  EXPECT_TRUE(d[2].ok);
  EXPECT_DOUBLE_EQ(d[2].remaining, 0);
}

TEST(Simulate, AnIdleRowAnswersAsANewOne) {
  LimitConfig c = SlidingWindow(4, kSecond);
  std::vector<Decision> d = Simulated(c, {{kT0, 4}, {kT0 + 60 * kSecond, 1}});
  std::vector<Decision> fresh = Simulated(c, {{kT0 + 60 * kSecond, 1}});
  EXPECT_EQ(d[1].remaining, fresh[0].remaining);
  EXPECT_EQ(d[1].reset_after, fresh[0].reset_after);
}

TEST(Simulate, ShadowGrantsWhatItWouldRefuseAndTakesNothing) {
  LimitConfig c = TokenBucket(2, kSecond);
  c.shadow = true;
  // Counts 2, 1 (would be refused), 5 (can never fit), 0.
  std::vector<Decision> d = Simulated(c, {{kT0, 2}, {kT0, 1}, {kT0, 5}, {kT0 + kSecond / 2, 1}});
  for (const Decision& x : d) {
    EXPECT_TRUE(x.ok);
    EXPECT_FALSE(x.has_retry);
  }
  EXPECT_DOUBLE_EQ(d[1].remaining, 0);  // the tokens there are, none taken
  EXPECT_DOUBLE_EQ(d[2].remaining, 0);
  EXPECT_DOUBLE_EQ(d[3].remaining, 0);  // one refilled, one taken: the refusals took nothing
}

// A shadow limit keeps the enforced limit's state (a refusal takes
// nothing either way): the same remaining at every arrival, always ok.
TEST(Simulate, ShadowKeepsTheEnforcedLimitsState) {
  Rng rng(7);
  LimitConfig enforced = FixedWindow(3, kSecond);
  LimitConfig shadow = enforced;
  shadow.shadow = true;
  std::vector<Arrival> arrivals = RandomArrivals(rng, enforced, 300, 3);
  std::vector<Decision> e = Simulated(enforced, arrivals);
  std::vector<Decision> s = Simulated(shadow, arrivals);
  int refused = 0;
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    refused += e[i].ok ? 0 : 1;
    EXPECT_TRUE(s[i].ok) << i;
    EXPECT_FALSE(s[i].has_retry) << i;
    EXPECT_EQ(s[i].remaining, e[i].remaining) << i;
    EXPECT_EQ(s[i].reset_after, e[i].reset_after) << i;
  }
  EXPECT_GT(refused, 20);
}

TEST(Simulate, ArrivalsMustBeInOrder) {
  std::vector<Arrival> arrivals = {{kT0, 1}, {kT0, 1}, {kT0 + 1, 1}, {kT0, 1}};
  std::size_t failed = 0;
  Status s = ValidateArrivals(TokenBucket(5, kSecond), arrivals.data(), arrivals.size(), &failed);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(MessageHas(s, "not in order"));
  EXPECT_EQ(failed, 3u);
}

TEST(Simulate, CountsAreCheckedAsCallsCheckThem) {
  LimitConfig c = TokenBucket(2, kSecond);
  std::size_t failed = 0;
  std::vector<Arrival> too_many = {{kT0, 1}, {kT0, 3}};
  Status s = ValidateArrivals(c, too_many.data(), too_many.size(), &failed);
  EXPECT_EQ(failed, 1u);
  EXPECT_STREQ(s.message, ValidateRequest(c, Take(3)).message);
  std::vector<Arrival> negative = {{kT0, -1}};
  s = ValidateArrivals(c, negative.data(), negative.size(), &failed);
  EXPECT_STREQ(s.message, ValidateRequest(c, Take(-1)).message);
  std::vector<Arrival> not_a_number = {{kT0, std::nan("")}};
  EXPECT_FALSE(ValidateArrivals(c, not_a_number.data(), 1, &failed).ok());
  // A shadow limit answers a count that can never fit.
  c.shadow = true;
  EXPECT_TRUE(ValidateArrivals(c, too_many.data(), too_many.size(), &failed).ok());
  EXPECT_FALSE(ValidateArrivals(c, negative.data(), negative.size(), &failed).ok());
}

TEST(Simulate, AtMostMaxArrivals) {
  std::vector<Arrival> arrivals(kMaxArrivals + 1, Arrival{kT0, 0});
  std::size_t failed = 0;
  EXPECT_TRUE(ValidateArrivals(TokenBucket(1, kSecond), arrivals.data(), kMaxArrivals, &failed).ok());
  Status s = ValidateArrivals(TokenBucket(1, kSecond), arrivals.data(), arrivals.size(), &failed);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(MessageHas(s, "too many arrivals"));
}

TEST(Simulate, ShardedLimitsCannotBeSimulated) {
  EXPECT_TRUE(ValidateSimulatedConfig(TokenBucket(8, kSecond)).ok());
  EXPECT_TRUE(ValidateSimulatedConfig(WithShards(TokenBucket(8, kSecond), 1)).ok());
  Status s = ValidateSimulatedConfig(WithShards(TokenBucket(8, kSecond), 4));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(MessageHas(s, "shards"));
}

}  // namespace
}  // namespace ratelimit
