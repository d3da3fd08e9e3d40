// pg_dump and pg_restore: state and definitions survive bit for bit and
// answer the same (see faults.h).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "faults.h"

namespace faults {
namespace {

// 5. pg_dump -Fc of a database that uses the extension, pg_restore into a new
// database. The source has definitions (one sharded, {"shards": 4}) and state
// on several keys: a NULL key, '' and a non-ASCII key, an exhausted key, a
// sharded limit, a fixed and a sliding window, fractional counts.
//   - The restored state rows (name, key, shard, value, ts, prev, idle_at)
//     and definitions are identical to the source's, bit for bit.
//   - Under one frozen clock (ratelimit.now), ratelimit_value and
//     ratelimit_check answer the same on both databases, and the same
//     sequence of ratelimit_limit calls gets the same answers (an exhausted
//     key stays exhausted, a partly used one grants what is left).
//   - Limits defined only in the dump work without a config on the restored
//     database.
TEST(DumpRestoreTest, StateAndDefinitionsSurvive) {
  REQUIRE_CLUSTER_DIR();
  const std::string src = CreateRunDatabase("dump_src");
  CreateExtension(src);
  auto s = ConnectTo(src);
  const std::string defined = "dump.defined", sharded = "dump.sharded", window = "dump.window",
                    sliding = "dump.sliding";
  const std::string defined_config = SlowBucket(5), sharded_config = SlowBucket(40, 4),
                    window_config = LongWindow(3), sliding_config = LongSlidingWindow(4);
  // (name, key, config or "" for the definition): every limit the test calls.
  struct Use {
    std::string name;
    const char* key;
    std::string config;
  };
  const std::vector<Use> uses = {
      {defined, "alice", ""},    {defined, "bob", ""},         {defined, nullptr, ""},
      {defined, "", ""},         {defined, "ключ ✓", ""},      {defined, "never used", ""},
      {sharded, nullptr, ""},    {window, "w", window_config}, {sliding, "s", sliding_config},
      {defined, "fraction", ""},
  };
  auto limit = [&](pqxx::transaction_base& tx, const Use& u, double count) {
    pqxx::row row = u.config.empty()
                        ? tx.exec_params1("SELECT ok, remaining, retry_after, reset_after FROM " +
                                              Fn("ratelimit_limit") + "($1, $2, count => $3)",
                                          u.name, u.key, count)
                        : tx.exec_params1("SELECT ok, remaining, retry_after, reset_after FROM " +
                                              Fn("ratelimit_limit") + "($1, $2, $3::jsonb, $4)",
                                          u.name, u.key, u.config, count);
    return row;
  };
  {
    pqxx::work tx(*s);
    tx.exec_params1("SELECT " + Fn("ratelimit_define") + "($1, $2::jsonb)", defined, defined_config);
    tx.exec_params1("SELECT " + Fn("ratelimit_define") + "($1, $2::jsonb)", sharded, sharded_config);
    EXPECT_TRUE(limit(tx, uses[0], 2)[0].as<bool>());  // alice: 3 left
    EXPECT_TRUE(limit(tx, uses[1], 5)[0].as<bool>());  // bob: exhausted
    EXPECT_TRUE(limit(tx, uses[2], 1)[0].as<bool>());  // NULL key
    EXPECT_TRUE(limit(tx, uses[3], 4)[0].as<bool>());  // ''
    EXPECT_TRUE(limit(tx, uses[4], 1)[0].as<bool>());
    for (int i = 0; i < 7; ++i) EXPECT_TRUE(limit(tx, uses[6], 3)[0].as<bool>());  // sharded: 21 of 40
    EXPECT_TRUE(limit(tx, uses[7], 3)[0].as<bool>());                              // window: exhausted
    EXPECT_TRUE(limit(tx, uses[8], 2)[0].as<bool>());
    EXPECT_TRUE(limit(tx, uses[9], 0.1)[0].as<bool>());
    EXPECT_TRUE(limit(tx, uses[9], 1.7)[0].as<bool>());
    // A per-key override (0.5.0): bob's row is carried into it.
    tx.exec_params1("SELECT " + Fn("ratelimit_override") + "($1, 'bob', $2::jsonb)", defined, SlowBucket(7));
    tx.commit();
  }
  const std::vector<std::string> src_rows = StateRows(*s, "");
  // 8 keys, the sharded one with a row for each shard its calls locked (two
  // random candidates a call: 1 to 4 rows).
  ASSERT_GE(src_rows.size(), 9u) << Describe(src_rows);
  ASSERT_LE(src_rows.size(), 12u) << Describe(src_rows);
  const std::string definitions_sql =
      "SELECT name || ' ' || config::text FROM public.ratelimit_definition ORDER BY name";
  auto definitions = [&](pqxx::connection& conn) {
    pqxx::nontransaction tx(conn);
    std::vector<std::string> out;
    for (const auto& row : tx.exec(definitions_sql)) out.push_back(row[0].as<std::string>());
    return out;
  };
  const std::vector<std::string> src_definitions = definitions(*s);
  ASSERT_EQ(src_definitions.size(), 2u);

  const std::string dump = ClusterDir() + "/faults_" + g_run_id + ".dump";
  const auto t0 = Clock::now();
  ASSERT_EQ(ClusterCtl("dump " + ShellQuote(src) + " " + ShellQuote(dump)), 0) << "pg_dump failed";
  const std::string dst = CreateRunDatabase("dump_dst");
  const int restore_rc = ClusterCtl("restore " + ShellQuote(dst) + " " + ShellQuote(dump));
  const double dump_restore_s = Seconds(Clock::now() - t0);
  std::remove(dump.c_str());
  ASSERT_EQ(restore_rc, 0) << "pg_restore failed";

  auto d = ConnectTo(dst);
  EXPECT_EQ(StateRows(*d, ""), src_rows) << "source:" << Describe(src_rows);
  EXPECT_EQ(definitions(*d), src_definitions);
  {
    const std::string overrides_sql =
        "SELECT string_agg(name || ' ' || key || ' ' || config::text, ', ' ORDER BY name, key) FROM "
        "public.ratelimit_override";
    pqxx::nontransaction tx(*d);
    pqxx::nontransaction stx(*s);
    EXPECT_EQ(tx.exec1(overrides_sql)[0].as<std::string>(""),
              stx.exec1(overrides_sql)[0].as<std::string>(""));
    EXPECT_NE(stx.exec1(overrides_sql)[0].as<std::string>(""), "") << "the override is in the source";
  }
  {
    pqxx::nontransaction tx(*d);
    pqxx::nontransaction stx(*s);
    const std::string version = "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'";
    EXPECT_EQ(tx.exec1(version)[0].as<std::string>(), stx.exec1(version)[0].as<std::string>());
  }

  // One frozen clock for both: a second after every stored ts.
  std::string frozen;
  {
    pqxx::nontransaction tx(*s);
    frozen = tx.exec1("SELECT (max(ts) + interval '1 second')::text FROM public.ratelimit_state")[0]
                 .as<std::string>();
  }
  for (auto* conn : {s.get(), d.get()}) {
    pqxx::nontransaction tx(*conn);
    tx.exec_params1("SELECT set_config('ratelimit.now', $1, false)", frozen);
  }
  auto answers = [&](pqxx::connection& conn) {
    std::vector<std::string> out;
    pqxx::work tx(conn);
    for (const Use& u : uses) {
      const std::string cfg = u.config.empty() ? "NULL" : tx.quote(u.config) + "::jsonb";
      pqxx::row v = tx.exec_params1(
          "SELECT format('%s|%s', value, ts) FROM " + Fn("ratelimit_value") + "($1, $2, " + cfg + ")", u.name,
          u.key);
      pqxx::row c = tx.exec_params1(
          "SELECT format('%s|%s|%s|%s|%s', ok, retry_after, retry_at, remaining, "
          "reset_after) FROM " +
              Fn("ratelimit_check") + "($1, $2, " + cfg + ")",
          u.name, u.key);
      out.push_back(u.name + "/" + (u.key ? u.key : "NULL") + ": value " + v[0].as<std::string>() +
                    "; check " + c[0].as<std::string>());
    }
    // Consume: everything that is left on the non-sharded keys, one more
    // each (refused), and 1 on the sharded limit (its shard choice is
    // random, so only ok is compared).
    for (const Use& u : uses) {
      if (u.name == sharded) {
        out.push_back("sharded limit ok " + limit(tx, u, 1)[0].as<std::string>());
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        pqxx::row left =
            tx.exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, " +
                                (u.config.empty() ? "NULL" : tx.quote(u.config) + "::jsonb") + ")",
                            u.name, u.key);
        const double count = i == 0 ? std::max(1.0, std::floor(left[0].as<double>())) : 1.0;
        pqxx::row r = limit(tx, u, count);
        out.push_back(u.name + "/" + (u.key ? u.key : "NULL") + Format(" take %g: ", count) +
                      r[0].as<std::string>() + " " + r[1].c_str() + " " + r[2].c_str() + " " + r[3].c_str());
      }
    }
    tx.commit();
    return out;
  };
  const std::vector<std::string> src_answers = answers(*s), dst_answers = answers(*d);
  EXPECT_EQ(dst_answers, src_answers)
      << "source:" << Describe(src_answers) << "\nrestored:" << Describe(dst_answers);
  // Spot checks of what those answers say.
  {
    pqxx::work tx(*d);
    tx.exec_params1("SELECT set_config('ratelimit.now', $1, true)", frozen);
    EXPECT_FALSE(limit(tx, uses[1], 1)[0].as<bool>()) << "bob was exhausted in the source";
    EXPECT_FALSE(limit(tx, uses[7], 1)[0].as<bool>()) << "the window was exhausted in the source";
    EXPECT_TRUE(limit(tx, Use{defined, "fresh", ""}, 5)[0].as<bool>()) << "a never-used key is full";
    EXPECT_TRUE(limit(tx, uses[6], 1)[0].as<bool>()) << "the sharded limit works";
  }
  bool alice_granted_rest = false;
  for (const auto& line : dst_answers)
    if (line.rfind(defined + "/alice take 3: t", 0) == 0) alice_granted_rest = true;
  EXPECT_TRUE(alice_granted_rest) << "alice's 3 remaining tokens:" << Describe(dst_answers);
  PrintMeasure("dump/restore:",
               Format("%zu state rows, %zu definitions identical; pg_dump + pg_restore %.3f s",
                      src_rows.size(), src_definitions.size(), dump_restore_s));
}

}  // namespace
}  // namespace faults
