#include "playground.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "playground_input.h"
#include "routes.h"
#include "store.h"

namespace http_api {
namespace {

using nlohmann::json;

// The simulated timeline starts here, and the window kinds' windows are
// aligned to it (plus the controls' start), so that the page can draw their
// edges: 2026-01-01T00:00:00Z.
constexpr std::int64_t kOriginMs = 1767225600000;
constexpr char kOriginText[] = "2026-01-01T00:00:00Z";

// Window edges probed at most, per simulation (a short period over a long span has more).
constexpr std::int64_t kMaxEdgeProbes = 1000;

// The extension's SQLSTATE for a bad config, count or arrival: the client's
// input, so a 400.
constexpr char kInvalidParameterValue[] = "22023";

constexpr const char* kKinds[] = {"token bucket", "fixed window", "sliding window"};

// The config of `kind` for the controls: the bucket takes the capacity; the
// windows are the article's (rate per window, no rollover), starting at
// `origin_ms` plus the controls' start.
json ConfigFor(const char* kind, const Controls& controls, std::int64_t origin_ms) {
  json config{{"kind", kind}, {"rate", controls.rate}, {"period", controls.period}};
  if (std::string(kind) == "token bucket") {
    if (!controls.capacity.is_null()) config["capacity"] = controls.capacity;
  } else {
    config["start"] = IsoTimestamp(static_cast<double>(origin_ms) + controls.start_ms);
  }
  return config;
}

json OptionalJson(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

json CallsJson(const std::vector<SimulatedCall>& calls) {
  json list = json::array();
  for (const SimulatedCall& call : calls) {
    list.push_back({{"t", call.t},
                    {"count", call.count},
                    {"ok", call.ok},
                    {"remaining", OptionalJson(call.remaining)},
                    {"retry_after", OptionalJson(call.retry_after)}});
  }
  return list;
}

// `samples` times evenly spread over [from, span].
void AddSamples(const ProbeRequest& request, std::vector<std::int64_t>& times) {
  for (std::int64_t i = 0; i < request.samples; ++i) {
    double step = request.samples == 1 ? 0 : double(request.span - request.from) * i / (request.samples - 1);
    times.push_back(request.from + std::llround(step));
  }
}

// Just before and at each window edge in [from, span], when there are at
// most kMaxEdgeProbes: a window's count drops to 0 between the two.
void AddEdges(const ProbeRequest& request, const Controls& controls, std::vector<std::int64_t>& times) {
  const double period = controls.period_ms, start = controls.start_ms;
  const double first = std::ceil((request.from - start) / period);
  const double last = std::floor((request.span - start) / period);
  if (last < first || last - first + 1 > kMaxEdgeProbes) return;
  for (double k = first; k <= last; ++k) {
    std::int64_t edge = static_cast<std::int64_t>(std::ceil(start + k * period));
    if (edge <= request.span) times.push_back(edge);
    if (edge - 1 >= request.from) times.push_back(edge - 1);
  }
}

// The probe times: the samples, and just before and at each arrival and
// window edge within [from, span], so that a picture drawn through them
// drops where the limit does; in order, each once.
std::vector<std::int64_t> ProbeTimes(const ProbeRequest& request, const std::vector<std::int64_t>& arrivals,
                                     const Controls& controls) {
  std::vector<std::int64_t> times;
  if (request.samples == 0) return times;
  AddSamples(request, times);
  for (std::int64_t arrival : arrivals) {
    if (arrival < request.from || arrival > request.span) continue;
    times.push_back(arrival);
    if (arrival - 1 >= request.from) times.push_back(arrival - 1);
  }
  AddEdges(request, controls, times);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

// The limit's level between arrivals: the arrivals again, with probes of
// count 0 (which take nothing) merged in after the arrivals at the same
// time; the probes' remaining, over time.
json Levels(pqxx::work& tx, const json& config, const std::vector<std::int64_t>& arrivals,
            const std::vector<double>& counts, const std::vector<std::int64_t>& probes) {
  json offsets = json::array(), merged_counts = json::array();
  std::vector<bool> is_probe;
  std::size_t a = 0, p = 0;
  while (a < arrivals.size() || p < probes.size()) {
    bool take_arrival = p == probes.size() || (a < arrivals.size() && arrivals[a] <= probes[p]);
    offsets.push_back(take_arrival ? arrivals[a] : probes[p]);
    merged_counts.push_back(take_arrival ? counts[a] : 0.0);
    is_probe.push_back(!take_arrival);
    ++(take_arrival ? a : p);
  }
  std::vector<SimulatedCall> calls =
      Simulate(tx, config.dump(), offsets.dump(), merged_counts.dump(), kOriginMs);
  json levels = json::array();
  for (std::size_t i = 0; i < calls.size() && i < is_probe.size(); ++i) {
    if (is_probe[i]) levels.push_back({{"t", calls[i].t}, {"remaining", OptionalJson(calls[i].remaining)}});
  }
  return levels;
}

// The server's message of an error, without its "ERROR:" and detail lines.
std::string ServerMessage(const pqxx::sql_error& e) {
  std::string message = e.what();
  message = message.substr(0, message.find('\n'));
  const std::string prefix = "ERROR:";
  if (message.compare(0, prefix.size(), prefix) == 0)
    message.erase(0, message.find_first_not_of(' ', prefix.size()));
  return message;
}

// Runs `work` in a transaction; the extension's 22023 (bad config, arrivals
// out of order, ...) is a 400 with its message, and rolls everything back.
Reply InTransactionBadInputIs400(ConnectionPool& pool, const std::function<Reply(pqxx::work&)>& work) {
  return InTransaction(pool, [&](pqxx::work& tx) {
    try {
      return work(tx);
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != kInvalidParameterValue) throw;
      return ErrorReply(400, ServerMessage(e));
    }
  });
}

// A header's whole-number value, or -1.
long long HeaderNumber(const json& headers, const char* name) {
  auto value = headers.find(name);
  return value == headers.end() ? -1 : std::stoll(value->get<std::string>());
}

// The HTTP headers of a Hit, made of each limit's ratelimit_headers: the
// IETF fields as lists with one item per limit; Retry-After the latest; the
// X-RateLimit-* fields, which hold one limit only, of the limit with the
// fewest remaining (the one that refuses first), the latest reset on a tie.
Headers CombinedHeaders(const std::vector<json>& per_limit) {
  std::string policies, states;
  long long retry_after = -1;
  const json* tightest = nullptr;
  for (const json& headers : per_limit) {
    policies += (policies.empty() ? "" : ", ") + headers.at("RateLimit-Policy").get<std::string>();
    states += (states.empty() ? "" : ", ") + headers.at("RateLimit").get<std::string>();
    retry_after = std::max(retry_after, HeaderNumber(headers, "Retry-After"));
    long long remaining = HeaderNumber(headers, "X-RateLimit-Remaining");
    if (tightest == nullptr || remaining < HeaderNumber(*tightest, "X-RateLimit-Remaining") ||
        (remaining == HeaderNumber(*tightest, "X-RateLimit-Remaining") &&
         HeaderNumber(headers, "X-RateLimit-Reset") > HeaderNumber(*tightest, "X-RateLimit-Reset")))
      tightest = &headers;
  }
  Headers combined{{"RateLimit-Policy", policies}, {"RateLimit", states}};
  if (retry_after >= 0) combined.emplace_back("Retry-After", std::to_string(retry_after));
  for (const char* name : {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"})
    if (tightest != nullptr) combined.emplace_back(name, tightest->at(name).get<std::string>());
  return combined;
}

// 503: the service admits no new playground key now; nothing was stored.
Reply NoNewKeys(const Verdict& verdict) {
  Reply reply = ErrorReply(503, "the playground admits no new session now: retry later");
  reply.body["retry_after"] = verdict.retry_after.value_or(0);
  for (const auto& [name, value] : verdict.headers.items()) reply.headers.emplace_back(name, value);
  return reply;
}

}  // namespace

Reply Playground::Simulate(const json& request) {
  Controls controls = ReadControls(request);
  std::vector<std::int64_t> arrivals = ReadArrivals(request);
  std::vector<double> counts = ReadCounts(request, arrivals.size());
  std::vector<std::int64_t> probes = ProbeTimes(ReadProbeRequest(request), arrivals, controls);
  return InTransactionBadInputIs400(pool_, [&](pqxx::work& tx) {
    json algorithms = json::array();
    for (const char* kind : kKinds) {
      json config = ConfigFor(kind, controls, kOriginMs);
      std::vector<SimulatedCall> calls =
          http_api::Simulate(tx, config.dump(), json(arrivals).dump(), json(counts).dump(), kOriginMs);
      json algorithm{{"kind", kind}, {"config", config}, {"calls", CallsJson(calls)}};
      // Only once the arrivals passed the extension's checks (order, lengths).
      algorithm["levels"] = probes.empty() ? json::array() : Levels(tx, config, arrivals, counts, probes);
      algorithms.push_back(std::move(algorithm));
    }
    json body{{"origin", kOriginText},
              {"origin_ms", kOriginMs},
              {"period_ms", controls.period_ms},
              {"start_ms", controls.start_ms},
              {"algorithms", algorithms}};
    return Reply{200, std::move(body), {}};
  });
}

Reply Playground::Hit(const json& request) {
  std::string session = ReadSession(request);
  std::int64_t origin = ReadOrigin(request);
  Controls controls = ReadControls(request);
  // One key per page and config: a new config starts from a full limit.
  std::string key = session + " " + std::to_string(origin) + " " + ControlsJson(controls).dump();
  return InTransactionBadInputIs400(pool_, [&](pqxx::work& tx) {
    PurgeExpiredPlaygroundKeys(tx);
    if (AdmitPlaygroundKey(tx, key)) {
      Verdict admitted = LimitPlaygroundKeys(tx);
      if (!admitted.ok) return NoNewKeys(admitted);  // not committed: the key is not kept
    }
    json hits = json::array();
    std::vector<json> headers;
    for (std::size_t i = 0; i < std::size(kKinds); ++i) {
      json config = ConfigFor(kKinds[i], controls, origin);
      PlaygroundHit hit = HitPlayground(tx, kPlaygroundLimits[i], key, config.dump(), origin);
      hits.push_back({{"kind", kKinds[i]},
                      {"limit", kPlaygroundLimits[i]},
                      {"key", key},
                      {"config", config},
                      {"t", hit.t},
                      {"ok", hit.ok},
                      {"remaining", OptionalJson(hit.remaining)},
                      {"retry_after", OptionalJson(hit.retry_after)},
                      {"headers", hit.headers}});
      headers.push_back(hit.headers);
    }
    tx.commit();
    Headers combined = CombinedHeaders(headers);
    json combined_json = json::object();
    for (const auto& [name, value] : combined) combined_json[name] = value;
    return Reply{200, json{{"hits", hits}, {"headers", combined_json}}, combined};
  });
}

void RegisterPlaygroundRoutes(httplib::Server& server, JsonRoutes& routes, Playground& playground) {
  server.Get("/playground", [](const httplib::Request&, httplib::Response& response) {
    // The browser itself refuses anything from elsewhere: the page's only
    // requests are to this service's JSON endpoints.
    response.set_header("Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                        "connect-src 'self'; img-src 'self' data:");
    response.set_content(kPlaygroundPage, "text/html; charset=utf-8");
  });
  routes.Post("/playground/simulate",
              [&playground](const json& request) { return playground.Simulate(request); });
  routes.Post("/playground/hit", [&playground](const json& request) { return playground.Hit(request); });
}

}  // namespace http_api
