// Seeded random property test: ratelimit_cleanup() never changes an answer.
// Two stores of rows run the same random history of calls (take, reserve),
// config changes (rate, capacity, maxReserved, period, start, kind) and
// clock steps over a few keys; one of them also runs cleanup (deletes every
// row whose idle_at has passed) at random moments. Every answer must be the
// same in both. The stores read and write rows the way the adapter does:
// a call decides on LiveState (a row past idle_at is no row) and stores
// (next, full_at); a config change carries each row with CarryRow, or
// deletes it when the kind changes (row_codec.cpp, config_changes.cpp).
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "limiter.h"
#include "policy.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

using Store = std::map<int, StoredRow>;

LimitConfig RandomConfig(Rng& rng) {
  const Micros periods[] = {kSecond, 10 * kSecond, kMinute, kHour};
  KindId kind = kBuiltInKinds[rng() % std::size(kBuiltInKinds)];
  LimitConfig c = Config(kind, static_cast<double>(1 + rng() % 100), periods[rng() % 4]);
  if (kind != kSlidingWindow && Chance(rng, 0.5)) c = WithCapacity(c, static_cast<double>(rng() % 500));
  if (kind != kSlidingWindow && Chance(rng, 0.4)) c = WithMaxReserved(c, static_cast<double>(rng() % 200));
  if (kind != kTokenBucket && Chance(rng, 0.3)) c = WithStart(c, UniformMicros(rng, 0, kHour));
  return c;
}

Micros Origin(const LimitConfig& config, int key) {
  std::string name = "n" + std::to_string(key);
  return WindowOrigin(config, name.data(), name.size(), nullptr, 0);
}

LimitState Live(const Store& store, int key, Micros now) {
  auto it = store.find(key);
  if (it == store.end()) return LimitState{};
  return LiveState(it->second.state, true, it->second.idle_at, now);
}

// One call as the adapter makes it; a grant stores its row.
Decision Call(Store* store, const LimitConfig& config, int key, const Request& request, Micros now) {
  Decision d = Decide(config, Live(*store, key, now), now, Origin(config, key), request);
  if (d.ok) (*store)[key] = StoredRow{d.next, d.full_at};
  return d;
}

// A change of config as ApplyConfigChange makes it (one row per key).
void ChangeConfig(Store* store, const LimitConfig& from, const LimitConfig& to, Micros now) {
  for (auto it = store->begin(); it != store->end();) {
    if (from.kind != to.kind) {
      it = store->erase(it);
      continue;
    }
    LimitState live = LiveState(it->second.state, true, it->second.idle_at, now);
    it->second = CarryRow(from, Origin(from, it->first), to, Origin(to, it->first), live, now);
    ++it;
  }
}

void Cleanup(Store* store, Micros now) {
  for (auto it = store->begin(); it != store->end();)
    it = it->second.idle_at <= now ? store->erase(it) : ++it;
}

bool SameAnswer(const Decision& a, const Decision& b) {
  return a.ok == b.ok && a.has_retry == b.has_retry && a.retry_at == b.retry_at &&
         a.remaining == b.remaining && a.reset_after == b.reset_after;
}

TEST(CleanupProperty, NeverChangesAnAnswer) {
  Rng rng(20261125);
  for (int history = 0; history < 400; ++history) {
    LimitConfig config = RandomConfig(rng);
    Store cleaned;
    Store kept;
    Micros now = kT0 + UniformMicros(rng, 0, kHour);
    std::ostringstream log;
    for (int step = 0; step < 200; ++step) {
      int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        int key = static_cast<int>(rng() % 3);
        bool reserve = config.kind != kSlidingWindow && Chance(rng, 0.2);
        double count = std::min(MostGrantable(config, reserve), static_cast<double>(rng() % 60));
        Request request{count, reserve};
        Decision a = Call(&cleaned, config, key, request, now);
        Decision b = Call(&kept, config, key, request, now);
        log << " call(" << key << "," << count << (reserve ? ",reserve" : "") << ")";
        ASSERT_TRUE(SameAnswer(a, b))
            << "history " << history << ":" << log.str() << "\n  with cleanup ok=" << a.ok
            << " remaining=" << a.remaining << " retry_at=" << a.retry_at << "\n  without      ok=" << b.ok
            << " remaining=" << b.remaining << " retry_at=" << b.retry_at;
      } else if (op < 6) {
        LimitConfig next = RandomConfig(rng);
        ChangeConfig(&cleaned, config, next, now);
        ChangeConfig(&kept, config, next, now);
        config = next;
        log << " change";
      } else if (op < 8) {
        Cleanup(&cleaned, now);
        log << " cleanup";
      } else {
        now += Chance(rng, 0.5) ? UniformMicros(rng, 0, config.period)
                                : UniformMicros(rng, 0, 3 * config.period);
        log << " +t";
      }
    }
  }
}

// The example: 90 of 100 taken, a stricter override (10), cleanup,
// the override removed, then 100 more, all at one frozen moment: the same
// answers with and without the cleanup call.
TEST(CleanupProperty, OverrideThenCleanupThenUnoverride) {
  LimitConfig loose = TokenBucket(100, kHour);
  LimitConfig strict = TokenBucket(10, kHour);
  for (bool clean : {false, true}) {
    Store store;
    int granted = 0;
    for (int i = 0; i < 90; ++i) granted += Call(&store, loose, 0, Take(1), kT0).ok ? 1 : 0;
    ChangeConfig(&store, loose, strict, kT0);
    if (clean) Cleanup(&store, kT0);
    ChangeConfig(&store, strict, loose, kT0);
    for (int i = 0; i < 200; ++i) granted += Call(&store, loose, 0, Take(1), kT0).ok ? 1 : 0;
    EXPECT_EQ(granted, 190) << (clean ? "with cleanup" : "without cleanup");
  }
}

// Two keys full at 50; the capacity goes to 500; one key's row is cleaned
// up: both keys answer alike (full at the new capacity).
TEST(CleanupProperty, RaisedCapacityTreatsBothKeysAlike) {
  LimitConfig small = WithCapacity(TokenBucket(50, kHour), 50);
  LimitConfig large = WithCapacity(TokenBucket(50, kHour), 500);
  Store store;
  Call(&store, small, 0, Take(50), kT0);
  Call(&store, small, 1, Take(50), kT0);
  Micros later = kT0 + 2 * kHour;  // both full again (idle)
  ChangeConfig(&store, small, large, later);
  store.erase(1);  // cleanup of one key's row
  Decision a = Call(&store, large, 0, Take(0), later);
  Decision b = Call(&store, large, 1, Take(0), later);
  EXPECT_EQ(a.remaining, 500);
  EXPECT_EQ(b.remaining, 500);
}

}  // namespace
}  // namespace ratelimit
