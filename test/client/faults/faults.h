// Fault tests: what a caller's failures do to the limits. A backend killed in
// the middle of a transaction, the server crashing (pg_ctl stop -m immediate)
// under load and restarted, statement_timeout and lock_timeout firing while a
// call waits for a row lock, DROP/CREATE EXTENSION, and pg_dump/pg_restore.
// Not part of the ctest unit run: scripts/test.sh runs build/faults_test
// against its throwaway cluster.
//
// The files: this header (what they share: the run's databases, the limits'
// configs, reading state rows, calls), one file per fault
// (killed_backend_test.cpp, crash_test.cpp, lock_timeout_test.cpp,
// extension_lifecycle_test.cpp, dump_restore_test.cpp), faults.cpp (the
// shared helpers) and main.cpp.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster; the user must be
// a superuser. Every test works in databases this program creates (and drops
// at the end), with the extension in schema public, so DROP EXTENSION or the
// crash never touches another program's limits.
//
// Restarting the server and pg_dump/pg_restore go through
// scripts/cluster-ctl.sh, which needs CLUSTER_DIR (and PG_BINDIR, optional) in
// the environment: scripts/test.sh exports them. The script's path is compiled
// in (RATELIMIT_CLUSTER_CTL) and may be overridden by the environment variable
// of that name. The crash test leaves the server running again, also when it
// fails.
//
// The limits use periods of ten years, so that over a test at most a few
// hundred-millionths of a token per token of capacity refill: stored values
// are exact integers (fixed windows) or within that of one (token buckets),
// and every check can be exact.

#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "support.h"

namespace faults {

using namespace client_test;  // NOLINT(build/namespaces)

// The period of every limit here: 3650 days.
constexpr double kPeriodSeconds = 3650.0 * 86400;
constexpr const char* kPeriod = R"("3650 days")";

// Set once by the environment (main.cpp).
inline std::string g_run_id;  // makes database names unique per run
inline std::string g_db;      // the database most tests work in

inline std::string Fn(const char* function) { return std::string("public.") + function; }

// Creates a database of this run (dropped at the end).
std::string CreateRunDatabase(const std::string& suffix);

// CREATE EXTENSION IF NOT EXISTS ratelimit SCHEMA public in database `db`.
void CreateExtension(const std::string& db);

// A token bucket that refills all of `capacity` in ten years.
std::string SlowBucket(double capacity, int shards = 1);

// A fixed window of ten years, aligned to 1970 (one started 2019-12-20, the
// next starts 2029-12-17): `capacity` tokens, and no refill during a test.
std::string LongWindow(double capacity, int shards = 1);

// A sliding window of ten years, aligned to 1970.
std::string LongSlidingWindow(double rate);

// Every column of the state rows of the limits whose name starts with
// `prefix` (all rows when empty), one string per row, exact: float8 values as
// their bits, timestamps in microseconds.
std::vector<std::string> StateRows(pqxx::transaction_base& tx, const std::string& prefix,
                                   const std::string& schema = "public");
std::vector<std::string> StateRows(pqxx::connection& conn, const std::string& prefix,
                                   const std::string& schema = "public");

// The sum of the stored values of a limit's rows (every shard), and how many
// rows it has.
std::pair<double, long> StoredTotal(pqxx::transaction_base& tx, const std::string& name, const char* key);

// The available tokens now (ratelimit_value).
double Available(pqxx::transaction_base& tx, const std::string& name, const char* key,
                 const std::string& config);

struct CallResult {
  bool ok;
  double remaining;
};

// ratelimit_limit(name, key, config, count).
CallResult Limit(pqxx::transaction_base& tx, const std::string& name, const char* key,
                 const std::string& config, double count);

// Waits up to `timeout` for `condition` (an SQL boolean about backend $1,
// evaluated on `probe`) to hold.
bool WaitForBackend(pqxx::connection& probe, int pid, const std::string& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5));

class FaultsTest : public ConnectedTest {
 protected:
  FaultsTest() : ConnectedTest("dbname=" + g_db) {}
  std::string Name(const std::string& test) { return "faults." + test; }
};

}  // namespace faults
