// Rolled-back transactions and savepoints return their tokens, for each
// kind, also to a caller that waited for the row lock (see contention.h).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <utility>

#include "contention.h"

namespace contention {
namespace {

// d. Rolled-back transactions return their tokens, for each kind: take every
// token inside transactions (and a savepoint) that roll back, including while
// another caller waits on the row lock, then show the full capacity is still
// grantable. Runs once on a key with no row yet (INSERT path) and once on a
// key whose row exists (UPDATE path).
class RollbackTest : public ContentionTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(RollbackTest, RolledBackTokensReturn) {
  const std::string kind = GetParam();
  const int capacity = 5;
  const std::string name = LimitName(std::string("rollback.") + kind);
  const Micros now_ms = FloorDiv(ServerClock(Conn()), kMicrosPerMilli);
  // One hour periods, windows starting now: no refill or window change during the test.
  const std::string config = kind == "token bucket"
                                 ? TokenBucketConfig(capacity, 3600000, capacity)
                                 : WindowConfig(kind.c_str(), capacity, 3600000, nullptr, now_ms);
  const std::string limit_sql =
      "SELECT ok, remaining FROM " + Fn("ratelimit_limit") + "($1, $2, $3::jsonb, $4)";
  Conn().prepare("limit", limit_sql);
  auto waiter_conn = Connect();
  waiter_conn->prepare("limit", limit_sql);
  const int waiter_pid = waiter_conn->backendpid();
  auto probe_conn = Connect();

  // Takes every token in `tx`, then checks one more is refused.
  auto take_all = [&](pqxx::transaction_base& tx, const std::string& key) {
    for (int i = 0; i < capacity; ++i)
      ASSERT_TRUE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>()) << kind << " token " << i;
    ASSERT_FALSE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>()) << kind << " one too many";
  };

  for (const std::string key : {"new", "existing"}) {
    SCOPED_TRACE(kind + ", key " + key);
    if (key == "existing") {
      pqxx::work tx(Conn());  // count 0 writes the row without taking a token
      ASSERT_TRUE(tx.exec_prepared1("limit", name, key, config, 0.0)[0].as<bool>());
      tx.commit();
    }
    for (int round = 0; round < 3; ++round) {
      pqxx::work tx(Conn());
      take_all(tx, key);
      tx.abort();
    }
    {
      // A rolled-back savepoint returns its tokens to the same transaction.
      pqxx::work tx(Conn());
      tx.exec0("SAVEPOINT s");
      take_all(tx, key);
      tx.exec0("ROLLBACK TO SAVEPOINT s");
      take_all(tx, key);
      tx.abort();
    }
    {
      // A caller that comes while every token is taken by an open
      // transaction waits on the row lock (the committed state still shows
      // tokens), and gets one when that transaction rolls back.
      pqxx::work holder(Conn());
      take_all(holder, key);
      auto waiter = std::async(std::launch::async, [&] {
        pqxx::work tx(*waiter_conn);
        pqxx::row row = tx.exec_prepared1("limit", name, key, config, 1.0);
        tx.abort();
        return std::make_pair(row[0].as<bool>(), row[1].as<double>());
      });
      // Until the waiter blocks on the holder's lock or returns (it must
      // not; its statement_timeout ends a hang): no time limit of our own.
      bool waiting = false;
      while (!waiting && waiter.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
        pqxx::nontransaction probe(*probe_conn);
        waiting = probe
                      .exec_params1(
                          "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity"
                          " WHERE pid = $1",
                          waiter_pid)[0]
                      .as<bool>();
      }
      EXPECT_TRUE(waiting) << "the second caller did not wait for the holder's row lock";
      EXPECT_NE(waiter.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
      holder.abort();
      auto [ok, remaining] = waiter.get();  // bounded by its statement_timeout
      EXPECT_TRUE(ok) << "the waiter was refused although the holder rolled back";
      EXPECT_EQ(remaining, capacity - 1);
    }
    {
      pqxx::nontransaction tx(Conn());
      double value = tx.exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, $3::jsonb)",
                                     name, key, config)[0]
                         .as<double>();
      EXPECT_EQ(value, capacity);
    }
    {
      pqxx::work tx(Conn());
      take_all(tx, key);  // the full capacity, committed
      tx.commit();
    }
    pqxx::work tx(Conn());
    EXPECT_FALSE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>())
        << "committed tokens came back";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, RollbackTest,
                         ::testing::Values("token bucket", "fixed window", "sliding window"), KindTestName);

}  // namespace
}  // namespace contention
