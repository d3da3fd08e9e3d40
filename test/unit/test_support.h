// Shared builders, constants and checks for the core unit tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

#include "kinds/registry.h"
#include "limiter.h"

namespace ratelimit {
namespace testing_support {

constexpr Micros kSecond = kMicrosPerSecond;
constexpr Micros kMinute = 60 * kSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;

// 2023-11-14T22:00:00Z: aligned to the second, minute and hour (origin 0).
constexpr Micros kW0 = Micros{1699999200} * kSecond;
// An arbitrary clock reading for the token bucket (not window-aligned).
constexpr Micros kT0 = Micros{1700000000} * kSecond + 123456;

// A registered kind by its name (the tests name kinds; the code does not).
inline KindId KindNamed(const char* name) {
  KindId id{};
  if (!ParseKind(name, std::strlen(name), &id)) std::abort();  // a built-in kind missing from the registry
  return id;
}
inline const KindId kTokenBucket = KindNamed("token bucket");
inline const KindId kFixedWindow = KindNamed("fixed window");
inline const KindId kSlidingWindow = KindNamed("sliding window");
// Every built-in kind, for the tests that run over all of them.
inline const KindId kBuiltInKinds[] = {kTokenBucket, kFixedWindow, kSlidingWindow};

inline LimitConfig Config(KindId kind, double rate, Micros period) {
  LimitConfig c;
  c.has_kind = true;
  c.kind = kind;
  c.has_rate = true;
  c.rate = rate;
  c.has_period = true;
  c.period = period;
  return c;
}

inline LimitConfig TokenBucket(double rate, Micros period) { return Config(kTokenBucket, rate, period); }
inline LimitConfig FixedWindow(double rate, Micros period) { return Config(kFixedWindow, rate, period); }
inline LimitConfig SlidingWindow(double rate, Micros period) { return Config(kSlidingWindow, rate, period); }

inline LimitConfig WithCapacity(LimitConfig c, double capacity) {
  c.has_capacity = true;
  c.capacity = capacity;
  return c;
}

inline LimitConfig WithMaxReserved(LimitConfig c, double max_reserved) {
  c.has_max_reserved = true;
  c.max_reserved = max_reserved;
  return c;
}

inline LimitConfig WithStart(LimitConfig c, Micros start) {
  c.has_start = true;
  c.start = start;
  return c;
}

inline LimitConfig WithShards(LimitConfig c, int shards) {
  c.has_shards = true;
  c.shards = shards;
  return c;
}

// A refusal's retry time moves by up to `jitter` µs.
inline LimitConfig WithJitter(LimitConfig c, Micros jitter) {
  c.has_jitter = true;
  c.jitter_is_period = false;
  c.jitter = jitter;
  return c;
}

// "jitter": true: up to one period.
inline LimitConfig WithPeriodJitter(LimitConfig c) {
  c.has_jitter = true;
  c.jitter_is_period = true;
  return c;
}

inline LimitState Missing() { return LimitState{}; }
inline LimitState Stored(double value, Micros ts, double prev = 0) {
  return LimitState{true, value, ts, prev};
}

inline Request Take(double count) { return Request{count, false}; }
inline Request Reserve(double count) { return Request{count, true}; }

// One single-row decision at clock `now` (windows aligned to `origin`).
inline Decision DecideAt(const LimitConfig& c, const LimitState& s, Micros now, const Request& r,
                         Micros origin = 0) {
  return Decide(c, s, now, origin, r);
}

// A refused request is granted at retry_at and still refused one µs earlier.
inline void ExpectRetryIsExact(const LimitConfig& c, const LimitState& s, Micros now, const Request& r,
                               Micros origin = 0) {
  Decision d = DecideAt(c, s, now, r, origin);
  ASSERT_FALSE(d.ok);
  ASSERT_TRUE(d.has_retry);
  ASSERT_GT(d.retry_at, now);
  EXPECT_GT(d.retry_after, 0);
  EXPECT_TRUE(DecideAt(c, s, d.retry_at, r, origin).ok) << "retry_at " << d.retry_at;
  EXPECT_FALSE(DecideAt(c, s, d.retry_at - 1, r, origin).ok) << "retry_at - 1 " << d.retry_at - 1;
}

inline bool MessageHas(const Status& status, const char* needle) {
  return std::strstr(status.message, needle) != nullptr;
}

// Seeded random draws for the property tests.
using Rng = std::mt19937_64;
inline double Uniform(Rng& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
inline Micros UniformMicros(Rng& rng, Micros lo, Micros hi) {
  return std::uniform_int_distribution<Micros>(lo, std::max(lo, hi))(rng);
}
inline bool Chance(Rng& rng, double p) { return Uniform(rng, 0, 1) < p; }
inline double LogUniform(Rng& rng, double lo, double hi) {
  return std::pow(10.0, Uniform(rng, std::log10(lo), std::log10(hi)));
}

}  // namespace testing_support
}  // namespace ratelimit
