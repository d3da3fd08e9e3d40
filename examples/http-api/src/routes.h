// The JSON POST routes and how their bodies are read: at most kMaxBodyBytes,
// counted after any Content-Encoding is undone, and a body declared larger
// refused before a byte of it is read. Every other request that carries a
// body is answered without reading it.
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api.h"

namespace http_api {

// The largest request body the service reads: 64 KiB, enough for the
// largest playground request (2,000 arrivals) and a 10,000-byte message.
inline constexpr std::size_t kMaxBodyBytes = 64 * 1024;

// Writes `reply` (JSON) as the answer to a request.
void Write(const Reply& reply, httplib::Response& response);

// The endpoint's reply. Bad input is a 400; any other failure is logged and
// answered `on_failure`, so that no request can take the server down.
Reply Answer(const httplib::Request& http, const std::function<Reply()>& endpoint, const Reply& on_failure);

class JsonRoutes {
 public:
  // Installs on `server` the checks every request passes before its body is
  // read (the pre-routing and 100-continue handlers). Register the routes
  // with Post() before the server listens.
  explicit JsonRoutes(httplib::Server& server);
  JsonRoutes(const JsonRoutes&) = delete;
  JsonRoutes& operator=(const JsonRoutes&) = delete;

  // POST `path` {JSON object}: `endpoint`'s reply; 400 for malformed JSON, a
  // body that is not an object, or a BadRequest thrown by `endpoint`; 413 for
  // a body over kMaxBodyBytes; 500 (logged to stderr) for any other failure.
  void Post(const std::string& path, std::function<Reply(const nlohmann::json&)> endpoint);

 private:
  // What a request must be refused before its body is read, if anything.
  bool RefusedUnread(const httplib::Request& request, httplib::Response& response) const;

  httplib::Server& server_;
  std::set<std::string> paths_;  // filled before listening, only read after
};

}  // namespace http_api
