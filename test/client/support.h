// What the libpqxx client test programs (test/client/<program>/) share:
// connections with a statement timeout, the server's clock, databases a run
// creates and drops, scripts/cluster-ctl.sh, measurement lines and failure
// messages, and a main() body. Built once (support.cpp) and linked into every
// client test program by CMakeLists.txt.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster.

#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

namespace client_test {

using Clock = std::chrono::steady_clock;
using Micros = std::int64_t;

constexpr Micros kMicrosPerSecond = 1000000;

// Opens a connection (`conninfo`, the rest from the environment) with a
// statement timeout, so that a hang fails the test instead of blocking it
// forever.
std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo = "",
                                          const std::string& statement_timeout = "20s");

// The same, to database `db`.
std::unique_ptr<pqxx::connection> ConnectTo(const std::string& db,
                                            const std::string& statement_timeout = "20s");

// The server's clock_timestamp() in microseconds since the Unix epoch, read in
// a statement of its own (autocommit).
Micros ServerClock(pqxx::connection& conn);

// A run id unique among runs against one server: this process's id and the
// server's clock in microseconds.
std::string ProcessAndServerClockId(pqxx::transaction_base& tx);

// Whether the session's user is a superuser.
bool IsSuperuser(pqxx::transaction_base& tx);

// Creates database `db` from the environment's default database and records
// it, for DropCreatedDatabases.
void CreateDatabase(const std::string& db);

// Drops every database CreateDatabase made (best effort: a failure is a note
// on stderr).
void DropCreatedDatabases();

// CLUSTER_DIR (the throwaway cluster's directory), empty when not set.
const std::string& ClusterDir();

// Fails the current test unless CLUSTER_DIR is set (tests that restart the
// server or dump and restore through scripts/cluster-ctl.sh).
#define REQUIRE_CLUSTER_DIR()                                                                            \
  do {                                                                                                   \
    if (::client_test::ClusterDir().empty()) {                                                           \
      FAIL() << "CLUSTER_DIR is not set: run this test from scripts/test.sh (or export CLUSTER_DIR and " \
                "PG_BINDIR of the throwaway cluster)";                                                   \
    }                                                                                                    \
  } while (0)

// `s` quoted for the shell.
std::string ShellQuote(const std::string& s);

// Runs scripts/cluster-ctl.sh with `args` (quoted for the shell by the
// caller); returns its exit status. The script's path is compiled in
// (RATELIMIT_CLUSTER_CTL) and may be overridden by the environment variable
// of that name.
int ClusterCtl(const std::string& args);

// Starts the server again (scripts/cluster-ctl.sh) when it goes out of scope
// unless it runs, so that a test which crashes the server leaves it running,
// whatever happened; `program` names the program in a note on failure.
class RestartGuard {
 public:
  explicit RestartGuard(const char* program) : program_(program) {}
  RestartGuard(const RestartGuard&) = delete;
  RestartGuard& operator=(const RestartGuard&) = delete;
  ~RestartGuard();

 private:
  const char* program_;
};

// printf into a std::string.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// A duration in seconds.
double Seconds(Clock::duration d);

// Prints a measurement line (not a pass/fail criterion) to stdout.
void PrintMeasure(const char* what, const std::string& text);

// Lines for a failure message, one indented line each ("(none)" when empty).
std::string Describe(const std::vector<std::string>& lines);

// A test with a connection of its own (Connect(conninfo)), opened before the
// test: Conn().
class ConnectedTest : public ::testing::Test {
 protected:
  explicit ConnectedTest(std::string conninfo = "") : conninfo_(std::move(conninfo)) {}
  void SetUp() override { conn_ = Connect(conninfo_); }
  pqxx::connection& Conn() { return *conn_; }

 private:
  std::string conninfo_;
  std::unique_ptr<pqxx::connection> conn_;
};

// The latest checkpoint (pg_control_checkpoint()). After crash recovery it is
// the end-of-recovery checkpoint (the server accepts connections only after
// it), whose next_xid is the first transaction id after recovery.
struct Checkpoint {
  std::uint64_t next_xid;  // the full 64-bit transaction id
  Micros time_s;           // checkpoint_time, in seconds since the Unix epoch
};
Checkpoint LatestCheckpoint(pqxx::connection& conn);

// Errors a test did not expect: how many, and the first few messages, for the
// failure message.
struct UnexpectedErrors {
  long count = 0;
  std::vector<std::string> messages;  // the first `keep` of them

  void Add(const std::string& message, size_t keep = 10);
  void Merge(const UnexpectedErrors& other, size_t keep = 10);
};

// The environment of a client test program: SetUp runs SetUpServer and fails
// the run if it throws (no server, no extension); TearDown runs
// TearDownServer and drops the databases the run created, best effort (a
// failure is a note on stderr).
class ServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() final;
  void TearDown() final;

 protected:
  virtual void SetUpServer() = 0;
  virtual void TearDownServer() {}
};

// The body of a client test program's main(): runs every test with
// `environment` set up around them; `program` names the program in an error.
int RunAllTests(int argc, char** argv, ::testing::Environment* environment, const char* program);

}  // namespace client_test
