// The C++ client offline: the config builder's JSON and the PT429 DETAIL
// reader (see api.h).

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "api.h"

namespace client_api {
namespace {

// ---------------------------------------------------------------------------
// Offline: the config builder.

TEST(ConfigJson, ArticlesShape) {
  using ratelimit::Config;
  using ratelimit::Duration;
  using ratelimit::Instant;
  EXPECT_EQ(Config::token_bucket(10, minutes(1)).capacity(20).json(),
            R"({"kind": "token bucket", "rate": 10, "period": 60000, "capacity": 20})");
  EXPECT_EQ(Config::token_bucket(40000, "1 minute").max_reserved(100000).json(),
            R"({"kind": "token bucket", "rate": 40000, "period": "1 minute", "maxReserved": 100000})");
  EXPECT_EQ(Config::fixed_window(100, Duration::milliseconds(60000))
                .capacity(150)
                .max_reserved(0)
                .start(Instant::milliseconds_since_epoch(0))
                .shards(4)
                .jitter(true)
                .json(),
            R"({"kind": "fixed window", "rate": 100, "period": 60000, "capacity": 150, "maxReserved": 0, )"
            R"("start": 0, "shards": 4, "jitter": true})");
  EXPECT_EQ(Config::sliding_window(2.5, std::chrono::duration<double>(1.5))
                .start("2024-01-01 00:00:00+00")
                .jitter("5 seconds")
                .json(),
            R"({"kind": "sliding window", "rate": 2.5, "period": 1500, "start": "2024-01-01 00:00:00+00", )"
            R"("jitter": "5 seconds"})");
  EXPECT_EQ(Config::token_bucket(0.1, microseconds(1)).jitter(false).json(),
            R"({"kind": "token bucket", "rate": 0.1, "period": 0.001, "jitter": false})");
  EXPECT_EQ(Config::token_bucket(1e300, seconds(1)).jitter(std::chrono::milliseconds(250)).json(),
            R"({"kind": "token bucket", "rate": 1e+300, "period": 1000, "jitter": 250})");
  EXPECT_EQ(Config::token_bucket(1e21, seconds(1)).capacity(1e20).max_reserved(1e-7).json(),
            R"({"kind": "token bucket", "rate": 1e+21, "period": 1000, "capacity": 100000000000000000000, )"
            R"("maxReserved": 1e-07})");
  const TimePoint start(microseconds(1700000000123456));
  EXPECT_EQ(Instant(start).json(), "1700000000123.456");
  EXPECT_EQ(Instant(std::chrono::system_clock::time_point(seconds(-1))).json(), "-1000");
}

TEST(ConfigJson, Float8Parameters) {
  using ratelimit::detail::float8_text;
  EXPECT_EQ(float8_text(0.1), "0.1");
  EXPECT_EQ(float8_text(1e300), "1e+300");
  EXPECT_EQ(float8_text(-2.5e-310), "-2.5e-310");
  EXPECT_EQ(float8_text(INFINITY), "Infinity");
  EXPECT_EQ(float8_text(-INFINITY), "-Infinity");
  EXPECT_EQ(float8_text(NAN), "NaN");
}

TEST(ConfigJson, EscapingAndRejection) {
  using ratelimit::Config;
  EXPECT_EQ(ratelimit::Duration("1 \"min\"\\\n\t\x01").json(), R"("1 \"min\"\\\n\t\u0001")");
  EXPECT_EQ(ratelimit::Duration("ünï ✓").json(), "\"ünï ✓\"");
  EXPECT_THROW(Config::token_bucket(INFINITY, seconds(1)), std::invalid_argument);
  EXPECT_THROW(Config::token_bucket(1, seconds(1)).capacity(NAN), std::invalid_argument);
  EXPECT_THROW(Config::token_bucket(1, std::chrono::duration<double>(INFINITY)), std::invalid_argument);
  EXPECT_THROW(ratelimit::Duration(std::string("1 min\0ute", 9)), std::invalid_argument);
}

// ---------------------------------------------------------------------------
// Offline: reading the PT429 DETAIL.

std::string Message(const std::string& name, const std::string& detail) {
  return "ERROR:  rate limit \"" + name + "\" exceeded\nDETAIL:  " + detail +
         "\nHINT:  Retry after 1 seconds.\n";
}

TEST(RefusalDetail, Fields) {
  using ratelimit::detail::find_refusal;
  auto r =
      find_refusal(Message("n", R"({"name": "n", "key": "k\"\\\n\u00e9\ud83d\ude00", "retry_after": 59.25, )"
                                R"("retry_at": "2030-01-01T05:45:00.5+05:45", "remaining": -3.5e-05})"),
                   nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "n");
  EXPECT_EQ(r->key, std::optional<std::string>("k\"\\\n\xc3\xa9\xf0\x9f\x98\x80"));
  EXPECT_EQ(r->retry_after, 59.25);
  EXPECT_EQ(r->remaining, -3.5e-05);
  EXPECT_EQ(r->retry_at_text, "2030-01-01T05:45:00.5+05:45");
  EXPECT_EQ(r->retry_at, TimePoint(seconds(1893456000)) + microseconds(500000));

  r = find_refusal(
      Message("g", R"({"name":"g","key":null,"retry_after":Infinity,"extra":{"a":[1,{"b":"}"}]},)"
                   R"("retry_at":"infinity","remaining":NaN})"),
      nullptr);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->key);
  EXPECT_TRUE(std::isinf(r->retry_after));
  EXPECT_FALSE(r->retry_at);
  EXPECT_TRUE(std::isnan(r->remaining));
}

TEST(RefusalDetail, RejectsWhatIsNotTheDetail) {
  using ratelimit::detail::find_refusal;
  const std::string good = R"({"name": "n", "key": null, "retry_after": 1, "retry_at": "x", "remaining": 0})";
  // terse verbosity: no DETAIL line
  EXPECT_FALSE(find_refusal("ERROR:  rate limit \"n\" exceeded\n", nullptr));
  // a name we did not ask about
  const std::vector<std::string> expected{"m"};
  EXPECT_FALSE(find_refusal(Message("n", good), &expected));
  // malformed objects
  for (const char* bad : {R"({"name": "n", "key": null})", R"({"name": 1, "key": null, "retry_after": 1})",
                          R"({"name": "n", "key": null, "retry_after": "1"})",
                          R"({"name": "n", "key": "\ud83d", "retry_after": 1})",
                          R"({"name": "n", "key": "\u0000", "retry_after": 1})",
                          R"({"name": "n", "key": null, "retry_after": 1} trailing)",
                          R"({"name": "n", "key": null, "retry_after": inf})",
                          R"({"name": "n", "key": null, "retry_after": 1)"})
    EXPECT_FALSE(find_refusal(Message("n", bad), nullptr)) << bad;
  // A name holding a forged DETAIL line: with the expected name, the real DETAIL is found.
  const std::string forged_name =
      "evil\nDETAIL:  {\"name\": \"evil\", \"key\": \"forged\", \"retry_after\": 0, \"retry_at\": \"\"}\nend";
  const std::string real =
      "{\"name\": \"evil\\nDETAIL:  {\\\"name\\\": \\\"evil\\\", \\\"key\\\": \\\"forged\\\", "
      "\\\"retry_after\\\": 0, \\\"retry_at\\\": \\\"\\\"}\\nend\", \"key\": \"real\", "
      "\"retry_after\": 7, \"retry_at\": \"\", \"remaining\": 0}";
  const std::vector<std::string> names{forged_name};
  auto r = find_refusal(Message(forged_name, real), &names);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->key, std::optional<std::string>("real"));
  EXPECT_EQ(r->retry_after, 7);
}

TEST(RefusalDetail, IsoTimestamps) {
  using ratelimit::detail::parse_iso_timestamp;
  EXPECT_EQ(parse_iso_timestamp("1970-01-01T00:00:00+00:00"), TimePoint(microseconds(0)));
  EXPECT_EQ(parse_iso_timestamp("1970-01-01T00:00:00Z"), TimePoint(microseconds(0)));
  EXPECT_EQ(parse_iso_timestamp("1969-12-31T23:59:59.999999+00"), TimePoint(microseconds(-1)));
  EXPECT_EQ(parse_iso_timestamp("2030-01-01T05:45:00.123456+05:45"),
            kFrozen - minutes(30) + microseconds(123456));
  EXPECT_EQ(parse_iso_timestamp("2029-12-31 20:30:00-03:30"), kFrozen - minutes(30));
  EXPECT_EQ(parse_iso_timestamp("1970-01-01T00:00:00+00:00:10"), TimePoint(seconds(-10)));
  EXPECT_EQ(parse_iso_timestamp("2000-02-29T00:00:00+00:00"), TimePoint(seconds(951782400)));
  EXPECT_EQ(parse_iso_timestamp("12000-01-01T00:00:00+00:00"), TimePoint(seconds(316516204800)));
  EXPECT_EQ(parse_iso_timestamp("100000-01-01T00:00:00+00:00"), TimePoint(seconds(3093527980800)));
  for (const char* bad : {"infinity", "-infinity", "2024-01-01", "2024-13-01T00:00:00+00",
                          "2024-01-01T00:00:00", "0001-01-01T00:00:00+00:00 BC", "2024-01-01T00:00:00+00:00x",
                          "294277-01-01T00:00:00+00:00", "999999999-01-01T00:00:00+00:00"})
    EXPECT_FALSE(parse_iso_timestamp(bad)) << bad;
}

}  // namespace
}  // namespace client_api
