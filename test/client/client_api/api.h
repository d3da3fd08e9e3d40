// Tests of the header-only C++ client API (include/ratelimit/ratelimit.hpp) against a live server with the
// extension installed. Not part of the ctest unit run: like client_tests, build/client_api_tests is run
// against a throwaway cluster (connection parameters from PGHOST, PGPORT, PGUSER, PGDATABASE; the user must
// be a superuser: the tests define limits, freeze the clock with ratelimit.now and create a database).
//
// Most tests freeze the extension's clock (SET LOCAL ratelimit.now) so that retry times are exact, and use
// limit names unique to the run. The config builder and the PT429 DETAIL reader are also tested offline.
//
// The files: this header (what they share), offline_test.cpp (the config
// builder and the PT429 DETAIL reader, without a server), one file per part
// of the API against the server (calls_test.cpp, named_limits_test.cpp,
// requests_test.cpp, transactions_test.cpp, errors_and_sql_test.cpp) and
// main.cpp.

#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <string>
#include <vector>

#include "support.h"

namespace client_api {

using client_test::Connect;

using ratelimit::TimePoint;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// Set once by the environment (main.cpp).
inline std::string g_schema;  // the extension's schema, unquoted (Options::schema)
inline std::string g_run_id;  // makes limit names unique per run

// A limit name of this run.
inline std::string Name(const std::string& test) { return "client_api_test." + g_run_id + "." + test; }

// The frozen clock most tests use, and that moment as a TimePoint.
constexpr char kFrozenNow[] = "2030-01-01 00:30:00+00";
const TimePoint kFrozen = TimePoint(seconds(1893456000 + 1800));  // 2030-01-01T00:30:00Z

// Freezes the extension's clock for the rest of `tx` (superuser-only GUC).
inline void Freeze(pqxx::transaction_base& tx, const char* at = kFrozenNow) {
  tx.exec_params("SELECT set_config('ratelimit.now', $1, true)", at);
}

// Options with an inline config (and the test schema).
inline ratelimit::Options With(const std::string& config, double count = 1, bool reserve = false,
                               bool throws = false) {
  ratelimit::Options options;
  options.config = config;
  options.count = count;
  options.reserve = reserve;
  options.throws = throws;
  options.schema = g_schema;
  return options;
}

// Options without a config (a defined limit's), in the test schema.
inline ratelimit::Options Named() {
  ratelimit::Options options;
  options.schema = g_schema;
  return options;
}

// A token bucket config: `rate` per hour, capacity `capacity`.
inline std::string Bucket(double rate, double capacity) {
  return ratelimit::Config::token_bucket(rate, hours(1)).capacity(capacity).json();
}

// The number of state rows of a limit with exactly this key (NULL included).
inline long StateRows(pqxx::transaction_base& tx, const std::string& name,
                      const std::optional<std::string>& key) {
  const std::string sql = "SELECT count(*) FROM " + tx.quote_name(g_schema) +
                          ".ratelimit_state WHERE name = $1 AND key IS NOT DISTINCT FROM $2::text";
  return key ? tx.exec_params1(sql, name, *key)[0].as<long>()
             : tx.exec_params1(sql, name, nullptr)[0].as<long>();
}

// Runs `body`, which must throw a pqxx::sql_error with `sqlstate` that is not a RateLimited.
template <typename Body>
void ExpectSqlError(const char* sqlstate, Body body) {
  try {
    body();
    ADD_FAILURE() << "no error; expected SQLSTATE " << sqlstate;
  } catch (const ratelimit::RateLimited& e) {
    ADD_FAILURE() << "RateLimited instead of SQLSTATE " << sqlstate << ": " << e.what();
  } catch (const pqxx::insufficient_privilege& e) {
    // libpqxx 6.4 throws 42501 as insufficient_privilege with an empty sqlstate().
    EXPECT_EQ(std::string(sqlstate), "42501") << e.what();
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), sqlstate) << e.what();
  }
}

// The value of header `name` in `headers` (nullopt if absent).
inline std::optional<std::string> HeaderValue(const std::vector<ratelimit::Header>& headers,
                                              const std::string& name) {
  for (const auto& [header, value] : headers)
    if (header == name) return value;
  return std::nullopt;
}

class ApiTest : public client_test::ConnectedTest {};

}  // namespace client_api
