// The client threads of the DDL-under-load tests (see ddl_load.h): the
// limits, the errors DDL legitimately causes, one client transaction, the
// calls and the transactions of each kind of thread.

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ddl_load.h"

namespace ddl_load {

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

namespace {

void PrepareStatements(const Shared& s, pqxx::connection& conn) {
  conn.prepare("limit", "SELECT ok FROM " + s.Fn("ratelimit_limit") + "($1, $2, $3::jsonb)");
  conn.prepare("limit_all", "SELECT bool_and(ok) FROM " + s.Fn("ratelimit_limit_all") + "($1::jsonb)");
  conn.prepare("refund", "SELECT ok FROM " + s.Fn("ratelimit_refund") + "($1, $2, $3::float8, $4::jsonb)");
  conn.prepare("cleanup", "SELECT " + s.Fn("ratelimit_cleanup") + "()");
  conn.prepare("check", "SELECT ok FROM " + s.Fn("ratelimit_check") + "($1, $2, $3::jsonb)");
}

}  // namespace

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
namespace {

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

}  // namespace

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
namespace {

// key (whose row lock every other caller then waits for) now and then.
void ParkedCall(Shared& s, Worker& w, pqxx::work& tx, Grants& g) {
  if (w.Chance(0.2)) return CallAny(s, w, tx, g);
  CallFastRandom(s, w, tx);
}

}  // namespace

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

}  // namespace ddl_load
