// One call's answers: limit, check, value and reset with an inline config,
// and the HTTP headers (see api.h).

#include <gtest/gtest.h>

#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <string>

#include "api.h"

namespace client_api {
namespace {

// limit, check, value and reset with an inline config, on the frozen clock: exact answers.
TEST_F(ApiTest, InlineRoundTrip) {
  const std::string name = Name("inline");
  const std::string config = Bucket(3, 3);  // a token every 1200 s
  {
    pqxx::work tx(Conn());
    Freeze(tx);
    ratelimit::Value v = ratelimit::value(tx, name, "k", config, g_schema);
    EXPECT_EQ(v.value, 3);
    EXPECT_EQ(v.ts, kFrozen);
    ratelimit::Result c = ratelimit::check(tx, name, "k", With(config));
    EXPECT_TRUE(c.ok);
    EXPECT_FALSE(c.retry_after);
    EXPECT_FALSE(c.retry_at);
    EXPECT_EQ(c.remaining, 2);
    EXPECT_EQ(c.reset_after, 1200);
    EXPECT_EQ(ratelimit::value(tx, name, "k", config, g_schema).value, 3) << "check consumed";
    for (double remaining : {2, 1, 0}) {
      ratelimit::Result r = ratelimit::limit(tx, name, "k", With(config));
      EXPECT_TRUE(r.ok);
      EXPECT_FALSE(r.retry_after);
      EXPECT_EQ(r.remaining, remaining);
    }
    EXPECT_EQ(ratelimit::value(tx, name, "k", config, g_schema).value, 0);
    ratelimit::Result refused = ratelimit::limit(tx, name, "k", With(config));
    EXPECT_FALSE(refused.ok);
    EXPECT_EQ(refused.retry_after, 1200.0);
    EXPECT_EQ(refused.retry_at, kFrozen + seconds(1200));
    EXPECT_EQ(refused.remaining, 0);
    EXPECT_EQ(refused.reset_after, 3600);
    ratelimit::Result checked = ratelimit::check(tx, name, "k", With(config));
    EXPECT_EQ(checked.ok, refused.ok);
    EXPECT_EQ(checked.retry_after, refused.retry_after);
    EXPECT_EQ(checked.retry_at, refused.retry_at);
    tx.commit();
  }
  pqxx::work tx(Conn());
  Freeze(tx);
  EXPECT_TRUE(ratelimit::reset(tx, name, "k", g_schema));
  EXPECT_EQ(ratelimit::value(tx, name, "k", config, g_schema).value, 3);
  EXPECT_FALSE(ratelimit::reset(tx, name, "k", g_schema));
  tx.commit();
}

// headers(): the response headers of a grant, a refusal and a reservation, with inline and defined configs.
TEST_F(ApiTest, Headers) {
  const std::string name = Name("headers");
  const std::string config = Bucket(3, 3);  // 3 per hour, a token every 1200 s
  pqxx::work tx(Conn());
  Freeze(tx);
  ratelimit::Result granted = ratelimit::limit(tx, name, "k", With(config));
  auto h = ratelimit::headers(tx, name, granted, config, g_schema);
  const std::string quoted = "\"" + name + "\"";
  EXPECT_EQ(HeaderValue(h, "RateLimit-Policy"), quoted + ";q=3;w=3600");
  EXPECT_EQ(HeaderValue(h, "RateLimit"), quoted + ";r=2;t=1200");
  EXPECT_EQ(HeaderValue(h, "X-RateLimit-Limit"), "3");
  EXPECT_EQ(HeaderValue(h, "X-RateLimit-Remaining"), "2");
  EXPECT_EQ(HeaderValue(h, "X-RateLimit-Reset"), std::to_string(1893456000 + 1800 + 1200));
  EXPECT_FALSE(HeaderValue(h, "Retry-After")) << "a grant has no Retry-After";

  ratelimit::limit(tx, name, "k", With(config, 2));
  ratelimit::Result refused = ratelimit::limit(tx, name, "k", With(config));
  ASSERT_FALSE(refused.ok);
  ratelimit::define(tx, name, config, g_schema);  // the defined config gives the same headers
  auto r = ratelimit::headers(tx, name, refused, std::nullopt, g_schema);
  EXPECT_EQ(HeaderValue(r, "Retry-After"), "1200");
  EXPECT_EQ(HeaderValue(r, "RateLimit"), quoted + ";r=0;t=1200");
  EXPECT_EQ(HeaderValue(r, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(r, ratelimit::headers(tx, name, refused, config, g_schema));

  const std::string reserving =
      ratelimit::Config::token_bucket(3, hours(1)).capacity(3).max_reserved(5).json();
  // (Another name: the defined one now takes only its definition's config.)
  ratelimit::Result reserved = ratelimit::limit(tx, name + ".r", "r", With(reserving, 5, true));
  ASSERT_TRUE(reserved.ok);
  auto v = ratelimit::headers(tx, name + ".r", reserved, reserving, g_schema);
  EXPECT_EQ(HeaderValue(v, "X-RateLimit-Remaining"), "0") << "never negative";
  EXPECT_EQ(HeaderValue(v, "Retry-After"), "2400");
  tx.abort();
}

}  // namespace
}  // namespace client_api
