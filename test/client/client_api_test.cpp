// Tests of the header-only C++ client API (include/ratelimit/ratelimit.hpp) against a live server with the
// extension installed. Not part of the ctest unit run: like client_tests, build/client_api_tests is run
// against a throwaway cluster (connection parameters from PGHOST, PGPORT, PGUSER, PGDATABASE; the user must
// be a superuser: the tests define limits, freeze the clock with ratelimit.now and create a database).
//
// Most tests freeze the extension's clock (SET LOCAL ratelimit.now) so that retry times are exact, and use
// limit names unique to the run. The config builder and the PT429 DETAIL reader are also tested offline.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <ratelimit/ratelimit.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.h"

namespace {

using client_test::Connect;

using ratelimit::TimePoint;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::minutes;
using std::chrono::seconds;

std::string g_schema;  // the extension's schema, unquoted (Options::schema)
std::string g_run_id;  // makes limit names unique per run

// A limit name of this run.
std::string Name(const std::string& test) { return "client_api_test." + g_run_id + "." + test; }

// The frozen clock most tests use, and that moment as a TimePoint.
constexpr char kFrozenNow[] = "2030-01-01 00:30:00+00";
const TimePoint kFrozen = TimePoint(seconds(1893456000 + 1800));  // 2030-01-01T00:30:00Z

// Freezes the extension's clock for the rest of `tx` (superuser-only GUC).
void Freeze(pqxx::transaction_base& tx, const char* at = kFrozenNow) {
  tx.exec_params("SELECT set_config('ratelimit.now', $1, true)", at);
}

// Options with an inline config (and the test schema).
ratelimit::Options With(const std::string& config, double count = 1, bool reserve = false,
                        bool throws = false) {
  ratelimit::Options options;
  options.config = config;
  options.count = count;
  options.reserve = reserve;
  options.throws = throws;
  options.schema = g_schema;
  return options;
}

// A token bucket config: `rate` per hour, capacity `capacity`.
std::string Bucket(double rate, double capacity) {
  return ratelimit::Config::token_bucket(rate, hours(1)).capacity(capacity).json();
}

// The number of state rows of a limit with exactly this key (NULL included).
long StateRows(pqxx::transaction_base& tx, const std::string& name, const std::optional<std::string>& key) {
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

// ---------------------------------------------------------------------------
// Against the server.

class ApiTest : public client_test::ConnectedTest {};

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

// The value of header `name` in `headers` (nullopt if absent).
std::optional<std::string> HeaderValue(const std::vector<ratelimit::Header>& headers,
                                       const std::string& name) {
  for (const auto& [header, value] : headers)
    if (header == name) return value;
  return std::nullopt;
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

// A named config (ratelimit_define), the same limit inline, and undefine; another inline config for a
// defined name is 22023 (a defined limit belongs to its owner).
TEST_F(ApiTest, NamedConfig) {
  const std::string name = Name("named");
  pqxx::work tx(Conn());
  Freeze(tx);
  ratelimit::define(tx, name, Bucket(2, 2), g_schema);
  ratelimit::Options named;
  named.schema = g_schema;
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
  ratelimit::Options named;
  named.schema = g_schema;
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
    tx.exec0("SET LOCAL TIME ZONE 'Asia/Kathmandu'");  // retry_at_text in +05:45
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
      EXPECT_EQ(e.retry_at_text(), "2030-01-01T07:15:00+05:45");
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
  ratelimit::Options named;
  named.schema = g_schema;
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

int main(int argc, char** argv) {
  return client_test::RunAllTests(argc, argv, new ApiEnvironment, "client_api_tests");
}
