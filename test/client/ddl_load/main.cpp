// main() of build/ddl_load_test (see ddl_load.h).

#include <signal.h>
#include <unistd.h>

#include <string>

#include "ddl_load.h"

namespace ddl_load {
namespace {

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
}  // namespace ddl_load

int main(int argc, char** argv) {
  // A write to a connection the server closed must fail, not kill the program.
  signal(SIGPIPE, SIG_IGN);
  return client_test::RunAllTests(argc, argv, new ddl_load::DdlLoadEnvironment, "ddl_load_test");
}
