// Limits the owner manages: named configs, overrides, shadow mode, the
// memory storage and the stats (see api.h).

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <string>
#include <vector>

#include "api.h"

namespace client_api {
namespace {

// A named config (ratelimit_define), the same limit inline, and undefine; another inline config for a
// defined name is 22023 (a defined limit belongs to its owner).
TEST_F(ApiTest, NamedConfig) {
  const std::string name = Name("named");
  pqxx::work tx(Conn());
  Freeze(tx);
  ratelimit::define(tx, name, Bucket(2, 2), g_schema);
  const ratelimit::Options named = Named();
  EXPECT_EQ(ratelimit::check(tx, name, "u", named).remaining, 1);
  EXPECT_EQ(ratelimit::limit(tx, name, "u", named).remaining, 1);
  EXPECT_EQ(ratelimit::value(tx, name, "u", std::nullopt, g_schema).value, 1);
  EXPECT_EQ(ratelimit::limit(tx, name, "v", With(Bucket(2, 2))).remaining, 1) << "the same limit inline";
  tx.commit();
  {
    pqxx::work other(Conn());
    ExpectSqlError("22023", [&] { ratelimit::limit(other, name, "v", With(Bucket(10, 10))); });
  }
  pqxx::work tx1(Conn());
  EXPECT_TRUE(ratelimit::undefine(tx1, name, g_schema));
  EXPECT_FALSE(ratelimit::undefine(tx1, name, g_schema));
  tx1.commit();
  pqxx::work tx2(Conn());
  ExpectSqlError("42704", [&] { ratelimit::limit(tx2, name, "u", named); });
}

// override() gives one key its own config, whatever the call passes; unoverride() removes it. A key's tokens
// carry over (capped at the new capacity). Errors: a NULL-free API, so an invalid config (22023).
TEST_F(ApiTest, OverrideAndUnoverride) {
  const std::string name = Name("override");
  pqxx::work tx(Conn());
  Freeze(tx);
  ratelimit::define(tx, name, Bucket(10, 10), g_schema);
  const ratelimit::Options named = Named();
  EXPECT_EQ(ratelimit::limit(tx, name, "enterprise", named).remaining, 9);
  ratelimit::override(tx, name, "enterprise", Bucket(1000, 1000), g_schema);
  EXPECT_EQ(ratelimit::value(tx, name, "enterprise", std::nullopt, g_schema).value, 9)
      << "tokens carried over";
  EXPECT_EQ(ratelimit::limit(tx, name, "enterprise", With(Bucket(10, 10))).remaining, 8)
      << "the override wins over the inline config";
  EXPECT_EQ(ratelimit::limit(tx, name, "basic", named).remaining, 9);
  ratelimit::override(tx, name, "enterprise", Bucket(5, 5), g_schema);
  EXPECT_EQ(ratelimit::value(tx, name, "enterprise", std::nullopt, g_schema).value, 5) << "capped";
  auto h =
      ratelimit::headers(tx, name, ratelimit::check(tx, name, "enterprise", named), std::nullopt, g_schema);
  EXPECT_EQ(HeaderValue(h, "X-RateLimit-Limit"), "10") << "headers without a key describe the definition";
  EXPECT_TRUE(ratelimit::unoverride(tx, name, "enterprise", g_schema));
  EXPECT_FALSE(ratelimit::unoverride(tx, name, "enterprise", g_schema));
  EXPECT_EQ(ratelimit::value(tx, name, "enterprise", std::nullopt, g_schema).value, 10)
      << "full under the override is the same as no row: full under the definition (cleanup never changes an "
         "answer)";
  tx.commit();
  pqxx::work tx2(Conn());
  ExpectSqlError("22023", [&] {
    ratelimit::override(tx2, name, "k", R"({"kind": "token bucket", "rate": 0})", g_schema);
  });
}

// Config::shadow(true): a call that would be refused is answered ok, without retry_after, consumes nothing
// and does not throw even with throws = true.
TEST_F(ApiTest, ShadowMode) {
  const std::string name = Name("shadow");
  const std::string config = ratelimit::Config::token_bucket(1, hours(1)).shadow(true).json();
  EXPECT_EQ(config, R"({"kind": "token bucket", "rate": 1, "period": 3600000, "shadow": true})");
  pqxx::work tx(Conn());
  Freeze(tx);
  EXPECT_TRUE(ratelimit::limit(tx, name, "k", With(config)).ok);
  ratelimit::Result shadowed = ratelimit::limit(tx, name, "k", With(config, 1, false, true));
  EXPECT_TRUE(shadowed.ok);
  EXPECT_FALSE(shadowed.retry_after);
  EXPECT_EQ(ratelimit::value(tx, name, "k", config, g_schema).value, 0) << "nothing consumed";
  tx.abort();
}

// A memory limit through the client: Config::memory() and keep_on_rollback(), a grant given back by the
// rollback (refund) or kept (keep), in a read-only transaction too. Needs shared memory for memory limits:
// the preload (scripts/memory-test.sh runs this test so), or PostgreSQL 17 on; on 15 without the preload
// the server's 55000 is what the client raises.
TEST_F(ApiTest, MemoryStorage) {
  const std::string name = Name("memory");
  const std::string config = ratelimit::Config::token_bucket(3, hours(1)).memory().json();
  EXPECT_EQ(config, R"({"kind": "token bucket", "rate": 3, "period": 3600000, "storage": "memory"})");
  EXPECT_EQ(
      ratelimit::Config::token_bucket(3, hours(1)).memory().memory_keys(1000).json(),
      R"({"kind": "token bucket", "rate": 3, "period": 3600000, "storage": "memory", "memoryKeys": 1000})");
  const std::string keep = ratelimit::Config::fixed_window(3, hours(1)).memory().keep_on_rollback().json();
  EXPECT_EQ(
      keep,
      R"({"kind": "fixed window", "rate": 3, "period": 3600000, "storage": "memory", "on_rollback": "keep"})");
  bool available = false;
  {
    pqxx::work probe(Conn());
    available = probe
                    .exec1(
                        "SELECT current_setting('shared_preload_libraries') LIKE '%ratelimit%'"
                        " OR current_setting('server_version_num')::int >= 170000")[0]
                    .as<bool>();
  }
  if (!available) {
    pqxx::work tx(Conn());
    try {
      ratelimit::limit(tx, name, "k", With(config));
      ADD_FAILURE() << "a memory limit without shared memory must fail";
    } catch (const pqxx::sql_error& e) {
      EXPECT_EQ(e.sqlstate(), "55000") << e.what();
    }
    return;
  }
  {
    pqxx::work tx(Conn());
    EXPECT_TRUE(ratelimit::limit(tx, name, "refund", With(config, 2)).ok);
    EXPECT_TRUE(ratelimit::limit(tx, name, "keep", With(keep, 2)).ok);
    tx.abort();
  }
  {
    pqxx::read_transaction tx(Conn());
    EXPECT_NEAR(ratelimit::value(tx, name, "refund", config, g_schema).value, 3, 1e-3) << "given back";
    EXPECT_EQ(ratelimit::value(tx, name, "keep", keep, g_schema).value, 1) << "kept";
    EXPECT_TRUE(ratelimit::limit(tx, name, "keep", With(keep)).ok) << "a read-only transaction can take";
    EXPECT_FALSE(ratelimit::limit(tx, name, "keep", With(keep)).ok);
  }
  pqxx::work tx(Conn());
  ratelimit::reset(tx, name, "refund");
  ratelimit::reset(tx, name, "keep");
  tx.commit();
}

// stats(): the ratelimit_stats view. With shared memory (shared_preload_libraries = 'ratelimit', as
// scripts/stats-test.sh runs this test, or PostgreSQL 17 on) it counts this test's decisions; without, it is
// empty.
TEST_F(ApiTest, Stats) {
  const std::string name = Name("stats");
  pqxx::work tx(Conn());
  // Shared memory: the preload, or the dynamic shared memory registry of PostgreSQL 17 on.
  const bool preloaded = tx.exec1(
                               "SELECT current_setting('shared_preload_libraries') LIKE '%ratelimit%'"
                               " OR current_setting('server_version_num')::int >= 170000")[0]
                             .as<bool>();
  Freeze(tx);
  const std::string config = Bucket(2, 2);
  ratelimit::limit(tx, name, "k", With(config, 1.5));
  ratelimit::limit(tx, name, "k", With(config));
  ratelimit::limit(tx, name, "k", With(ratelimit::Config::token_bucket(2, hours(1)).shadow(true).json()));
  tx.commit();
  pqxx::work tx2(Conn());
  std::vector<ratelimit::Stat> stats = ratelimit::stats(tx2, g_schema);
  if (!preloaded) {
    EXPECT_TRUE(stats.empty()) << "no shared memory: the view is empty";
    return;
  }
  const ratelimit::Stat* mine = nullptr;
  for (const ratelimit::Stat& stat : stats)
    if (stat.name == name) mine = &stat;
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->granted, 1);
  EXPECT_EQ(mine->refused, 1);
  EXPECT_EQ(mine->shadow_refused, 1);
  EXPECT_EQ(mine->tokens_granted, 1.5);
  EXPECT_EQ(mine->lock_waits, 0);
  EXPECT_LE(mine->stats_reset, std::chrono::time_point_cast<microseconds>(std::chrono::system_clock::now()));
  ratelimit::stats_reset(tx2, g_schema);
  for (const ratelimit::Stat& stat : ratelimit::stats(tx2, g_schema)) EXPECT_NE(stat.name, name);
  tx2.commit();
}

}  // namespace
}  // namespace client_api
