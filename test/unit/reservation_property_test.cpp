// Seeded random property test of reservations and of sharded check/take
// agreement. Over random token bucket and fixed window limits (one row, or
// 2 to 16 shards), random shard states (in deficit, at multiples of the
// rate where rounding bites, missing, or stamped ahead of the clock) and
// random counts:
//  - a reservation never answers worse than the same call without reserve:
//    never refused where that call is granted, never a wait where it has
//    none, never a later time than it gives;
//  - check (CheckShards) and take (DecideShards on the shards check assumes)
//    give the same answer;
//  - a shard that alone grants without a wait (the only case the adapter
//    takes from one shard alone) agrees with the plan for the pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Rates that are whole per shard, tenths per shard (which round), or anything.
LimitConfig RandomConfig(Rng& rng, KindId kind, int n) {
  for (;;) {
    const Micros nice[] = {7, 1000, kSecond, 7 * kSecond, kMinute, kHour};
    Micros period = Chance(rng, 0.7) ? nice[rng() % 6] : UniformMicros(rng, 1, 100000);
    double rate = 0;
    switch (rng() % 3) {
      case 0:
        rate = static_cast<double>(n * (1 + rng() % 20));
        break;
      case 1:
        rate = n * 0.1 * static_cast<double>(1 + rng() % 9);
        break;
      default:
        rate = LogUniform(rng, 1e-3, 1e7);
    }
    LimitConfig c = Config(kind, rate, period);
    static const double kFactor[] = {0.5, 1, 2, 3.7, 10};
    if (Chance(rng, 0.6)) c = WithCapacity(c, rate * kFactor[rng() % 5]);
    if (Chance(rng, 0.5)) c = WithMaxReserved(c, Chance(rng, 0.2) ? 0 : rate * Uniform(rng, 0, 4));
    if (n > 1) c = WithShards(c, n);
    if (ValidateConfig(c).ok()) return c;
  }
}

// A value in [-deficit, top]: often a whole multiple of the rate.
double RandomValue(Rng& rng, double rate, double top, double deficit) {
  double low = -std::min(deficit, 3 * std::max(top, rate));
  double value =
      Chance(rng, 0.5) ? rate * std::floor(Uniform(rng, low / rate, top / rate + 1)) : Uniform(rng, low, top);
  return std::clamp(value, -deficit, top);
}

// One row's state: missing (unless the limit is busy), or stored up to 3
// periods ago or (written by a call whose clock was ahead) up to a period
// after now. A busy limit's rows hold at most a fifth of their capacity.
LimitState RandomState(Rng& rng, const LimitConfig& row, Micros now, Micros origin, bool busy) {
  if (!busy && Chance(rng, 0.15)) return Missing();
  Micros ts = Chance(rng, 0.15) ? now + UniformMicros(rng, 1, row.period)
                                : now - UniformMicros(rng, 0, 3 * row.period);
  if (row.kind == kFixedWindow) ts = InitialState(row, ts, origin).ts;
  double top = Capacity(row) * (busy ? 0.2 : 1);
  return Stored(RandomValue(rng, row.rate, top, MaxDeficit(row)), ts);
}

// Whole multiples of the rate, what one or two shards hold, or anything grantable.
double RandomCount(Rng& rng, const LimitConfig& c, const LimitConfig& row) {
  const double most = std::min(MostGrantable(c, true), 4 * std::max(Capacity(c), c.rate));
  switch (rng() % 4) {
    case 0:
      return row.rate * static_cast<double>(rng() % 9);
    case 1:
      return Capacity(row) * static_cast<double>(1 + rng() % 2);
    case 2:
      return Uniform(rng, 0, 2 * Capacity(row));
    default:
      return Uniform(rng, 0, most);
  }
}

// Counts violations per property; prints the first few with a reproduction.
class Checker {
 public:
  void Expect(bool holds, const char* property, const std::string& where) {
    if (holds) return;
    if (++failures_[property] <= 3) ADD_FAILURE() << "property violated: " << property << "\n" << where;
  }
  std::string Summary() const {
    std::ostringstream out;
    for (const auto& [property, count] : failures_) out << "  " << count << " x " << property << "\n";
    return out.str();
  }
  bool clean() const { return failures_.empty(); }

 private:
  std::map<std::string, long> failures_;
};

std::string Describe(const LimitConfig& c, Micros now, Micros origin, double count,
                     const std::vector<ShardInput>& all) {
  std::ostringstream out;
  out.precision(17);
  out << "  config {kind " << KindName(c.kind) << ", rate " << c.rate << ", period " << c.period
      << ", shards " << c.shards;
  if (c.has_capacity) out << ", capacity " << c.capacity;
  if (c.has_max_reserved) out << ", maxReserved " << c.max_reserved;
  out << "} origin " << origin << " now " << now << " count " << count;
  for (const ShardInput& input : all) {
    out << "\n  shard " << input.shard << ": ";
    if (input.state.exists) {
      out << "{value " << input.state.value << ", ts " << input.state.ts << "}";
    } else {
      out << "missing";
    }
  }
  return out.str();
}

// The answer a caller sees: granted or not, whether to wait, and until when.
struct Answer {
  bool ok = false;
  bool waits = false;
  Micros at = 0;  // retry_at when waits
};

Answer AnswerOf(const Decision& d) { return Answer{d.ok, d.has_retry, d.has_retry ? d.retry_at : 0}; }

bool Same(const Answer& a, const Answer& b) { return a.ok == b.ok && a.waits == b.waits && a.at == b.at; }

// Whether `reserved` is at least as good for the caller as `plain`.
bool NoWorse(const Answer& reserved, const Answer& plain) {
  if (plain.ok && !plain.waits) return reserved.ok && !reserved.waits;
  if (plain.ok) return reserved.ok && reserved.waits && reserved.at <= plain.at;
  return reserved.at <= plain.at;  // plain refused: a grant or a refusal, no later
}

// The two shards CheckShards decides with: the most tokens at now, the
// lower index first among equals, in ascending order as PickCandidates gives.
void RichestTwo(const LimitConfig& row, const std::vector<ShardInput>& all, Micros now, Micros origin,
                ShardInput out[2]) {
  std::vector<int> order(all.size());
  for (size_t i = 0; i < all.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return ValueAt(row, all[a].state, now, origin).value > ValueAt(row, all[b].state, now, origin).value;
  });
  out[0] = all[std::min(order[0], order[1])];
  out[1] = all[std::max(order[0], order[1])];
}

struct Counts {
  long cases = 0;
  long reserved_waits = 0;  // reservations granted with a wait
  long plain_refused = 0;
  long ahead = 0;  // cases with a shard stamped ahead of the clock
};

void CheckSharded(Checker& check, Counts& counts, const LimitConfig& c, const std::vector<ShardInput>& all,
                  Micros now, Micros origin, double count, const std::string& where) {
  const LimitConfig row = ShardConfig(c);
  const int n = c.shards;
  const Request reserve = Reserve(count);
  const Request plain = Take(count);
  const bool plain_valid = ValidateRequest(c, plain).ok();

  ShardInput pair[2];
  RichestTwo(row, all, now, origin, pair);
  const Answer take_reserved = AnswerOf(DecideShards(row, pair, 2, now, origin, reserve, n).summary);
  const Answer check_reserved = AnswerOf(CheckShards(row, all.data(), n, now, origin, reserve));
  check.Expect(Same(check_reserved, take_reserved), "reserve: check and take agree", where);
  counts.reserved_waits += take_reserved.ok && take_reserved.waits;

  if (plain_valid) {
    const Answer take_plain = AnswerOf(DecideShards(row, pair, 2, now, origin, plain, n).summary);
    const Answer check_plain = AnswerOf(CheckShards(row, all.data(), n, now, origin, plain));
    check.Expect(Same(check_plain, take_plain), "no reserve: check and take agree", where);
    check.Expect(NoWorse(take_reserved, take_plain), "take: reserve never worse than no reserve", where);
    check.Expect(NoWorse(check_reserved, check_plain), "check: reserve never worse than no reserve", where);
    counts.plain_refused += !take_plain.ok;
  }

  // The adapter takes from one shard alone only if it grants without a wait.
  for (const Request& r : {reserve, plain}) {
    if (!r.reserve && !plain_valid) continue;
    const Answer both = AnswerOf(DecideShards(row, pair, 2, now, origin, r, n).summary);
    for (int i = 0; i < 2; ++i) {
      const Answer alone = AnswerOf(DecideShards(row, &pair[i], 1, now, origin, r, n).summary);
      if (alone.ok && !alone.waits)
        check.Expect(both.ok && !both.waits, "a shard that alone grants at once agrees with the pair", where);
    }
  }
}

void CheckOneRow(Checker& check, Counts& counts, const LimitConfig& c, const LimitState& state, Micros now,
                 Micros origin, double count, const std::string& where) {
  const Answer reserved = AnswerOf(Decide(c, state, now, origin, Reserve(count)));
  counts.reserved_waits += reserved.ok && reserved.waits;
  if (!ValidateRequest(c, Take(count)).ok()) return;
  const Answer plain = AnswerOf(Decide(c, state, now, origin, Take(count)));
  check.Expect(NoWorse(reserved, plain), "one row: reserve never worse than no reserve", where);
  counts.plain_refused += !plain.ok;
}

void RunReservationProperty(KindId kind, int n, std::uint64_t seed, long cases) {
  Rng rng(seed);
  Checker check;
  Counts counts;
  while (counts.cases < cases) {
    const LimitConfig c = RandomConfig(rng, kind, n);
    const LimitConfig row = n > 1 ? ShardConfig(c) : c;
    const Micros origin = UniformMicros(rng, 0, c.period - 1);
    const Micros now = kT0 + UniformMicros(rng, 0, kDay);
    std::vector<ShardInput> all(n);
    const bool busy = Chance(rng, 0.5);
    bool ahead = false;
    for (int i = 0; i < n; ++i) {
      all[i] = ShardInput{i, RandomState(rng, row, now, origin, busy)};
      ahead = ahead || (all[i].state.exists && all[i].state.ts > now);
    }
    const double count = RandomCount(rng, c, row);
    if (!ValidateRequest(c, Reserve(count)).ok()) continue;
    ++counts.cases;
    counts.ahead += ahead;
    const std::string where = Describe(c, now, origin, count, all);
    if (n > 1) {
      CheckSharded(check, counts, c, all, now, origin, count, where);
    } else {
      CheckOneRow(check, counts, c, all[0].state, now, origin, count, where);
    }
  }
  EXPECT_TRUE(check.clean()) << "violations in " << cases << " cases:\n" << check.Summary();
  // The run must exercise reservations that wait, refusals and clocks behind a shard.
  EXPECT_GT(counts.reserved_waits, cases / 10);
  EXPECT_GT(counts.plain_refused, cases / 20);
  EXPECT_GT(counts.ahead, cases / 20);
}

constexpr long kCases = 6000;

TEST(ReservationProperty, TokenBucket) {
  for (int n : {1, 2, 3, 16}) {
    SCOPED_TRACE(n);
    RunReservationProperty(kTokenBucket, n, 0x5eed0800 + n, kCases);
  }
}

TEST(ReservationProperty, FixedWindow) {
  for (int n : {1, 2, 3, 16}) {
    SCOPED_TRACE(n);
    RunReservationProperty(kFixedWindow, n, 0x5eed0900 + n, kCases);
  }
}

}  // namespace
}  // namespace ratelimit
