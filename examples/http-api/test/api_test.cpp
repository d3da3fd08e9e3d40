// End-to-end tests of the service's endpoints (POST /messages, /signup,
// /completions, GET /healthz): status codes, the limit's headers, and what
// the database stored (see e2e.h for how they run).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e.h"

namespace {

using namespace e2e;

long MessagesOf(const std::string& user) {
  return QueryValue<long>("SELECT count(*) FROM messages WHERE user_id = $1", user);
}

long CompletionsOf(const std::string& user) {
  return QueryValue<long>("SELECT count(*) FROM completions WHERE user_id = $1", user);
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
  const int capacity = Capacity(g_service.messages_limit);
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
  PostGrantedMessages(spammer, Capacity(g_service.messages_limit));
  ExpectRefusal(Post("/messages", json{{"user", spammer}, {"text", "more"}}), "messages");

  httplib::Result response = Post("/messages", json{{"user", bystander}, {"text", "hi"}});
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 201) << response->body;
  EXPECT_EQ(IntHeader(response, "X-RateLimit-Remaining"), Capacity(g_service.messages_limit) - 1);
}

// The service's accept queue holds a burst of new connections: its listen
// backlog (ss's Send-Q for a listening socket) is the kernel's somaxconn,
// not httplib's 5 (which made the concurrent test below flaky).
TEST(HttpApi, ListensWithTheKernelsBacklog) {
  std::string command = "ss -ltnH 'sport = :" + std::to_string(g_service.port) + "'";
  FILE* ss = popen(command.c_str(), "r");
  ASSERT_NE(ss, nullptr);
  char line[512] = "";
  bool read = std::fgets(line, sizeof line, ss) != nullptr;
  pclose(ss);
  ASSERT_TRUE(read) << command << " printed nothing";
  std::istringstream fields(line);
  std::string state;
  long queued = -1, backlog = -1;
  fields >> state >> queued >> backlog;
  EXPECT_EQ(state, "LISTEN") << line;
  EXPECT_GE(backlog, 128) << line;
}

// Concurrent requests of one user: the limit's row lock lets exactly
// `capacity` of them through, however they interleave.
TEST(HttpApi, ConcurrentRequestsNeverExceedTheLimit) {
  const std::string user = Unique("concurrent");
  const int capacity = Capacity(g_service.messages_limit);
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
  const int quota = Capacity(g_service.signup_limit);
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
  const int capacity = Capacity(g_service.completions_limit);
  const int reservable = g_service.completions_limit.at("maxReserved").get<int>();
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
  const int too_many =
      Capacity(g_service.completions_limit) + g_service.completions_limit.at("maxReserved").get<int>() + 1;
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
  EXPECT_EQ(IntHeader(retried, "X-RateLimit-Remaining"), Capacity(g_service.messages_limit) - 1);
  EXPECT_EQ(MessagesOf(user), 1);
}

}  // namespace
