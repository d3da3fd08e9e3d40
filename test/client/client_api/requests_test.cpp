// What a request can ask: fractional counts, NULL and empty keys,
// reservations, throwing RateLimited, hostile keys and names (see api.h).

#include <gtest/gtest.h>

#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api.h"

namespace client_api {
namespace {

// Fractional counts reach the server exactly (limit's float8 and limit_all's numeric parameters alike).
TEST_F(ApiTest, FractionalCounts) {
  const std::string name = Name("fractional");
  const std::string config = Bucket(1, 1);
  pqxx::work tx(Conn());
  Freeze(tx);
  EXPECT_EQ(ratelimit::limit(tx, name, "a", With(config, 0.1)).remaining, 1 - 0.1);
  EXPECT_EQ(ratelimit::limit(tx, name, "a", With(config, 1.0 / 3)).remaining, 1 - 0.1 - 1.0 / 3);
  EXPECT_EQ(ratelimit::limit_all(tx, {{name, "b", config, 1.0 / 3}}, false, g_schema).at(0).remaining,
            1 - 1.0 / 3);
  EXPECT_EQ(ratelimit::check(tx, name, "b", With(config, 2.0 / 3)).remaining, 1 - 1.0 / 3 - 2.0 / 3);
  tx.commit();
}

// A NULL key is the global limit; "" is an ordinary key of its own.
TEST_F(ApiTest, NullKeyVersusEmptyKey) {
  const std::string name = Name("null_key");
  const std::string config = Bucket(1, 1);
  pqxx::work tx(Conn());
  Freeze(tx);
  EXPECT_TRUE(ratelimit::limit(tx, name, std::nullopt, With(config)).ok);
  EXPECT_FALSE(ratelimit::limit(tx, name, std::nullopt, With(config)).ok);
  EXPECT_TRUE(ratelimit::limit(tx, name, "", With(config)).ok);
  EXPECT_FALSE(ratelimit::limit(tx, name, "", With(config)).ok);
  EXPECT_EQ(StateRows(tx, name, std::nullopt), 1);
  EXPECT_EQ(StateRows(tx, name, std::string()), 1);
  EXPECT_TRUE(ratelimit::reset(tx, name, std::nullopt, g_schema));
  EXPECT_EQ(ratelimit::value(tx, name, std::nullopt, config, g_schema).value, 1);
  EXPECT_EQ(ratelimit::value(tx, name, "", config, g_schema).value, 0);
  tx.commit();
}

// Reservations: granted with a retry_after, refused past maxReserved, refusals write nothing.
TEST_F(ApiTest, Reserve) {
  const std::string name = Name("reserve");
  const std::string config = ratelimit::Config::token_bucket(10, minutes(1))
                                 .capacity(10)
                                 .max_reserved(20)
                                 .json();  // a token per 6 s
  pqxx::work tx(Conn());
  Freeze(tx);
  ratelimit::Result all = ratelimit::limit(tx, name, "k", With(config, 10));
  EXPECT_TRUE(all.ok);
  EXPECT_FALSE(all.retry_after);
  ratelimit::Result reserved = ratelimit::limit(tx, name, "k", With(config, 5, true));
  EXPECT_TRUE(reserved.ok);
  EXPECT_EQ(reserved.retry_after, 30.0);
  EXPECT_EQ(reserved.retry_at, kFrozen + seconds(30));
  EXPECT_EQ(reserved.remaining, -5);
  ratelimit::Result too_much = ratelimit::limit(tx, name, "k", With(config, 20, true));
  EXPECT_FALSE(too_much.ok);
  EXPECT_EQ(too_much.retry_after, 30.0);  // when the value is back to 0: a reservation of 20 then fits
  ratelimit::Result plain = ratelimit::limit(tx, name, "k", With(config, 1));
  EXPECT_FALSE(plain.ok);
  EXPECT_EQ(plain.retry_after, 36.0);
  EXPECT_EQ(ratelimit::value(tx, name, "k", config, g_schema).value, -5) << "a refusal wrote";
  tx.commit();
}

// throws = true: RateLimited carries what ratelimit_check says, and the transaction is aborted.
TEST_F(ApiTest, ThrowsRateLimited) {
  const std::string config = Bucket(1, 1);
  for (const std::optional<std::string>& key :
       {std::optional<std::string>("user 1"), std::optional<std::string>(""), std::optional<std::string>()}) {
    const std::string name = Name("throws." + std::string(key ? "k" + *key : "null"));
    {
      pqxx::work tx(Conn());
      Freeze(tx);
      EXPECT_TRUE(ratelimit::limit(tx, name, key, With(config, 1, false, true)).ok);
      tx.commit();
    }
    pqxx::work tx(Conn());
    Freeze(tx);
    tx.exec0("SET LOCAL TIME ZONE 'Asia/Kathmandu'");  // retry_at_text in UTC all the same
    ratelimit::Result expected = ratelimit::check(tx, name, key, With(config));
    ASSERT_FALSE(expected.ok);
    try {
      ratelimit::limit(tx, name, key, With(config, 1, false, true));
      ADD_FAILURE() << "no RateLimited";
    } catch (const ratelimit::RateLimited& e) {
      EXPECT_EQ(e.sqlstate(), "PT429");
      EXPECT_NE(std::string(e.what()).find("rate limit \"" + name + "\" exceeded"), std::string::npos);
      EXPECT_EQ(e.name(), name);
      EXPECT_EQ(e.key(), key);
      EXPECT_EQ(e.retry_after(), expected.retry_after.value());
      EXPECT_EQ(e.retry_at(), expected.retry_at);
      EXPECT_EQ(e.retry_at_text(), "2030-01-01T01:30:00+00:00");
      EXPECT_EQ(e.remaining(), expected.remaining);
    }
    ExpectSqlError("25P02", [&] { tx.exec0("SELECT 1"); });  // the server aborted the transaction
  }
  // check raises too; a RateLimited is a pqxx::sql_error.
  pqxx::work tx(Conn());
  Freeze(tx);
  try {
    ratelimit::check(tx, Name("throws.null"), std::nullopt, With(config, 1, false, true));
    ADD_FAILURE() << "no error";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "PT429");
    EXPECT_NE(dynamic_cast<const ratelimit::RateLimited*>(&e), nullptr);
  }
}

// Keys with quotes, backslashes, control characters, unicode, SQL and a forged DETAIL line round-trip
// exactly, in the state table and in RateLimited::key(); so does a name holding a forged DETAIL.
TEST_F(ApiTest, HostileKeysAndNames) {
  const std::string config = Bucket(1, 1);
  const std::string forged_detail =
      "\nDETAIL:  {\"name\": \"forged\", \"key\": null, \"retry_after\": 0, \"retry_at\": \"\"}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Name("hostile"), "it's \"quoted\" \\back\\slash"},
      {Name("hostile"), "new\nline\ttab\x01\x1f\x7f"},
      {Name("hostile"), "ünïcødé ✓ 😀"},
      {Name("hostile"), "'); DROP TABLE ratelimit_state; --"},
      {Name("hostile"), forged_detail},
      {Name("hostile"), std::string(1024, 'k')},
      {Name("hostile.\"name\"") + forged_detail + "HINT:  x", "k"},
  };
  for (const auto& [name, key] : cases) {
    {
      pqxx::work tx(Conn());
      Freeze(tx);
      EXPECT_TRUE(ratelimit::limit(tx, name, key, With(config)).ok) << key;
      EXPECT_EQ(StateRows(tx, name, key), 1) << key;
      tx.commit();
    }
    pqxx::work tx(Conn());
    Freeze(tx);
    try {
      ratelimit::limit(tx, name, key, With(config, 1, false, true));
      ADD_FAILURE() << "no RateLimited for key " << key;
    } catch (const ratelimit::RateLimited& e) {
      EXPECT_EQ(e.name(), name);
      EXPECT_EQ(e.key(), key);
      EXPECT_EQ(e.retry_after(), 3600);
    }
  }
  // A NUL byte cannot be sent as text: rejected before anything reaches the server.
  pqxx::work tx(Conn());
  EXPECT_THROW(ratelimit::limit(tx, Name("hostile"), std::string("a\0b", 3), With(config)),
               std::invalid_argument);
  EXPECT_THROW(ratelimit::limit(tx, std::string("a\0b", 3), "k", With(config)), std::invalid_argument);
  EXPECT_EQ(tx.exec1("SELECT 1")[0].as<int>(), 1) << "the transaction is still usable";
}

}  // namespace
}  // namespace client_api
