// A backend killed in the middle of a transaction: its consumption is gone
// and nothing else is touched (see faults.h).

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "faults.h"

namespace faults {
namespace {

// 1. A backend killed (pg_terminate_backend from another connection) in the
// middle of a transaction that consumed tokens: on four limits, through each
// write path (UPDATE of an existing row, INSERT of a new one, creating the
// rows of the two shards a sharded grant takes from, a sliding window's row), once while the victim is
// idle in its transaction and once while it runs a statement (pg_sleep).
//
// Its consumption is gone: every state row of the test is bit for bit what it
// was before the victim's transaction (the killed keys' rows back to what they
// were, the new ones absent), except for a bystander's transaction, open on
// another key during the kill and committed after it, whose consumption is
// there. The killed transaction's row locks are released: a caller with a
// short lock_timeout gets the killed key's tokens at once.
class TerminateTest : public FaultsTest, public ::testing::WithParamInterface<bool> {};

TEST_P(TerminateTest, KilledTransactionsConsumptionIsGone) {
  const bool running = GetParam();
  const std::string prefix = Name(running ? "terminate_running." : "terminate_idle.");
  const std::string bucket = prefix + "bucket", window = prefix + "window", sharded = prefix + "sharded",
                    sliding = prefix + "sliding";
  const std::string bucket_config = SlowBucket(10), window_config = LongWindow(10),
                    sharded_config = SlowBucket(40, 4), sliding_config = LongSlidingWindow(10);
  {
    pqxx::work tx(Conn());
    ASSERT_TRUE(Limit(tx, bucket, "victim", bucket_config, 2).ok);
    ASSERT_TRUE(Limit(tx, bucket, "bystander", bucket_config, 3).ok);
    ASSERT_TRUE(Limit(tx, window, "bystander", window_config, 4).ok);
    tx.commit();
  }
  const std::vector<std::string> before = StateRows(Conn(), prefix);
  ASSERT_EQ(before.size(), 3u) << Describe(before);

  auto victim = ConnectTo(g_db);
  const int victim_pid = victim->backendpid();
  auto victim_tx = std::make_unique<pqxx::work>(*victim);
  EXPECT_TRUE(Limit(*victim_tx, bucket, "victim", bucket_config, 5).ok);    // UPDATE of an existing row
  EXPECT_TRUE(Limit(*victim_tx, window, "victim", window_config, 6).ok);    // INSERT of a new row
  EXPECT_TRUE(Limit(*victim_tx, sharded, nullptr, sharded_config, 15).ok);  // creates 2 shard rows (10 each)
  EXPECT_TRUE(Limit(*victim_tx, sliding, "victim", sliding_config, 8).ok);  // a sliding window
  EXPECT_EQ(StateRows(*victim_tx, prefix).size(), 3u + 1 + 2 + 1) << "the victim's own view";

  auto bystander = ConnectTo(g_db);
  pqxx::work bystander_tx(*bystander);
  EXPECT_TRUE(Limit(bystander_tx, bucket, "bystander 2", bucket_config, 1).ok);

  auto probe = ConnectTo(g_db);
  std::future<std::string> sleeping;
  if (running) {
    sleeping = std::async(std::launch::async, [&]() -> std::string {
      try {
        victim_tx->exec("SELECT pg_sleep(15)");
        return "pg_sleep returned";
      } catch (const pqxx::broken_connection&) {
        return "broken connection";
      } catch (const std::exception& e) {
        return std::string("other error: ") + e.what();
      }
    });
    ASSERT_TRUE(WaitForBackend(*probe, victim_pid, "state = 'active' AND query LIKE '%pg_sleep%'"));
  } else {
    ASSERT_TRUE(WaitForBackend(*probe, victim_pid, "state = 'idle in transaction'"));
  }

  {
    pqxx::nontransaction killer(*probe);
    // Waits (up to 10 s) until the backend has exited.
    EXPECT_TRUE(killer.exec_params1("SELECT pg_terminate_backend($1, 10000)", victim_pid)[0].as<bool>());
    EXPECT_EQ(
        killer.exec_params1("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", victim_pid)[0].as<int>(),
        0);
  }
  if (running) {
    ASSERT_EQ(sleeping.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(sleeping.get(), "broken connection");
  } else {
    EXPECT_THROW(victim_tx->exec("SELECT 1"), pqxx::broken_connection);
  }
  victim_tx.reset();
  victim.reset();

  bystander_tx.commit();
  std::vector<std::string> after = StateRows(Conn(), prefix);
  std::vector<std::string> bystander_rows;
  after.erase(std::remove_if(after.begin(), after.end(),
                             [&](const std::string& row) {
                               bool mine = row.rfind(bucket + "|'bystander 2'|", 0) == 0;
                               if (mine) bystander_rows.push_back(row);
                               return mine;
                             }),
              after.end());
  EXPECT_EQ(after, before) << "state rows before the victim's transaction:" << Describe(before)
                           << "\nafter it was killed (without the bystander's new row):" << Describe(after);
  ASSERT_EQ(bystander_rows.size(), 1u) << "the bystander's committed consumption is missing";
  {
    pqxx::work tx(Conn());
    EXPECT_NEAR(StoredTotal(tx, bucket, "bystander 2").first, 9, 1e-6);
  }

  // The killed transaction's locks are gone: no waiting for any of its rows.
  pqxx::work tx(Conn());
  tx.exec0("SET LOCAL lock_timeout = '2s'");
  CallResult r = Limit(tx, bucket, "victim", bucket_config, 8);
  EXPECT_TRUE(r.ok) << "the killed consumption still counts";
  EXPECT_NEAR(r.remaining, 0, 1e-6);
  EXPECT_TRUE(Limit(tx, window, "victim", window_config, 10).ok);
  EXPECT_TRUE(Limit(tx, sharded, nullptr, sharded_config, 10).ok);
  EXPECT_NEAR(Available(tx, sharded, nullptr, sharded_config), 30, 1e-6);
  EXPECT_TRUE(Limit(tx, sliding, "victim", sliding_config, 10).ok);
  tx.commit();
}

INSTANTIATE_TEST_SUITE_P(Victim, TerminateTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "RunningStatement" : "IdleInTransaction");
                         });

}  // namespace
}  // namespace faults
