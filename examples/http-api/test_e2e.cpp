// End-to-end tests of ratelimit-http-api: HTTP requests against a running
// service, and a libpqxx connection to its database to check what was stored.
// run-e2e.sh starts the service and runs this program with:
//   HTTP_API_E2E_PORT           the service's port on 127.0.0.1
//   HTTP_API_MESSAGES_LIMIT, HTTP_API_SIGNUP_LIMIT, HTTP_API_COMPLETIONS_LIMIT
//                               the limit configs the service was started with
//                               (the service reads the same variables)
//   PGHOST, PGPORT, PGUSER, PGDATABASE   the service's database (a superuser:
//                               one test adds a trigger to a table)
// Each test uses users and emails of its own; the global sign-up limit is
// used by one test only, so the database must be fresh for each run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace {

using nlohmann::json;

int g_port = 0;
json g_messages_limit;  // the configs the service runs with
json g_signup_limit;
json g_completions_limit;

// The tokens a fresh limit holds: its capacity, which defaults to its rate.
int Capacity(const json& config) { return config.value("capacity", config.at("rate").get<int>()); }

// A user or email unique to this run and test.
std::string Unique(const std::string& what) { return "e2e-" + std::to_string(getpid()) + "-" + what; }

httplib::Client Client() {
  httplib::Client client("127.0.0.1", g_port);
  client.set_connection_timeout(10);
  client.set_read_timeout(30);
  return client;
}

httplib::Result Post(const std::string& path, const std::string& body) {
  return Client().Post(path.c_str(), body, "application/json");
}

httplib::Result Post(const std::string& path, const json& body) { return Post(path, body.dump()); }

json Body(const httplib::Result& response) { return json::parse(response->body); }

// An integer header, or -1 when absent.
long IntHeader(const httplib::Result& response, const char* name) {
  if (!response->has_header(name)) return -1;
  return std::stol(response->get_header_value(name));
}

bool Matches(const std::string& text, const char* pattern) {
  return std::regex_match(text, std::regex(pattern));
}

// The one value of a query on the service's database.
template <typename T, typename... Args>
T QueryValue(const std::string& sql, Args&&... args) {
  pqxx::connection conn("");
  pqxx::nontransaction tx(conn);
  return tx.exec_params1(sql, std::forward<Args>(args)...)[0].template as<T>();
}

long MessagesOf(const std::string& user) {
  return QueryValue<long>("SELECT count(*) FROM messages WHERE user_id = $1", user);
}

long CompletionsOf(const std::string& user) {
  return QueryValue<long>("SELECT count(*) FROM completions WHERE user_id = $1", user);
}

// The stored state of a limit's key: value and ts as text, "" if no row.
std::string LimitState(const std::string& name, const std::string& key) {
  return QueryValue<std::string>(
      "SELECT coalesce((SELECT value::text || ' ' || ts::text FROM ratelimit_state "
      "WHERE name = $1 AND key = $2 AND shard = 0), '')",
      name, key);
}

// What every 429 carries: the JSON error and the limit's headers.
void ExpectRefusal(const httplib::Result& response, const std::string& limit) {
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 429) << response->body;
  EXPECT_EQ(response->get_header_value("Content-Type"), "application/json");
  json body = Body(response);
  EXPECT_EQ(body.at("error"), "rate limited");
  EXPECT_GT(body.at("retry_after").get<double>(), 0);
  std::string retry_after = response->get_header_value("Retry-After");
  EXPECT_TRUE(Matches(retry_after, "[1-9][0-9]*")) << "Retry-After: " << retry_after;
  std::string quoted = "\"" + limit + "\"";
  EXPECT_TRUE(Matches(response->get_header_value("RateLimit"), (quoted + ";r=0;t=[0-9]+").c_str()))
      << "RateLimit: " << response->get_header_value("RateLimit");
  EXPECT_TRUE(
      Matches(response->get_header_value("RateLimit-Policy"), (quoted + ";q=[0-9]+;w=[0-9]+").c_str()))
      << "RateLimit-Policy: " << response->get_header_value("RateLimit-Policy");
  EXPECT_EQ(response->get_header_value("X-RateLimit-Remaining"), "0");
  EXPECT_TRUE(response->has_header("X-RateLimit-Limit"));
  EXPECT_TRUE(response->has_header("X-RateLimit-Reset"));
}

// Posts `count` messages for `user`, each of which must be granted.
void PostGrantedMessages(const std::string& user, int count) {
  for (int i = 0; i < count; ++i) {
    httplib::Result response =
        Post("/messages", json{{"user", user}, {"text", "hello " + std::to_string(i)}});
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    ASSERT_EQ(response->status, 201) << response->body;
  }
}

TEST(HttpApi, HealthzAnswers200) {
  httplib::Result response = Client().Get("/healthz");
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(Body(response).at("status"), "ok");
}

TEST(HttpApi, MessagesCountDownThenRefuseStoringNothing) {
  const std::string user = Unique("countdown");
  const int capacity = Capacity(g_messages_limit);
  long previous_remaining = capacity;
  for (int i = 0; i < capacity; ++i) {
    httplib::Result response = Post("/messages", json{{"user", user}, {"text", "hello"}});
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    ASSERT_EQ(response->status, 201) << response->body;
    EXPECT_TRUE(Body(response).at("id").is_number_integer());
    long remaining = IntHeader(response, "X-RateLimit-Remaining");
    EXPECT_LT(remaining, previous_remaining) << "remaining must go down with every success";
    EXPECT_GE(remaining, 0);
    previous_remaining = remaining;
    EXPECT_EQ(IntHeader(response, "X-RateLimit-Limit"), capacity);
    EXPECT_FALSE(response->has_header("Retry-After")) << "a grant to run now has no Retry-After";
    EXPECT_TRUE(Matches(response->get_header_value("RateLimit-Policy"), "\"messages\";q=[0-9]+;w=[0-9]+"));
  }
  EXPECT_EQ(previous_remaining, 0);
  ASSERT_EQ(MessagesOf(user), capacity);

  const std::string state_before = LimitState("messages", user);
  for (int i = 0; i < 3; ++i)
    ExpectRefusal(Post("/messages", json{{"user", user}, {"text", "spam"}}), "messages");
  EXPECT_EQ(MessagesOf(user), capacity) << "a refused request must store no message";
  EXPECT_EQ(LimitState("messages", user), state_before) << "a refusal must write nothing in the limiter";
}

TEST(HttpApi, MessagesLimitIsPerUser) {
  const std::string spammer = Unique("spammer");
  const std::string bystander = Unique("bystander");
  PostGrantedMessages(spammer, Capacity(g_messages_limit));
  ExpectRefusal(Post("/messages", json{{"user", spammer}, {"text", "more"}}), "messages");

  httplib::Result response = Post("/messages", json{{"user", bystander}, {"text", "hi"}});
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 201) << response->body;
  EXPECT_EQ(IntHeader(response, "X-RateLimit-Remaining"), Capacity(g_messages_limit) - 1);
}

// Concurrent requests of one user: the limit's row lock lets exactly
// `capacity` of them through, however they interleave.
TEST(HttpApi, ConcurrentRequestsNeverExceedTheLimit) {
  const std::string user = Unique("concurrent");
  const int capacity = Capacity(g_messages_limit);
  const int requests = 4 * capacity + 4;
  std::atomic<int> created{0}, refused{0}, other{0};
  std::mutex other_lock;
  std::string others;  // what the other answers were, for the failure message
  std::vector<std::thread> clients;
  clients.reserve(requests);
  for (int i = 0; i < requests; ++i) {
    clients.emplace_back([&] {
      httplib::Result response = Post("/messages", json{{"user", user}, {"text", "race"}});
      int status = response ? response->status : 0;
      (status == 201 ? created : status == 429 ? refused : other)++;
      if (status == 201 || status == 429) return;
      std::lock_guard<std::mutex> guard(other_lock);
      others += response ? std::to_string(status) + " " + response->body + "; "
                         : "no response: " + httplib::to_string(response.error()) + "; ";
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(created, capacity);
  EXPECT_EQ(refused, requests - capacity);
  EXPECT_EQ(other, 0) << others;
  EXPECT_EQ(MessagesOf(user), capacity);
}

// One limit for the whole app (key NULL): different emails share it. A
// repeated email answers 409 and rolls back, giving its token back.
TEST(HttpApi, SignupLimitIsGlobalAcrossEmails) {
  const int quota = Capacity(g_signup_limit);
  const std::string domain = "@" + Unique("signup") + ".example";
  auto signup = [](const std::string& email) { return Post("/signup", json{{"email", email}}); };

  httplib::Result first = signup("user0" + domain);
  ASSERT_TRUE(first) << httplib::to_string(first.error());
  ASSERT_EQ(first->status, 201) << first->body;
  EXPECT_EQ(IntHeader(first, "X-RateLimit-Remaining"), quota - 1);

  httplib::Result again = signup("user0" + domain);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409) << again->body;

  for (int i = 1; i < quota; ++i) {
    httplib::Result response = signup("user" + std::to_string(i) + domain);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    ASSERT_EQ(response->status, 201) << "email " << i << " of " << quota << ": " << response->body;
    EXPECT_EQ(IntHeader(response, "X-RateLimit-Remaining"), quota - 1 - i) << "the 409 must not use a token";
  }
  ExpectRefusal(signup("late" + domain), "signup");
  ExpectRefusal(signup("later" + domain), "signup");

  EXPECT_EQ(QueryValue<long>("SELECT count(*) FROM signups WHERE email LIKE '%' || $1", domain), quota);
  EXPECT_EQ(QueryValue<long>("SELECT count(*) FROM signups WHERE email = $1", "late" + domain), 0);
}

// A token bucket with maxReserved: a full bucket runs the work now (201); an
// empty one reserves the tokens and schedules the work for when they refill
// (202); beyond maxReserved the request is refused (429).
TEST(HttpApi, CompletionsRunNowThenScheduleThenRefuse) {
  const std::string user = Unique("completions");
  const int capacity = Capacity(g_completions_limit);
  const int reservable = g_completions_limit.at("maxReserved").get<int>();
  ASSERT_GT(reservable, 0) << "the e2e config needs maxReserved";

  httplib::Result now = Post("/completions", json{{"user", user}, {"tokens", capacity}});
  ASSERT_TRUE(now) << httplib::to_string(now.error());
  ASSERT_EQ(now->status, 201) << now->body;
  EXPECT_FALSE(now->has_header("Retry-After"));
  std::string now_at = Body(now).at("scheduled_at");
  EXPECT_TRUE(QueryValue<bool>("SELECT $1::timestamptz <= now()", now_at)) << now_at;

  httplib::Result later = Post("/completions", json{{"user", user}, {"tokens", reservable}});
  ASSERT_TRUE(later) << httplib::to_string(later.error());
  ASSERT_EQ(later->status, 202) << later->body;
  json body = Body(later);
  EXPECT_GT(body.at("retry_after").get<double>(), 0);
  EXPECT_TRUE(Matches(later->get_header_value("Retry-After"), "[1-9][0-9]*"));
  std::string later_at = body.at("scheduled_at");
  EXPECT_TRUE(QueryValue<bool>("SELECT $1::timestamptz > now()", later_at)) << later_at;
  EXPECT_EQ(QueryValue<long>("SELECT count(*) FROM completions WHERE user_id = $1 AND scheduled_at = $2",
                             user, later_at),
            1)
      << "the completion must be stored with scheduled_at = retry_at";

  ExpectRefusal(Post("/completions", json{{"user", user}, {"tokens", 1}}), "completions");
  EXPECT_EQ(CompletionsOf(user), 2) << "a refused request must store nothing";
}

TEST(HttpApi, BadInputIs400) {
  const std::string user = Unique("bad-input");
  const int too_many = Capacity(g_completions_limit) + g_completions_limit.at("maxReserved").get<int>() + 1;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/messages", "{\"user\": "},
      {"/messages", "[]"},
      {"/messages", ""},
      {"/messages", json{{"text", "no user"}}.dump()},
      {"/messages", json{{"user", user}}.dump()},
      {"/messages", json{{"user", ""}, {"text", "empty user"}}.dump()},
      {"/messages", json{{"user", user}, {"text", 42}}.dump()},
      {"/messages", json{{"user", user}, {"text", std::string("a\0b", 3)}}.dump()},
      {"/signup", json{{"email", "no-at-sign"}}.dump()},
      {"/signup", json::object().dump()},
      {"/completions", json{{"user", user}, {"tokens", "5"}}.dump()},
      {"/completions", json{{"user", user}, {"tokens", 0}}.dump()},
      {"/completions", json{{"user", user}, {"tokens", 1.5}}.dump()},
      {"/completions", json{{"user", user}}.dump()},
      {"/completions", json{{"user", user}, {"tokens", too_many}}.dump()},  // more than the limit can grant
  };
  for (const auto& [path, body] : cases) {
    httplib::Result response = Post(path, body);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    EXPECT_EQ(response->status, 400) << path << " " << body << " -> " << response->body;
    EXPECT_TRUE(json::parse(response->body, nullptr, false).value("error", json()).is_string())
        << path << " " << body << " -> " << response->body;
  }
  EXPECT_EQ(MessagesOf(user), 0);
  EXPECT_EQ(CompletionsOf(user), 0);
}

// A database error after the limit call: 500, and the transaction's rollback
// gives the token back. The service keeps serving on the same connections.
TEST(HttpApi, DatabaseErrorIs500AndReturnsTheToken) {
  const std::string user = Unique("db-error");
  const std::string trigger_sql = R"(
    CREATE FUNCTION e2e_fail_insert() RETURNS trigger LANGUAGE plpgsql AS
      $$BEGIN RAISE EXCEPTION 'e2e: insert refused by trigger'; END$$;
    CREATE TRIGGER e2e_fail_insert BEFORE INSERT ON messages FOR EACH ROW
      WHEN (NEW.user_id LIKE 'e2e-%-db-error') EXECUTE FUNCTION e2e_fail_insert())";
  pqxx::connection conn("");
  pqxx::nontransaction(conn).exec(trigger_sql);

  httplib::Result failed = Post("/messages", json{{"user", user}, {"text", "boom"}});
  pqxx::nontransaction(conn).exec(
      "DROP TRIGGER e2e_fail_insert ON messages; DROP FUNCTION e2e_fail_insert()");
  ASSERT_TRUE(failed) << httplib::to_string(failed.error());
  EXPECT_EQ(failed->status, 500) << failed->body;
  EXPECT_TRUE(Body(failed).at("error").is_string());
  EXPECT_EQ(LimitState("messages", user), "") << "the rolled-back call must leave no limiter row";

  httplib::Result retried = Post("/messages", json{{"user", user}, {"text", "boom again"}});
  ASSERT_TRUE(retried) << httplib::to_string(retried.error());
  EXPECT_EQ(retried->status, 201) << retried->body;
  EXPECT_EQ(IntHeader(retried, "X-RateLimit-Remaining"), Capacity(g_messages_limit) - 1);
  EXPECT_EQ(MessagesOf(user), 1);
}

// The playground's page is one self-contained document: nothing in it is
// fetched from elsewhere, and its Content-Security-Policy forbids it anyway.
TEST(HttpApi, PlaygroundServesASelfContainedPage) {
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
  for (const char* outside : {"src=", "href=", "<link", "@import", "https:"})
    EXPECT_EQ(page.find(outside), std::string::npos) << "the page refers to something outside: " << outside;
}

// Each kind's dots are ratelimit_simulate's answers for the same config and
// arrivals, queried here directly; the level probes take nothing.
TEST(HttpApi, PlaygroundSimulateIsTheDatabasesAnswer) {
  json arrivals = json::array({50, 100, 200, 300, 9900, 9950, 10000, 10050, 10100, 15000, 25000});
  json request{{"rate", 3},    {"period", 10000}, {"capacity", 4}, {"arrivals", arrivals},
               {"samples", 7}, {"span", 30000}};
  httplib::Result response = Post("/playground/simulate", request);
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  ASSERT_EQ(response->status, 200) << response->body;
  json body = Body(response);
  ASSERT_EQ(body.at("algorithms").size(), 3u);
  std::vector<std::string> kinds;
  pqxx::connection conn("");
  pqxx::nontransaction tx(conn);
  int refused = 0;
  for (const json& algorithm : body.at("algorithms")) {
    kinds.push_back(algorithm.at("kind"));
    const json& config = algorithm.at("config");
    EXPECT_EQ(config.at("kind"), algorithm.at("kind"));
    EXPECT_EQ(config.at("rate"), 3);
    EXPECT_EQ(config.at("period"), 10000);
    pqxx::result expected = tx.exec_params(
        "SELECT ok, remaining, retry_after FROM ratelimit_simulate($1::jsonb, "
        "ARRAY(SELECT $2::timestamptz + t::bigint * interval '1 millisecond' "
        "FROM jsonb_array_elements_text($3::jsonb) WITH ORDINALITY a(t, i) ORDER BY i))",
        config.dump(), body.at("origin").get<std::string>(), arrivals.dump());
    const json& calls = algorithm.at("calls");
    ASSERT_EQ(calls.size(), expected.size()) << algorithm.at("kind");
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].at("t"), arrivals[i]) << algorithm.at("kind") << " #" << i;
      EXPECT_EQ(calls[i].at("ok"), expected[i][0].as<bool>()) << algorithm.at("kind") << " #" << i;
      EXPECT_DOUBLE_EQ(calls[i].at("remaining").get<double>(), expected[i][1].as<double>());
      EXPECT_EQ(calls[i].at("retry_after").is_null(), expected[i][2].is_null());
      refused += !expected[i][0].as<bool>();
    }
    ASSERT_EQ(algorithm.at("levels").size(), 7u);
    EXPECT_EQ(algorithm.at("levels")[0].at("t"), 0);
    EXPECT_EQ(algorithm.at("levels")[6].at("t"), 30000);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"token bucket", "fixed window", "sliding window"}));
  EXPECT_GT(refused, 0) << "the arrivals must be over the limit somewhere";
  const json& bucket = body.at("algorithms")[0];
  EXPECT_EQ(bucket.at("config").at("capacity"), 4);
  EXPECT_EQ(bucket.at("levels")[0].at("remaining"), 4) << "a full bucket before any arrival";
}

// The Hit button's endpoint: one real ratelimit_limit call per kind, under
// a key of the page's session; past the capacity, refused with retry_after.
TEST(HttpApi, PlaygroundHitIsARealLimit) {
  json request{{"session", Unique("hit")}, {"origin", 1767225600000}, {"rate", 2}, {"period", 3600000}};
  json last;
  for (int i = 0; i < 3; ++i) {
    httplib::Result response = Post("/playground/hit", request);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    ASSERT_EQ(response->status, 200) << response->body;
    last = Body(response);
    ASSERT_EQ(last.at("hits").size(), 3u);
    for (const json& hit : last.at("hits")) EXPECT_EQ(hit.at("ok"), i < 2) << hit.dump();
  }
  for (const json& hit : last.at("hits")) {
    EXPECT_GT(hit.at("retry_after").get<double>(), 0) << hit.dump();
    EXPECT_NE(LimitState("playground", hit.at("key")), "") << "the limit's row is in ratelimit_state";
  }
}

// Bad input is a 400 with a JSON error: the service's own checks, and the
// extension's 22023 (arrivals out of order, counts of another length, a bad
// config). A refused hit writes nothing.
TEST(HttpApi, PlaygroundBadInputIs400WritingNothing) {
  auto body = [](json fields) {
    json request{{"rate", 2}, {"period", 10000}};
    request.update(fields);
    return request.dump();
  };
  const std::string session = Unique("bad-hit");
  const std::int64_t origin = 1767225600000;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/playground/simulate", "{"},
      {"/playground/simulate", "[]"},
      {"/playground/simulate", body({{"arrivals", json::array()}})},
      {"/playground/simulate", body({{"arrivals", {-1}}})},
      {"/playground/simulate", body({{"arrivals", {1.5}}})},
      {"/playground/simulate", body({{"arrivals", "1"}})},
      {"/playground/simulate", body({{"arrivals", std::vector<int>(2001, 0)}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"rate", "2"}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"period", nullptr}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"counts", {"1"}}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"samples", 5}})},  // without span
      {"/playground/simulate", body({{"arrivals", {1}}, {"samples", 401}, {"span", 10}})},
      {"/playground/simulate", body({{"arrivals", {2, 1}}})},
      {"/playground/simulate", body({{"arrivals", {1, 2}}, {"counts", {1}}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"counts", {-1}}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"rate", 0}})},
      {"/playground/simulate", body({{"arrivals", {1}}, {"capacity", -1}})},
      {"/playground/hit", body({{"origin", origin}})},
      {"/playground/hit", body({{"session", "a b"}, {"origin", origin}})},
      {"/playground/hit", body({{"session", std::string(65, 'a')}, {"origin", origin}})},
      {"/playground/hit", body({{"session", session}})},
      {"/playground/hit", body({{"session", session}, {"origin", -1}})},
      {"/playground/hit", body({{"session", session}, {"origin", origin}, {"period", -5}})},
      {"/playground/hit", body({{"session", session}, {"origin", origin}, {"rate", 0}})},
  };
  const std::string rows = "SELECT count(*) FROM ratelimit_state WHERE name = 'playground'";
  const long before = QueryValue<long>(rows);
  for (const auto& [path, request] : cases) {
    httplib::Result response = Post(path, request);
    ASSERT_TRUE(response) << httplib::to_string(response.error());
    EXPECT_EQ(response->status, 400) << path << " " << request << " -> " << response->body;
    EXPECT_TRUE(json::parse(response->body, nullptr, false).value("error", json()).is_string())
        << path << " " << request << " -> " << response->body;
  }
  EXPECT_EQ(QueryValue<long>(rows), before);
  // The extension's own message comes through.
  httplib::Result unordered = Post("/playground/simulate", body({{"arrivals", {2, 1}}}));
  ASSERT_TRUE(unordered);
  EXPECT_NE(Body(unordered).at("error").get<std::string>().find("order"), std::string::npos)
      << unordered->body;
}

// The value of a required environment variable, or exits with a message.
std::string RequiredEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    std::cerr << "test_e2e: " << name << " is not set (run examples/http-api/run-e2e.sh)" << std::endl;
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_port = std::stoi(RequiredEnv("HTTP_API_E2E_PORT"));
  g_messages_limit = json::parse(RequiredEnv("HTTP_API_MESSAGES_LIMIT"));
  g_signup_limit = json::parse(RequiredEnv("HTTP_API_SIGNUP_LIMIT"));
  g_completions_limit = json::parse(RequiredEnv("HTTP_API_COMPLETIONS_LIMIT"));
  return RUN_ALL_TESTS();
}
