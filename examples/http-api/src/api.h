// The HTTP endpoints: what each request does in the database, and how the
// answer maps to a status, a JSON body and headers.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "pool.h"

namespace http_api {

// HTTP response headers: name, value.
using Headers = std::vector<std::pair<std::string, std::string>>;

// What an endpoint answers, before it is written to the HTTP response.
struct Reply {
  int status = 200;
  nlohmann::json body;
  Headers headers;
};

// Input the client must fix: answered 400 {"error": message, "field": field},
// "field" naming the request's field at fault when there is one.
class BadRequest : public std::runtime_error {
 public:
  explicit BadRequest(const std::string& message, std::string field = "")
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

class Api {
 public:
  // limiter false: the same transactions without the limit calls (what the
  // benchmark compares against).
  Api(ConnectionPool& pool, bool limiter) : pool_(pool), limiter_(limiter) {}

  // POST /messages {"user", "text"}: 201 {"id"}; per-user limit.
  Reply PostMessage(const nlohmann::json& request);

  // POST /signup {"email"}: 201 {"id"}, 409 if signed up already; one global limit.
  Reply PostSignup(const nlohmann::json& request);

  // POST /completions {"user", "tokens"}: 201 {"id", "scheduled_at"} to run
  // now, 202 {"id", "scheduled_at", "retry_after"} to run later.
  Reply PostCompletion(const nlohmann::json& request);

  // GET /healthz: 200 when the database answers, else 503.
  Reply Health();

 private:
  ConnectionPool& pool_;
  const bool limiter_;
};

// An error answer: {"error": message}.
Reply ErrorReply(int status, const std::string& message);

// Runs `work` in a transaction on a pooled connection. `work` commits when it
// should; leaving without a commit rolls everything back, the limit's
// consumption included. A connection that broke is dropped from the pool.
Reply InTransaction(ConnectionPool& pool, const std::function<Reply(pqxx::work&)>& work);

class JsonRoutes;

// Routes the endpoints of `api`: the POST ones through `routes`, GET /healthz
// on `server`. Every answer is JSON: 400 for bad input, 413 for a body over
// the bound, 500 (logged to stderr) for any other failure; 429 when limited.
void RegisterRoutes(httplib::Server& server, JsonRoutes& routes, Api& api);

}  // namespace http_api
