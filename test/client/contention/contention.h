// Client contention tests (build/client_tests): many libpqxx connections (one per thread) against a
// live server with the extension installed. Not part of the ctest unit run;
// scripts/test.sh runs this binary against its throwaway cluster.
//
// The files: this header (what they share: the workers, their timed calls,
// the configs and the token bucket's interval check), one file per thing
// proved (token_bucket_bound_test.cpp, window_bounds_test.cpp,
// many_keys_test.cpp, rollback_test.cpp, two_limits_test.cpp,
// isolation_levels_test.cpp, memory_test.cpp), contention.cpp (the shared
// helpers) and main.cpp.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster. The program runs
// CREATE EXTENSION IF NOT EXISTS ratelimit in that database.
//
// Every test uses its own limit names (prefixed with a per-run id), runs for a
// few seconds of the server's real clock (never ratelimit.now) and checks the
// committed admissions against exact upper bounds derived from the server's
// clock_timestamp() taken before the first call and after the last one.
//
// How a call's clock read is bracketed: TimedLimitSql() evaluates t0 =
// clock_timestamp() in a subquery the call's arguments depend on (LATERAL), so
// t0 is read before the call starts; t1 = clock_timestamp() is in the
// projection of the join, evaluated after the call has returned. The extension
// reads its clock (GetCurrentTimestamp(), the same clock as clock_timestamp())
// inside the call, so that read lies in [t0, t1]. These brackets let the tests
// attribute a grant to a window only when both ends agree.

#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace contention {

using namespace client_test;  // NOLINT(build/namespaces)

constexpr Micros kMicrosPerMilli = 1000;

// Set once by the environment (main.cpp).
inline std::string g_schema;  // the extension's schema, quoted for SQL
inline std::string g_run_id;  // makes limit names unique per run

inline std::string Fn(const char* function) { return g_schema + "." + function; }

// A limit name of this run; each test passes its own suffix.
inline std::string LimitName(const std::string& test) { return "client_test." + g_run_id + "." + test; }

// The statement every hot-key worker runs: (ok, t0, t1) with the call's clock
// read in [t0, t1] (see the file comment). $2 NULL means the global key.
// The workers run it as an unnamed statement (no session-level prepared
// statement), so they also run through a pooler in transaction mode
// (scripts/pgbouncer-test.sh).
std::string TimedLimitSql();

// ratelimit_limit($1, $2, $3::jsonb), the call's ok only.
std::string PlainLimitSql();

// A timed call (a committed grant, or a refusal): its clock read lies in [t0, t1].
struct Grant {
  Micros t0;
  Micros t1;
};

// What the workers of one test saw. Counts only; each test asserts which
// errors it expects.
struct Stats {
  std::vector<Grant> grants;    // grants of committed transactions
  std::vector<Grant> refusals;  // brackets of the refused calls
  long transactions = 0;
  long granted_calls = 0;  // granted, committed or not
  long refused_calls = 0;
  long rolled_back_on_purpose = 0;  // granted, then rolled back by the test
  long serialization_failures = 0;  // SQLSTATE 40001, retried
  long deadlocks = 0;               // SQLSTATE 40P01
  UnexpectedErrors unexpected;
  // The span of demand: the earliest t0 and the latest t1 of any timed call
  // (granted or refused, committed or not).
  Micros first_call = std::numeric_limits<Micros>::max();
  Micros last_call = std::numeric_limits<Micros>::min();

  void Merge(const Stats& other) {
    grants.insert(grants.end(), other.grants.begin(), other.grants.end());
    refusals.insert(refusals.end(), other.refusals.begin(), other.refusals.end());
    transactions += other.transactions;
    granted_calls += other.granted_calls;
    refused_calls += other.refused_calls;
    rolled_back_on_purpose += other.rolled_back_on_purpose;
    serialization_failures += other.serialization_failures;
    deadlocks += other.deadlocks;
    first_call = std::min(first_call, other.first_call);
    last_call = std::max(last_call, other.last_call);
    unexpected.Merge(other.unexpected);
  }
};

// One worker thread's world.
struct Worker {
  int index = 0;
  pqxx::connection* conn = nullptr;
  std::mt19937_64 rng;
  Stats stats;

  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
};

// Runs n workers, each with its own connection, all released at once and
// stopped at a deadline. Connections are opened (and `prepare`, if given,
// run) before the start, so connecting never counts as test time.
class Workers {
 public:
  explicit Workers(int n, const std::function<void(pqxx::connection&)>& prepare = nullptr) {
    for (int i = 0; i < n; ++i) {
      conns_.push_back(Connect());
      if (prepare) prepare(*conns_.back());
    }
  }

  // Calls body(worker) in a loop until `deadline` (body runs one transaction
  // per call). Errors escaping body are classified by SQLSTATE into stats.
  // Blocks until every worker has stopped; returns the merged stats.
  Stats Run(Clock::time_point deadline, const std::function<void(Worker&)>& body) {
    std::vector<Worker> workers(conns_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < conns_.size(); ++i) {
      workers[i].index = static_cast<int>(i);
      workers[i].conn = conns_[i].get();
      workers[i].rng.seed(0x5eed0000u + i);
      threads.emplace_back([&, i] { Loop(workers[i], deadline, body); });
    }
    for (auto& thread : threads) thread.join();
    Stats all;
    for (const auto& worker : workers) all.Merge(worker.stats);
    return all;
  }

 private:
  static void Loop(Worker& worker, Clock::time_point deadline, const std::function<void(Worker&)>& body) {
    while (Clock::now() < deadline) {
      try {
        body(worker);
      } catch (const pqxx::serialization_failure&) {
        ++worker.stats.serialization_failures;  // the loop retries
      } catch (const pqxx::deadlock_detected&) {
        ++worker.stats.deadlocks;
      } catch (const pqxx::broken_connection& e) {
        worker.stats.unexpected.Add(std::string("broken connection: ") + e.what());
        return;
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() == "40001") {
          ++worker.stats.serialization_failures;
        } else if (e.sqlstate() == "40P01") {
          ++worker.stats.deadlocks;
        } else {
          worker.stats.unexpected.Add("SQLSTATE " + e.sqlstate() + ": " + e.what());
        }
      } catch (const std::exception& e) {
        worker.stats.unexpected.Add(e.what());
      }
    }
  }

  std::vector<std::unique_ptr<pqxx::connection>> conns_;
};

// One call of TimedLimitSql() in `tx`: whether it was granted; its bracket
// goes to *grant and widens the worker's span of demand.
inline bool TimedCall(Worker& w, pqxx::transaction_base& tx, const std::string& name, const std::string& key,
                      const std::string& config, Grant* grant) {
  static const std::string sql = TimedLimitSql();
  pqxx::row row = tx.exec_params1(sql, name, key, config);
  *grant = Grant{row[1].as<Micros>(), row[2].as<Micros>()};
  w.stats.first_call = std::min(w.stats.first_call, grant->t0);
  w.stats.last_call = std::max(w.stats.last_call, grant->t1);
  return row[0].as<bool>();
}

// One transaction on a hot key: call, then roll back each worker's first grant
// (so every run, however slow, has rollbacks) and ~10% of the others on
// purpose, and commit the rest. Only committed grants are recorded.
template <typename Transaction>
void HotKeyTransaction(Worker& w, const std::string& name, const std::string& key, const std::string& config,
                       double rollback_share) {
  Transaction tx(*w.conn);
  ++w.stats.transactions;
  Grant grant{};
  if (!TimedCall(w, tx, name, key, config, &grant)) {
    ++w.stats.refused_calls;
    w.stats.refusals.push_back(grant);
    tx.commit();  // a refusal wrote nothing; committing it is harmless
    return;
  }
  ++w.stats.granted_calls;
  if (w.stats.granted_calls == 1 || w.Chance(rollback_share)) {
    tx.abort();
    ++w.stats.rolled_back_on_purpose;
    return;
  }
  tx.commit();
  w.stats.grants.push_back(grant);
}

// A token bucket config; the period in milliseconds.
std::string TokenBucketConfig(double rate, Micros period_ms, double capacity);

// A window config of `kind` (capacity optional) whose windows start at
// start_ms.
std::string WindowConfig(const char* kind, double rate, Micros period_ms, const double* capacity,
                         Micros start_ms);

// a / b rounded towards minus infinity.
Micros FloorDiv(Micros a, Micros b);

// A point on the server's clock and the local steady clock at (about) the
// same moment, to turn server-clock deadlines into local ones.
struct Start {
  Micros server;
  Clock::time_point local;
};

// The server's clock and the local clock now.
Start TakeStart(pqxx::connection& conn);

// The local time of server_deadline.
Clock::time_point LocalDeadline(const Start& start, Micros server_deadline);

// Token bucket interval check: the grants whose clock read certainly lies in
// [a, b] never exceed capacity + rate * (b - a) / period. Along the chain of
// committed writes the clock reads increase (a call decides after the
// previous grant committed: its optimistic write fails and it decides again
// under the lock otherwise), so each effective time max(clock, stored ts) is
// the call's own clock read. Those grants then have effective times in
// [a, b]: the first sees at most `capacity` tokens, and at most
// rate * (b - a) / period refill until the last. Checked for every a = some
// grant's t0 and b = some grant's t1. Returns the smallest slack seen.
double CheckTokenBucketIntervals(const std::vector<Grant>& grants, double capacity, double rate,
                                 Micros period_us);

class ContentionTest : public ConnectedTest {};

// A kind parameter's test name: the kind with '_' for ' ' ("token_bucket").
std::string KindTestName(const ::testing::TestParamInfo<const char*>& info);

}  // namespace contention
