// Several limits in one call (limit_all) and rolled-back transactions
// giving their tokens back (see api.h).

#include <gtest/gtest.h>

#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <string>

#include "api.h"

namespace client_api {
namespace {

// limit_all: all or nothing, rows in input order, the summary, throws, reservations.
TEST_F(ApiTest, LimitAll) {
  const std::string a = Name("all.a"), b = Name("all.b");
  const std::string config_a = Bucket(2, 2), config_b = Bucket(1, 1);
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    auto rows = ratelimit::limit_all(tx, {{a, "u1", config_a}, {b, std::nullopt, config_b}}, false, g_schema);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].name, a);
    EXPECT_EQ(rows[0].key, std::optional<std::string>("u1"));
    EXPECT_EQ(rows[1].name, b);
    EXPECT_FALSE(rows[1].key);
    EXPECT_TRUE(rows[0].ok && rows[1].ok);
    EXPECT_EQ(rows[0].remaining, 1);
    EXPECT_EQ(rows[1].remaining, 0);
    ratelimit::Summary s = ratelimit::summarize(rows);
    EXPECT_TRUE(s.ok);
    EXPECT_FALSE(s.retry_after);

    // b refused: nothing consumed, a shows what it would have granted.
    rows = ratelimit::limit_all(tx, {{b, std::nullopt, config_b}, {a, "u1", config_a}}, false, g_schema);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].name, b);
    EXPECT_FALSE(rows[0].ok);
    EXPECT_EQ(rows[0].retry_after, 3600.0);
    EXPECT_EQ(rows[0].retry_at, kFrozen + hours(1));
    EXPECT_TRUE(rows[1].ok);
    s = ratelimit::summarize(rows);
    EXPECT_FALSE(s.ok);
    EXPECT_EQ(s.retry_after, 3600.0);
    EXPECT_EQ(ratelimit::value(tx, a, "u1", config_a, g_schema).value, 1) << "a refusal consumed";
    EXPECT_TRUE(ratelimit::limit_all(tx, {}, false, g_schema).empty());
    tx.commit();
  }
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    try {
      ratelimit::limit_all(tx, {{a, "u1", config_a}, {b, std::nullopt, config_b}}, true, g_schema);
      ADD_FAILURE() << "no RateLimited";
    } catch (const ratelimit::RateLimited& e) {
      EXPECT_EQ(e.name(), b);
      EXPECT_FALSE(e.key());
      EXPECT_EQ(e.retry_after(), 3600);
    }
  }
  pqxx::work tx(Conn());
  Freeze(tx);
  EXPECT_EQ(ratelimit::value(tx, a, "u1", config_a, g_schema).value, 1) << "the thrown call consumed";
  // A reservation's retry_after is part of the summary; counts keep every digit.
  const std::string c = Name("all.c");
  const std::string config_c =
      ratelimit::Config::token_bucket(1, seconds(1)).capacity(1).max_reserved(10).json();
  auto rows = ratelimit::limit_all(
      tx, {{c, "r", config_c, 5, true}, {a, "u1", config_a, 0.1}, {a, "u2", config_a, 0.3}}, false, g_schema);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0].ok);
  EXPECT_EQ(rows[0].retry_after, 4.0);
  EXPECT_EQ(rows[0].remaining, -4);
  EXPECT_EQ(rows[1].remaining, 1 - 0.1);
  EXPECT_EQ(rows[2].remaining, 2 - 0.3);
  ratelimit::Summary s = ratelimit::summarize(rows);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.retry_after, 4.0);
  // A defined config (no config in the element), and the same limit twice: all or nothing.
  const std::string d = Name("all.d");
  ratelimit::define(tx, d, Bucket(1, 1), g_schema);
  rows = ratelimit::limit_all(tx, {{d, "x"}, {d, "x"}}, false, g_schema);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].ok);
  EXPECT_FALSE(rows[1].ok);
  EXPECT_EQ(ratelimit::value(tx, d, "x", std::nullopt, g_schema).value, 1);
  EXPECT_TRUE(ratelimit::limit_all(tx, {{d, "x"}}, false, g_schema).at(0).ok);
  tx.commit();
}

// What a transaction consumed comes back when it rolls back: an explicit abort, or a RateLimited thrown by a
// later limit in it. A commit keeps it.
TEST_F(ApiTest, RollbackReturnsTokens) {
  const std::string a = Name("rollback.a"), b = Name("rollback.b");
  const std::string config_a = Bucket(2, 2), config_b = Bucket(1, 1);
  auto value_a = [&] {
    pqxx::work tx(Conn());
    Freeze(tx);
    return ratelimit::value(tx, a, "k", config_a, g_schema).value;
  };
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    EXPECT_EQ(ratelimit::limit(tx, a, "k", With(config_a)).remaining, 1);
    EXPECT_TRUE(ratelimit::limit(tx, b, "k", With(config_b)).ok);
    tx.abort();
  }
  EXPECT_EQ(value_a(), 2);
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    EXPECT_TRUE(ratelimit::limit(tx, b, "k", With(config_b)).ok);  // b's only token, committed
    tx.commit();
  }
  try {
    pqxx::work tx(Conn());
    Freeze(tx);
    EXPECT_TRUE(ratelimit::limit(tx, a, "k", With(config_a, 1, false, true)).ok);
    ratelimit::limit(tx, b, "k", With(config_b, 1, false, true));
    ADD_FAILURE() << "b was granted twice";
    tx.commit();
  } catch (const ratelimit::RateLimited& e) {
    EXPECT_EQ(e.name(), b);
  }
  EXPECT_EQ(value_a(), 2) << "the aborted transaction kept a's token";
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    EXPECT_TRUE(ratelimit::limit(tx, a, "k", With(config_a)).ok);
    tx.commit();
  }
  EXPECT_EQ(value_a(), 1);
}

}  // namespace
}  // namespace client_api
