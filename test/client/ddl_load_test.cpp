// DDL under load: the storage cannot be corrupted by the DDL an operator runs
// on a live ratelimit_state. Several threads, each on its own connection, call
// the extension (every kind, a hot key, random keys, a sharded limit,
// ratelimit_limit_all, savepoints rolled back after grants, refunds, cleanup,
// and "parked" transactions that sleep between two calls while DDL runs),
// while one more session cycles through REINDEX TABLE CONCURRENTLY, CREATE
// INDEX [CONCURRENTLY] / DROP INDEX, a row trigger created and dropped, VACUUM
// FULL, CLUSTER and ALTER TABLE SET (fillfactor) / RESET. Between the steps it
// verifies the table with amcheck, so that a broken index cannot hide behind
// the next rebuild. Transactions are kept open across DDL on purpose: the
// parked ones, a transaction of the DDL session's own that reads before each
// step that does not wait for readers (CREATE INDEX [CONCURRENTLY], CREATE
// TRIGGER, REINDEX CONCURRENTLY, SET/RESET fillfactor) and writes after it
// (after CREATE TRIGGER its write must be logged), and the trigger-key
// threads' first transactions, open across the phase trigger's creation.
// Afterwards:
//   - amcheck: bt_index_check and bt_index_parent_check (heapallindexed) on
//     every valid index of ratelimit_state and of the trigger's log table,
//     and verify_heapam on both, find nothing;
//   - no (name, key, shard) is stored twice (read by a sequential scan);
//   - trigger completeness: while a trigger stayed in place for a whole
//     phase, every committed grant on keys used only in that phase left
//     exactly one row in its log, with its transaction id;
//   - exact admission bound: on four limits whose refill during the test is
//     negligible (a period of ten years), the stored state says exactly as
//     many grants committed as the clients counted, never more than the
//     capacity, and once drained, exactly the capacity.
// The second test crashes the server (pg_ctl stop -m immediate) in the middle
// of the load and the DDL, restarts it and checks the same, resolving the
// transactions whose COMMIT got no answer with pg_xact_status.
//
// Errors that concurrent DDL legitimately causes are counted, not failures:
// 40P01 (deadlock), 40001 (REPEATABLE READ callers), 55P03, 57014, and 23505
// raised by the transient index of REINDEX CONCURRENTLY (_ccnew, or the old
// index while it is being retired, _ccold: INSERT ... ON CONFLICT takes only
// valid indexes as arbiters, which is PostgreSQL's own behaviour). Any other
// error, or a lost connection (outside the crash), fails the test. Durations
// only decide how much load there is: each phase waits for time to pass and
// for the DDL session to complete a whole cycle, never the other way round,
// and every statement has a statement_timeout, so a hang fails.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster; the user must be
// a superuser. Each test works in a database of its own (dropped at the end),
// with the extension in a schema of its own. The crash test restarts the
// server through scripts/cluster-ctl.sh, which needs CLUSTER_DIR (and
// PG_BINDIR) in the environment, and leaves the server running, also when it
// fails. Not part of the ctest unit run: scripts/test.sh runs
// build/ddl_load_test against its throwaway cluster.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support.h"

namespace {

using namespace client_test;

// The period of the limits whose admissions are counted exactly: 3650 days,
// so that over a test well under a thousandth of a token refills.
constexpr double kPeriodSeconds = 3650.0 * 86400;
constexpr const char* kLongPeriod = R"("3650 days")";
constexpr const char* kStatementTimeout = "30s";
// The trigger that stays in place for a whole phase, and the one the DDL
// session creates and drops in every cycle. Both log into kTriggerLog.
constexpr const char* kPhaseTrigger = "ddl_phase";
constexpr const char* kCycleTrigger = "ddl_cycle";
constexpr const char* kTriggerLog = "public.ddl_trigger_log";
constexpr int kRandomKeys = 400;
constexpr int kRefundKeys = 20;
constexpr int kTriggerKeys = 32;

// Set once by the environment below.
std::string g_run_id;  // makes database names unique per run

// Creates a database of this run (dropped at the end).
std::string CreateRunDatabase(const std::string& suffix) {
  const std::string db = "ratelimit_ddl_" + g_run_id + "_" + suffix;
  CreateDatabase(db);
  return db;
}

// ---------------------------------------------------------------------------
// The limits.

struct LimitDef {
  std::string name;
  std::string config;
  bool null_key;
  std::string key;  // the fixed key (bound limits), when not null_key
  double capacity;  // the most that can ever be granted (bound limits)
  int shards;

  const char* Key() const { return null_key ? nullptr : key.c_str(); }
};

// Every limit the load uses. bound[0..3] are counted exactly (tracked ids
// 0..3); the trigger keys are tracked ids kFirstTriggerId + i.
struct Limits {
  std::vector<LimitDef> bound;
  LimitDef fast_bucket, fast_fixed, fast_sliding, hot, fast_sharded, refund, trigger, straddle;
};

constexpr int kFirstTriggerId = 4;

Limits MakeLimits() {
  Limits l;
  l.bound = {
      {"ddl.bound_bucket",
       Format(R"({"kind": "token bucket", "rate": 300, "period": %s, "capacity": 300})", kLongPeriod), false,
       "bound", 300, 1},
      {"ddl.bound_fixed",
       Format(R"({"kind": "fixed window", "rate": 1000, "period": %s, "start": 0})", kLongPeriod), false,
       "bound", 1000, 1},
      {"ddl.bound_sliding",
       Format(R"({"kind": "sliding window", "rate": 1000, "period": %s, "start": 0})", kLongPeriod), false,
       "bound", 1000, 1},
      {"ddl.bound_sharded",
       Format(R"({"kind": "token bucket", "rate": 800, "period": %s, "capacity": 800, "shards": 8})",
              kLongPeriod),
       true, "", 800, 8},
  };
  // Fast limits on random keys: rows go idle within a second or two, so
  // ratelimit_cleanup deletes them while others create them again.
  l.fast_bucket = {"ddl.fast_bucket",
                   R"({"kind": "token bucket", "rate": 50, "period": "1 second", "capacity": 5})",
                   false,
                   "",
                   0,
                   1};
  l.fast_fixed = {
      "ddl.fast_fixed", R"({"kind": "fixed window", "rate": 5, "period": "1 second"})", false, "", 0, 1};
  l.fast_sliding = {
      "ddl.fast_sliding", R"({"kind": "sliding window", "rate": 5, "period": "1 second"})", false, "", 0, 1};
  l.hot = {"ddl.hot", R"({"kind": "token bucket", "rate": 2000, "period": "1 second", "capacity": 20})",
           false,     "hot",
           0,         1};
  l.fast_sharded = {
      "ddl.fast_sharded",
      R"({"kind": "token bucket", "rate": 400, "period": "1 second", "capacity": 40, "shards": 8})",
      true,
      "",
      0,
      8};
  l.refund = {"ddl.refund",
              R"({"kind": "token bucket", "rate": 1, "period": "1 minute", "capacity": 10})",
              false,
              "",
              0,
              1};
  // Never refused: every call on a trigger key is a grant that writes.
  l.trigger = {"ddl.trigger",
               Format(R"({"kind": "token bucket", "rate": 1e9, "period": %s, "capacity": 1e9})", kLongPeriod),
               false,
               "",
               0,
               1};
  l.straddle = {"ddl.straddle", l.trigger.config, false, "", 0, 1};
  return l;
}

std::string TriggerKey(int i) { return "t" + std::to_string(i); }

// ---------------------------------------------------------------------------
// What the clients saw.

// SQLSTATEs that concurrent DDL legitimately causes (see the file comment).
enum ErrorKind {
  kErrDeadlock,
  kErrSerialization,
  kErrTransientIndex,
  kErrLockTimeout,
  kErrStatementTimeout,
  kErrorKinds
};
const char* const kErrorKindNames[kErrorKinds] = {"40P01", "40001", "23505 _ccnew/_ccold", "55P03", "57014"};

// The SQLSTATE of a server error, or "" for anything else (a lost
// connection, a COMMIT without an answer). libpqxx 6 throws 40001 and 40P01
// as transaction_rollback exceptions, which carry no SQLSTATE and are no
// sql_error.
std::string SqlState(const std::exception& e) {
  if (auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) return sql->sqlstate();
  if (dynamic_cast<const pqxx::deadlock_detected*>(&e) != nullptr) return "40P01";
  if (dynamic_cast<const pqxx::serialization_failure*>(&e) != nullptr) return "40001";
  if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e) != nullptr) return "";
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) return "40000";
  return "";
}

// The legitimate kind of an error, or -1.
int LegitimateKind(const std::exception& e) {
  const std::string s = SqlState(e);
  const std::string message = e.what();
  if (s == "40P01") return kErrDeadlock;
  if (s == "40001") return kErrSerialization;
  if (s == "23505" &&
      (message.find("_ccnew") != std::string::npos || message.find("_ccold") != std::string::npos))
    return kErrTransientIndex;
  if (s == "55P03") return kErrLockTimeout;
  if (s == "57014") return kErrStatementTimeout;
  return -1;
}

struct Counters {
  long transactions = 0, committed = 0, rolled_back_on_purpose = 0, granted_calls = 0, refused_calls = 0;
  long cleaned_rows = 0, refunds = 0;
  std::array<long, kErrorKinds> legitimate{};
  UnexpectedErrors unexpected;

  void Merge(const Counters& o) {
    transactions += o.transactions;
    committed += o.committed;
    rolled_back_on_purpose += o.rolled_back_on_purpose;
    granted_calls += o.granted_calls;
    refused_calls += o.refused_calls;
    cleaned_rows += o.cleaned_rows;
    refunds += o.refunds;
    for (int i = 0; i < kErrorKinds; ++i) legitimate[i] += o.legitimate[i];
    unexpected.Merge(o.unexpected, 20);
  }

  std::string Legitimate() const {
    std::string out;
    for (int i = 0; i < kErrorKinds; ++i)
      out += Format("%s%s %ld", i ? ", " : "", kErrorKindNames[i], legitimate[i]);
    return out;
  }
};

enum class Outcome { kCommitted, kUnknown, kAborted };

// (tracked id, grants) of one transaction.
using Grants = std::vector<std::pair<int, int>>;

// A transaction that granted on a tracked limit: its xid (read before
// COMMIT), whether the COMMIT returned, and the grants it made that were not
// rolled back to a savepoint.
struct TxRecord {
  std::string xid;
  Outcome outcome;
  Grants grants;
};

// One client thread: its connection and what it saw.
struct Worker {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<pqxx::quiet_errorhandler> quiet;  // destroyed before conn
  std::mt19937_64 rng;
  Counters counters;
  std::vector<TxRecord> records;
  std::atomic<bool> alive{true};
  std::atomic<bool> waiting_for_trigger{false};

  int Uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  void SleepMs(int lo, int hi) {
    std::this_thread::sleep_for(std::chrono::milliseconds(lo + Uniform(hi - lo + 1)));
  }
};

// What every thread of one test shares.
struct Shared {
  std::string db;
  std::string schema;  // the extension's, quoted for SQL
  Limits limits = MakeLimits();
  std::atomic<bool> stop{false};             // every thread ends its loop
  std::atomic<bool> stop_triggered{false};   // the trigger-key threads end theirs
  std::atomic<bool> crashing{false};         // the server is being stopped: lost connections are expected
  std::atomic<long> ddl_steps{0};            // DDL steps done (or failed)
  std::atomic<int> ddl_current{-1};          // the DDL step running now (its index in DdlCycle), or -1
  std::atomic<int> ddl_cycle{0};             // the cycle ddl_current belongs to
  std::atomic<bool> trigger_created{false};  // the phase trigger is committed
  std::atomic<long> straddled{0};  // trigger-key transactions open across its creation that granted after it
  std::atomic<long> straddles{0};  // DDL steps a transaction was open across (RunStraddledStep)
  std::atomic<long> trigger_commits{0};  // committed transactions that granted on trigger keys
  std::mutex findings_mutex;
  std::vector<std::string> findings;  // live amcheck problems

  std::string Fn(const char* function) const { return schema + "." + function; }
  std::string StateTable() const { return schema + ".ratelimit_state"; }
  void Finding(const std::string& what) {
    std::lock_guard<std::mutex> lock(findings_mutex);
    if (findings.size() < 30) findings.push_back(what);
  }
};

void PrepareStatements(const Shared& s, pqxx::connection& conn) {
  conn.prepare("limit", "SELECT ok FROM " + s.Fn("ratelimit_limit") + "($1, $2, $3::jsonb)");
  conn.prepare("limit_all", "SELECT bool_and(ok) FROM " + s.Fn("ratelimit_limit_all") + "($1::jsonb)");
  conn.prepare("refund", "SELECT ok FROM " + s.Fn("ratelimit_refund") + "($1, $2, $3::float8, $4::jsonb)");
  conn.prepare("cleanup", "SELECT " + s.Fn("ratelimit_cleanup") + "()");
  conn.prepare("check", "SELECT ok FROM " + s.Fn("ratelimit_check") + "($1, $2, $3::jsonb)");
}

void OpenWorker(const Shared& s, Worker& w, std::uint64_t seed, bool quiet) {
  w.conn = ConnectTo(s.db, kStatementTimeout);
  if (quiet) w.quiet = std::make_unique<pqxx::quiet_errorhandler>(*w.conn);
  PrepareStatements(s, *w.conn);
  w.rng.seed(seed);
}

// An error of a client or DDL statement: legitimate ones are counted,
// others recorded; a lost connection ends the worker. Once the server is
// being stopped, every error just ends the worker.
void OnError(Shared& s, Worker& w, const std::exception& e, const std::string& where) {
  if (s.crashing) {
    w.alive = false;
    return;
  }
  const std::string state = SqlState(e);
  const int kind = LegitimateKind(e);
  if (kind >= 0) {
    ++w.counters.legitimate[kind];
    return;
  }
  w.counters.unexpected.Add(where + ": " + (state.empty() ? "" : "SQLSTATE " + state + ": ") + e.what());
  if (state.empty() &&
      (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr ||
       dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr ||
       dynamic_cast<const pqxx::statement_completion_unknown*>(&e) != nullptr || !w.conn->is_open()))
    w.alive = false;
}

// A transaction body: makes calls, adds the tracked grants it got, and
// returns whether to commit (false: roll back on purpose).
using Body = std::function<bool(pqxx::work&, Grants&)>;

// Runs one client transaction. Before COMMIT it reads its xid, so that a
// COMMIT without an answer can be resolved after a crash.
void RunTx(Shared& s, Worker& w, const Body& body) {
  TxRecord rec{"", Outcome::kAborted, {}};
  bool committing = false;
  ++w.counters.transactions;
  try {
    pqxx::work tx(*w.conn);
    if (!body(tx, rec.grants)) {
      tx.abort();
      ++w.counters.rolled_back_on_purpose;
      return;
    }
    if (!rec.grants.empty()) {
      pqxx::row r = tx.exec1("SELECT pg_current_xact_id_if_assigned()::text");
      if (r[0].is_null())
        w.counters.unexpected.Add("a transaction that was granted tokens has no xid: nothing written");
      rec.xid = r[0].is_null() ? "" : r[0].c_str();
    }
    committing = true;
    tx.commit();
    rec.outcome = Outcome::kCommitted;
    ++w.counters.committed;
    for (const auto& grant : rec.grants)
      if (grant.first >= kFirstTriggerId) {
        ++s.trigger_commits;
        break;
      }
  } catch (const std::exception& e) {
    // A COMMIT that failed without a server error (or with one sent while
    // the server was being stopped) may have committed.
    if (committing && (s.crashing || SqlState(e).empty())) rec.outcome = Outcome::kUnknown;
    OnError(s, w, e, committing ? "COMMIT" : "call");
  }
  if (!rec.grants.empty() && rec.outcome != Outcome::kAborted) w.records.push_back(std::move(rec));
}

// ---------------------------------------------------------------------------
// The calls.

bool Call(Worker& w, pqxx::work& tx, const LimitDef& l, const char* key) {
  bool ok = tx.exec_prepared1("limit", l.name, key, l.config)[0].as<bool>();
  ++(ok ? w.counters.granted_calls : w.counters.refused_calls);
  return ok;
}

// A call on bound limit k; a grant is recorded (as tracked id k) unless
// `record` is false (a call inside a savepoint that is rolled back).
bool CallBound(Shared& s, Worker& w, pqxx::work& tx, int k, Grants& g, bool record = true) {
  const LimitDef& l = s.limits.bound[k];
  bool ok = Call(w, tx, l, l.Key());
  if (ok && record) g.emplace_back(k, 1);
  return ok;
}

// One call on a fast limit of a random kind and a random key.
void CallFastRandom(Shared& s, Worker& w, pqxx::work& tx) {
  const LimitDef* kinds[] = {&s.limits.fast_bucket, &s.limits.fast_fixed, &s.limits.fast_sliding};
  const std::string key = "r" + std::to_string(w.Uniform(kRandomKeys));
  Call(w, tx, *kinds[w.Uniform(3)], key.c_str());
}

// One untracked or tracked call, chosen at random: a bound limit, a random
// key, the hot key or the fast sharded limit.
void CallAny(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  int pick = w.Uniform(10);
  if (pick < 3) {
    CallBound(s, w, tx, w.Uniform(4), g);
  } else if (pick < 7) {
    CallFastRandom(s, w, tx);
  } else if (pick < 9) {
    Call(w, tx, s.limits.hot, s.limits.hot.Key());
  } else {
    Call(w, tx, s.limits.fast_sharded, nullptr);
  }
}

std::string LimitAllElement(const LimitDef& l, const char* key) {
  std::string out = "{\"name\": \"" + l.name + "\"";
  if (key != nullptr) out += std::string(", \"key\": \"") + key + "\"";
  return out + ", \"config\": " + l.config + "}";
}

// ratelimit_limit_all on 2 or 3 distinct limits; bound limits among them are
// recorded when all were granted.
void CallLimitAll(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  std::vector<int> choices = {0, 1, 2, 3, 4, 5, 6};  // bound 0..3, random key, fast sharded, hot
  std::shuffle(choices.begin(), choices.end(), w.rng);
  choices.resize(2 + w.Uniform(2));
  std::string json = "[";
  const std::string key = "r" + std::to_string(w.Uniform(kRandomKeys));
  for (size_t i = 0; i < choices.size(); ++i) {
    int c = choices[i];
    if (i > 0) json += ", ";
    if (c < 4) json += LimitAllElement(s.limits.bound[c], s.limits.bound[c].Key());
    if (c == 4) json += LimitAllElement(s.limits.fast_bucket, key.c_str());
    if (c == 5) json += LimitAllElement(s.limits.fast_sharded, nullptr);
    if (c == 6) json += LimitAllElement(s.limits.hot, s.limits.hot.Key());
  }
  json += "]";
  bool ok = tx.exec_prepared1("limit_all", json)[0].as<bool>();
  ++(ok ? w.counters.granted_calls : w.counters.refused_calls);
  if (!ok) return;
  for (int c : choices)
    if (c < 4) g.emplace_back(c, 1);
}

// ---------------------------------------------------------------------------
// The transactions of each kind of thread.

// A general worker's transaction, of a random shape.
bool MixedTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  const int pick = w.Uniform(100);
  if (pick < 50 && w.Chance(0.1)) tx.exec0("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  if (pick < 25) {
    CallFastRandom(s, w, tx);
  } else if (pick < 35) {
    Call(w, tx, s.limits.hot, s.limits.hot.Key());
  } else if (pick < 45) {
    Call(w, tx, s.limits.fast_sharded, nullptr);
  } else if (pick < 60) {
    CallBound(s, w, tx, w.Uniform(4), g);
  } else if (pick < 70) {
    CallLimitAll(s, w, tx, g);
  } else if (pick < 80) {
    // Grants inside a savepoint that is rolled back: not consumed.
    CallAny(s, w, tx, g);
    tx.exec0("SAVEPOINT s");
    CallBound(s, w, tx, w.Uniform(4), g, false);
    if (w.Chance(0.5)) CallFastRandom(s, w, tx);
    tx.exec0("ROLLBACK TO SAVEPOINT s");
    CallBound(s, w, tx, w.Uniform(4), g);
  } else if (pick < 85) {
    const std::string key = "f" + std::to_string(w.Uniform(kRefundKeys));
    const LimitDef& l = s.limits.refund;
    for (int i = 1 + w.Uniform(2); i > 0; --i) Call(w, tx, l, key.c_str());
    tx.exec_prepared1("refund", l.name, key, 1.0, l.config);
    ++w.counters.refunds;
  } else {
    for (int i = 2 + w.Uniform(2); i > 0; --i) CallAny(s, w, tx, g);
    return pick < 95;  // the rest: rolled back on purpose
  }
  return true;
}

// A parked transaction's call: mostly a random key; a bound limit or the hot
// key (whose row lock every other caller then waits for) now and then.
void ParkedCall(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  if (w.Chance(0.2)) return CallAny(s, w, tx, g);
  CallFastRandom(s, w, tx);
}

// A parked transaction: a call, a sleep while DDL happens, another call.
// One in three parks as a reader: it first only reads the row it will
// write (ratelimit_check: the table's AccessShareLock, no row lock, so
// CREATE INDEX, REINDEX CONCURRENTLY and CREATE TRIGGER do not wait for it)
// and writes it after the sleep, under whatever the DDL left.
bool ParkedTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  if (w.Chance(1.0 / 3)) {
    const int k = w.Uniform(5);
    const std::string key = "r" + std::to_string(w.Uniform(kRandomKeys));
    const LimitDef& l = k < 4 ? s.limits.bound[k] : s.limits.fast_bucket;
    const char* key_arg = k < 4 ? l.Key() : key.c_str();
    tx.exec_prepared1("check", l.name, key_arg, l.config);
    w.SleepMs(200, 800);
    if (Call(w, tx, l, key_arg) && k < 4) g.emplace_back(k, 1);
    return !w.Chance(0.1);
  }
  ParkedCall(s, w, tx, g);
  w.SleepMs(200, 800);
  ParkedCall(s, w, tx, g);
  return !w.Chance(0.1);
}

// A transaction on the trigger keys only: 1-3 grants, sometimes parked,
// sometimes one of them rolled back to a savepoint, sometimes all rolled back.
bool TriggerTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  std::vector<int> keys;
  for (int i = 1 + w.Uniform(3); i > 0; --i) keys.push_back(w.Uniform(kTriggerKeys));
  std::sort(keys.begin(), keys.end());
  const bool parked = w.Chance(0.2);
  const int savepoint_at = w.Chance(0.15) ? w.Uniform(static_cast<int>(keys.size())) : -1;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string key = TriggerKey(keys[i]);
    const bool in_savepoint = static_cast<int>(i) == savepoint_at;
    if (in_savepoint) tx.exec0("SAVEPOINT s");
    bool ok = Call(w, tx, s.limits.trigger, key.c_str());
    if (!ok) w.counters.unexpected.Add("a trigger key (capacity 1e9) refused a call");
    if (in_savepoint) tx.exec0("ROLLBACK TO SAVEPOINT s");
    if (ok && !in_savepoint) g.emplace_back(kFirstTriggerId + keys[i], 1);
    if (parked) w.SleepMs(50, 300);
  }
  return !w.Chance(0.1);
}

bool CleanupTx(Shared& s, Worker& w, pqxx::work& tx, Grants&) {
  (void)s;
  w.counters.cleaned_rows += tx.exec_prepared1("cleanup")[0].as<long>();
  return true;
}

void TxLoop(Shared& s, Worker& w, bool (*tx_fn)(Shared&, Worker&, pqxx::work&, Grants&), int pause_ms,
            const std::atomic<bool>& stop_too) {
  while (!s.stop && !stop_too && w.alive) {
    RunTx(s, w, [&](pqxx::work& tx, Grants& g) { return tx_fn(s, w, tx, g); });
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
}

// ---------------------------------------------------------------------------
// The storage checks.

// amcheck and verify_heapam on ratelimit_state and the trigger log, and the
// duplicate check. Returns the problems found; `invalid` receives the
// indexes skipped because they are not valid (left by an interrupted
// REINDEX or CREATE INDEX CONCURRENTLY). `thorough` adds
// bt_index_parent_check (ShareLock: not while the load runs). Errors other
// than SQL errors (a lost connection) propagate.
std::vector<std::string> CheckStorage(pqxx::connection& conn, const Shared& s, bool thorough,
                                      std::vector<std::string>* invalid = nullptr) {
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

// ---------------------------------------------------------------------------
// The DDL session.

// One cycle of the DDL session. Every step but amcheck and the fillfactor
// ones waits for the transactions that hold row locks (REINDEX
// CONCURRENTLY for them several times); CREATE INDEX alternates with
// CREATE INDEX CONCURRENTLY. amcheck runs before each step that rebuilds
// the indexes (REINDEX, VACUUM FULL, CLUSTER), which would repair what it
// should find; `pause_ms` after a step lets the parked transactions that
// straddled it write (and commit) before the next check.
enum class Straddle { kNone, kAnyRead, kNoTableLock };

struct DdlStep {
  std::string label;
  std::string sql;  // empty: a special step named by label
  int pause_ms;
  // A transaction of the DDL session's second connection open across the
  // step (see RunStraddledStep): kAnyRead for the steps that do not wait
  // for the table's AccessShareLock; REINDEX CONCURRENTLY waits for every
  // locker before it drops the old indexes, so its straddle reads nothing.
  Straddle straddle;
};

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

// The steps whose middle the crash test aims at (their index in DdlCycle).
const std::vector<std::pair<int, const char*>> kCrashTargets = {{1, "CREATE INDEX [CONCURRENTLY]"},
                                                                {4, "REINDEX TABLE CONCURRENTLY"},
                                                                {7, "VACUUM FULL"},
                                                                {11, "CLUSTER"}};

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

// The first transactions of trigger-key thread n (see Load::StartTriggerKeys):
// thread 0 first creates the rows of the first kExistingTriggerKeys keys
// (before the trigger exists: those writes are not logged, and not
// counted), so that most writes in the phase, and every straddling one,
// update an existing row. Then each opens the transaction that waits for
// the trigger, having read, in turn by thread, nothing of the table (SELECT
// 1), the key it will write (ratelimit_check), or that key's value
// (ratelimit_value).
constexpr int kExistingTriggerKeys = 24;

void StraddleTriggerCreation(Shared& s, Worker& w, int n) {
  const LimitDef& l = s.limits.trigger;
  RunTx(s, w, [&](pqxx::work& tx, Grants&) {
    for (int k = 0; n == 0 && k < kExistingTriggerKeys; ++k) Call(w, tx, l, TriggerKey(k).c_str());
    Call(w, tx, l, ("warm" + std::to_string(n)).c_str());
    return true;
  });
  RunTx(s, w, [&](pqxx::work& tx, Grants& g) {
    const int k = w.Uniform(kExistingTriggerKeys);
    if (n % 3 == 0) tx.exec1("SELECT 1");
    if (n % 3 == 1) tx.exec_prepared1("check", l.name, TriggerKey(k), l.config);
    if (n % 3 == 2)
      tx.exec_params1("SELECT value FROM " + s.Fn("ratelimit_value") + "($1, $2, $3::jsonb)", l.name,
                      TriggerKey(k), l.config);
    w.waiting_for_trigger = true;
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (!s.trigger_created && !s.stop && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!s.trigger_created) return true;
    ++s.straddled;
    for (int key : {k, w.Uniform(kExistingTriggerKeys)})
      if (Call(w, tx, l, TriggerKey(key).c_str())) g.emplace_back(kFirstTriggerId + key, 1);
    return true;
  });
  w.waiting_for_trigger = true;  // also when the transaction failed
}

// ---------------------------------------------------------------------------
// The load: every thread, started and stopped together (the trigger-key
// threads separately).

class Load {
 public:
  explicit Load(Shared& s) : s_(s) {}
  ~Load() { Stop(); }

  // Opens every connection first, then starts the threads.
  void Start() {
    const bool quiet = true;  // lost connections are counted, not printed
    for (int i = 0; i < kMixed + kParked + kCleanup + 2; ++i) {
      workers_.push_back(std::make_unique<Worker>());
      OpenWorker(s_, *workers_.back(), 0xdd100000u + i, quiet);
    }
    int i = 0;
    for (int n = 0; n < kMixed; ++n, ++i) Spawn(i, &MixedTx, 0);
    for (int n = 0; n < kParked; ++n, ++i) Spawn(i, &ParkedTx, 200);
    for (int n = 0; n < kCleanup; ++n, ++i) Spawn(i, &CleanupTx, 20);
    Worker* ddl = workers_[i].get();
    Worker* straddle = workers_[i + 1].get();
    {
      // The straddle keys' rows exist (but for the "new" ones), so that a
      // straddled write is an update.
      pqxx::work tx(*straddle->conn);
      for (int k = 0; k < 8; ++k) Call(*straddle, tx, s_.limits.straddle, ("s" + std::to_string(k)).c_str());
      tx.commit();
      // A DDL step that would wait for the straddling transaction fails
      // instead of blocking its own session until statement_timeout.
      pqxx::nontransaction(*ddl->conn).exec0("SET lock_timeout = '10s'");
    }
    threads_.emplace_back([this, ddl, straddle] { DdlLoop(s_, *ddl, *straddle); });
    ddl_ = ddl;
  }

  // Opens the trigger-key threads' connections before the phase trigger
  // exists. Each warms up, then opens a transaction that reads (at most the
  // table's AccessShareLock, which CREATE TRIGGER does not wait for) and
  // waits there for the trigger (up to 3 s) before granting on trigger keys
  // in that same transaction: a backend that knew the table before the
  // trigger existed (see StraddleTriggerCreation). Then they run TriggerTx
  // until StopTriggerKeys. Returns once every thread is in its waiting
  // transaction (or gone).
  void StartTriggerKeys() {
    for (int n = 0; n < kTrigger; ++n) {
      trigger_workers_.push_back(std::make_unique<Worker>());
      Worker* w = trigger_workers_.back().get();
      OpenWorker(s_, *w, 0xdd200000u + n, true);
      trigger_threads_.emplace_back([this, w, n] {
        StraddleTriggerCreation(s_, *w, n);
        TxLoop(s_, *w, &TriggerTx, 0, s_.stop_triggered);
      });
    }
    auto all_waiting = [&] {
      for (const auto& w : trigger_workers_)
        if (w->alive && !w->waiting_for_trigger) return false;
      return true;
    };
    while (!all_waiting()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  void StopTriggerKeys() {
    s_.stop_triggered = true;
    for (auto& t : trigger_threads_) t.join();
    trigger_threads_.clear();
  }

  void Stop() {
    s_.stop = true;
    StopTriggerKeys();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  // Waits until at least `min_time` has passed and the DDL session has
  // done `steps` more steps (or its connection is gone).
  void WaitForDdl(Clock::duration min_time, long steps) {
    const auto t0 = Clock::now();
    const long target = s_.ddl_steps.load() + steps;
    while (Clock::now() - t0 < min_time || (s_.ddl_steps.load() < target && ddl_->alive))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Waits until a transaction that granted on trigger keys has committed (or
  // every trigger-key thread is gone).
  void WaitForTriggerCommit() {
    auto any_alive = [&] {
      for (const auto& w : trigger_workers_)
        if (w->alive) return true;
      return false;
    };
    while (s_.trigger_commits.load() == 0 && any_alive())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Waits until the DDL session runs step `index` of its cycle (or its
  // connection is gone).
  void WaitForDdlStep(int index) {
    while (s_.ddl_current.load() != index && ddl_->alive)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  Counters Clients() const {
    Counters all;
    for (const auto& w : workers_)
      if (w.get() != ddl_) all.Merge(w->counters);
    for (const auto& w : trigger_workers_) all.Merge(w->counters);
    return all;
  }
  const Counters& Ddl() const { return ddl_->counters; }

  std::vector<TxRecord> Records() const {
    std::vector<TxRecord> all;
    for (const auto* list : {&workers_, &trigger_workers_})
      for (const auto& w : *list) all.insert(all.end(), w->records.begin(), w->records.end());
    return all;
  }

 private:
  static constexpr int kMixed = 3, kParked = 2, kCleanup = 1, kTrigger = 3;

  void Spawn(int index, bool (*tx_fn)(Shared&, Worker&, pqxx::work&, Grants&), int pause_ms) {
    Worker* w = workers_[index].get();
    threads_.emplace_back([this, w, tx_fn, pause_ms] { TxLoop(s_, *w, tx_fn, pause_ms, never_); });
  }

  Shared& s_;
  std::atomic<bool> never_{false};
  std::vector<std::unique_ptr<Worker>> workers_, trigger_workers_;
  std::vector<std::thread> threads_, trigger_threads_;
  Worker* ddl_ = nullptr;
};

// ---------------------------------------------------------------------------
// Setting up and checking one test's database.

// A new database with the extension in a schema of its own, amcheck, the
// trigger log and its trigger function; returns the shared state.
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

// ---------------------------------------------------------------------------

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

  Counters clients = load.Clients();
  EXPECT_EQ(clients.unexpected.count, 0)
      << "unexpected client errors:" << Describe(clients.unexpected.messages);
  EXPECT_EQ(load.Ddl().unexpected.count, 0)
      << "unexpected DDL errors:" << Describe(load.Ddl().unexpected.messages);
  {
    std::lock_guard<std::mutex> lock(s.findings_mutex);
    EXPECT_TRUE(s.findings.empty()) << "amcheck between DDL steps:" << Describe(s.findings);
  }
  const std::vector<TxRecord> records = load.Records();
  long unknown = 0;
  for (const TxRecord& rec : records) unknown += rec.outcome == Outcome::kUnknown;
  EXPECT_EQ(unknown, 0) << "COMMITs without an answer, no crash";

  ExpectStorageIntact(*main, s, "after the load");
  CheckTriggerLog(*main, s, records, {});
  CheckBounds(*main, s, records, {}, t_start);
  ExpectStorageIntact(*main, s, "after the drain");
}

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

  Counters clients = load.Clients();
  EXPECT_EQ(clients.unexpected.count, 0)
      << "unexpected client errors before the crash:" << Describe(clients.unexpected.messages);
  EXPECT_EQ(load.Ddl().unexpected.count, 0)
      << "unexpected DDL errors before the crash:" << Describe(load.Ddl().unexpected.messages);
  {
    std::lock_guard<std::mutex> lock(s.findings_mutex);
    EXPECT_TRUE(s.findings.empty()) << "amcheck between DDL steps:" << Describe(s.findings);
  }

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

// Records the run id and checks for a superuser; the databases of the run are
// dropped at the end (best effort).
class DdlLoadEnvironment : public ServerEnvironment {
  void SetUpServer() override {
    g_run_id = std::to_string(getpid());
    pqxx::connection conn("");
    pqxx::nontransaction tx(conn);
    if (!IsSuperuser(tx))
      FAIL() << "ddl_load_test needs a superuser (DDL on the extension's table, CREATE DATABASE, amcheck)";
  }
};

}  // namespace

int main(int argc, char** argv) {
  // A write to a connection the server closed must fail, not kill the program.
  signal(SIGPIPE, SIG_IGN);
  return client_test::RunAllTests(argc, argv, new DdlLoadEnvironment, "ddl_load_test");
}
