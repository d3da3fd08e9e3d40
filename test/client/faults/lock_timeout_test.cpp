// statement_timeout and lock_timeout while a call waits for a row lock: a
// clean error, nothing half-written (see faults.h).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <ostream>
#include <string>
#include <vector>

#include "faults.h"

namespace faults {
namespace {

// 3. statement_timeout and lock_timeout firing while a call waits for a row
// lock that another transaction (the holder) has: on a key whose row the
// holder creates (the waiter's INSERT ... ON CONFLICT waits), on an existing
// row (UPDATE / SELECT ... FOR UPDATE waits), and on a limit of 2 shards
// whose rows the holder takes both of (count 6 > one shard's 5), new and
// existing (the waiter's SKIP LOCKED finds no free shard and waits).
//
// The waiter's transaction first takes 2 tokens of another limit, then:
//   - with a savepoint: the call fails with the timeout's SQLSTATE (57014 /
//     55P03) after waiting (seen in pg_stat_activity as a Lock wait), ROLLBACK
//     TO SAVEPOINT recovers the transaction (the SET LOCAL timeout undone
//     with it), a further call succeeds and the transaction commits: the 2 + 1
//     tokens of the other limit stay consumed;
//   - without: the call fails the same way, the transaction is aborted (25P02
//     on the next statement), ROLLBACK works, and its 4 tokens of the other
//     limit return.
// Nothing is half-written: after the holder commits, the held limit's rows
// are bit for bit what the holder's transaction saw of its own writes, and
// the totals are exactly the committed consumption.
struct TimeoutCase {
  const char* setting;
  const char* sqlstate;
  bool existing;
  int shards;
};

void PrintTo(const TimeoutCase& c, std::ostream* os) {
  *os << c.setting << ", " << (c.existing ? "existing" : "new") << " row, " << c.shards << " shard(s)";
}

class LockWaitTimeoutTest : public FaultsTest, public ::testing::WithParamInterface<TimeoutCase> {};

TEST_P(LockWaitTimeoutTest, CleanErrorAndNothingHalfWritten) {
  const TimeoutCase c = GetParam();
  const std::string prefix =
      Name(Format("timeout.%s.%s.%d.", c.setting, c.existing ? "existing" : "new", c.shards));
  const std::string held = prefix + "held", other = prefix + "other";
  const char* held_key = c.shards > 1 ? nullptr : "held";
  const std::string held_config = LongWindow(10, c.shards), other_config = LongWindow(10);
  const double before = c.existing ? 2 : 0, holder_count = c.shards > 1 ? 6 : 3;
  if (c.existing) {
    pqxx::work tx(Conn());
    ASSERT_TRUE(Limit(tx, held, held_key, held_config, before).ok);
    tx.commit();
  }

  auto holder = ConnectTo(g_db);
  pqxx::work holder_tx(*holder);
  ASSERT_TRUE(Limit(holder_tx, held, held_key, held_config, holder_count).ok);
  const std::vector<std::string> holder_view = StateRows(holder_tx, held);

  auto waiter = ConnectTo(g_db);
  const int waiter_pid = waiter->backendpid();
  auto probe = ConnectTo(g_db);
  const std::string set_timeout = std::string("SET LOCAL ") + c.setting + " = '300ms'";

  // The call that waits for the holder; returns the SQLSTATE it failed with.
  auto call_held = [&](pqxx::transaction_base& tx, bool expect_wait_seen) {
    const auto t0 = Clock::now();
    auto call = std::async(std::launch::async, [&]() -> std::string {
      try {
        Limit(tx, held, held_key, held_config, 1);
        return "no error";
      } catch (const pqxx::sql_error& e) {
        return e.sqlstate();
      }
    });
    if (expect_wait_seen) {
      EXPECT_TRUE(
          WaitForBackend(*probe, waiter_pid, "wait_event_type = 'Lock'", std::chrono::milliseconds(280)))
          << "the call did not wait for the holder's row lock";
    }
    EXPECT_EQ(call.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    std::string sqlstate = call.get();
    const double waited = Seconds(Clock::now() - t0);
    EXPECT_GE(waited, 0.25) << "failed before the timeout";
    return std::make_pair(sqlstate, waited);
  };

  double waited_savepoint = 0, waited_abort = 0;
  {
    pqxx::work tx(*waiter);
    ASSERT_TRUE(Limit(tx, other, "k", other_config, 2).ok);
    tx.exec0("SAVEPOINT before_call");
    tx.exec0(set_timeout);
    auto [sqlstate, waited] = call_held(tx, true);
    waited_savepoint = waited;
    EXPECT_EQ(sqlstate, c.sqlstate);
    tx.exec0("ROLLBACK TO SAVEPOINT before_call");
    EXPECT_EQ(tx.exec1(std::string("SHOW ") + c.setting)[0].as<std::string>(),
              std::string(c.setting) == "statement_timeout" ? "20s" : "0")
        << "the SET LOCAL after the savepoint was not undone";
    EXPECT_TRUE(Limit(tx, other, "k", other_config, 1).ok);
    tx.commit();
  }
  {
    pqxx::work tx(*waiter);
    ASSERT_TRUE(Limit(tx, other, "k", other_config, 4).ok);
    tx.exec0(set_timeout);
    auto [sqlstate, waited] = call_held(tx, false);
    waited_abort = waited;
    EXPECT_EQ(sqlstate, c.sqlstate);
    try {
      tx.exec("SELECT 1");
      ADD_FAILURE() << "the transaction went on after the error";
    } catch (const pqxx::sql_error& e) {
      EXPECT_EQ(e.sqlstate(), "25P02");
    }
    tx.abort();
  }
  {
    // The waiter's backend still works, and sees only the committed 3 tokens of `other`.
    pqxx::work tx(*waiter);
    EXPECT_EQ(Available(tx, other, "k", other_config), 7);
  }
  holder_tx.commit();

  {
    pqxx::work tx(Conn());
    EXPECT_EQ(StateRows(tx, held), holder_view)
        << "the holder's rows, as it saw them before committing:" << Describe(holder_view);
    auto [held_total, held_rows] = StoredTotal(tx, held, held_key);
    EXPECT_EQ(held_total, 10 * 1.0 - before - holder_count) << "held: stored " << held_total;
    EXPECT_EQ(held_rows, c.shards);
    EXPECT_EQ(StoredTotal(tx, other, "k").first, 7);
  }
  {
    // Now the waiter gets the held limit's tokens without waiting.
    pqxx::work tx(*waiter);
    tx.exec0("SET LOCAL lock_timeout = '2s'");
    EXPECT_TRUE(Limit(tx, held, held_key, held_config, 1).ok);
    tx.commit();
  }
  PrintMeasure(
      Format("timeout %s, %s, %d shard(s):", c.setting, c.existing ? "existing" : "new", c.shards).c_str(),
      Format("failed after %.3f s (savepoint) and %.3f s (transaction)", waited_savepoint, waited_abort));
}

INSTANTIATE_TEST_SUITE_P(Timeouts, LockWaitTimeoutTest,
                         ::testing::Values(TimeoutCase{"statement_timeout", "57014", false, 1},
                                           TimeoutCase{"statement_timeout", "57014", true, 1},
                                           TimeoutCase{"statement_timeout", "57014", false, 2},
                                           TimeoutCase{"statement_timeout", "57014", true, 2},
                                           TimeoutCase{"lock_timeout", "55P03", false, 1},
                                           TimeoutCase{"lock_timeout", "55P03", true, 1},
                                           TimeoutCase{"lock_timeout", "55P03", false, 2},
                                           TimeoutCase{"lock_timeout", "55P03", true, 2}),
                         [](const ::testing::TestParamInfo<TimeoutCase>& info) {
                           return std::string(info.param.setting) +
                                  (info.param.existing ? "_existing" : "_new") +
                                  (info.param.shards > 1 ? "_sharded" : "");
                         });

}  // namespace
}  // namespace faults
