// Two limits: separate calls in opposite orders may deadlock (40P01) but
// never over-admit; one ratelimit_limit_all call never deadlocks and
// consumes all or none (see contention.h).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "contention.h"

namespace contention {
namespace {

// e. Two limits in one transaction, consumed by concurrent clients in
// opposite orders with separate ratelimit_limit calls. 16 connections: 4 take
// a then b and 4 take b then a, holding the first row lock 10 ms
// (pg_sleep) before the second call to provoke the deadlock; 4 + 4 more take
// only a or only b, so that each limit's demand stays far above its supply
// even while the pairs are stuck. (With 16 pair connections nearly every
// transaction ends in a deadlock: ~15 of ~300 committed in 3 s, 10% of the
// bound, which would leave the bound untested. Rate 20/s for the same
// reason: deadlocked pairs hold the rows for 20 ms at a time, the
// deadlock_timeout set here.)
//
// PostgreSQL's deadlock detector aborts some transactions with 40P01; that
// must be the only error, and the committed admissions of each limit stay
// within the token bucket's exact bound (see HotKeyTokenBucket: every
// committed grant on a limit is part of that limit's chain of writes,
// whatever else its transaction did). When a pair's second call is refused,
// the pair rolls back (all or nothing, as docs/semantics.md advises) or, for half
// of them, commits the first grant alone (a caller for whom the second limit
// is optional).
//
// Single-limit transactions are deadlock victims too (about half of the
// 40P01s): one waiting for a row holds that row's tuple lock, which the
// opposite-order pair queues behind, so it closes the cycle. Callers of a
// limit that others take in opposite orders must all retry 40P01.
//
// TwoLimitsOneCall below takes the same two limits through one
// ratelimit_limit_all call instead: no deadlock at all.
TEST_F(ContentionTest, TwoLimitsOppositeOrders) {
  const double rate = 20, capacity = 5;
  const Micros period_ms = 1000;
  const std::string names[2] = {LimitName("pair.a"), LimitName("pair.b")};
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = "SELECT ok FROM " + Fn("ratelimit_limit") + "($1, NULL, $2::jsonb)";

  bool fast_deadlock_detection = true;
  const int threads = 16;
  // Worker roles by index % 4: 0 pair a then b, 1 pair b then a, 2 only a,
  // 3 only b. Per worker: [0] committed grants on a, [1] on b, [2] pairs
  // committed with both grants, [3] pairs aborted by 40P01.
  std::vector<std::array<long, 4>> counts(threads, std::array<long, 4>{});
  Workers workers(threads, [&](pqxx::connection& conn) {
    conn.prepare("limit", sql);
    try {
      pqxx::nontransaction tx(conn);
      tx.exec0("SET deadlock_timeout = '20ms'");  // superuser only; else the default 1 s
    } catch (const pqxx::sql_error&) {
      fast_deadlock_detection = false;
    }
  });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    const int role = w.index % 4;
    const int first = role % 2;  // the limit taken first (or only)
    std::array<long, 4>& mine = counts[w.index];
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    if (role >= 2) {
      if (tx.exec_prepared1("limit", names[first], config)[0].as<bool>()) {
        tx.commit();
        ++mine[first];
      } else {
        ++w.stats.refused_calls;
      }
      return;
    }
    try {
      if (!tx.exec_prepared1("limit", names[first], config)[0].as<bool>()) {
        ++w.stats.refused_calls;
        return;  // nothing taken; tx rolls back
      }
      tx.exec("SELECT pg_sleep(0.01)");
      const bool second = tx.exec_prepared1("limit", names[1 - first], config)[0].as<bool>();
      if (!second) {
        ++w.stats.refused_calls;
        if (w.Chance(0.5)) return;  // all or nothing: tx rolls back
      }
      tx.commit();
      ++mine[first];
      if (second) {
        ++mine[1 - first];
        ++mine[2];
      }
    } catch (const pqxx::deadlock_detected&) {
      ++mine[3];
      throw;
    }
  });
  Micros t_end = ServerClock(Conn());
  long admitted[2] = {0, 0}, both[2] = {0, 0}, pair_deadlocks[2] = {0, 0};
  for (int i = 0; i < threads; ++i) {
    admitted[0] += counts[i][0];
    admitted[1] += counts[i][1];
    if (i % 4 < 2) {
      both[i % 4] += counts[i][2];
      pair_deadlocks[i % 4] += counts[i][3];
    }
  }

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  char text[360];
  std::snprintf(
      text, sizeof text,
      "admitted a %ld, b %ld, bound %.3f (%.1f%%, %.1f%%); pairs committed both a->b %ld, b->a %ld; "
      "40P01 %ld (pairs a->b %ld, b->a %ld, single-limit %ld)%s; %ld txns, elapsed %.3f s",
      admitted[0], admitted[1], bound, 100 * static_cast<double>(admitted[0]) / bound,
      100 * static_cast<double>(admitted[1]) / bound, both[0], both[1], stats.deadlocks, pair_deadlocks[0],
      pair_deadlocks[1], stats.deadlocks - pair_deadlocks[0] - pair_deadlocks[1],
      fast_deadlock_detection ? "" : " (deadlock_timeout 1 s)", stats.transactions, elapsed_s);
  PrintMeasure("two limits, opposite orders:", text);
  for (int limit = 0; limit < 2; ++limit)
    EXPECT_LE(static_cast<double>(admitted[limit]), bound) << "limit " << names[limit];
  EXPECT_GE(stats.deadlocks, 1) << "the opposite orders never deadlocked: the test did not provoke the race";
  EXPECT_GE(pair_deadlocks[0] + pair_deadlocks[1], 1) << "no pair transaction was a deadlock victim";
}

// e'. The same two limits through one all-or-nothing ratelimit_limit_all call,
// half of the 16 clients listing them a, b and half b, a, each holding its
// locks a little (pg_sleep) before committing. The call locks rows in one
// canonical order, so no deadlock ever reaches a caller: no 40P01 at all, no
// other error. All or nothing: every committed call consumed both limits, so
// the admissions of a and b are equal, and each within the exact bound.
TEST_F(ContentionTest, TwoLimitsOneCall) {
  const double rate = 20, capacity = 5;
  const Micros period_ms = 1000;
  const std::string names[2] = {LimitName("all.a"), LimitName("all.b")};
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = "SELECT bool_and(ok) FROM " + Fn("ratelimit_limit_all") +
                          "(jsonb_build_array(jsonb_build_object('name', $1::text, 'config', $3::jsonb),"
                          " jsonb_build_object('name', $2::text, 'config', $3::jsonb)))";
  const int threads = 16;
  std::vector<long> committed(threads, 0);
  Workers workers(threads, [&](pqxx::connection& conn) {
    conn.prepare("limit_all", sql);
    pqxx::nontransaction tx(conn);
    tx.exec0("SET deadlock_timeout = '20ms'");  // would find any deadlock fast
  });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    const int first = w.index % 2;
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    if (!tx.exec_prepared1("limit_all", names[first], names[1 - first], config)[0].as<bool>()) {
      ++w.stats.refused_calls;
      return;
    }
    tx.exec("SELECT pg_sleep(0.005)");
    tx.commit();
    ++committed[w.index];
  });
  Micros t_end = ServerClock(Conn());
  long admitted = 0;
  for (long n : committed) admitted += n;
  pqxx::work check(Conn());
  pqxx::result rows = check.exec_params(
      "SELECT value, ts FROM " + Fn("ratelimit_state") + " WHERE name IN ($1, $2) ORDER BY name", names[0],
      names[1]);
  check.commit();

  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  char text[240];
  std::snprintf(text, sizeof text,
                "admitted %ld (both limits), bound %.3f (%.1f%%); 40P01 %ld; %ld txns, %.3f s", admitted,
                bound, 100 * static_cast<double>(admitted) / bound, stats.deadlocks, stats.transactions,
                elapsed_s);
  PrintMeasure("two limits, one call:", text);
  EXPECT_EQ(stats.deadlocks, 0) << "a deadlock reached a caller of ratelimit_limit_all";
  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_LE(static_cast<double>(admitted), bound);
  // Every call wrote both rows with one clock reading: the rows are identical.
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].as<double>(), rows[1][0].as<double>());
  EXPECT_EQ(rows[0][1].as<std::string>(), rows[1][1].as<std::string>());
}

}  // namespace
}  // namespace contention
