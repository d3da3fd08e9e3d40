// REPEATABLE READ and SERIALIZABLE callers on a hot key: 40001 (retried)
// and never a wrong admission (see contention.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "contention.h"

namespace contention {
namespace {

// f. REPEATABLE READ and SERIALIZABLE callers on a hot key (16 connections,
// one level per test, some grants rolled back on purpose). A call that
// would write a row changed since the snapshot fails with 40001; the worker
// retries the transaction. Never a wrong admission: committed admissions stay
// within the exact token bucket bound (see HotKeyTokenBucket), and 40001 is
// the only error.
//
// Liveness is reported only (see HotKeyTokenBucket): the share of capacity +
// rate * (demand span) / period admitted, which would show a limiter that
// failed every contended call with 40001. Alone on a 2-core machine both
// levels reach ~99%; with a second copy of this program running at the same
// time SERIALIZABLE fell to ~80%, every call then being granted or failing
// with 40001: the machine, not the limiter, was the bottleneck.
template <pqxx::isolation_level Level>
void RunIsolationHotKey(pqxx::connection& main, const std::string& name, const char* label) {
  const double rate = 100, capacity = 50;
  const Micros period_ms = 1000;
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);

  Workers workers(16);
  Start start = TakeStart(main);
  Stats stats = workers.Run(start.local + std::chrono::milliseconds(2500), [&](Worker& w) {
    HotKeyTransaction<pqxx::transaction<Level>>(w, name, "hot", config, 0.10);
  });
  Micros t_end = ServerClock(main);

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.deadlocks, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  const double demand_s = static_cast<double>(stats.last_call - stats.first_call) / kMicrosPerSecond;
  const double demand_bound = capacity + rate * demand_s;
  const auto admitted = static_cast<double>(stats.grants.size());
  char text[360];
  std::snprintf(text, sizeof text,
                "admitted %zu, bound %.3f (%.1f%%), over the demand span %.3f (%.1f%%), 40001 retried %ld, "
                "%ld txns, %ld refused, %ld rolled back, elapsed %.3f s",
                stats.grants.size(), bound, 100 * admitted / bound, demand_bound,
                100 * admitted / demand_bound, stats.serialization_failures, stats.transactions,
                stats.refused_calls, stats.rolled_back_on_purpose, elapsed_s);
  PrintMeasure(label, text);
  EXPECT_LE(admitted, bound);
  EXPECT_GT(stats.serialization_failures, 0) << "no contention: the retry path was not exercised";
  CheckTokenBucketIntervals(stats.grants, capacity, rate, period_ms * kMicrosPerMilli);
}

TEST_F(ContentionTest, HotKeyRepeatableRead) {
  RunIsolationHotKey<pqxx::repeatable_read>(Conn(), LimitName("hot_repeatable_read"),
                                            "hot key REPEATABLE READ:");
}

TEST_F(ContentionTest, HotKeySerializable) {
  RunIsolationHotKey<pqxx::serializable>(Conn(), LimitName("hot_serializable"), "hot key SERIALIZABLE:");
}

}  // namespace
}  // namespace contention
