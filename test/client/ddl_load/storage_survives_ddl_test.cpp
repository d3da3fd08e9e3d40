// DdlLoadTest.StorageSurvivesDdlUnderLoad: the load and every kind of DDL
// on ratelimit_state, then every check of ddl_load.h's comment.

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "ddl_load.h"
#include "load.h"

namespace ddl_load {
namespace {

// Load and DDL for three phases: without a trigger (at least 2 s and 3 DDL
// steps), with the phase trigger in place and the trigger-key threads
// running (at least 4 s and a whole cycle's worth of DDL steps, so every
// kind of DDL runs while the trigger is there), and without it again (at
// least 1 s and 2 steps). Then every check of the file comment.
TEST(DdlLoadTest, StorageSurvivesDdlUnderLoad) {
  Shared s;
  SetUpDatabase(s, "main");
  auto main = ConnectTo(s.db, kStatementTimeout);
  {
    pqxx::work tx(*main);
    for (const LimitDef& l : s.limits.bound) ASSERT_EQ(Available(tx, s, l), l.capacity) << l.name;
  }
  const Micros t_start = ServerClock(*main);
  const auto t0 = Clock::now();
  Load load(s);
  load.Start();
  load.WaitForDdl(std::chrono::seconds(2), 3);

  load.StartTriggerKeys();
  DdlWithRetry(*main, PhaseTriggerSql(s));
  s.trigger_created = true;
  load.WaitForDdl(std::chrono::seconds(4), static_cast<long>(DdlCycle(s, 0).size()));
  load.WaitForTriggerCommit();
  load.StopTriggerKeys();
  DdlWithRetry(*main, std::string("DROP TRIGGER ") + kPhaseTrigger + " ON " + s.StateTable());

  load.WaitForDdl(std::chrono::seconds(1), 2);
  load.Stop();
  const double load_s = Seconds(Clock::now() - t0);
  PrintLoad(load, s, load_s);

  ExpectNoErrorsOrFindings(load, s, "");
  const std::vector<TxRecord> records = load.Records();
  long unknown = 0;
  for (const TxRecord& rec : records) unknown += rec.outcome == Outcome::kUnknown;
  EXPECT_EQ(unknown, 0) << "COMMITs without an answer, no crash";

  ExpectStorageIntact(*main, s, "after the load");
  CheckTriggerLog(*main, s, records, {});
  CheckBounds(*main, s, records, {}, t_start);
  ExpectStorageIntact(*main, s, "after the drain");
}

}  // namespace
}  // namespace ddl_load
