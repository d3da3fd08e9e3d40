// The DDL session of the DDL-under-load tests (see ddl_load.h): one cycle
// of DDL steps on ratelimit_state, each step alone or with a transaction of
// a second connection open across it, checked by amcheck between the steps.

#include <memory>
#include <string>
#include <vector>

#include "ddl_load.h"

namespace ddl_load {

std::vector<DdlStep> DdlCycle(const Shared& s, int cycle) {
  const std::string t = s.StateTable();
  const bool concurrently = cycle % 2 == 0;
  return {
      {"drop invalid indexes", "", 0, Straddle::kNone},
      {concurrently ? "CREATE INDEX CONCURRENTLY" : "CREATE INDEX",
       std::string("CREATE INDEX ") + (concurrently ? "CONCURRENTLY " : "") +
           "IF NOT EXISTS ddl_value_idx ON " + t + " (value)",
       300, Straddle::kAnyRead},
      {"CREATE TRIGGER",
       std::string("CREATE OR REPLACE TRIGGER ") + kCycleTrigger + " AFTER INSERT OR UPDATE ON " + t +
           " FOR EACH ROW EXECUTE FUNCTION public.ddl_log_write()",
       900, Straddle::kAnyRead},
      {"amcheck", "", 0, Straddle::kNone},
      {"REINDEX TABLE CONCURRENTLY", "REINDEX TABLE CONCURRENTLY " + t, 900, Straddle::kNoTableLock},
      {"SET (fillfactor = 70)", "ALTER TABLE " + t + " SET (fillfactor = 70)", 0, Straddle::kAnyRead},
      {"amcheck", "", 0, Straddle::kNone},
      {"VACUUM FULL", "VACUUM FULL " + t, 300, Straddle::kNone},
      {"DROP INDEX", "DROP INDEX IF EXISTS " + s.schema + ".ddl_value_idx", 0, Straddle::kNone},
      {"DROP TRIGGER", std::string("DROP TRIGGER IF EXISTS ") + kCycleTrigger + " ON " + t, 0,
       Straddle::kNone},
      {"amcheck", "", 0, Straddle::kNone},
      {"CLUSTER", "CLUSTER " + t + " USING ratelimit_state_name_key_shard", 300, Straddle::kNone},
      {"amcheck", "", 0, Straddle::kNone},
      {"RESET (fillfactor)", "ALTER TABLE " + t + " RESET (fillfactor)", 0, Straddle::kAnyRead},
  };
}

// Drops the indexes of the state table that are not valid: what an
// interrupted REINDEX CONCURRENTLY or CREATE INDEX CONCURRENTLY leaves.
void DropInvalidIndexes(pqxx::connection& conn, const Shared& s) {
  std::vector<std::string> invalid;
  {
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec_params("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = "
                                          "$1::regclass AND NOT indisvalid",
                                          s.StateTable()))
      invalid.push_back(row[0].as<std::string>());
  }
  for (const auto& index : invalid) {
    pqxx::nontransaction tx(conn);
    tx.exec0("DROP INDEX IF EXISTS " + index);
  }
}

namespace {

bool RunDdlStep(Shared& s, Worker& w, const DdlStep& step, const std::string& previous) {
  try {
    if (step.label == "drop invalid indexes") {
      DropInvalidIndexes(*w.conn, s);
    } else if (step.label == "amcheck") {
      for (const auto& problem : CheckStorage(*w.conn, s, false))
        if (!s.crashing) s.Finding("after " + previous + ": " + problem);
    } else {
      pqxx::nontransaction tx(*w.conn);
      tx.exec0(step.sql);
    }
    ++w.counters.committed;
    return true;
  } catch (const std::exception& e) {
    OnError(s, w, e, step.label);
    return false;
  }
}

// Runs a DDL step while a transaction of the second connection `st` is open
// across it: the transaction first reads (SELECT 1, ratelimit_check or
// ratelimit_value, in turn; kNoTableLock: SELECT 1 only), then the step
// runs and commits, then the transaction grants on a key of its own (an
// existing row, or every fourth round a new one) and commits. The write must
// see the table as the step left it: its index entries are checked by the
// next amcheck, and after CREATE TRIGGER the trigger must have logged it
// (checked inside the transaction, against its xid).
void RunStraddledStep(Shared& s, Worker& ddl, Worker& st, const DdlStep& step, const std::string& previous,
                      long round) {
  const LimitDef& l = s.limits.straddle;
  const std::string key = round % 4 == 3 ? "new" + std::to_string(round) : "s" + std::to_string(round % 8);
  const long read = step.straddle == Straddle::kNoTableLock ? 0 : round % 3;
  std::unique_ptr<pqxx::work> tx;
  try {
    tx = std::make_unique<pqxx::work>(*st.conn);
    if (read == 0) tx->exec1("SELECT 1");
    if (read == 1) tx->exec_prepared1("check", l.name, key, l.config);
    if (read == 2)
      tx->exec_params1("SELECT value FROM " + s.Fn("ratelimit_value") + "($1, $2, $3::jsonb)", l.name, key,
                       l.config);
  } catch (const std::exception& e) {
    OnError(s, st, e, "straddle read before " + step.label);
    tx.reset();
  }
  const bool done = RunDdlStep(s, ddl, step, previous);
  if (!tx) return;
  try {
    if (!Call(st, *tx, l, key.c_str()))
      st.counters.unexpected.Add("a straddle key (capacity 1e9) refused a call");
    if (done && step.label == "CREATE TRIGGER") {
      const long logged =
          tx->exec_params1("SELECT count(*) FROM " + std::string(kTriggerLog) +
                               " WHERE xid = pg_current_xact_id() AND tg = $1 AND name = $2 AND key = $3",
                           kCycleTrigger, l.name, key)[0]
              .as<long>();
      if (logged != 1 && !s.crashing)
        s.Finding(
            Format("a transaction open across CREATE TRIGGER (read: %s) wrote key %s after it: %ld trigger "
                   "rows, expected 1",
                   read == 0   ? "SELECT 1"
                   : read == 1 ? "ratelimit_check"
                               : "ratelimit_value",
                   key.c_str(), logged));
    }
    tx->commit();
    ++st.counters.committed;
    ++s.straddles;
  } catch (const std::exception& e) {
    OnError(s, st, e, "straddle write after " + step.label);
  }
}

}  // namespace

void DdlLoop(Shared& s, Worker& w, Worker& st) {
  long round = 0;
  for (int cycle = 0; !s.stop && w.alive; ++cycle) {
    std::string previous = "the start of cycle " + std::to_string(cycle);
    const std::vector<DdlStep> steps = DdlCycle(s, cycle);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (s.stop || !w.alive) return;
      ++w.counters.transactions;
      s.ddl_cycle = cycle;
      s.ddl_current = static_cast<int>(i);
      if (steps[i].straddle != Straddle::kNone && st.alive) {
        RunStraddledStep(s, w, st, steps[i], previous, round++);
      } else {
        RunDdlStep(s, w, steps[i], previous);
      }
      s.ddl_current = -1;
      if (steps[i].label != "amcheck") previous = steps[i].label;
      ++s.ddl_steps;
      w.SleepMs(20 + steps[i].pause_ms, 100 + steps[i].pause_ms);
    }
  }
}

}  // namespace ddl_load
