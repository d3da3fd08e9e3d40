// Other errors propagate, terse verbosity and the caller's own SQL, the
// builder's configs on the server and a quoted schema (see api.h).

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <string>
#include <vector>

#include "api.h"

namespace client_api {
namespace {

// Other server errors propagate as pqxx::sql_error with the extension's SQLSTATE, never as RateLimited,
// even with throws = true.
TEST_F(ApiTest, OtherErrorsPropagate) {
  const std::string name = Name("errors");
  const std::string good = Bucket(1, 1);
  const std::string sliding = ratelimit::Config::sliding_window(1, minutes(1)).json();
  struct Case {
    const char* sqlstate;
    std::function<void(pqxx::work&)> call;
  };
  const std::vector<Case> cases = {
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::limit(tx, name, "k",
                          With(R"({"kind": "token bucket", "rate": 1, "peroid": 1000})", 1, false, true));
       }},
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::check(tx, name, "k", With(R"({"kind": "leaky bucket", "rate": 1, "period": 1000})"));
       }},
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::limit(tx, name, "k",
                          With(ratelimit::Config::sliding_window(1, minutes(1)).capacity(2).json()));
       }},
      {"22P02", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With("{")); }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With(good, -1)); }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With(good, NAN, false, true)); }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With(good, INFINITY)); }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With(good, 2, false, true)); }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, "k", With(sliding, 1, true)); }},
      {"42704",
       [&](pqxx::work& tx) {
         ratelimit::limit(tx, Name("errors.undefined"), "k",
                          ratelimit::Options{std::nullopt, 1, false, true, g_schema});
       }},
      {"22023", [&](pqxx::work& tx) { ratelimit::limit(tx, name, std::string(1025, 'k'), With(good)); }},
      {"22023",
       [&](pqxx::work& tx) { ratelimit::value(tx, name, "k", R"({"kind": "token bucket"})", g_schema); }},
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::limit_all(tx, {{name, "k", good, NAN}}, true, g_schema);
       }},
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::limit_all(tx, {{name, "k", "[1]"}}, true, g_schema);
       }},
      {"22023",
       [&](pqxx::work& tx) {
         ratelimit::define(tx, name, R"({"kind": "token bucket", "rate": 0, "period": 1})", g_schema);
       }},
      {"3F000",
       [&](pqxx::work& tx) {
         ratelimit::Options options = With(good);
         options.schema = "no such \"schema\"";
         ratelimit::limit(tx, name, "k", options);
       }},
      {"42501",
       [&](pqxx::work& tx) {
         tx.exec0("CREATE ROLE " + tx.quote_name(Name("role")) + " NOLOGIN");
         tx.exec0("SET LOCAL ROLE " + tx.quote_name(Name("role")));
         ratelimit::reset(tx, name, "k", g_schema);
       }},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    pqxx::work tx(Conn());
    Freeze(tx);
    ExpectSqlError(cases[i].sqlstate, [&] { cases[i].call(tx); });
  }
  pqxx::work tx(Conn());
  EXPECT_EQ(StateRows(tx, name, "k"), 0) << "an error wrote";
}

// With the connection's error verbosity terse, libpq drops the DETAIL; the API raises it for its own calls
// (and restores it), so RateLimited still has every field. as_rate_limited reads PT429s of your own SQL.
TEST_F(ApiTest, TerseVerbosityAndOwnSql) {
  const std::string name = Name("terse");
  const std::string config = Bucket(1, 1);
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    EXPECT_TRUE(ratelimit::limit(tx, name, "k", With(config)).ok);
    tx.commit();
  }
  Conn().set_verbosity(pqxx::connection_base::terse);
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    try {
      ratelimit::limit(tx, name, "k", With(config, 1, false, true));
      ADD_FAILURE() << "no RateLimited";
    } catch (const ratelimit::RateLimited& e) {
      EXPECT_EQ(e.key(), std::optional<std::string>("k"));
      EXPECT_EQ(e.retry_after(), 3600);
    }
  }
  EXPECT_EQ(Conn().get_verbosity(), pqxx::connection_base::terse);
  const std::string own_sql =
      "SELECT * FROM " + Conn().quote_name(g_schema) + ".ratelimit_limit($1, 'k', $2::jsonb, throws => true)";
  for (auto verbosity :
       {pqxx::connection_base::terse, pqxx::connection_base::normal, pqxx::connection_base::verbose}) {
    Conn().set_verbosity(verbosity);
    pqxx::work tx(Conn());
    Freeze(tx);
    try {
      tx.exec_params(own_sql, name, config);
      ADD_FAILURE() << "no error";
    } catch (const pqxx::sql_error& e) {
      EXPECT_EQ(e.sqlstate(), "PT429");
      std::optional<ratelimit::RateLimited> limited = ratelimit::as_rate_limited(e);
      if (verbosity == pqxx::connection_base::terse) {
        EXPECT_FALSE(limited) << e.what();
      } else {
        ASSERT_TRUE(limited) << e.what();
        EXPECT_EQ(limited->name(), name);
        EXPECT_EQ(limited->retry_after(), 3600);
      }
    }
  }
  Conn().set_verbosity(pqxx::connection_base::normal);
}

// Configs from the builder are accepted by the server, and mean what they say: a fixed window aligned to
// the epoch refuses until the next hour, exactly.
TEST_F(ApiTest, BuilderConfigsOnTheServer) {
  using ratelimit::Config;
  const std::string epoch_hours =
      Config::fixed_window(1, hours(1)).start(std::chrono::system_clock::time_point()).json();
  const std::vector<std::string> configs = {
      Config::token_bucket(8, "1 hour").capacity(8).shards(4).jitter("5 seconds").json(),
      Config::token_bucket(40000, minutes(1)).max_reserved(100000).jitter(true).json(),
      Config::fixed_window(100, minutes(1)).capacity(150).start("2024-01-01 00:00:00+00").json(),
      Config::sliding_window(2.5, ratelimit::Duration::milliseconds(1500))
          .start(std::chrono::system_clock::now())
          .json(),
      epoch_hours,
  };
  pqxx::work tx(Conn());
  Freeze(tx);
  for (std::size_t i = 0; i < configs.size(); ++i)
    ratelimit::define(tx, Name("builder." + std::to_string(i)), configs[i], g_schema);
  EXPECT_EQ(ratelimit::value(tx, Name("builder.0"), std::nullopt, std::nullopt, g_schema).value, 8);
  const ratelimit::Options named = Named();
  EXPECT_TRUE(ratelimit::limit(tx, Name("builder.0"), std::nullopt, named).ok);
  EXPECT_EQ(ratelimit::value(tx, Name("builder.0"), std::nullopt, std::nullopt, g_schema).value, 7)
      << "the sharded total";
  EXPECT_TRUE(ratelimit::limit(tx, Name("builder.4"), "k", named).ok);
  ratelimit::Result refused = ratelimit::limit(tx, Name("builder.4"), "k", named);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.retry_at, kFrozen + minutes(30));
  EXPECT_EQ(refused.retry_after, 1800.0);
  // refund gives a token back.
  ratelimit::Result refunded = ratelimit::refund(tx, Name("builder.4"), "k", 1, std::nullopt, g_schema);
  EXPECT_EQ(refunded.remaining, 1);
  EXPECT_TRUE(ratelimit::limit(tx, Name("builder.4"), "k", named).ok);
  tx.commit();
}

// The extension in a schema whose name needs quoting, in a database of its own; extension_schema() finds it.
TEST_F(ApiTest, QuotedSchema) {
  const std::string database = "client_api_test_" + std::to_string(getpid());
  const std::string schema = "Rate Limits.ü";  // (the extension refuses a schema name with " $ ' or \ in it)
  // Drops the database when the test ends, passed or failed.
  struct DropDatabase {
    pqxx::connection& conn;
    const std::string& name;
    ~DropDatabase() {
      try {
        pqxx::nontransaction admin(conn);
        admin.exec0("DROP DATABASE IF EXISTS " + admin.quote_name(name) + " WITH (FORCE)");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "note: could not drop database %s: %s\n", name.c_str(), e.what());
      }
    }
  };
  {
    pqxx::nontransaction admin(Conn());
    admin.exec0("DROP DATABASE IF EXISTS " + admin.quote_name(database));
    admin.exec0("CREATE DATABASE " + admin.quote_name(database));
  }
  DropDatabase drop{Conn(), database};
  auto conn = Connect("dbname=" + database);
  pqxx::work tx(*conn);
  EXPECT_FALSE(ratelimit::extension_schema(tx));
  tx.exec0("CREATE SCHEMA " + tx.quote_name(schema));
  tx.exec0("CREATE EXTENSION ratelimit SCHEMA " + tx.quote_name(schema));
  EXPECT_EQ(ratelimit::extension_schema(tx), schema);
  Freeze(tx);
  ratelimit::Options options;
  options.config = Bucket(2, 2);
  options.schema = schema;
  EXPECT_EQ(ratelimit::limit(tx, "n", "k", options).remaining, 1);
  EXPECT_EQ(ratelimit::check(tx, "n", "k", options).remaining, 0);
  EXPECT_EQ(ratelimit::value(tx, "n", "k", options.config, schema).value, 1);
  EXPECT_EQ(ratelimit::limit_all(tx, {{"n", "k", options.config}}, false, schema).at(0).remaining, 0);
  EXPECT_TRUE(ratelimit::reset(tx, "n", "k", schema));
  ExpectSqlError("42883", [&] { ratelimit::limit(tx, "n", "k", With(Bucket(1, 1))); });  // not in public
}

}  // namespace
}  // namespace client_api
