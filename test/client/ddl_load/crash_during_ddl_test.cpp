// DdlLoadTest.CrashDuringDdlUnderLoad: the load and the DDL of
// storage_survives_ddl_test.cpp, and the server crashes in the middle of
// a rebuild; after crash recovery every check of ddl_load.h's comment.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl_load.h"
#include "load.h"

namespace ddl_load {
namespace {

// The steps whose middle the crash test aims at (their index in DdlCycle).
const std::vector<std::pair<int, const char*>> kCrashTargets = {{1, "CREATE INDEX [CONCURRENTLY]"},
                                                                {4, "REINDEX TABLE CONCURRENTLY"},
                                                                {7, "VACUUM FULL"},
                                                                {11, "CLUSTER"}};

// The same load and DDL, and the server crashes (pg_ctl stop -m immediate)
// in the middle of it: after at least 2 s and 3 DDL steps without a
// trigger, then with the phase trigger and the trigger-key threads for at
// least 2 s and 3 more steps, once the DDL session has started one of
// REINDEX CONCURRENTLY, CREATE INDEX [CONCURRENTLY], VACUUM FULL or CLUSTER
// (chosen at random, printed; RATELIMIT_DDL_CRASH_STEP=0..3 picks one) and
// 0-150 ms more have passed. After the restart (pg_ctl start -w: crash
// recovery), the transactions whose COMMIT got no answer are resolved:
//   - an xid at or past the next_xid of the end-of-recovery checkpoint never
//     reached the WAL that survived (a commit record carries its xid, and
//     replay moves next_xid past every xid it sees): not committed;
//   - the others with pg_xact_status(): committed or aborted.
// Then amcheck, verify_heapam and the duplicate check; the indexes an
// interrupted REINDEX or CREATE INDEX CONCURRENTLY left invalid are reported
// and dropped (as an operator would); the trigger log has exactly the
// committed trigger-key grants; and the bound limits' state has exactly the
// committed grants, never above capacity, and exactly the capacity once
// drained.
TEST(DdlLoadTest, CrashDuringDdlUnderLoad) {
  REQUIRE_CLUSTER_DIR();
  RestartGuard restart_guard("ddl_load_test");

  Shared s;
  SetUpDatabase(s, "crash");
  Micros t_start = 0, server_before_crash = 0;
  {
    auto main = ConnectTo(s.db, kStatementTimeout);
    t_start = ServerClock(*main);
  }
  const auto t0 = Clock::now();
  Load load(s);
  std::mt19937_64 rng(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()));
  const char* forced = std::getenv("RATELIMIT_DDL_CRASH_STEP");
  const auto& target = kCrashTargets[forced != nullptr ? std::atoi(forced) % kCrashTargets.size()
                                                       : rng() % kCrashTargets.size()];
  const int delay_ms = static_cast<int>(rng() % 151);
  load.Start();
  load.WaitForDdl(std::chrono::seconds(2), 3);
  {
    auto main = ConnectTo(s.db, kStatementTimeout);
    load.StartTriggerKeys();
    DdlWithRetry(*main, PhaseTriggerSql(s));
    s.trigger_created = true;
    load.WaitForDdl(std::chrono::seconds(2), 3);
    load.WaitForTriggerCommit();
    server_before_crash = ServerClock(*main);
  }
  load.WaitForDdlStep(target.first);
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const int step_at_crash = s.ddl_current.load(), cycle_at_crash = s.ddl_cycle.load();
  const auto t_crash = Clock::now();
  s.crashing = true;
  const int stop_rc = ClusterCtl("stop-immediate");
  load.Stop();
  const int start_rc = ClusterCtl("start");
  const auto t_restarted = Clock::now();
  ASSERT_EQ(stop_rc, 0) << "cluster-ctl.sh stop-immediate failed";
  ASSERT_EQ(start_rc, 0) << "cluster-ctl.sh start failed";
  PrintLoad(load, s, Seconds(t_crash - t0));

  ExpectNoErrorsOrFindings(load, s, " before the crash");

  auto conn = ConnectTo(s.db, kStatementTimeout);
  // The first xid after crash recovery: the next_xid of the end-of-recovery
  // checkpoint (the server accepts connections only after it).
  const Checkpoint checkpoint = LatestCheckpoint(*conn);
  ASSERT_GE(checkpoint.time_s, server_before_crash / kMicrosPerSecond - 1)
      << "the latest checkpoint is not the end-of-recovery one";
  const std::uint64_t recovered_next_xid = checkpoint.next_xid;
  const std::vector<TxRecord> records = load.Records();
  Resolution resolved;
  long unknown = 0, unknown_committed = 0, unknown_not_in_wal = 0;
  std::vector<std::string> unresolved;
  {
    pqxx::nontransaction tx(*conn);
    for (const TxRecord& rec : records) {
      if (rec.outcome != Outcome::kUnknown) continue;
      ++unknown;
      if (rec.xid.empty() || std::stoull(rec.xid) >= recovered_next_xid) {
        resolved[rec.xid] = false;
        ++unknown_not_in_wal;
        continue;
      }
      const std::string status =
          tx.exec_params1("SELECT coalesce(pg_xact_status($1::xid8), 'NULL')", rec.xid)[0].as<std::string>();
      if (status != "committed" && status != "aborted")
        unresolved.push_back("xid " + rec.xid + ": " + status);
      resolved[rec.xid] = status == "committed";
      unknown_committed += status == "committed";
    }
  }
  EXPECT_TRUE(unresolved.empty()) << Describe(unresolved);
  PrintMeasure(
      "crash:",
      Format("at %.1f s, %d ms into %s (running at the crash: %s); down (stop + start with recovery) %.1f s; "
             "%ld COMMITs without an answer: %ld committed, %ld not in the recovered WAL",
             Seconds(t_crash - t0), delay_ms, target.second,
             step_at_crash < 0 ? "no step" : DdlCycle(s, cycle_at_crash)[step_at_crash].label.c_str(),
             Seconds(t_restarted - t_crash), unknown, unknown_committed, unknown_not_in_wal));

  ExpectStorageIntact(*conn, s, "after the crash");
  {
    pqxx::nontransaction tx(*conn);
    for (const auto& row : tx.exec_params("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = "
                                          "$1::regclass AND NOT indisvalid",
                                          s.StateTable()))
      PrintMeasure("invalid after the restart:", row[0].as<std::string>());
  }
  DropInvalidIndexes(*conn, s);
  CheckTriggerLog(*conn, s, records, resolved);
  CheckBounds(*conn, s, records, resolved, t_start);
  ExpectStorageIntact(*conn, s, "after the crash and the drain");
}

}  // namespace
}  // namespace ddl_load
