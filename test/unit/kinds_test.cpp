// The registry of the built-in kinds (src/core/kinds): their names and
// flags, the texts made from the list of kinds, and the stored kind tags,
// which must read and write exactly what rows and memory-state files have
// always held (NULL: token bucket, -1: fixed window, -2 or an untagged
// NULL: either of the two, any other value: a sliding window's count).
#include <gtest/gtest.h>

#include "kinds/registry.h"
#include "test_support.h"

namespace ratelimit {
namespace {

using namespace testing_support;  // NOLINT(build/namespaces)

TEST(KindRegistry, ListsTheBuiltInKindsInOrder) {
  ASSERT_EQ(KindCount(), 3);
  EXPECT_EQ(kTokenBucket, KindAt(0));  // the default of a config without "kind"
  EXPECT_EQ(LimitConfig{}.kind, kTokenBucket);
  EXPECT_EQ(kFixedWindow, KindAt(1));
  EXPECT_EQ(kSlidingWindow, KindAt(2));
}

TEST(KindRegistry, FlagsSayWhatApplies) {
  EXPECT_FALSE(KindOf(kTokenBucket).windowed);
  EXPECT_TRUE(KindOf(kFixedWindow).windowed);
  EXPECT_TRUE(KindOf(kSlidingWindow).windowed);
  for (KindId kind : {kTokenBucket, kFixedWindow}) {
    EXPECT_TRUE(KindOf(kind).takes_capacity);
    EXPECT_TRUE(KindOf(kind).can_reserve);
    EXPECT_TRUE(KindOf(kind).reads_untagged_rows);
  }
  EXPECT_FALSE(KindOf(kSlidingWindow).takes_capacity);
  EXPECT_FALSE(KindOf(kSlidingWindow).can_reserve);
  EXPECT_FALSE(KindOf(kSlidingWindow).reads_untagged_rows);
}

TEST(KindRegistry, TextsNameEveryKind) {
  char text[256];
  DescribeKindChoice(text, sizeof text);
  EXPECT_STREQ(text, "Use \"token bucket\", \"fixed window\" or \"sliding window\".");
  ListKindNames(text, sizeof text, "", " and ", true);
  EXPECT_STREQ(text, "token bucket and fixed window");
  ListKindNames(text, 10, "'", " or ", false);
  EXPECT_STREQ(text, "'token bu");  // cut to the buffer, still terminated
  LimitConfig no_kind = TokenBucket(10, kMinute);
  no_kind.has_kind = false;
  EXPECT_STREQ(ValidateConfig(no_kind).detail,
               "Use \"token bucket\", \"fixed window\" or \"sliding window\".");
  Status reserve = ValidateRequest(SlidingWindow(10, kMinute), Reserve(1));
  EXPECT_STREQ(reserve.message, "reserve does not apply to kind \"sliding window\"");
  EXPECT_STREQ(reserve.detail, "Only token bucket and fixed window limits can reserve.");
}

TEST(KindRegistry, WritesTheTagsRowsHaveAlwaysHeld) {
  LimitState next = Stored(4, kW0, 2.5);
  PrevColumn bucket = PrevColumnOf(kTokenBucket, next);
  EXPECT_TRUE(bucket.is_null);
  EXPECT_EQ(bucket.value, 2.5);  // the value a storage keeps beside the NULL: as it was
  PrevColumn fixed = PrevColumnOf(kFixedWindow, next);
  EXPECT_FALSE(fixed.is_null);
  EXPECT_EQ(fixed.value, -1);
  PrevColumn sliding = PrevColumnOf(kSlidingWindow, next);
  EXPECT_FALSE(sliding.is_null);
  EXPECT_EQ(sliding.value, 2.5);  // the previous window's count
}

// The kind a row with this prev column reads as, by the old names.
const char* ReadAs(PrevColumn prev, bool tagged) {
  RowKind row = RowKindOf(prev, tagged);
  if (row.is == RowKind::Is::kUntagged) return "token bucket or fixed window";
  if (row.is == RowKind::Is::kUnknown) return "none";
  return KindName(row.kind);
}

TEST(KindRegistry, ReadsTheTagsRowsHaveAlwaysHeld) {
  EXPECT_STREQ(ReadAs({true, 0}, true), "token bucket");
  EXPECT_STREQ(ReadAs({true, 0}, false), "token bucket or fixed window");  // before 0.5.0
  EXPECT_STREQ(ReadAs({false, -1}, true), "fixed window");
  EXPECT_STREQ(ReadAs({false, -1}, false), "fixed window");
  EXPECT_STREQ(ReadAs({false, -2}, true), "token bucket or fixed window");
  for (double count : {0.0, 0.5, 7.0, 1e300, -7.0})
    EXPECT_STREQ(ReadAs({false, count}, true), "sliding window") << count;
}

TEST(KindRegistry, RowsFitTheKindsThatWroteThem) {
  const RowKind untagged = RowKindOf({false, kUntaggedRowTag}, true);
  for (KindId reader : kBuiltInKinds) {
    for (KindId writer : kBuiltInKinds) {
      RowKind row = RowKindOf(PrevColumnOf(writer, Stored(1, kW0, 3)), true);
      EXPECT_EQ(RowKindFits(row, reader), reader == writer)
          << KindName(writer) << " read by " << KindName(reader);
    }
    EXPECT_EQ(RowKindFits(untagged, reader), reader != kSlidingWindow) << KindName(reader);
  }
  RowKind unknown{RowKind::Is::kUnknown, kTokenBucket};
  EXPECT_FALSE(RowKindFits(unknown, kTokenBucket));
}

}  // namespace
}  // namespace ratelimit
