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

// Input the client must fix: answered 400 with the message.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

// A POST handler taking a JSON object: 400 for malformed JSON, a body that is
// not an object or a BadRequest thrown by `endpoint`; 500 (logged to stderr)
// for any other failure.
httplib::Server::Handler JsonPost(std::function<Reply(const nlohmann::json&)> endpoint);

// Routes the endpoints of `api` on `server`. Every answer is JSON: 400 for
// bad input, 500 (logged to stderr) for any other failure; 429 when limited.
void RegisterRoutes(httplib::Server& server, Api& api);

}  // namespace http_api
