// Refund (tokens given back to one row), ApplyJitter (spreading refused
// calls' retry times) and InitialState (a never-used row, the same as none).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "limiter.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// ---- Refund ----------------------------------------------------------------

TEST(Refund, TokenBucketGivesTokensBack) {
  LimitConfig c = TokenBucket(10, kMinute);
  // 3 stored 6 s ago: 4 now; 5 more make 9, full 6 s later.
  Decision d = Refund(c, Stored(3, kT0), kT0 + 6 * kSecond, 0, 5);
  EXPECT_TRUE(d.ok);
  EXPECT_FALSE(d.has_retry);
  EXPECT_TRUE(d.next.exists);
  EXPECT_DOUBLE_EQ(d.next.value, 9);
  EXPECT_EQ(d.next.ts, kT0 + 6 * kSecond);
  EXPECT_DOUBLE_EQ(d.remaining, 9);
  EXPECT_EQ(d.full_at, kT0 + 12 * kSecond);
  EXPECT_DOUBLE_EQ(d.reset_after, 6.0);
  EXPECT_EQ(ValueAt(c, d.next, kT0 + 6 * kSecond, 0).value, d.remaining);
}

TEST(Refund, CappedAtCapacity) {
  LimitConfig c = TokenBucket(10, kMinute);
  Decision d = Refund(c, Stored(3, kT0), kT0 + 6 * kSecond, 0, 100);
  EXPECT_EQ(d.next.value, 10.0);
  EXPECT_EQ(d.remaining, 10.0);
  EXPECT_EQ(d.full_at, kT0 + 6 * kSecond);
  EXPECT_EQ(d.reset_after, 0.0);
  // Exactly filling it.
  EXPECT_EQ(Refund(c, Stored(3, kT0), kT0 + 6 * kSecond, 0, 6).next.value, 10.0);

  // Capacity, not the rate, is the cap.
  LimitConfig twenty = WithCapacity(c, 20);
  EXPECT_EQ(Refund(twenty, Stored(3, kT0), kT0, 0, 100).next.value, 20.0);
  LimitConfig five = WithCapacity(c, 5);
  EXPECT_EQ(Refund(five, Stored(3, kT0), kT0, 0, 100).next.value, 5.0);
  // A missing row is full already.
  Decision fresh = Refund(c, Missing(), kT0, 0, 5);
  EXPECT_TRUE(fresh.next.exists);
  EXPECT_EQ(fresh.next.value, 10.0);
  EXPECT_EQ(fresh.next.ts, kT0);
  EXPECT_EQ(fresh.remaining, 10.0);
  EXPECT_EQ(fresh.reset_after, 0.0);
}

TEST(Refund, NeverBelowTheCurrentValue) {
  LimitConfig c = TokenBucket(10, kMinute);
  for (double amount : {0.0, -0.0, -5.0}) {
    SCOPED_TRACE(amount);
    Decision d = Refund(c, Stored(3, kT0), kT0 + 6 * kSecond, 0, amount);
    EXPECT_DOUBLE_EQ(d.next.value, 4);
    EXPECT_EQ(d.next.ts, kT0 + 6 * kSecond);
    EXPECT_DOUBLE_EQ(d.remaining, 4);
    EXPECT_DOUBLE_EQ(d.reset_after, 36.0);
  }
  // A full bucket stays full; a bucket in deficit stays in deficit.
  EXPECT_EQ(Refund(c, Stored(10, kT0), kT0, 0, -3).next.value, 10.0);
  EXPECT_EQ(Refund(c, Stored(-7, kT0), kT0, 0, -3).next.value, -7.0);
}

TEST(Refund, PaysBackAReservation) {
  LimitConfig c = WithMaxReserved(TokenBucket(10, kMinute), 50);
  Decision reserved = Decide(c, Missing(), kT0, 0, Reserve(40));
  ASSERT_TRUE(reserved.ok);
  ASSERT_EQ(reserved.next.value, -30.0);
  Decision d = Refund(c, reserved.next, kT0, 0, 25);
  EXPECT_EQ(d.next.value, -5.0);
  EXPECT_EQ(d.remaining, -5.0);
  EXPECT_EQ(d.full_at, kT0 + 90 * kSecond);
  EXPECT_DOUBLE_EQ(d.reset_after, 90.0);
  // Now 5 more can be reserved than before the refund.
  EXPECT_FALSE(Decide(c, reserved.next, kT0, 0, Reserve(30.5)).ok);
  EXPECT_TRUE(Decide(c, d.next, kT0, 0, Reserve(45)).ok);
}

TEST(Refund, ClockBehindTheStoredTs) {
  LimitConfig c = TokenBucket(10, kMinute);
  Decision d = Refund(c, Stored(4, kT0 + 10 * kSecond), kT0, 0, 1);
  EXPECT_EQ(d.next.value, 5.0);
  EXPECT_EQ(d.next.ts, kT0 + 10 * kSecond);  // never moved back
  EXPECT_EQ(d.full_at, kT0 + 40 * kSecond);
  EXPECT_DOUBLE_EQ(d.reset_after, 40.0);  // counted from the raw clock
}

TEST(Refund, FixedWindowGivesTokensBackInTheCurrentWindow) {
  LimitConfig c = FixedWindow(10, kMinute);
  Decision d = Refund(c, Stored(2, kW0), kW0 + 20 * kSecond, 0, 3);
  EXPECT_EQ(d.next.value, 5.0);
  EXPECT_EQ(d.next.ts, kW0);
  EXPECT_EQ(d.remaining, 5.0);
  EXPECT_EQ(d.full_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(d.reset_after, 40.0);

  Decision capped = Refund(c, Stored(2, kW0), kW0 + 20 * kSecond, 0, 100);
  EXPECT_EQ(capped.next.value, 10.0);
  EXPECT_EQ(capped.reset_after, 0.0);

  // A deficit rolled into a later window: stored at that window's start.
  Decision rolled = Refund(WithMaxReserved(c, 20), Stored(-15, kW0), kW0 + 70 * kSecond, 0, 3);
  EXPECT_EQ(rolled.next.value, -2.0);
  EXPECT_EQ(rolled.next.ts, kW0 + kMinute);
  EXPECT_EQ(rolled.full_at, kW0 + 3 * kMinute);

  // A window aligned to an origin.
  Decision shifted = Refund(c, Missing(), kW0 + 10 * kSecond, 15 * kSecond, 1);
  EXPECT_EQ(shifted.next.ts, kW0 - 45 * kSecond);
  EXPECT_EQ(shifted.next.value, 10.0);
}

TEST(Refund, SlidingWindowCountsDownTheCurrentWindow) {
  LimitConfig c = SlidingWindow(10, kMinute);
  const Micros now = kW0 + 30 * kSecond;
  // used = floor(4 * 0.5) + 6 = 8: 2 available.
  Decision d = Refund(c, Stored(6, kW0, 4), now, 0, 3);
  EXPECT_EQ(d.next.value, 3.0);
  EXPECT_EQ(d.next.prev, 4.0);
  EXPECT_EQ(d.next.ts, kW0);
  EXPECT_EQ(d.remaining, 5.0);
  EXPECT_EQ(ValueAt(c, d.next, now, 0).value, 5.0);

  // The current count never goes below zero; the previous window is not refunded.
  Decision all = Refund(c, Stored(6, kW0, 4), now, 0, 10);
  EXPECT_EQ(all.next.value, 0.0);
  EXPECT_EQ(all.next.prev, 4.0);
  EXPECT_EQ(all.remaining, 8.0);

  // A window later, the stored count is the previous window: nothing to count down.
  Decision rolled = Refund(c, Stored(6, kW0, 4), kW0 + 90 * kSecond, 0, 3);
  EXPECT_EQ(rolled.next.value, 0.0);
  EXPECT_EQ(rolled.next.prev, 6.0);
  EXPECT_EQ(rolled.next.ts, kW0 + kMinute);
  EXPECT_EQ(rolled.remaining, 7.0);  // 10 - floor(6 * 0.5)

  Decision fresh = Refund(c, Missing(), now, 0, 3);
  EXPECT_EQ(fresh.next.value, 0.0);
  EXPECT_EQ(fresh.remaining, 10.0);
  EXPECT_EQ(fresh.reset_after, 0.0);
}

// Random rows and amounts: a refund gives back min(amount, room) tokens,
// never more than capacity, never less than now.
TEST(Refund, RandomRowsGiveBackMinOfAmountAndRoom) {
  std::mt19937_64 rng(0x5eed0301);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 5000; ++i) {
    const KindId kind = rng() % 2 ? kTokenBucket : kFixedWindow;
    const Micros period = 1 + static_cast<Micros>(rng() % kHour);
    LimitConfig c = WithMaxReserved(Config(kind, std::pow(10.0, unit(rng) * 8 - 3), period), 0);
    c.max_reserved = c.rate * unit(rng) * 3;
    if (unit(rng) < 0.5) c = WithCapacity(c, c.rate * unit(rng) * 4);
    ASSERT_TRUE(ValidateConfig(c).ok());
    const double cap = Capacity(c);
    const Micros origin = static_cast<Micros>(rng() % period);
    const LimitState s = Stored(cap - unit(rng) * (cap + MaxDeficit(c)), InitialState(c, kW0, origin).ts);
    const Micros now = kW0 + static_cast<Micros>(rng() % (2 * period));
    const double before = ValueAt(c, s, now, origin).value;
    const double room = cap - before;
    const double amount = unit(rng) < 0.2 ? room * (1 + unit(rng)) : unit(rng) * room;
    Decision d = Refund(c, s, now, origin, amount);
    const double after = ValueAt(c, d.next, now, origin).value;
    SCOPED_TRACE(::testing::Message() << KindName(kind) << " rate " << c.rate << " cap " << cap << " before "
                                      << before << " amount " << amount);
    ASSERT_TRUE(d.ok);
    EXPECT_LE(after, cap);
    EXPECT_GE(after, before);
    EXPECT_NEAR(after - before, std::min(amount, room), 1e-12 * (cap + MaxDeficit(c)));
    EXPECT_EQ(d.remaining, after);
    EXPECT_GE(d.next.ts, s.ts);
    // full_at is the first µs at which the row is full.
    EXPECT_GE(ValueAt(c, d.next, d.full_at, origin).value, cap);
    if (d.full_at > now) {
      EXPECT_LT(ValueAt(c, d.next, d.full_at - 1, origin).value, cap);
    }
  }
}

// ---- RefundTaken (a rolled-back grant) -----------------------------------

TEST(RefundTaken, WindowKindsGiveBackOnlyIntoTheWindowTakenFrom) {
  for (LimitConfig c : {FixedWindow(5, kMinute), SlidingWindow(5, kMinute)}) {
    Request one{1, false};
    Decision taken = Decide(c, LimitState{}, kT0 + kSecond, 0, one);
    ASSERT_TRUE(taken.ok);
    // In the same window: the grant comes back, as Refund gives it.
    Decision back = RefundTaken(c, taken.next, kT0 + 30 * kSecond, 0, 1, taken.next.ts);
    EXPECT_TRUE(back.ok);
    EXPECT_DOUBLE_EQ(back.remaining, 5);
    EXPECT_DOUBLE_EQ(back.next.value, Refund(c, taken.next, kT0 + 30 * kSecond, 0, 1).next.value);
    // In the next window: that window is over, nothing to give back into.
    EXPECT_FALSE(RefundTaken(c, taken.next, kT0 + kMinute + kSecond, 0, 1, taken.next.ts).ok);
  }
}

TEST(RefundTaken, TokenBucketAlwaysGivesBackCappedAtCapacity) {
  LimitConfig c = TokenBucket(10, kMinute);
  Decision taken = Decide(c, LimitState{}, kT0, 0, Request{4, false});
  ASSERT_TRUE(taken.ok);
  Decision soon = RefundTaken(c, taken.next, kT0 + 6 * kSecond, 0, 4, taken.next.ts);
  EXPECT_TRUE(soon.ok);
  EXPECT_DOUBLE_EQ(soon.remaining, 10);  // 6 + 1 refilled + 4, capped at 10
  EXPECT_TRUE(RefundTaken(c, taken.next, kT0 + kHour, 0, 4, taken.next.ts).ok);
}

// ---- ApplyJitter -----------------------------------------------------------

void ExpectSameDecision(const Decision& a, const Decision& b) {
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.next.exists, b.next.exists);
  EXPECT_EQ(a.next.value, b.next.value);
  EXPECT_EQ(a.next.ts, b.next.ts);
  EXPECT_EQ(a.next.prev, b.next.prev);
  EXPECT_EQ(a.has_retry, b.has_retry);
  EXPECT_EQ(a.retry_at, b.retry_at);
  EXPECT_EQ(a.retry_after, b.retry_after);
  EXPECT_EQ(a.remaining, b.remaining);
  EXPECT_EQ(a.reset_after, b.reset_after);
  EXPECT_EQ(a.full_at, b.full_at);
}

// Everything but the retry time stays as it was.
void ExpectOnlyRetryMoved(const Decision& before, const Decision& after, Micros delay) {
  EXPECT_EQ(after.retry_at, before.retry_at + delay);
  EXPECT_DOUBLE_EQ(after.retry_after, before.retry_after + static_cast<double>(delay) / kSecond);
  Decision back = after;
  back.retry_at = before.retry_at;
  back.retry_after = before.retry_after;
  ExpectSameDecision(back, before);
}

TEST(ApplyJitter, MovesARefusalsRetryByFloorOfUnitTimesJitter) {
  LimitConfig c = WithJitter(FixedWindow(10, kMinute), 5 * kSecond);
  Decision refused = Decide(c, Stored(0, kW0), kW0 + 20 * kSecond, 0, Take(1));
  ASSERT_FALSE(refused.ok);
  ASSERT_EQ(refused.retry_at, kW0 + kMinute);

  ExpectSameDecision(ApplyJitter(c, refused, 0), refused);
  Decision half = ApplyJitter(c, refused, 0.5);
  ExpectOnlyRetryMoved(refused, half, 2500 * kMicrosPerMilli);
  EXPECT_DOUBLE_EQ(half.retry_after, 42.5);
  ExpectOnlyRetryMoved(refused, ApplyJitter(c, refused, 0.1234567), 617283);  // floor(617283.5)
  ExpectOnlyRetryMoved(refused, ApplyJitter(c, refused, std::nextafter(1.0, 0.0)), 5 * kSecond - 1);
}

TEST(ApplyJitter, TruePeriodJittersByUpToOnePeriod) {
  LimitConfig c = WithPeriodJitter(FixedWindow(10, kMinute));
  Decision refused = Decide(c, Stored(0, kW0), kW0 + 20 * kSecond, 0, Take(1));
  ASSERT_FALSE(refused.ok);
  ExpectOnlyRetryMoved(refused, ApplyJitter(c, refused, 0.5), 30 * kSecond);
  ExpectOnlyRetryMoved(refused, ApplyJitter(c, refused, std::nextafter(1.0, 0.0)), kMinute - 1);
  ExpectSameDecision(ApplyJitter(c, refused, 0), refused);
  // The jitter field is ignored when jitter is the period.
  LimitConfig odd = c;
  odd.jitter = 7;
  ExpectOnlyRetryMoved(refused, ApplyJitter(odd, refused, 0.5), 30 * kSecond);
}

TEST(ApplyJitter, DelayIsBelowTheSpanForEveryUnit) {
  const double units[] = {0, 1e-300, 0.25, 0.5, 0.999999, 1 - std::ldexp(1.0, -52), std::nextafter(1.0, 0.0)};
  for (Micros span : {Micros{1}, Micros{7}, kSecond, kMinute, kDay, kHorizonMicros}) {
    LimitConfig c = WithJitter(TokenBucket(1, kSecond), span);
    ASSERT_TRUE(ValidateConfig(c).ok());
    Decision refused = Decide(c, Stored(0, kT0), kT0, 0, Take(1));
    ASSERT_FALSE(refused.ok);
    for (double unit : units) {
      SCOPED_TRACE(::testing::Message() << "span " << span << " unit " << unit);
      Micros delay = ApplyJitter(c, refused, unit).retry_at - refused.retry_at;
      EXPECT_EQ(delay, static_cast<Micros>(std::floor(unit * static_cast<double>(span))));
      EXPECT_GE(delay, 0);
      EXPECT_LT(delay, span);
    }
    EXPECT_EQ(ApplyJitter(c, refused, std::nextafter(1.0, 0.0)).retry_at - refused.retry_at, span - 1);
  }
}

TEST(ApplyJitter, GrantsAndReservationsAreUnchanged) {
  LimitConfig c = WithJitter(TokenBucket(10, kMinute), kMinute);
  Decision granted = Decide(c, Missing(), kT0, 0, Take(1));
  ASSERT_TRUE(granted.ok);
  ASSERT_FALSE(granted.has_retry);
  Decision reserved = Decide(c, Stored(0, kT0), kT0, 0, Reserve(2));
  ASSERT_TRUE(reserved.ok);
  ASSERT_TRUE(reserved.has_retry);
  for (double unit : {0.0, 0.5, std::nextafter(1.0, 0.0)}) {
    ExpectSameDecision(ApplyJitter(c, granted, unit), granted);
    ExpectSameDecision(ApplyJitter(c, reserved, unit), reserved);
    ExpectSameDecision(ApplyJitter(WithPeriodJitter(c), reserved, unit), reserved);
  }
}

TEST(ApplyJitter, NoJitterConfiguredChangesNothing) {
  LimitConfig c = TokenBucket(10, kMinute);
  Decision refused = Decide(c, Stored(0, kT0), kT0, 0, Take(1));
  ASSERT_FALSE(refused.ok);
  ExpectSameDecision(ApplyJitter(c, refused, 0.9), refused);
  // A jitter value without has_jitter is not used.
  c.jitter = kMinute;
  ExpectSameDecision(ApplyJitter(c, refused, 0.9), refused);
}

// A jittered retry is never earlier than the exact one, so it still succeeds.
TEST(ApplyJitter, JitteredRetryStillSucceeds) {
  LimitConfig c = WithJitter(SlidingWindow(10, kMinute), 10 * kSecond);
  LimitState s = Stored(2, kW0, 10);
  const Micros now = kW0 + 30 * kSecond;
  Decision refused = Decide(c, s, now, 0, Take(5));
  ASSERT_FALSE(refused.ok);
  for (double unit : {0.0, 0.3, 0.7, std::nextafter(1.0, 0.0)}) {
    Decision jittered = ApplyJitter(c, refused, unit);
    EXPECT_GE(jittered.retry_at, refused.retry_at);
    EXPECT_TRUE(Decide(c, s, jittered.retry_at, 0, Take(5)).ok) << unit;
  }
}

// ---- InitialState ----------------------------------------------------------

TEST(InitialState, IsFullOrEmptyInTheCurrentWindow) {
  LimitState tb = InitialState(WithCapacity(TokenBucket(10, kMinute), 20), kT0, 0);
  EXPECT_TRUE(tb.exists);
  EXPECT_EQ(tb.value, 20.0);
  EXPECT_EQ(tb.ts, kT0);
  EXPECT_EQ(tb.prev, 0.0);

  LimitState fw = InitialState(FixedWindow(10, kMinute), kW0 + 10 * kSecond, 15 * kSecond);
  EXPECT_TRUE(fw.exists);
  EXPECT_EQ(fw.value, 10.0);
  EXPECT_EQ(fw.ts, kW0 - 45 * kSecond);
  EXPECT_EQ(fw.prev, 0.0);
  EXPECT_EQ(InitialState(FixedWindow(10, kMinute), kW0 + 15 * kSecond, 15 * kSecond).ts, kW0 + 15 * kSecond);
  EXPECT_EQ(InitialState(FixedWindow(1, 10 * kSecond), -3 * kSecond, 0).ts, -10 * kSecond);

  LimitState sw = InitialState(SlidingWindow(10, kMinute), kW0 + 10 * kSecond, 0);
  EXPECT_TRUE(sw.exists);
  EXPECT_EQ(sw.value, 0.0);
  EXPECT_EQ(sw.ts, kW0);
  EXPECT_EQ(sw.prev, 0.0);
}

// Deciding on the initial state gives exactly the answer for no row, at the
// clock it was made for and later.
TEST(InitialState, DecidesLikeAMissingRow) {
  std::mt19937_64 rng(0x5eed0302);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const KindId kind = kBuiltInKinds[rng() % std::size(kBuiltInKinds)];
    const Micros period = 1 + static_cast<Micros>(rng() % (2 * kDay));
    const double rate = unit(rng) < 0.1 ? kMaxMagnitude : std::pow(10.0, unit(rng) * 12 - 4);
    LimitConfig c = Config(kind, rate, period);
    if (kind != kSlidingWindow && unit(rng) < 0.5) c = WithCapacity(c, c.rate * unit(rng) * 3);
    if (kind != kSlidingWindow && unit(rng) < 0.5) c = WithMaxReserved(c, c.rate * unit(rng) * 3);
    if (!ValidateConfig(c).ok()) continue;
    const Micros origin = static_cast<Micros>(rng() % period);
    const Micros made = kW0 + static_cast<Micros>(rng() % kDay) - kDay / 2;
    const Micros later = made + (rng() % 3 == 0 ? 0 : static_cast<Micros>(rng() % (3 * period)));
    Request r{unit(rng) * MostGrantable(c, false), false};
    if (kind != kSlidingWindow && unit(rng) < 0.3) r = Request{unit(rng) * MostGrantable(c, true), true};
    if (rng() % 5 == 0) r.count = MostGrantable(c, r.reserve);
    if (!ValidateRequest(c, r).ok()) continue;
    const LimitState initial = InitialState(c, made, origin);
    SCOPED_TRACE(::testing::Message()
                 << KindName(kind) << " rate " << rate << " period " << period << " made " << made
                 << " later " << later << " count " << r.count << (r.reserve ? " reserve" : ""));
    ExpectSameDecision(Decide(c, initial, later, origin, r), Decide(c, Missing(), later, origin, r));
    Reading a = ValueAt(c, initial, later, origin);
    Reading b = ValueAt(c, Missing(), later, origin);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.ts, b.ts);
    ExpectSameDecision(Refund(c, initial, later, origin, r.count),
                       Refund(c, Missing(), later, origin, r.count));
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace ratelimit
