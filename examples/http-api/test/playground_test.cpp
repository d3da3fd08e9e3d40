// End-to-end tests of the playground's endpoints (src/playground.cpp): the
// page, its simulations against ratelimit_simulate queried directly, Hit
// through the real limits with their headers, and the bounds on what a web
// client can make the service store (see e2e.h for how they run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "e2e.h"

namespace {

using namespace e2e;

constexpr std::int64_t kOrigin = 1767225600000;  // the simulations' origin, 2026-01-01
const std::vector<std::string> kLimits = {"playground-token-bucket", "playground-fixed-window",
                                          "playground-sliding-window"};
const std::string kPlaygroundRows =
    "SELECT count(*) FROM ratelimit_state WHERE name LIKE 'playground-%' AND name <> 'playground-keys'";

// ratelimit_simulate's rows (ok, remaining, retry_after) for `config` and
// arrivals in milliseconds after `origin`, queried directly.
pqxx::result SimulateInDatabase(const json& config, const std::string& origin, const json& arrivals) {
  pqxx::connection conn("");
  pqxx::nontransaction tx(conn);
  return tx.exec_params(
      "SELECT ok, remaining, retry_after FROM ratelimit_simulate($1::jsonb, "
      "ARRAY(SELECT $2::timestamptz + t::bigint * interval '1 millisecond' "
      "FROM jsonb_array_elements_text($3::jsonb) WITH ORDINALITY a(t, i) ORDER BY i))",
      config.dump(), origin, arrivals.dump());
}

// A Hit request of a session of its own.
json HitRequest(const std::string& session, const json& controls) {
  json request{{"session", Unique(session)}, {"origin", kOrigin}, {"rate", 2}, {"period", 3600000}};
  if (controls.is_object()) request.update(controls);
  return request;
}

// The page is one self-contained document: nothing in it is fetched from
// elsewhere (its icon is a data: URL), and its Content-Security-Policy
// forbids it anyway.
TEST(Playground, ServesASelfContainedPage) {
  httplib::Result response = Client().Get("/playground");
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(Matches(response->get_header_value("Content-Security-Policy"),
                      "default-src 'none'.*connect-src 'self'.*"));
  const std::string& page = response->body;
  EXPECT_NE(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("/playground/simulate"), std::string::npos);
  EXPECT_NE(page.find("/playground/hit"), std::string::npos);
  EXPECT_NE(page.find("rel=\"icon\" href=\"data:"), std::string::npos) << "the page names its icon";
  for (const char* outside : {"src=", "href=\"http", "href=\"/", "@import", "https:", "url("})
    EXPECT_EQ(page.find(outside), std::string::npos) << "the page refers to something outside: " << outside;
}

// Each kind's dots are ratelimit_simulate's answers for the same config and
// arrivals, queried here directly; the level probes take nothing.
TEST(Playground, SimulateIsTheDatabasesAnswer) {
  json arrivals = json::array({50, 100, 200, 300, 9900, 9950, 10000, 10050, 10100, 15000, 25000});
  json request{{"rate", 3},    {"period", 10000}, {"capacity", 4}, {"arrivals", arrivals},
               {"samples", 7}, {"span", 30000}};
  httplib::Result response = Post("/playground/simulate", request);
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  ASSERT_EQ(response->status, 200) << response->body;
  json body = Body(response);
  ASSERT_EQ(body.at("algorithms").size(), 3u);
  EXPECT_EQ(body.at("period_ms"), 10000);
  std::vector<std::string> kinds;
  int refused = 0;
  for (const json& algorithm : body.at("algorithms")) {
    kinds.push_back(algorithm.at("kind"));
    const json& config = algorithm.at("config");
    EXPECT_EQ(config.at("kind"), algorithm.at("kind"));
    EXPECT_EQ(config.at("rate"), 3);
    EXPECT_EQ(config.at("period"), 10000);
    pqxx::result expected = SimulateInDatabase(config, body.at("origin"), arrivals);
    const json& calls = algorithm.at("calls");
    ASSERT_EQ(calls.size(), expected.size()) << algorithm.at("kind");
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].at("t"), arrivals[i]) << algorithm.at("kind") << " #" << i;
      EXPECT_EQ(calls[i].at("ok"), expected[i][0].as<bool>()) << algorithm.at("kind") << " #" << i;
      EXPECT_DOUBLE_EQ(calls[i].at("remaining").get<double>(), expected[i][1].as<double>());
      EXPECT_EQ(calls[i].at("retry_after").is_null(), expected[i][2].is_null());
      refused += !expected[i][0].as<bool>();
    }
    // The 7 samples are among the probes, in order.
    std::vector<double> times;
    for (const json& level : algorithm.at("levels")) times.push_back(level.at("t"));
    EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
    for (double sample : {0, 5000, 10000, 15000, 20000, 25000, 30000})
      EXPECT_NE(std::find(times.begin(), times.end(), sample), times.end()) << sample;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"token bucket", "fixed window", "sliding window"}));
  EXPECT_GT(refused, 0) << "the arrivals must be over the limit somewhere";
  const json& bucket = body.at("algorithms")[0];
  EXPECT_EQ(bucket.at("config").at("capacity"), 4);
  EXPECT_EQ(bucket.at("levels")[0].at("remaining"), 4) << "a full bucket before any arrival";
}

// The probes fall just before and at each window edge and arrival, so that a
// picture drawn through them drops where the limit does: a fixed window full
// at 9,999 ms is empty at 10,000 ms.
TEST(Playground, ProbesShowTheResetAtTheEdge) {
  json request{
      {"rate", 2}, {"period", "10 seconds"}, {"arrivals", {9000, 9500}}, {"samples", 2}, {"span", 20000}};
  httplib::Result response = Post("/playground/simulate", request);
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  ASSERT_EQ(response->status, 200) << response->body;
  const json body = Body(response);
  const json& fixed = body.at("algorithms")[1];
  ASSERT_EQ(fixed.at("kind"), "fixed window");
  std::map<double, double> remaining;
  for (const json& level : fixed.at("levels")) remaining[level.at("t")] = level.at("remaining");
  ASSERT_TRUE(remaining.count(8999) && remaining.count(9000) && remaining.count(9999) &&
              remaining.count(10000))
      << fixed.at("levels").dump();
  EXPECT_EQ(remaining[8999], 2);
  EXPECT_EQ(remaining[9000], 1);
  EXPECT_EQ(remaining[9999], 0);
  EXPECT_EQ(remaining[10000], 2);
}

// A period in a unit ("10 seconds") goes into the config as typed, with the
// same answers as 10000 ms; "start" moves the windows, whose start the
// config shows as a timestamp.
TEST(Playground, PeriodInItsUnitAndWindowStart) {
  json arrivals = json::array({1000, 2000, 3000, 4000, 6000, 7000, 8000, 12000, 13000});
  json request{{"rate", 2}, {"period", "10 seconds"}, {"start", 5000}, {"arrivals", arrivals}};
  httplib::Result response = Post("/playground/simulate", request);
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  ASSERT_EQ(response->status, 200) << response->body;
  json body = Body(response);
  EXPECT_EQ(body.at("period_ms"), 10000);
  EXPECT_EQ(body.at("start_ms"), 5000);
  for (const json& algorithm : body.at("algorithms")) {
    const json& config = algorithm.at("config");
    EXPECT_EQ(config.at("period"), "10 seconds");
    if (algorithm.at("kind") != "token bucket") {
      EXPECT_EQ(config.at("start"), "2026-01-01T00:00:05Z");
    }
    json by_ms = config;
    by_ms["period"] = 10000;
    pqxx::result expected = SimulateInDatabase(by_ms, body.at("origin"), arrivals);
    for (std::size_t i = 0; i < arrivals.size(); ++i)
      EXPECT_EQ(algorithm.at("calls")[i].at("ok"), expected[i][0].as<bool>()) << config.dump() << " #" << i;
  }
  // The fixed window's windows start at 5 s: 1 s and 2 s fill [-5 s, 5 s),
  // 3 s and 4 s are refused, 6 s and 7 s are granted in [5 s, 15 s).
  std::vector<bool> fixed;
  for (const json& call : body.at("algorithms")[1].at("calls")) fixed.push_back(call.at("ok"));
  EXPECT_EQ(fixed, (std::vector<bool>{true, true, false, false, true, true, false, false, false}));
}

// The Hit button's endpoint: one real ratelimit_limit call per kind, under
// a key of the page's session; past the capacity, refused with retry_after.
// The answer carries each limit's ratelimit_headers, and the HTTP response
// the three combined.
TEST(Playground, HitIsARealLimitWithItsHeaders) {
  json request = HitRequest("hit", {});
  auto hit = [&request](bool granted) {
    httplib::Result response = Post("/playground/hit", request);
    EXPECT_TRUE(response) << httplib::to_string(response.error());
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_EQ(Body(response).at("hits").size(), 3u);
    for (const json& hit : Body(response).at("hits")) EXPECT_EQ(hit.at("ok"), granted) << hit.dump();
    EXPECT_EQ(response->has_header("Retry-After"), !granted) << "Retry-After only once refused";
    return response;
  };
  hit(true);
  hit(true);
  httplib::Result response = hit(false);
  ASSERT_TRUE(response);
  json last = Body(response);
  std::string policies, states;
  long retry_after = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const json& hit = last.at("hits")[i];
    EXPECT_EQ(hit.at("limit"), kLimits[i]);
    EXPECT_GT(hit.at("retry_after").get<double>(), 0) << hit.dump();
    EXPECT_NE(LimitState(kLimits[i], hit.at("key")), "") << "the limit's row is in ratelimit_state";
    const json& headers = hit.at("headers");
    std::string quoted = "\"" + kLimits[i] + "\"";
    EXPECT_TRUE(Matches(headers.at("RateLimit"), (quoted + ";r=0;t=[0-9]+").c_str())) << headers.dump();
    EXPECT_TRUE(Matches(headers.at("RateLimit-Policy"), (quoted + ";q=2;w=3600").c_str())) << headers.dump();
    EXPECT_EQ(headers.at("X-RateLimit-Remaining"), "0");
    EXPECT_EQ(headers.at("Retry-After"),
              std::to_string(static_cast<long>(std::ceil(hit.at("retry_after").get<double>()))));
    policies += (i ? ", " : "") + headers.at("RateLimit-Policy").get<std::string>();
    states += (i ? ", " : "") + headers.at("RateLimit").get<std::string>();
    retry_after = std::max(retry_after, std::stol(headers.at("Retry-After").get<std::string>()));
  }
  EXPECT_EQ(response->get_header_value("RateLimit-Policy"), policies);
  EXPECT_EQ(response->get_header_value("RateLimit"), states);
  EXPECT_EQ(IntHeader(response, "Retry-After"), retry_after);
  EXPECT_EQ(response->get_header_value("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(IntHeader(response, "X-RateLimit-Limit"), 2);
  EXPECT_EQ(last.at("headers").at("RateLimit"), states) << "the body carries the HTTP headers too";
}

// Bad input is a 400 with a JSON error naming the field when it is the
// service's check, or the extension's 22023 (arrivals out of order, counts
// of another length). Nothing is written.
TEST(Playground, BadInputIs400WritingNothing) {
  auto body = [](json fields) {
    json request{{"rate", 2}, {"period", 10000}};
    request.update(fields);
    return request.dump();
  };
  const std::string session = Unique("bad-hit");
  const std::int64_t origin = kOrigin;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"/playground/simulate", "{", ""},
      {"/playground/simulate", "[]", ""},
      {"/playground/simulate", body({{"arrivals", json::array()}}), "arrivals"},
      {"/playground/simulate", body({{"arrivals", {-1}}}), "arrivals"},
      {"/playground/simulate", body({{"arrivals", {1.5}}}), "arrivals"},
      {"/playground/simulate", body({{"arrivals", "1"}}), "arrivals"},
      {"/playground/simulate", body({{"arrivals", std::vector<int>(2001, 0)}}), "arrivals"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"rate", "2"}}), "rate"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"period", nullptr}}), "period"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"counts", {"1"}}}), "counts"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"samples", 5}}), "span"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"samples", 401}, {"span", 10}}), "samples"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"samples", 5}, {"span", 10}, {"from", 11}}), "from"},
      {"/playground/simulate", body({{"arrivals", {2, 1}}}), ""},
      {"/playground/simulate", body({{"arrivals", {1, 2}}, {"counts", {1}}}), ""},
      {"/playground/simulate", body({{"arrivals", {1}}, {"counts", {-1}}}), ""},
      {"/playground/simulate", body({{"arrivals", {1}}, {"rate", 0}}), "rate"},
      {"/playground/simulate", body({{"arrivals", {1}}, {"capacity", -1}}), "capacity"},
      {"/playground/hit", body({{"origin", origin}}), "session"},
      {"/playground/hit", body({{"session", "a b"}, {"origin", origin}}), "session"},
      {"/playground/hit", body({{"session", std::string(65, 'a')}, {"origin", origin}}), "session"},
      {"/playground/hit", body({{"session", session}}), "origin"},
      {"/playground/hit", body({{"session", session}, {"origin", -1}}), "origin"},
      {"/playground/hit", body({{"session", session}, {"origin", origin}, {"period", -5}}), "period"},
      {"/playground/hit", body({{"session", session}, {"origin", origin}, {"rate", 0}}), "rate"},
  };
  const long before = QueryValue<long>(kPlaygroundRows);
  for (const auto& [path, request, field] : cases) {
    httplib::Result response = Post(path, request);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    EXPECT_EQ(response->status, 400) << path << " " << request << " -> " << response->body;
    json answer = json::parse(response->body, nullptr, false);
    EXPECT_TRUE(answer.value("error", json()).is_string())
        << path << " " << request << " -> " << response->body;
    EXPECT_EQ(answer.value("field", ""), field) << path << " " << request << " -> " << response->body;
  }
  EXPECT_EQ(QueryValue<long>(kPlaygroundRows), before);
  // The extension's own message comes through.
  httplib::Result unordered = Post("/playground/simulate", body({{"arrivals", {2, 1}}}));
  ASSERT_TRUE(unordered);
  EXPECT_NE(Body(unordered).at("error").get<std::string>().find("order"), std::string::npos)
      << unordered->body;
}

// A web client cannot make a limit that never goes idle: rate, capacity,
// period and start are bounded (a period of at most an hour, in a unit the
// service knows), each refusal naming its field and storing nothing.
TEST(Playground, ControlsAreBounded) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"period", 1000000000000}}, "period"},
      {{{"period", 3600001}}, "period"},
      {{{"period", 0.5}}, "period"},
      {{{"period", "2 hours"}}, "period"},
      {{{"period", "10 fortnights"}}, "period"},
      {{{"period", "1e3 seconds"}}, "period"},
      {{{"period", "10  seconds"}}, "period"},
      {{{"period", "seconds"}}, "period"},
      {{{"rate", 1001}}, "rate"},
      {{{"rate", -1}}, "rate"},
      {{{"capacity", 1001}}, "capacity"},
      {{{"start", 3600001}}, "start"},
      {{{"start", -1}}, "start"},
  };
  const long before = QueryValue<long>(kPlaygroundRows);
  for (const auto& [controls, field] : cases) {
    json request = HitRequest("bounded", controls);
    httplib::Result response = Post("/playground/hit", request);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    EXPECT_EQ(response->status, 400) << request.dump() << " -> " << response->body;
    EXPECT_EQ(json::parse(response->body, nullptr, false).value("field", ""), field) << response->body;
  }
  EXPECT_EQ(QueryValue<long>(kPlaygroundRows), before);
  httplib::Result hour =
      Post("/playground/hit", HitRequest("bounded-hour", {{"period", "1 hour"}, {"rate", 1000}}));
  ASSERT_TRUE(hour);
  EXPECT_EQ(hour->status, 200) << "the bounds themselves are allowed: " << hour->body;
}

// The service admits at most the playground limit's rate of new keys (a
// page's session, origin and config); past it, a new key is 503 with
// Retry-After and stores nothing, while keys already admitted still work.
TEST(Playground, NewKeysAreBoundedForTheWholeService) {
  const long quota = g_service.playground_limit.at("rate").get<long>();
  const long left = QueryValue<long>("SELECT floor(value)::bigint FROM ratelimit_value('playground-keys')");
  ASSERT_GT(left, 0) << "earlier tests used the whole quota of " << quota;
  const long keys = QueryValue<long>("SELECT count(*) FROM playground_keys");
  json first = HitRequest("keys-0", {});
  for (long i = 0; i < left; ++i) {
    json request = i == 0 ? first : HitRequest("keys-" + std::to_string(i), {});
    httplib::Result response = Post("/playground/hit", request);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    ASSERT_EQ(response->status, 200) << "key " << i << " of " << quota << ": " << response->body;
  }
  const long rows = QueryValue<long>(kPlaygroundRows);
  for (int i = 0; i < 3; ++i) {
    httplib::Result refused = Post("/playground/hit", HitRequest("keys-over-" + std::to_string(i), {}));
    ASSERT_TRUE(refused) << httplib::to_string(refused.error());
    EXPECT_EQ(refused->status, 503) << refused->body;
    EXPECT_GT(Body(refused).at("retry_after").get<double>(), 0) << refused->body;
    EXPECT_TRUE(Matches(refused->get_header_value("Retry-After"), "[1-9][0-9]*"));
    EXPECT_TRUE(Matches(refused->get_header_value("RateLimit"), "\"playground-keys\";r=0;t=[0-9]+"));
  }
  EXPECT_EQ(QueryValue<long>(kPlaygroundRows), rows) << "a refused new key stores no limit row";
  EXPECT_EQ(QueryValue<long>("SELECT count(*) FROM playground_keys"), keys + left);
  httplib::Result again = Post("/playground/hit", first);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << "an admitted key still works: " << again->body;
  // The quota back for the tests that follow.
  Execute("SELECT ratelimit_reset('playground-keys')");
}

// A key lives an hour: the next admission forgets it and resets its three
// limits, so their rows go; the same key then starts from a full limit.
TEST(Playground, KeysExpireWithTheirRows) {
  json old_request = HitRequest("expiring", {{"rate", 1}});
  for (int i = 0; i < 2; ++i) ASSERT_EQ(Post("/playground/hit", old_request)->status, 200);
  const std::string key = Body(Post("/playground/hit", old_request)).at("hits")[0].at("key");
  for (const std::string& limit : kLimits) ASSERT_NE(LimitState(limit, key), "") << limit;
  ASSERT_EQ(
      QueryValue<long>("WITH aged AS (UPDATE playground_keys SET created_at = now() - interval '61 minutes' "
                       "WHERE key = $1 RETURNING 1) SELECT count(*) FROM aged",
                       key),
      1);

  ASSERT_EQ(Post("/playground/hit", HitRequest("expiring-next", {}))->status, 200);
  EXPECT_EQ(QueryValue<long>("SELECT count(*) FROM playground_keys WHERE key = $1", key), 0);
  for (const std::string& limit : kLimits) EXPECT_EQ(LimitState(limit, key), "") << limit << " kept its row";

  httplib::Result fresh = Post("/playground/hit", old_request);
  ASSERT_TRUE(fresh);
  ASSERT_EQ(fresh->status, 200) << fresh->body;
  for (const json& hit : Body(fresh).at("hits")) EXPECT_TRUE(hit.at("ok").get<bool>()) << hit.dump();
}

}  // namespace
