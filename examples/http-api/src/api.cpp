#include "api.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "routes.h"
#include "store.h"

namespace http_api {
namespace {

using nlohmann::json;

// Input bounds: well under what PostgreSQL or the extension would reject
// (a limit key is at most 1024 bytes), so that bad input is a 400, not a 500.
constexpr std::size_t kMaxUserBytes = 256;
constexpr std::size_t kMaxEmailBytes = 320;
constexpr std::size_t kMaxTextBytes = 10000;
constexpr std::int64_t kMaxTokens = 1000000;

// SQLSTATE of a count the limit can never grant (more than capacity plus maxReserved).
constexpr char kInvalidParameterValue[] = "22023";

// The string field `name` of the request: present, non-empty, at most
// `max_bytes`, and without NUL (PostgreSQL text cannot hold one).
std::string RequireString(const json& request, const char* name, std::size_t max_bytes) {
  auto field = request.find(name);
  if (field == request.end() || !field->is_string())
    throw BadRequest(std::string("field \"") + name + "\" must be a string", name);
  const std::string& value = field->get_ref<const std::string&>();
  if (value.empty() || value.size() > max_bytes || value.find('\0') != std::string::npos)
    throw BadRequest(std::string("field \"") + name + "\" must be 1 to " + std::to_string(max_bytes) +
                         " bytes without NUL",
                     name);
  return value;
}

// The integer field `name`, from 1 to `max`.
int RequireCount(const json& request, const char* name, std::int64_t max) {
  auto field = request.find(name);
  if (field == request.end() || !field->is_number_integer() || *field < 1 || *field > max)
    throw BadRequest(
        std::string("field \"") + name + "\" must be an integer from 1 to " + std::to_string(max), name);
  return field->get<int>();
}

std::string RequireEmail(const json& request) {
  std::string email = RequireString(request, "email", kMaxEmailBytes);
  if (email.find('@') == std::string::npos)
    throw BadRequest("field \"email\" must be an email address", "email");
  return email;
}

// The limit's headers, sent on every answer the limit decided.
Headers HeaderList(const json& headers) {
  Headers list;
  for (const auto& [name, value] : headers.items()) list.emplace_back(name, value.get<std::string>());
  return list;
}

// 429: nothing was stored, and the limit took nothing.
Reply Refused(const Verdict& verdict) {
  return Reply{429, json{{"error", "rate limited"}, {"retry_after", verdict.retry_after.value_or(0)}},
               HeaderList(verdict.headers)};
}

// A reply with the verdict's headers (none without the limiter).
Reply Granted(int status, json body, const std::optional<Verdict>& verdict) {
  return Reply{status, std::move(body), verdict ? HeaderList(verdict->headers) : Headers{}};
}

// Runs `use` on a pooled connection; a connection that broke is dropped
// from the pool instead of being lent again.
Reply WithConnection(ConnectionPool& pool, const std::function<Reply(pqxx::connection&)>& use) {
  ConnectionPool::Lease lease = pool.Acquire();
  try {
    return use(*lease);
  } catch (const pqxx::broken_connection&) {
    lease.Discard();
    throw;
  }
}

}  // namespace

Reply ErrorReply(int status, const std::string& message) {
  return Reply{status, json{{"error", message}}, {}};
}

Reply InTransaction(ConnectionPool& pool, const std::function<Reply(pqxx::work&)>& work) {
  return WithConnection(pool, [&](pqxx::connection& conn) {
    pqxx::work tx(conn);
    return work(tx);
  });
}

Reply Api::PostMessage(const json& request) {
  std::string user = RequireString(request, "user", kMaxUserBytes);
  std::string text = RequireString(request, "text", kMaxTextBytes);
  return InTransaction(pool_, [&](pqxx::work& tx) {
    std::optional<Verdict> verdict;
    if (limiter_) {
      verdict = LimitMessage(tx, user);
      if (!verdict->ok) return Refused(*verdict);
    }
    std::int64_t id = InsertMessage(tx, user, text);
    tx.commit();
    return Granted(201, json{{"id", id}}, verdict);
  });
}

Reply Api::PostSignup(const json& request) {
  std::string email = RequireEmail(request);
  return InTransaction(pool_, [&](pqxx::work& tx) {
    std::optional<Verdict> verdict;
    if (limiter_) {
      verdict = LimitSignup(tx);
      if (!verdict->ok) return Refused(*verdict);
    }
    std::optional<std::int64_t> id = InsertSignup(tx, email);
    // Not committed: the token taken above goes back to the limit.
    if (!id) return ErrorReply(409, "email already signed up");
    tx.commit();
    return Granted(201, json{{"id", *id}}, verdict);
  });
}

Reply Api::PostCompletion(const json& request) {
  std::string user = RequireString(request, "user", kMaxUserBytes);
  int tokens = RequireCount(request, "tokens", kMaxTokens);
  return InTransaction(pool_, [&](pqxx::work& tx) {
    std::optional<Verdict> verdict;
    if (limiter_) {
      try {
        verdict = LimitCompletion(tx, user, tokens);
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kInvalidParameterValue) throw;
        Reply reply = ErrorReply(400, "field \"tokens\" is more than the limit can ever grant");
        reply.body["field"] = "tokens";
        return reply;
      }
      if (!verdict->ok) return Refused(*verdict);
    }
    // Granted with a retry time: the tokens are reserved, the work runs then.
    std::optional<std::string> run_at = verdict ? verdict->retry_at : std::nullopt;
    Completion completion = InsertCompletion(tx, user, tokens, run_at);
    tx.commit();
    json body{{"id", completion.id}, {"scheduled_at", completion.scheduled_at}};
    if (!run_at) return Granted(201, std::move(body), verdict);
    body["retry_after"] = verdict->retry_after.value_or(0);
    return Granted(202, std::move(body), verdict);
  });
}

Reply Api::Health() {
  return WithConnection(pool_, [](pqxx::connection& conn) {
    Ping(conn);
    return Reply{200, json{{"status", "ok"}}, {}};
  });
}

void RegisterRoutes(httplib::Server& server, JsonRoutes& routes, Api& api) {
  routes.Post("/messages", [&api](const json& request) { return api.PostMessage(request); });
  routes.Post("/signup", [&api](const json& request) { return api.PostSignup(request); });
  routes.Post("/completions", [&api](const json& request) { return api.PostCompletion(request); });
  server.Get("/healthz", [&api](const httplib::Request& http, httplib::Response& response) {
    auto answer = [&] { return api.Health(); };
    Write(Answer(http, answer, ErrorReply(503, "database unavailable")), response);
  });
}

}  // namespace http_api
