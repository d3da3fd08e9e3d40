// The playground: GET /playground, a page that shows the three algorithms
// side by side for one config and one traffic pattern (the smudge.ai
// article's pictures), drawn from the extension's own answers; and the two
// JSON endpoints the page calls.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api.h"
#include "pool.h"

namespace http_api {

// The page, HTML with its SVG and JavaScript inline (playground/index.html,
// embedded at build time).
extern const char kPlaygroundPage[];

class Playground {
 public:
  explicit Playground(ConnectionPool& pool) : pool_(pool) {}

  // POST /playground/simulate {"rate", "period", "capacity"?, "start"?,
  // "arrivals", "counts"?, "samples"?, "from"?, "span"?}: ratelimit_simulate
  // over the arrivals for each of the three kinds, and the level at probes;
  // 200 {"origin", "origin_ms", "period_ms", "start_ms", "algorithms": [...]}.
  Reply Simulate(const nlohmann::json& request);

  // POST /playground/hit {"session", "origin", "rate", "period",
  // "capacity"?, "start"?}: one real ratelimit_limit call per kind, in one
  // transaction; 200 {"hits": [...], "headers"} with the three limits'
  // headers; 503 when the service admits no new playground key now.
  Reply Hit(const nlohmann::json& request);

 private:
  ConnectionPool& pool_;
};

class JsonRoutes;

// Routes GET /playground on `server` and the endpoints above through `routes`.
void RegisterPlaygroundRoutes(httplib::Server& server, JsonRoutes& routes, Playground& playground);

}  // namespace http_api
