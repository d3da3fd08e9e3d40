// Many keys: per key, admissions are exactly min(committed calls, capacity)
// under 16 connections on 10,000 keys (see contention.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include <random>

#include "contention.h"

namespace contention {
namespace {

// c. Many keys: 10,000 keys, 16 connections, random keys for 3 s (half of
// the calls on any of the 10,000 keys, half on keys 0..999, so that even a
// slow run calls many keys more often than their capacity, some of them
// concurrently), one call per transaction, ~10% of the grants rolled back on
// purpose.
// Token bucket capacity 2, 1 token per minute. Per key, exactly:
//   committed admissions <= capacity + rate * elapsed / period
// (which is < 3 unless the run took a minute), and admissions >=
// min(committed calls, 2): a call is refused only when the committed state
// holds < 1 token, and that value is at least capacity minus the committed
// grants so far (refills only add), so two committed grants came first
// (every one of which is counted). Together: admissions == min(committed
// calls, 2), no key over-admitted and none refused while it has tokens. How
// many keys were called more often than their capacity depends on the
// machine's speed; it is reported.
TEST_F(ContentionTest, ManyKeys) {
  const int keys = 10000;
  const double rate = 1, capacity = 2;
  const Micros period_ms = 60000;
  const std::string name = LimitName("many_keys");
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = PlainLimitSql();

  const int threads = 16;
  std::vector<std::vector<int>> calls(threads, std::vector<int>(keys)),
      granted(threads, std::vector<int>(keys));
  Workers workers(threads, [&](pqxx::connection& conn) { conn.prepare("limit", sql); });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    int k = std::uniform_int_distribution<int>(0, w.Chance(0.5) ? keys - 1 : keys / 10 - 1)(w.rng);
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    bool ok = tx.exec_prepared1("limit", name, "k" + std::to_string(k), config)[0].as<bool>();
    if (ok && w.Chance(0.10)) {
      tx.abort();
      ++w.stats.rolled_back_on_purpose;
      return;
    }
    tx.commit();
    ++calls[w.index][k];
    if (ok) {
      ++granted[w.index][k];
      ++w.stats.granted_calls;
    } else {
      ++w.stats.refused_calls;
    }
  });
  Micros t_end = ServerClock(Conn());

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double refill =
      rate * elapsed_s * kMicrosPerSecond / static_cast<double>(period_ms * kMicrosPerMilli);
  const double bound = capacity + refill;
  long keys_touched = 0, keys_at_bound = 0, keys_beyond = 0, admitted = 0, over = 0, starved = 0;
  for (int k = 0; k < keys; ++k) {
    int c = 0, g = 0;
    for (int t = 0; t < threads; ++t) {
      c += calls[t][k];
      g += granted[t][k];
    }
    admitted += g;
    keys_touched += c > 0;
    keys_at_bound += g == static_cast<int>(capacity);
    keys_beyond += c > static_cast<int>(capacity);
    if (g > bound && over++ < 5) ADD_FAILURE() << "key k" << k << ": " << g << " admissions > " << bound;
    if (g < std::min(c, static_cast<int>(capacity)) && starved++ < 5)
      ADD_FAILURE() << "key k" << k << ": " << g << " admissions for " << c << " committed calls";
  }
  char text[320];
  std::snprintf(text, sizeof text,
                "%ld committed txns, %ld admitted, %ld refused; %ld keys used, %ld at the bound (%.2f), "
                "%ld with more calls than capacity; %ld rolled back; elapsed %.3f s",
                stats.transactions - stats.rolled_back_on_purpose, admitted, stats.refused_calls,
                keys_touched, keys_at_bound, bound, keys_beyond, stats.rolled_back_on_purpose, elapsed_s);
  PrintMeasure("many keys:", text);
  EXPECT_EQ(over, 0);
  EXPECT_EQ(starved, 0);
}

}  // namespace
}  // namespace contention
