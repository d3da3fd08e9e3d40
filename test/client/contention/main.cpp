// main() of build/client_tests (see contention.h).

#include <string>

#include "contention.h"

namespace contention {
namespace {

// Creates the extension if needed, finds its schema, picks the run id and
// removes this run's rows at the end (best effort).
class ContentionEnvironment : public ServerEnvironment {
  void SetUpServer() override {
    auto conn = Connect();
    pqxx::nontransaction tx(*conn);
    tx.exec0("CREATE EXTENSION IF NOT EXISTS ratelimit");
    g_schema = tx.exec1(
                     "SELECT quote_ident(n.nspname) FROM pg_extension e"
                     " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'ratelimit'")[0]
                   .as<std::string>();
    g_run_id = ProcessAndServerClockId(tx);
  }

  void TearDownServer() override {
    auto conn = Connect();
    pqxx::nontransaction tx(*conn);
    tx.exec_params0("DELETE FROM " + g_schema + ".ratelimit_state WHERE starts_with(name, $1)",
                    "client_test." + g_run_id + ".");
  }
};

}  // namespace
}  // namespace contention

int main(int argc, char** argv) {
  return client_test::RunAllTests(argc, argv, new contention::ContentionEnvironment, "client_tests");
}
