// Seeded random property test of sharded limits: random sequences of calls
// on N shards, each picking two candidates with PickCandidates, deciding with
// DecideShards and storing the writes of a grant, as the adapter does. Over
// the whole run the shards never admit more than the limit allows, and every
// decision follows the power of two choices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "limiter.h"
#include "shards.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

LimitConfig RandomShardedConfig(Rng& rng, KindId kind, int n, bool extreme) {
  for (;;) {
    const Micros nice[] = {1, 7, 1000, kSecond, 7 * kSecond, kMinute, kHour, kDay};
    Micros period = Chance(rng, 0.7) ? nice[rng() % 8] : UniformMicros(rng, 1, 100000);
    double rate =
        extreme ? (Chance(rng, 0.5) ? kMaxMagnitude : LogUniform(rng, 1e250, kMaxMagnitude))
                : (Chance(rng, 0.5) ? static_cast<double>(n * (1 + rng() % 50)) : LogUniform(rng, 1e-3, 1e7));
    LimitConfig c = Config(kind, rate, period);
    static const double kFactor[] = {0.5, 1, 2, 3.7, 0.1};
    if (Chance(rng, 0.5)) c = WithCapacity(c, std::min(kMaxMagnitude, rate * kFactor[rng() % 5]));
    if (Chance(rng, 0.6))
      c = WithMaxReserved(c, Chance(rng, 0.2) ? 0 : std::min(kMaxMagnitude, rate * Uniform(rng, 0, 3)));
    c = WithShards(c, n);
    if (ValidateConfig(c).ok()) return c;
  }
}

// What the whole limit may have admitted between the earliest and the latest
// clock a run has seen: capacity, plus what may be owed, plus the refill.
long double AdmissionBound(const LimitConfig& c, const LimitConfig& shard, bool reserve, Micros first,
                           Micros last, Micros origin) {
  long double bound = Capacity(c);
  if (reserve) bound += static_cast<long double>(MaxDeficit(shard)) * c.shards;
  if (c.kind == kTokenBucket) {
    bound += static_cast<long double>(last - first) * c.rate / static_cast<long double>(c.period);
  } else {
    auto window = [&](Micros t) {
      Micros k = t - origin;
      return k / c.period - ((k % c.period != 0 && k < 0) ? 1 : 0);
    };
    bound += static_cast<long double>(c.rate) * static_cast<long double>(window(last) - window(first));
  }
  return bound;
}

// Counts violations per property; prints the first few with a reproduction.
class Checker {
 public:
  bool Expect(bool holds, const char* property, const std::string& where) {
    if (holds) return true;
    failed_ = true;
    if (++failures_[property] <= 3) ADD_FAILURE() << "property violated: " << property << "\n" << where;
    return false;
  }
  bool TakeFailed() {
    bool failed = failed_;
    failed_ = false;
    return failed;
  }
  std::string Summary() const {
    std::ostringstream out;
    for (const auto& [property, count] : failures_) out << "  " << count << " x " << property << "\n";
    return out.str();
  }
  bool clean() const { return failures_.empty(); }

 private:
  std::map<std::string, long> failures_;
  bool failed_ = false;
};

std::string Describe(const LimitConfig& c, std::uint64_t seed, int scenario, int step, Micros now,
                     Micros origin, const Request& r, const ShardInput* inputs, const ShardDecision& d) {
  std::ostringstream out;
  out.precision(17);
  out << "  seed " << seed << " scenario " << scenario << " step " << step << "\n  config {kind "
      << KindName(c.kind) << ", rate " << c.rate << ", period " << c.period << ", shards " << c.shards;
  if (c.has_capacity) out << ", capacity " << c.capacity;
  if (c.has_max_reserved) out << ", maxReserved " << c.max_reserved;
  out << "} origin " << origin << " now " << now << " count " << r.count << (r.reserve ? " reserve" : "");
  for (int i = 0; i < 2; ++i) {
    const LimitState& s = inputs[i].state;
    out << "\n  shard " << inputs[i].shard << ": ";
    if (s.exists) {
      out << "{value " << s.value << ", ts " << s.ts << "}";
    } else {
      out << "missing";
    }
    if (d.writes[i].write)
      out << " -> {value " << d.writes[i].next.value << ", ts " << d.writes[i].next.ts << "}";
  }
  out << "\n  summary {ok " << d.summary.ok << ", remaining " << d.summary.remaining << ", has_retry "
      << d.summary.has_retry << ", retry_at " << d.summary.retry_at << ", reset_after "
      << d.summary.reset_after << "}";
  return out.str();
}

Micros NextNow(Rng& rng, Micros now, Micros period, Micros retry_at) {
  const int pick = static_cast<int>(rng() % 100);
  if (pick < 15) return now;
  if (pick < 25) return now + 1;
  if (pick < 55) return now + UniformMicros(rng, 0, std::max<Micros>(1, period / 4));
  if (pick < 70) return now + UniformMicros(rng, 0, std::min(3 * period, kHorizonMicros));
  if (pick < 90 && retry_at > 0) return retry_at - (Chance(rng, 0.2) ? 1 : 0);
  return now - UniformMicros(rng, 0, std::min(period, kHour));
}

Request RandomRequest(Rng& rng, const LimitConfig& c, bool allow_reserve) {
  Request r;
  r.reserve = allow_reserve && Chance(rng, 0.5);
  const double most = std::min(MostGrantable(c, r.reserve), kMaxMagnitude);
  const double shard_capacity = Capacity(c) / c.shards;
  const int pick = static_cast<int>(rng() % 10);
  if (pick == 0) {
    r.count = 0;
  } else if (pick == 1) {
    r.count = most;
  } else if (pick == 2) {
    r.count = shard_capacity;
  } else if (pick < 6) {
    r.count = Uniform(rng, 0, 0.3) * shard_capacity;
  } else {
    r.count = Uniform(rng, 0, 1) * most;
  }
  return r;
}

void RunShardedProperty(KindId kind, int n, bool reserve, bool extreme, std::uint64_t seed, long decisions) {
  Rng rng(seed);
  Checker check;
  long made = 0;
  long granted = 0;
  long balanced = 0;
  long refused = 0;
  int scenario = 0;
  while (made < decisions) {
    ++scenario;
    const LimitConfig c = RandomShardedConfig(rng, kind, n, extreme);
    const LimitConfig shard = ShardConfig(c);
    const double cap = Capacity(shard);
    const double deficit = reserve ? MaxDeficit(shard) : 0.0;
    const double scale = std::max({cap, deficit, 1e-300});
    const Micros origin = UniformMicros(rng, 0, c.period - 1);
    std::vector<LimitState> states(n);
    Micros now = kT0 + UniformMicros(rng, 0, kDay);
    Micros first = now;
    Micros last = now;
    Micros retry_at = 0;
    long double admitted = 0;
    const int steps = 50 + static_cast<int>(rng() % 200);
    for (int step = 0; step < steps && made < decisions; ++step) {
      now = NextNow(rng, now, c.period, retry_at);
      first = std::min(first, now);
      last = std::max(last, now);
      const Request r = RandomRequest(rng, c, reserve);
      if (!ValidateRequest(c, r).ok()) continue;
      int cand[2];
      PickCandidates(n, Uniform(rng, 0, 1), Uniform(rng, 0, 1), cand);
      const ShardInput inputs[2] = {{cand[0], states[cand[0]]}, {cand[1], states[cand[1]]}};
      const ShardDecision d = DecideShards(shard, inputs, 2, now, origin, r, n);
      ++made;
      const std::string where = Describe(c, seed, scenario, step, now, origin, r, inputs, d);
      const Decision& sum = d.summary;

      check.Expect(cand[0] < cand[1] && cand[0] >= 0 && cand[1] < n, "two distinct candidates in range",
                   where);
      check.Expect(d.count == 2, "count is the number of inputs", where);
      check.Expect(
          std::isfinite(sum.remaining) && std::isfinite(sum.retry_after) && std::isfinite(sum.reset_after),
          "summary finite", where);
      check.Expect(sum.reset_after >= 0, "reset_after >= 0", where);

      // The pair is seen at one moment: the latest of now and its shards' ts.
      Micros floor = now;
      for (int i = 0; i < 2; ++i)
        if (inputs[i].state.exists) floor = std::max(floor, inputs[i].state.ts);
      double before[2];
      double after[2];
      for (int i = 0; i < 2; ++i) {
        before[i] = ValueAt(shard, inputs[i].state, floor, origin).value;
        after[i] = d.writes[i].write ? ValueAt(shard, d.writes[i].next, floor, origin).value : before[i];
      }
      const int hi = before[1] > before[0] ? 1 : 0;
      const int lo = 1 - hi;
      const double tol = 1e-12 * scale;

      if (sum.ok) {
        ++granted;
        for (int i = 0; i < 2; ++i) {
          if (!d.writes[i].write) continue;
          const LimitState& next = d.writes[i].next;
          check.Expect(next.exists && std::isfinite(next.value), "written state exists and is finite", where);
          check.Expect(next.value <= cap, "no shard above capacity / N", where);
          // Within rounding: balanced takes may end one step below the level
          // they checked (DecideShards.BalancedTakeNeverEndsBelowTheCheckedLevel).
          check.Expect(next.value >= -deficit - tol, "no shard below -maxReserved / N (0 without reserve)",
                       where);
          check.Expect(!inputs[i].state.exists || next.ts >= inputs[i].state.ts, "shard ts never decreases",
                       where);
          // Within rounding: a reservation is stored out of deficit no later
          // than the same call without reserve would be granted, which may
          // round its deficit a few ulps toward the caller.
          check.Expect(after[i] <= before[i] + (r.reserve ? tol : 0), "a take never adds tokens", where);
        }
        // The takes add up to the count.
        check.Expect(std::fabs((before[0] - after[0]) + (before[1] - after[1]) - r.count) <= tol,
                     "takes sum to the count", where);
        check.Expect(std::fabs(sum.remaining - (after[0] + after[1]) * n / 2) <= tol * n,
                     "remaining = (sum of the pair after) * N / 2", where);
        if (before[hi] - r.count >= 0) {
          check.Expect(d.writes[hi].write && !d.writes[lo].write,
                       "the richer shard alone serves when it suffices", where);
          check.Expect(!sum.has_retry, "a grant without deficit has no retry", where);
        } else if (before[0] + before[1] - r.count >= 0) {
          ++balanced;
          check.Expect(d.writes[0].write && d.writes[1].write, "both serve when neither alone suffices",
                       where);
          check.Expect(std::fabs(after[0] - after[1]) <= tol, "both end level", where);
          check.Expect(!sum.has_retry, "a grant without deficit has no retry", where);
        } else {
          check.Expect(r.reserve && sum.has_retry, "a deficit only when reserving, with a retry time", where);
          if (d.writes[0].write && d.writes[1].write) {
            check.Expect(std::fabs(after[0] - after[1]) <= tol, "a reservation over both ends level", where);
          } else {
            check.Expect(d.writes[hi].write && after[hi] >= before[lo] - tol,
                         "a reservation on one shard uses the richer and keeps it the richer", where);
          }
          // retry_at: every shard written is out of deficit, one of them only just.
          bool just = false;
          for (int i = 0; i < 2; ++i) {
            if (!d.writes[i].write) continue;
            check.Expect(ValueAt(shard, d.writes[i].next, sum.retry_at, origin).value >= 0,
                         "reserved: out of deficit at retry_at", where);
            just = just || ValueAt(shard, d.writes[i].next, sum.retry_at - 1, origin).value < 0;
          }
          check.Expect(just, "reserved: in deficit at retry_at - 1", where);
        }
        for (int i = 0; i < 2; ++i) {
          if (d.writes[i].write && !sum.has_retry) {
            check.Expect(after[i] >= -tol, "a grant without a retry leaves no shard it took from in deficit",
                         where);
          }
        }
      } else {
        ++refused;
        check.Expect(!d.writes[0].write && !d.writes[1].write, "a refusal writes nothing", where);
        check.Expect(sum.has_retry && sum.retry_at > now && sum.retry_after > 0,
                     "a refusal has a retry in the future", where);
        check.Expect(sum.remaining == (before[0] + before[1]) * n / 2,
                     "refused: remaining = pair at its moment * N / 2", where);
        check.Expect(DecideShards(shard, inputs, 2, sum.retry_at, origin, r, n).summary.ok,
                     "the same shards grant at retry_at", where);
        if (sum.retry_at - 1 >= floor) {
          check.Expect(!DecideShards(shard, inputs, 2, sum.retry_at - 1, origin, r, n).summary.ok,
                       "the same shards refuse at retry_at - 1", where);
        }
        retry_at = sum.retry_at;
      }

      if (sum.ok) {
        for (int i = 0; i < 2; ++i)
          if (d.writes[i].write) states[cand[i]] = d.writes[i].next;
        admitted += r.count;
      }
      const long double bound = AdmissionBound(c, shard, reserve, first, last, origin);
      check.Expect(admitted <= bound * (1 + 1e-9L) + 1e-9L * scale,
                   "admitted in total <= capacity (+ maxReserved) + refill", where);
      for (int i = 0; i < n; ++i) {
        if (states[i].exists)
          check.Expect(states[i].value <= cap, "every stored shard <= capacity / N", where);
      }
      if (check.TakeFailed()) break;
    }
  }
  EXPECT_TRUE(check.clean()) << "violations in " << scenario << " scenarios:\n" << check.Summary();
  // The run must exercise every branch.
  EXPECT_GT(granted, decisions / 5);
  EXPECT_GT(refused, decisions / 20);
  EXPECT_GT(balanced, decisions / 200);
}

constexpr long kDecisions = 12000;

TEST(ShardsProperty, TokenBucket) {
  for (int n : {2, 4, 16}) {
    SCOPED_TRACE(n);
    RunShardedProperty(kTokenBucket, n, false, false, 0x5eed0200 + n, kDecisions);
    RunShardedProperty(kTokenBucket, n, true, false, 0x5eed0300 + n, kDecisions);
  }
}

TEST(ShardsProperty, FixedWindow) {
  for (int n : {2, 4, 16}) {
    SCOPED_TRACE(n);
    RunShardedProperty(kFixedWindow, n, false, false, 0x5eed0400 + n, kDecisions);
    RunShardedProperty(kFixedWindow, n, true, false, 0x5eed0500 + n, kDecisions);
  }
}

// Rates and capacities near the largest accepted (1e300).
TEST(ShardsProperty, ExtremeMagnitudes) {
  for (int n : {2, 16}) {
    SCOPED_TRACE(n);
    RunShardedProperty(kTokenBucket, n, true, true, 0x5eed0600 + n, kDecisions / 2);
    RunShardedProperty(kFixedWindow, n, true, true, 0x5eed0700 + n, kDecisions / 2);
  }
}

}  // namespace
}  // namespace ratelimit
