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
//
// The files of build/ddl_load_test: this header (the limits, the clients'
// world and what the files share), clients.cpp (the client threads'
// transactions), ddl_session.cpp (the DDL cycle), load.h (every thread,
// started and stopped together), checks.cpp (setting up a test's database
// and the checks after the load), storage_survives_ddl_test.cpp and
// crash_during_ddl_test.cpp (the two tests) and main.cpp.

#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
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

namespace ddl_load {

using namespace client_test;  // NOLINT(build/namespaces)

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
inline std::string g_run_id;  // makes database names unique per run

// Creates a database of this run (dropped at the end).
std::string CreateRunDatabase(const std::string& suffix);

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

// Every limit the load uses (clients.cpp).
Limits MakeLimits();

// The key of trigger key i.
std::string TriggerKey(int i);

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
std::string SqlState(const std::exception& e);

// The legitimate kind of an error, or -1.
int LegitimateKind(const std::exception& e);

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

// ---------------------------------------------------------------------------
// The clients (clients.cpp).

// Opens worker `w`'s connection to the test's database (quiet: no notices of
// lost connections) with the load's prepared statements.
void OpenWorker(const Shared& s, Worker& w, std::uint64_t seed, bool quiet);

// An error of a client or DDL statement: legitimate ones are counted,
// others recorded; a lost connection ends the worker. Once the server is
// being stopped, every error just ends the worker.
void OnError(Shared& s, Worker& w, const std::exception& e, const std::string& where);

// A transaction body: makes calls, adds the tracked grants it got, and
// returns whether to commit (false: roll back on purpose).
using Body = std::function<bool(pqxx::work&, Grants&)>;

// Runs one client transaction. Before COMMIT it reads its xid, so that a
// COMMIT without an answer can be resolved after a crash.
void RunTx(Shared& s, Worker& w, const Body& body);

// One ratelimit_limit call of worker `w` on limit `l`, counted; whether it
// was granted.
bool Call(Worker& w, pqxx::work& tx, const LimitDef& l, const char* key);

// The transactions of each kind of thread: make calls, add the tracked
// grants they got, and return whether to commit.
bool MixedTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g);
bool ParkedTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g);
bool TriggerTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g);
bool CleanupTx(Shared& s, Worker& w, pqxx::work& tx, Grants& g);

// Runs transactions of `tx_fn` until the test stops, `stop_too` is set or
// the worker's connection is gone, pausing `pause_ms` after each.
void TxLoop(Shared& s, Worker& w, bool (*tx_fn)(Shared&, Worker&, pqxx::work&, Grants&), int pause_ms,
            const std::atomic<bool>& stop_too);

// The first transactions of trigger-key thread n (see Load::StartTriggerKeys).
void StraddleTriggerCreation(Shared& s, Worker& w, int n);

// ---------------------------------------------------------------------------
// The DDL session (ddl_session.cpp).

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

// The steps of cycle `cycle`.
std::vector<DdlStep> DdlCycle(const Shared& s, int cycle);

// Drops the indexes of the state table that are not valid: what an
// interrupted REINDEX CONCURRENTLY or CREATE INDEX CONCURRENTLY leaves.
void DropInvalidIndexes(pqxx::connection& conn, const Shared& s);

// The DDL session's loop: cycle after cycle until the test stops; `st` is
// the second connection, whose transactions straddle the steps.
void DdlLoop(Shared& s, Worker& w, Worker& st);

// ---------------------------------------------------------------------------
// Setting up and checking one test's database (checks.cpp).

// amcheck and verify_heapam on ratelimit_state and the trigger log, and the
// duplicate check. Returns the problems found; `invalid` receives the
// indexes skipped because they are not valid (left by an interrupted
// REINDEX or CREATE INDEX CONCURRENTLY). `thorough` adds
// bt_index_parent_check (ShareLock: not while the load runs). Errors other
// than SQL errors (a lost connection) propagate.
std::vector<std::string> CheckStorage(pqxx::connection& conn, const Shared& s, bool thorough,
                                      std::vector<std::string>* invalid = nullptr);

// A new database with the extension in a schema of its own, amcheck, the
// trigger log and its trigger function; returns the shared state.
void SetUpDatabase(Shared& s, const std::string& suffix);

// The available tokens of a limit now (ratelimit_value).
double Available(pqxx::transaction_base& tx, const Shared& s, const LimitDef& l);

// CREATE TRIGGER of the phase trigger.
std::string PhaseTriggerSql(const Shared& s);

// Runs one DDL statement of the main thread, retrying legitimate errors.
void DdlWithRetry(pqxx::connection& conn, const std::string& sql);

// How a transaction whose COMMIT got no answer ended: by xid.
using Resolution = std::map<std::string, bool>;  // xid -> committed

// Whether a transaction committed (`resolved`: the unknown ones).
bool Committed(const TxRecord& rec, const Resolution& resolved);

// The exact admission bound of the four bound limits: what the state says
// was consumed is exactly what the clients committed (the unknown ones as
// resolved), never above capacity; then each is drained on one connection,
// and the total is exactly the capacity. t_start: the server's clock before
// the first call (what refills is bounded by the time since).
void CheckBounds(pqxx::connection& conn, const Shared& s, const std::vector<TxRecord>& records,
                 const Resolution& resolved, Micros t_start);

// Trigger completeness: every committed grant on a trigger key (made only
// while the phase trigger was in place) left exactly one row in the log,
// with its transaction's xid; nothing else is logged for those keys.
void CheckTriggerLog(pqxx::connection& conn, const Shared& s, const std::vector<TxRecord>& records,
                     const Resolution& resolved);

// CheckStorage with every check (thorough), as expectations, and a
// measurement line of the storage `when`.
void ExpectStorageIntact(pqxx::connection& conn, const Shared& s, const char* when);

}  // namespace ddl_load
