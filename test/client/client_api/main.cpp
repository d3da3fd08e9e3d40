// main() of build/client_api_tests (see api.h).

#include <string>

#include "api.h"

namespace client_api {
namespace {

// Creates the extension if needed, finds its schema, picks the run id, and removes this run's rows and
// definitions at the end (best effort).
class ApiEnvironment : public client_test::ServerEnvironment {
  void SetUpServer() override {
    auto conn = Connect();
    pqxx::work tx(*conn);
    tx.exec0("CREATE EXTENSION IF NOT EXISTS ratelimit");
    g_schema = ratelimit::extension_schema(tx).value();
    g_run_id = client_test::ProcessAndServerClockId(tx);
    tx.commit();
  }

  void TearDownServer() override {
    auto conn = Connect();
    pqxx::work tx(*conn);
    const std::string schema = tx.quote_name(g_schema);
    const std::string prefix = "client_api_test." + g_run_id + ".";
    tx.exec_params0("DELETE FROM " + schema + ".ratelimit_state WHERE starts_with(name, $1)", prefix);
    tx.exec_params0("DELETE FROM " + schema + ".ratelimit_definition WHERE starts_with(name, $1)", prefix);
    tx.commit();
  }
};

}  // namespace
}  // namespace client_api

int main(int argc, char** argv) {
  return client_test::RunAllTests(argc, argv, new client_api::ApiEnvironment, "client_api_tests");
}
