// LimitHash (FNV-1a 64) and WindowOrigin: pinned values, computed here
// independently, so a derived window start can never silently move.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// Reference FNV-1a 64 over raw bytes (offset basis 0xcbf29ce484222325,
// prime 0x100000001b3).
std::uint64_t ReferenceFnv1a64(const std::string& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

TEST(LimitHash, PinnedFnv1a64Values) {
  EXPECT_EQ(LimitHash("", 0, nullptr, 0), 0xcbf29ce484222325ULL);  // offset basis
  EXPECT_EQ(LimitHash("a", 1, nullptr, 0), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(LimitHash("foobar", 6, nullptr, 0), 0x85944171f73967e8ULL);
  EXPECT_EQ(LimitHash("login", 5, nullptr, 0), 0x03c75db6e18f29d2ULL);
  EXPECT_EQ(LimitHash("\xff\x80", 2, nullptr, 0), 0x0a9a2607b6f6e56aULL);  // bytes are unsigned
}

TEST(LimitHash, KeyIsMixedAfterAZeroByte) {
  EXPECT_EQ(LimitHash("a", 1, "b", 1), 0xe5d29919042666b2ULL);  // FNV-1a("a\0b")
  EXPECT_EQ(LimitHash("login", 5, "alice", 5), 0xf1af518891e7aedeULL);
  EXPECT_EQ(LimitHash("api", 3, "user:42", 7), 0x54f586e2ba486102ULL);
  // An empty key is not the NULL key.
  EXPECT_EQ(LimitHash("a", 1, "", 0), 0x089be207b544f1e4ULL);  // FNV-1a("a\0")
  EXPECT_EQ(LimitHash("login", 5, "", 0), 0xfaee0fc146440fd6ULL);
  EXPECT_NE(LimitHash("a", 1, "", 0), LimitHash("a", 1, nullptr, 0));
  // Only the given lengths are read.
  EXPECT_EQ(LimitHash("abc", 1, "bcd", 1), LimitHash("a", 1, "b", 1));
}

TEST(LimitHash, MatchesTheReferenceOnRandomBytes) {
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 2000; ++i) {
    std::string name(rng() % 40, '\0');
    for (char& ch : name) ch = static_cast<char>(rng() & 0xff);
    std::string key(rng() % 40, '\0');
    for (char& ch : key) ch = static_cast<char>(rng() & 0xff);
    ASSERT_EQ(LimitHash(name.data(), name.size(), nullptr, 0), ReferenceFnv1a64(name)) << i;
    ASSERT_EQ(LimitHash(name.data(), name.size(), key.data(), key.size()),
              ReferenceFnv1a64(name + std::string(1, '\0') + key))
        << i;
  }
}

TEST(WindowOrigin, DerivedFromTheHashModuloThePeriod) {
  LimitConfig minute = FixedWindow(10, kMinute);
  EXPECT_EQ(WindowOrigin(minute, "a", 1, nullptr, 0), 35641996);  // 0xaf63dc4c8601ec8c % 60e6
  EXPECT_EQ(WindowOrigin(minute, "a", 1, "b", 1), 37592754);
  EXPECT_EQ(WindowOrigin(minute, "", 0, nullptr, 0), 26656037);
  EXPECT_EQ(WindowOrigin(FixedWindow(10, kHour), "login", 5, "alice", 5), 670279390);
  EXPECT_EQ(WindowOrigin(SlidingWindow(10, kDay), "login", 5, "alice", 5), 7870279390);
  EXPECT_EQ(WindowOrigin(FixedWindow(1, kHorizonMicros), "a", 1, nullptr, 0), 2524160555641996);
  EXPECT_EQ(WindowOrigin(FixedWindow(1, 7), "a", 1, nullptr, 0), 5);
  EXPECT_EQ(WindowOrigin(FixedWindow(1, 1), "a", 1, nullptr, 0), 0);
  EXPECT_EQ(WindowOrigin(FixedWindow(1, kSecond), "\xff\x80", 2, nullptr, 0), 980842);
}

TEST(WindowOrigin, ConfigStartIsReducedModuloThePeriod) {
  LimitConfig c = FixedWindow(10, kMinute);
  EXPECT_EQ(WindowOrigin(WithStart(c, 0), "a", 1, nullptr, 0), 0);
  EXPECT_EQ(WindowOrigin(WithStart(c, 15 * kSecond), "a", 1, nullptr, 0), 15 * kSecond);
  EXPECT_EQ(WindowOrigin(WithStart(c, kW0 + 15 * kSecond), "a", 1, nullptr, 0), 15 * kSecond);
  EXPECT_EQ(WindowOrigin(WithStart(c, kMinute), "a", 1, nullptr, 0), 0);
  EXPECT_EQ(WindowOrigin(WithStart(c, -1), "a", 1, nullptr, 0), kMinute - 1);
  EXPECT_EQ(WindowOrigin(WithStart(c, -kMinute), "a", 1, nullptr, 0), 0);
  EXPECT_EQ(WindowOrigin(WithStart(c, -kMinute - 1), "a", 1, nullptr, 0), kMinute - 1);
  EXPECT_EQ(WindowOrigin(WithStart(c, -kW0 - 15 * kSecond), "a", 1, nullptr, 0), 45 * kSecond);
  EXPECT_EQ(WindowOrigin(WithStart(SlidingWindow(10, kMinute), -25 * kSecond), "z", 1, "k", 1), 35 * kSecond);
}

TEST(WindowOrigin, AlwaysInsideThePeriod) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    Micros period = static_cast<Micros>(rng() % static_cast<std::uint64_t>(kHorizonMicros)) + 1;
    LimitConfig c = FixedWindow(1, period);
    std::string key = std::to_string(rng());
    Micros derived = WindowOrigin(c, "n", 1, key.data(), key.size());
    ASSERT_GE(derived, 0);
    ASSERT_LT(derived, period);
    ASSERT_EQ(static_cast<std::uint64_t>(derived),
              ReferenceFnv1a64("n" + std::string(1, '\0') + key) % static_cast<std::uint64_t>(period));
    Micros start = static_cast<Micros>(rng() >> 2) - (Micros{1} << 61);
    Micros given = WindowOrigin(WithStart(c, start), "n", 1, nullptr, 0);
    ASSERT_GE(given, 0);
    ASSERT_LT(given, period);
    ASSERT_EQ((start - given) % period, 0) << start << " " << period;
  }
}

}  // namespace
}  // namespace ratelimit
