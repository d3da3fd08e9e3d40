// The helpers of support.h.

#include "support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <exception>

#ifndef RATELIMIT_CLUSTER_CTL
#define RATELIMIT_CLUSTER_CTL "scripts/cluster-ctl.sh"
#endif

namespace client_test {
namespace {

constexpr const char* kServerClockSql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8";

// Every database this run created, dropped at the end.
std::vector<std::string>& CreatedDatabases() {
  static std::vector<std::string> databases;
  return databases;
}

}  // namespace

std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo, const std::string& statement_timeout) {
  auto conn = std::make_unique<pqxx::connection>(conninfo);
  pqxx::nontransaction tx(*conn);
  tx.exec0("SET statement_timeout = '" + statement_timeout + "'");
  return conn;
}

std::unique_ptr<pqxx::connection> ConnectTo(const std::string& db, const std::string& statement_timeout) {
  return Connect("dbname=" + db, statement_timeout);
}

Micros ServerClock(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  return tx.exec1(kServerClockSql)[0].as<Micros>();
}

std::string ProcessAndServerClockId(pqxx::transaction_base& tx) {
  return std::to_string(getpid()) + "." + tx.exec1(kServerClockSql)[0].as<std::string>();
}

Checkpoint LatestCheckpoint(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  pqxx::row row = tx.exec1(
      "SELECT (split_part(next_xid, ':', 1)::int8 << 32) + split_part(next_xid, ':', 2)::int8,"
      " extract(epoch FROM checkpoint_time)::int8 FROM pg_control_checkpoint()");
  return Checkpoint{row[0].as<std::uint64_t>(), row[1].as<Micros>()};
}

bool IsSuperuser(pqxx::transaction_base& tx) {
  return tx.exec1("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0].as<bool>();
}

void CreateDatabase(const std::string& db) {
  pqxx::connection conn("");
  pqxx::nontransaction tx(conn);
  tx.exec0("CREATE DATABASE " + tx.quote_name(db));
  CreatedDatabases().push_back(db);
}

void DropCreatedDatabases() {
  try {
    pqxx::connection conn("");
    pqxx::nontransaction tx(conn);
    for (const auto& db : CreatedDatabases())
      tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(db) + " WITH (FORCE)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "note: could not drop this run's databases: %s\n", e.what());
  }
}

const std::string& ClusterDir() {
  static const std::string dir = [] {
    const char* env = std::getenv("CLUSTER_DIR");
    return std::string(env != nullptr ? env : "");
  }();
  return dir;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int ClusterCtl(const std::string& args) {
  const char* script = std::getenv("RATELIMIT_CLUSTER_CTL");
  std::string command = ShellQuote(script != nullptr ? script : RATELIMIT_CLUSTER_CTL) + " " + args;
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

RestartGuard::~RestartGuard() {
  if (ClusterCtl("status") != 0 && ClusterCtl("start") != 0)
    std::fprintf(stderr, "%s: could not start the server again\n", program_);
}

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void PrintMeasure(const char* what, const std::string& text) {
  std::printf("[ measured ] %-34s %s\n", what, text.c_str());
  std::fflush(stdout);
}

std::string Describe(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += "\n  " + line;
  return out.empty() ? "\n  (none)" : out;
}

void UnexpectedErrors::Add(const std::string& message, size_t keep) {
  ++count;
  if (messages.size() < keep) messages.push_back(message);
}

void UnexpectedErrors::Merge(const UnexpectedErrors& other, size_t keep) {
  count += other.count;
  for (const auto& message : other.messages)
    if (messages.size() < keep) messages.push_back(message);
}

void ServerEnvironment::SetUp() {
  try {
    SetUpServer();
  } catch (const std::exception& e) {
    FAIL() << "cannot set up the server (is PGHOST etc. set, and the extension installed?): " << e.what();
  }
}

void ServerEnvironment::TearDown() {
  try {
    TearDownServer();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "note: could not remove this run's rate limit rows: %s\n", e.what());
  }
  DropCreatedDatabases();
}

int RunAllTests(int argc, char** argv, ::testing::Environment* environment, const char* program) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    ::testing::AddGlobalTestEnvironment(environment);
    return RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace client_test
