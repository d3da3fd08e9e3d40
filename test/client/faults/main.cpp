// main() of build/faults_test (see faults.h).

#include <signal.h>
#include <unistd.h>

#include <string>

#include "faults.h"

namespace faults {
namespace {

// Creates this run's main database with the extension, and drops every
// database of the run at the end (best effort).
class FaultsEnvironment : public ServerEnvironment {
  void SetUpServer() override {
    pqxx::connection conn("");
    pqxx::nontransaction tx(conn);
    g_run_id = std::to_string(getpid());
    if (!IsSuperuser(tx)) {
      FAIL() << "faults_test needs a superuser (pg_terminate_backend, ratelimit.now, CREATE DATABASE)";
    }
    g_db = CreateRunDatabase("main");
    CreateExtension(g_db);
  }
};

}  // namespace
}  // namespace faults

int main(int argc, char** argv) {
  // A write to a connection the server closed must fail, not kill the program.
  signal(SIGPIPE, SIG_IGN);
  return client_test::RunAllTests(argc, argv, new faults::FaultsEnvironment, "faults_test");
}
