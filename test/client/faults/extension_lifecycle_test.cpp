// DROP EXTENSION and CREATE EXTENSION again: every session's functions
// work and follow the new tables (see faults.h).

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "faults.h"

namespace faults {
namespace {

// 4. DROP EXTENSION and CREATE EXTENSION again, in a database of its own,
// with three connections: A runs the DDL, B called the functions before
// (its backend kept prepared plans on the old tables) and C connects after.
//   - A DROP EXTENSION rolled back changes nothing: state and definitions
//     still there, in A and B.
//   - After DROP EXTENSION the functions are gone (42883) and so is the
//     state (the tables are gone).
//   - After CREATE EXTENSION the state is empty (limits are full), the
//     definitions are gone (42704 without a config, also in B, whose backend
//     had read the definition before), and the functions work in A, B and C,
//     each seeing the others' commits and definitions.
//   - A definition changed after the re-create reaches B, which had read it
//     (B follows the new definition table, not the dropped one).
//   - The same with the extension re-created in another schema, and then
//     back in public: the backends follow the tables to the new schema.
TEST(ExtensionLifecycleTest, DropAndRecreate) {
  const std::string db = CreateRunDatabase("lifecycle");
  CreateExtension(db);
  auto a = ConnectTo(db), b = ConnectTo(db);
  const std::string name = "lifecycle", config = SlowBucket(5);

  auto call = [&](pqxx::connection& conn, const std::string& schema, const char* key,
                  const std::optional<std::string>& cfg) {
    pqxx::work tx(conn);
    pqxx::row row =
        cfg ? tx.exec_params1("SELECT ok, remaining FROM " + schema + ".ratelimit_limit($1, $2, $3::jsonb)",
                              name, key, *cfg)
            : tx.exec_params1("SELECT ok, remaining FROM " + schema + ".ratelimit_limit($1, $2)", name, key);
    tx.commit();
    return CallResult{row[0].as<bool>(), row[1].as<double>()};
  };
  auto sqlstate_of = [&](pqxx::connection& conn, const std::string& sql) -> std::string {
    try {
      pqxx::work tx(conn);
      tx.exec(sql);
      tx.commit();
      return "no error";
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate();
    }
  };
  auto ddl = [&](const std::string& sql) {
    pqxx::nontransaction tx(*a);
    tx.exec0(sql);
  };
  auto define = [&](pqxx::connection& conn, const std::string& schema, const std::string& cfg) {
    pqxx::work tx(conn);
    tx.exec_params1("SELECT " + schema + ".ratelimit_define($1, $2::jsonb)", name, cfg);
    tx.commit();
  };
  auto count_rows = [&](pqxx::connection& conn, const std::string& schema) {
    pqxx::nontransaction tx(conn);
    return tx.exec1("SELECT count(*) FROM " + schema + ".ratelimit_state")[0].as<long>();
  };

  {
    pqxx::work tx(*a);
    tx.exec_params1("SELECT public.ratelimit_define($1, $2::jsonb)", name, config);
    tx.commit();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 3, 1e-6);

  {
    pqxx::work tx(*a);
    tx.exec0("DROP EXTENSION ratelimit");
    tx.abort();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 2, 1e-6) << "after a rolled-back DROP";
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 1, 1e-6) << "after a rolled-back DROP";

  ddl("DROP EXTENSION ratelimit");
  {
    pqxx::nontransaction tx(*a);
    EXPECT_TRUE(tx.exec1("SELECT to_regclass('public.ratelimit_state') IS NULL")[0].as<bool>());
    EXPECT_TRUE(tx.exec1("SELECT to_regclass('public.ratelimit_definition') IS NULL")[0].as<bool>());
  }
  EXPECT_EQ(sqlstate_of(*a, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42883");
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42883");

  ddl("CREATE EXTENSION ratelimit SCHEMA public");
  EXPECT_EQ(sqlstate_of(*a, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "the definition survived DROP EXTENSION";
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "B's backend still knows the definition it read before DROP EXTENSION";
  {
    pqxx::work tx(*a);
    EXPECT_EQ(Available(tx, name, "k", config), 5) << "the state survived DROP EXTENSION";
  }
  EXPECT_NEAR(call(*a, "public", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "public", "k", config).remaining, 3, 1e-6)
      << "B's backend, which called before the DROP";
  {
    auto c = ConnectTo(db);
    EXPECT_NEAR(call(*c, "public", "k", config).remaining, 2, 1e-6) << "a new backend";
    pqxx::work tx(*c);
    tx.exec_params1("SELECT public.ratelimit_define($1, $2::jsonb)", name, config);
    tx.commit();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 1, 1e-6)
      << "a definition made by another backend";
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 0, 1e-6)
      << "a definition made by another backend";
  // B now holds the new definition; a change to it reaches B (B follows the
  // new definition table, not the dropped one).
  define(*a, "public", SlowBucket(50));
  EXPECT_NEAR(call(*b, "public", "k2", std::nullopt).remaining, 49, 1e-6) << "B kept the old definition";
  EXPECT_EQ(count_rows(*a, "public"), 2);

  // Another schema.
  ddl("DROP EXTENSION ratelimit");
  ddl("CREATE SCHEMA rl_elsewhere");
  ddl("CREATE EXTENSION ratelimit SCHEMA rl_elsewhere");
  EXPECT_NEAR(call(*a, "rl_elsewhere", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "rl_elsewhere", "k", config).remaining, 3, 1e-6);
  EXPECT_EQ(count_rows(*a, "rl_elsewhere"), 1);
  define(*a, "rl_elsewhere", config);
  EXPECT_NEAR(call(*b, "rl_elsewhere", "k", std::nullopt).remaining, 2, 1e-6);
  // And back.
  ddl("DROP EXTENSION ratelimit");
  ddl("DROP SCHEMA rl_elsewhere");
  ddl("CREATE EXTENSION ratelimit SCHEMA public");
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "B's backend still knows the definition of the dropped schema";
  EXPECT_NEAR(call(*b, "public", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*a, "public", "k", config).remaining, 3, 1e-6);
  EXPECT_EQ(count_rows(*a, "public"), 1);
}

}  // namespace
}  // namespace faults
