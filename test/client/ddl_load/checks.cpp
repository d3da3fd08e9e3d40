// Setting up a DDL-under-load test's database and the checks after the
// load (see ddl_load.h): amcheck, verify_heapam and duplicates, the exact
// admission bound of the bound limits and the trigger log's completeness.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ddl_load.h"
#include "load.h"

namespace ddl_load {

std::string CreateRunDatabase(const std::string& suffix) {
  const std::string db = "ratelimit_ddl_" + g_run_id + "_" + suffix;
  CreateDatabase(db);
  return db;
}

std::vector<std::string> CheckStorage(pqxx::connection& conn, const Shared& s, bool thorough,
                                      std::vector<std::string>* invalid) {
  std::vector<std::string> problems;
  auto attempt = [&](const std::string& what, const std::function<void(pqxx::nontransaction&)>& body) {
    try {
      pqxx::nontransaction tx(conn);
      body(tx);
    } catch (const pqxx::sql_error& e) {
      problems.push_back(what + ": SQLSTATE " + e.sqlstate() + ": " + e.what());
    }
  };
  for (const std::string& relation : {s.StateTable(), std::string(kTriggerLog)}) {
    std::vector<std::pair<std::string, bool>> indexes;
    attempt("listing the indexes of " + relation, [&](pqxx::nontransaction& tx) {
      for (const auto& row : tx.exec_params(
               "SELECT indexrelid::regclass::text, indisvalid AND indisready AND indislive FROM pg_index"
               " WHERE indrelid = $1::regclass ORDER BY indexrelid",
               relation))
        indexes.emplace_back(row[0].as<std::string>(), row[1].as<bool>());
    });
    for (const auto& [index, valid] : indexes) {
      if (!valid) {
        if (invalid != nullptr) invalid->push_back(index);
        continue;
      }
      attempt("bt_index_check(" + index + ", heapallindexed)", [&](pqxx::nontransaction& tx) {
        tx.exec_params("SELECT public.bt_index_check($1::regclass, true)", index);
      });
      if (thorough)
        attempt("bt_index_parent_check(" + index + ", heapallindexed, rootdescend)",
                [&](pqxx::nontransaction& tx) {
                  tx.exec_params("SELECT public.bt_index_parent_check($1::regclass, true, true)", index);
                });
    }
    attempt("verify_heapam(" + relation + ")", [&](pqxx::nontransaction& tx) {
      for (const auto& row :
           tx.exec_params("SELECT format('block %s offset %s attribute %s: %s', blkno, offnum, attnum, msg)"
                          " FROM public.verify_heapam($1::regclass, check_toast => true)",
                          relation))
        problems.push_back("verify_heapam(" + relation + "): " + row[0].as<std::string>());
    });
  }
  try {
    pqxx::work tx(conn);
    tx.exec0("SET LOCAL enable_indexscan = off");
    tx.exec0("SET LOCAL enable_indexonlyscan = off");
    tx.exec0("SET LOCAL enable_bitmapscan = off");
    const std::string duplicates =
        "SELECT format('%s|%s|%s stored %s times', name, coalesce(quote_literal(key), 'NULL'), shard, "
        "count(*))"
        " FROM " +
        s.StateTable() + " GROUP BY name, key, shard HAVING count(*) > 1";
    for (const auto& row : tx.exec("EXPLAIN (COSTS OFF) " + duplicates))
      if (row[0].as<std::string>().find("Index") != std::string::npos)
        problems.push_back("the duplicate check does not read the heap: " + row[0].as<std::string>());
    for (const auto& row : tx.exec(duplicates)) problems.push_back("duplicate: " + row[0].as<std::string>());
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    problems.push_back(std::string("duplicate check: SQLSTATE ") + e.sqlstate() + ": " + e.what());
  }
  return problems;
}

void SetUpDatabase(Shared& s, const std::string& suffix) {
  s.db = CreateRunDatabase(suffix);
  auto conn = ConnectTo(s.db, kStatementTimeout);
  pqxx::nontransaction tx(*conn);
  tx.exec0("CREATE SCHEMA ddl_rl");
  tx.exec0("CREATE EXTENSION ratelimit SCHEMA ddl_rl");
  tx.exec0("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public");
  s.schema =
      tx.exec1("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'ratelimit'")[0]
          .as<std::string>();
  tx.exec0(std::string("CREATE TABLE ") + kTriggerLog +
           " (xid xid8 NOT NULL DEFAULT pg_current_xact_id(), tg text NOT NULL, op text NOT NULL,"
           " name text, key text, shard int2)");
  tx.exec0(std::string("CREATE INDEX ddl_trigger_log_key ON ") + kTriggerLog + " (name, key, shard)");
  tx.exec0(std::string("CREATE INDEX ddl_trigger_log_xid ON ") + kTriggerLog + " (xid)");
  tx.exec0(std::string("CREATE FUNCTION public.ddl_log_write() RETURNS trigger LANGUAGE plpgsql"
                       " SET search_path = pg_catalog AS $$ BEGIN INSERT INTO ") +
           kTriggerLog +
           " (tg, op, name, key, shard) VALUES (TG_NAME, TG_OP, NEW.name, NEW.key, NEW.shard);"
           " RETURN NULL; END $$");
}

// The available tokens of a limit now (ratelimit_value).
double Available(pqxx::transaction_base& tx, const Shared& s, const LimitDef& l) {
  return tx
      .exec_params1("SELECT value FROM " + s.Fn("ratelimit_value") + "($1, $2, $3::jsonb)", l.name, l.Key(),
                    l.config)[0]
      .as<double>();
}

std::string PhaseTriggerSql(const Shared& s) {
  return std::string("CREATE TRIGGER ") + kPhaseTrigger + " AFTER INSERT OR UPDATE ON " + s.StateTable() +
         " FOR EACH ROW EXECUTE FUNCTION public.ddl_log_write()";
}

// Runs one DDL statement of the main thread, retrying legitimate errors.
void DdlWithRetry(pqxx::connection& conn, const std::string& sql) {
  for (int attempt = 0;; ++attempt) {
    try {
      pqxx::nontransaction tx(conn);
      tx.exec0(sql);
      return;
    } catch (const std::exception& e) {
      if (LegitimateKind(e) < 0 || attempt >= 20) throw;
    }
  }
}

// How a transaction whose COMMIT got no answer ended: by xid.
using Resolution = std::map<std::string, bool>;  // xid -> committed

bool Committed(const TxRecord& rec, const Resolution& resolved) {
  if (rec.outcome == Outcome::kCommitted) return true;
  if (rec.outcome != Outcome::kUnknown) return false;
  auto it = resolved.find(rec.xid);
  return it != resolved.end() && it->second;
}

// The exact admission bound of the four bound limits: what the state says
// was consumed is exactly what the clients committed (the unknown ones as
// resolved), never above capacity; then each is drained on one connection,
// and the total is exactly the capacity. t_start: the server's clock before
// the first call (what refills is bounded by the time since).
void CheckBounds(pqxx::connection& conn, const Shared& s, const std::vector<TxRecord>& records,
                 const Resolution& resolved, Micros t_start) {
  for (int k = 0; k < 4; ++k) {
    const LimitDef& l = s.limits.bound[k];
    SCOPED_TRACE("limit " + l.name);
    long known = 0, unknown = 0, unknown_committed = 0;
    for (const TxRecord& rec : records)
      for (const auto& [id, count] : rec.grants) {
        if (id != k) continue;
        known += rec.outcome == Outcome::kCommitted ? count : 0;
        unknown += rec.outcome == Outcome::kUnknown ? count : 0;
        unknown_committed += rec.outcome == Outcome::kUnknown && Committed(rec, resolved) ? count : 0;
      }
    double available = 0;
    long rows = 0;
    Micros t_read = 0;
    {
      pqxx::work tx(conn);
      available = Available(tx, s, l);
      t_read = tx.exec1("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8")[0].as<Micros>();
      tx.exec0("SET LOCAL enable_indexscan = off");
      tx.exec0("SET LOCAL enable_bitmapscan = off");
      rows = tx.exec_params1("SELECT count(*) FROM " + s.StateTable() + " WHERE name = $1", l.name)[0]
                 .as<long>();
      tx.commit();
    }
    // The most that can have refilled since the test started.
    const double refill =
        l.capacity * static_cast<double>(t_read - t_start) / kMicrosPerSecond / kPeriodSeconds;
    ASSERT_LT(refill, 0.5) << "the run took too long for an exact check";
    const double consumed = l.capacity - available;
    const double n = std::ceil(consumed - 1e-6);
    EXPECT_LE(n, consumed + refill + 1e-6)
        << "the available value " << available << " is no whole number of grants";
    EXPECT_GE(n, static_cast<double>(known)) << "committed grants are missing from the state";
    EXPECT_LE(n, static_cast<double>(known + unknown))
        << "more consumed than the clients could have committed";
    EXPECT_EQ(n, static_cast<double>(known + unknown_committed))
        << "the state disagrees with the committed grants the clients counted";
    EXPECT_LE(n, l.capacity) << "over-admitted";
    EXPECT_LE(rows, l.shards) << "more state rows than shards";

    // Drain it: a non-sharded limit until refused; a sharded one (whose
    // calls can be refused while other shards hold tokens) until the total
    // available is below one token.
    long drained = 0;
    {
      pqxx::work tx(conn);
      for (long attempts = 0; attempts < 100000; ++attempts) {
        if (l.shards > 1 && Available(tx, s, l) < 1) break;
        bool ok = tx.exec_params1("SELECT ok FROM " + s.Fn("ratelimit_limit") + "($1, $2, $3::jsonb)", l.name,
                                  l.Key(), l.config)[0]
                      .as<bool>();
        if (ok) ++drained;
        if (!ok && l.shards == 1) break;
      }
      tx.commit();
    }
    bool refused_after = false;
    double left = 0;
    {
      pqxx::work tx(conn);
      refused_after = !tx.exec_params1("SELECT ok FROM " + s.Fn("ratelimit_check") + "($1, $2, $3::jsonb)",
                                       l.name, l.Key(), l.config)[0]
                           .as<bool>();
      left = Available(tx, s, l);
      tx.commit();
    }
    EXPECT_TRUE(refused_after) << "not exhausted after draining";
    EXPECT_LT(left, 1.0);
    EXPECT_EQ(n + static_cast<double>(drained), l.capacity)
        << "committed grants plus the drain's should be exactly the capacity";
    PrintMeasure(
        ("bound " + l.name + ":").c_str(),
        Format("capacity %.0f: state says %.0f committed (clients: %ld known, %ld unknown of which %ld "
               "committed), %ld rows; drained %ld more",
               l.capacity, n, known, unknown, unknown_committed, rows, drained));
  }
}

// Trigger completeness: every committed grant on a trigger key (made only
// while the phase trigger was in place) left exactly one row in the log,
// with its transaction's xid; nothing else is logged for those keys.
void CheckTriggerLog(pqxx::connection& conn, const Shared& s, const std::vector<TxRecord>& records,
                     const Resolution& resolved) {
  std::map<std::pair<std::string, std::string>, long> expected, logged;  // (xid, key) -> rows
  std::map<std::string, long> expected_per_key, logged_per_key;
  for (const TxRecord& rec : records) {
    if (!Committed(rec, resolved)) continue;
    for (const auto& [id, count] : rec.grants) {
      if (id < kFirstTriggerId) continue;
      const std::string key = TriggerKey(id - kFirstTriggerId);
      expected[{rec.xid, key}] += count;
      expected_per_key[key] += count;
    }
  }
  {
    pqxx::nontransaction tx(conn);
    for (const auto& row : tx.exec_params("SELECT xid::text, key, count(*) FROM " + std::string(kTriggerLog) +
                                              " WHERE tg = $1 AND name = $2 GROUP BY 1, 2",
                                          kPhaseTrigger, s.limits.trigger.name)) {
      logged[{row[0].as<std::string>(), row[1].as<std::string>()}] = row[2].as<long>();
      logged_per_key[row[1].as<std::string>()] += row[2].as<long>();
    }
  }
  std::vector<std::string> mismatches;
  long expected_total = 0, logged_total = 0;
  for (const auto& [k, n] : expected_per_key) expected_total += n;
  for (const auto& [k, n] : logged_per_key) logged_total += n;
  auto compare = [&](const auto& a, const auto& b, const char* a_name, const char* b_name) {
    for (const auto& [id, n] : a) {
      auto it = b.find(id);
      long m = it == b.end() ? 0 : it->second;
      if (m != n && mismatches.size() < 20)
        mismatches.push_back(Format("xid %s key %s: %s %ld, %s %ld", id.first.c_str(), id.second.c_str(),
                                    a_name, n, b_name, m));
    }
  };
  compare(expected, logged, "committed grants", "logged rows");
  compare(logged, expected, "logged rows", "committed grants");
  EXPECT_EQ(logged_per_key, expected_per_key) << "per key, logged rows against committed grants";
  EXPECT_TRUE(mismatches.empty()) << "trigger rows missing or extra:" << Describe(mismatches);
  EXPECT_GT(expected_total, 0) << "no committed grant on a trigger key";
  PrintMeasure("trigger completeness:", Format("%ld committed grants on %zu trigger keys, %ld logged rows",
                                               expected_total, expected_per_key.size(), logged_total));
}

void ExpectStorageIntact(pqxx::connection& conn, const Shared& s, const char* when) {
  std::vector<std::string> invalid;
  std::vector<std::string> problems = CheckStorage(conn, s, true, &invalid);
  EXPECT_TRUE(problems.empty()) << when << ":" << Describe(problems);
  long rows = 0, log_rows = 0;
  {
    pqxx::nontransaction tx(conn);
    rows = tx.exec1("SELECT count(*) FROM " + s.StateTable())[0].as<long>();
    log_rows = tx.exec1(std::string("SELECT count(*) FROM ") + kTriggerLog)[0].as<long>();
  }
  PrintMeasure(
      Format("storage %s:", when).c_str(),
      Format("%zu problems; %ld state rows, %ld trigger log rows; invalid indexes skipped:%s",
             problems.size(), rows, log_rows, invalid.empty() ? " none" : Describe(invalid).c_str()));
}

void PrintLoad(const Load& load, const Shared& s, double seconds) {
  Counters clients = load.Clients();
  const Counters& ddl = load.Ddl();
  PrintMeasure("load:",
               Format("%.1f s: %ld transactions (%ld committed, %ld rolled back on purpose), %ld granted and "
                      "%ld refused calls, %ld refunds, %ld rows cleaned up; legitimate errors: %s",
                      seconds, clients.transactions, clients.committed, clients.rolled_back_on_purpose,
                      clients.granted_calls, clients.refused_calls, clients.refunds, clients.cleaned_rows,
                      clients.Legitimate().c_str()));
  PrintMeasure("straddles:",
               Format("%ld trigger-key transactions open before CREATE TRIGGER granted after it; %ld "
                      "DDL steps had a transaction open across them",
                      s.straddled.load(), s.straddles.load()));
  PrintMeasure("ddl:",
               Format("%ld steps (%ld of them done, %zu in a cycle); legitimate errors: %s",
                      s.ddl_steps.load(), ddl.committed, DdlCycle(s, 0).size(), ddl.Legitimate().c_str()));
}

void ExpectNoErrorsOrFindings(const Load& load, Shared& s, const char* when) {
  Counters clients = load.Clients();
  EXPECT_EQ(clients.unexpected.count, 0)
      << "unexpected client errors" << when << ":" << Describe(clients.unexpected.messages);
  EXPECT_EQ(load.Ddl().unexpected.count, 0)
      << "unexpected DDL errors" << when << ":" << Describe(load.Ddl().unexpected.messages);
  std::lock_guard<std::mutex> lock(s.findings_mutex);
  EXPECT_TRUE(s.findings.empty()) << "amcheck between DDL steps:" << Describe(s.findings);
}

}  // namespace ddl_load
