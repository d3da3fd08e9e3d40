// The registry is all a kind needs: the toy "counter" kind
// (counter_kind.cpp), registered at run time, is parsed and named,
// validated with its own details, decided (one row, shards, refunds,
// simulation, a change of config) and its rows' tag round-trips, with no
// line of the core changed for it. Its own test program: the registration
// would change the other tests' kind lists.
#include <gtest/gtest.h>

#include <cstring>

#include "kinds/registry.h"
#include "limiter.h"
#include "policy.h"
#include "shards.h"
#include "simulate.h"
#include "test_support.h"

namespace ratelimit {
namespace testing_support {
extern const KindOps kCounterKind;
}  // namespace testing_support

namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

// The counter's id, registered once for the whole program.
KindId Counter() {
  static KindId id = [] {
    KindId registered{};
    Status status = RegisterKind(&kCounterKind, &registered);
    if (!status.ok()) ADD_FAILURE() << status.message;
    return registered;
  }();
  return id;
}

// Three per minute, windows aligned to origin 0.
LimitConfig ThreePerMinute() { return Config(Counter(), 3, kMinute); }

TEST(CounterKind, IsRegisteredAndNamed) {
  EXPECT_EQ(static_cast<int>(Counter()), 3);  // after the three built-in kinds
  EXPECT_EQ(KindCount(), 4);
  KindId parsed{};
  ASSERT_TRUE(ParseKind("counter", 7, &parsed));
  EXPECT_EQ(parsed, Counter());
  EXPECT_STREQ(KindName(Counter()), "counter");
  EXPECT_FALSE(ParseKind("counte", 6, &parsed));
}

TEST(CounterKind, ValidatesWithItsOwnDetails) {
  EXPECT_TRUE(ValidateConfig(ThreePerMinute()).ok());
  EXPECT_TRUE(ValidateConfig(WithStart(ThreePerMinute(), 5 * kSecond)).ok());  // windowed: start applies
  Status capacity = ValidateConfig(WithCapacity(ThreePerMinute(), 5));
  EXPECT_STREQ(capacity.message, "config field \"capacity\" does not apply to kind \"counter\"");
  EXPECT_STREQ(capacity.detail, "A counter counts at most rate per window.");
  Status reserved = ValidateConfig(WithMaxReserved(ThreePerMinute(), 5));
  EXPECT_STREQ(reserved.detail, "A counter cannot reserve.");
  Status reserve = ValidateRequest(ThreePerMinute(), Reserve(1));
  EXPECT_STREQ(reserve.message, "reserve does not apply to kind \"counter\"");
  EXPECT_STREQ(reserve.detail, "Only token bucket and fixed window limits can reserve.");
  Status too_many = ValidateRequest(ThreePerMinute(), Take(4));
  EXPECT_TRUE(MessageHas(too_many, "at most 3 fits")) << too_many.message;
  LimitConfig no_kind = ThreePerMinute();
  no_kind.has_kind = false;
  EXPECT_STREQ(ValidateConfig(no_kind).detail,
               "Use \"token bucket\", \"fixed window\", \"sliding window\" or \"counter\".");
}

TEST(CounterKind, DecidesOneRow) {
  LimitConfig c = ThreePerMinute();
  LimitState s = Missing();
  for (int i = 0; i < 3; ++i) {
    Decision d = DecideAt(c, s, kW0 + 10 * kSecond, Take(1));
    ASSERT_TRUE(d.ok) << i;
    EXPECT_DOUBLE_EQ(d.remaining, 2 - i);
    EXPECT_EQ(d.full_at, kW0 + kMinute);  // full again when the window ends
    s = d.next;
  }
  Decision refused = DecideAt(c, s, kW0 + 10 * kSecond, Take(1));
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.retry_at, kW0 + kMinute);
  EXPECT_DOUBLE_EQ(refused.retry_after, 50);
  ExpectRetryIsExact(c, s, kW0 + 10 * kSecond, Take(1));
  EXPECT_DOUBLE_EQ(ValueAt(c, s, kW0 + kMinute, 0).value, 3);
}

TEST(CounterKind, RefundsIntoItsWindowOnly) {
  LimitConfig c = ThreePerMinute();
  Decision taken = DecideAt(c, Missing(), kW0, Take(2));
  ASSERT_TRUE(taken.ok);
  Decision back = RefundTaken(c, taken.next, kW0 + kSecond, 0, 2, taken.next.ts);
  ASSERT_TRUE(back.ok);
  EXPECT_DOUBLE_EQ(back.remaining, 3);
  // Windowed: a grant of a window that is over is not given back.
  EXPECT_FALSE(RefundTaken(c, taken.next, kW0 + kMinute, 0, 2, taken.next.ts).ok);
}

TEST(CounterKind, DecidesOverShards) {
  LimitConfig c = WithShards(Config(Counter(), 4, kMinute), 2);
  ASSERT_TRUE(ValidateConfig(c).ok());
  LimitConfig shard = ShardConfig(c);
  EXPECT_FALSE(shard.has_capacity);  // it takes none
  ShardInput inputs[2] = {{0, Missing()}, {1, Missing()}};
  ShardDecision both = DecideShards(shard, inputs, 2, kW0, 0, Take(3), 2);
  ASSERT_TRUE(both.summary.ok);  // neither shard alone holds 3: balanced over both
  EXPECT_TRUE(both.writes[0].write && both.writes[1].write);
  inputs[0].state = both.writes[0].next;
  inputs[1].state = both.writes[1].next;
  EXPECT_DOUBLE_EQ(TotalValueAt(shard, inputs, 2, kW0, 0).value, 1);
  ShardDecision refused = DecideShards(shard, inputs, 2, kW0, 0, Take(2), 2);
  EXPECT_FALSE(refused.summary.ok);
  EXPECT_EQ(refused.summary.retry_at, kW0 + kMinute);
}

TEST(CounterKind, SimulatesAndCarriesOver) {
  LimitConfig c = ThreePerMinute();
  Arrival arrivals[5] = {{kW0, 1}, {kW0, 1}, {kW0, 1}, {kW0 + kSecond, 1}, {kW0 + kMinute, 1}};
  Decision out[5];
  Simulate(c, 0, arrivals, 5, out);
  EXPECT_TRUE(out[0].ok && out[1].ok && out[2].ok);
  EXPECT_FALSE(out[3].ok);
  EXPECT_TRUE(out[4].ok);
  // A change to six per minute keeps the one token left, not refilled by the change.
  Decision two = DecideAt(c, Missing(), kW0, Take(2));
  LimitConfig six = Config(Counter(), 6, kMinute);
  EXPECT_FALSE(SameLimit(c, six));
  LimitState carried = CarryOver(c, 0, six, 0, two.next, kW0 + kSecond);
  EXPECT_DOUBLE_EQ(ValueAt(six, carried, kW0 + kSecond, 0).value, 1);
}

TEST(CounterKind, StoredTagRoundTrips) {
  LimitState next = Stored(2, kW0);
  PrevColumn prev = PrevColumnOf(Counter(), next);
  EXPECT_FALSE(prev.is_null);
  EXPECT_EQ(prev.value, -3);
  RowKind row = RowKindOf(prev, true);
  ASSERT_EQ(row.is, RowKind::Is::kKind);
  EXPECT_EQ(row.kind, Counter());
  EXPECT_TRUE(RowKindFits(row, Counter()));
  for (KindId other : kBuiltInKinds) {
    EXPECT_FALSE(RowKindFits(row, other)) << KindName(other);
    // The built-in kinds' rows, and untagged ones, are never a counter's.
    EXPECT_FALSE(RowKindFits(RowKindOf(PrevColumnOf(other, next), true), Counter())) << KindName(other);
  }
  EXPECT_FALSE(RowKindFits(RowKindOf(PrevColumn{false, kUntaggedRowTag}, true), Counter()));
  EXPECT_FALSE(RowKindFits(RowKindOf(PrevColumn{true, 0}, false), Counter()));
}

TEST(CounterKind, RegistryRefusesClashesAndGaps) {
  KindId id = Counter();
  EXPECT_TRUE(MessageHas(RegisterKind(&kCounterKind, &id), "already registered"));
  KindOps copy = kCounterKind;
  copy.name = "counter two";
  EXPECT_TRUE(MessageHas(RegisterKind(&copy, &id), "has the stored tag of kind \"counter\""));
  copy.tag = StoredTag{TagForm::kNull, 0};
  EXPECT_TRUE(MessageHas(RegisterKind(&copy, &id), "has the stored tag of kind \"token bucket\""));
  copy.tag = StoredTag{TagForm::kConstant, kUntaggedRowTag};
  EXPECT_TRUE(MessageHas(RegisterKind(&copy, &id), "invalid stored tag"));
  copy.tag = StoredTag{TagForm::kConstant, -4};
  copy.no_reserve_detail = nullptr;
  EXPECT_TRUE(MessageHas(RegisterKind(&copy, &id), "lacks a detail"));
  copy.no_reserve_detail = "No.";
  copy.when_available = nullptr;
  EXPECT_TRUE(MessageHas(RegisterKind(&copy, &id), "incomplete"));
  EXPECT_TRUE(MessageHas(RegisterKind(nullptr, &id), "incomplete"));
  EXPECT_EQ(KindCount(), 4);  // nothing refused was registered
}

}  // namespace
}  // namespace ratelimit
