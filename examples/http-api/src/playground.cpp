#include "playground.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store.h"

namespace http_api {
namespace {

using nlohmann::json;

// The simulated timeline starts here, and the window kinds' windows are
// aligned to it ("start"), so that the page can draw their edges at every
// period after it: 2026-01-01T00:00:00Z.
constexpr std::int64_t kOriginMs = 1767225600000;
constexpr char kOriginText[] = "2026-01-01T00:00:00Z";

// Input bounds: a page's worth of dots, and offsets whose timestamps stay
// exact to the millisecond. ratelimit_simulate has its own bound.
constexpr std::size_t kMaxArrivals = 2000;
constexpr std::int64_t kMaxSamples = 400;
constexpr std::int64_t kMaxOffsetMs = 10000000000;   // about 115 days
constexpr std::int64_t kMaxEpochMs = 4102444800000;  // 2100-01-01
constexpr std::size_t kMaxSessionBytes = 64;

// The extension's SQLSTATE for a bad config, count or arrival: the client's
// input, so a 400.
constexpr char kInvalidParameterValue[] = "22023";

constexpr const char* kKinds[] = {"token bucket", "fixed window", "sliding window"};

// What the page's controls set, the same for the three kinds: JSON numbers,
// kept as given (2, not 2.0, in the configs the page shows).
struct Controls {
  json rate;
  json period;    // milliseconds
  json capacity;  // null: absent
};

BadRequest FieldError(const char* name, const std::string& what) {
  return BadRequest(std::string("field \"") + name + "\" must be " + what);
}

// A finite JSON number; absent (or null, answered as null) only where `optional`.
json Number(const json& request, const char* name, bool optional) {
  auto field = request.find(name);
  if (field == request.end() || field->is_null()) {
    if (optional) return nullptr;
    throw FieldError(name, "a number");
  }
  if (!field->is_number() || !std::isfinite(field->get<double>())) throw FieldError(name, "a number");
  return *field;
}

bool IsIntegerIn(const json& value, std::int64_t min, std::int64_t max) {
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned()) {
    std::uint64_t n = value.get<std::uint64_t>();
    return n <= static_cast<std::uint64_t>(max) && static_cast<std::int64_t>(n) >= min;
  }
  std::int64_t n = value.get<std::int64_t>();
  return n >= min && n <= max;
}

std::int64_t Integer(const json& request, const char* name, std::int64_t min, std::int64_t max) {
  auto field = request.find(name);
  if (field == request.end() || !IsIntegerIn(*field, min, max))
    throw FieldError(name, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return field->get<std::int64_t>();
}

// rate and period are checked by the extension (positive, not too large):
// its 22023 is answered 400 with its message.
Controls ReadControls(const json& request) {
  return Controls{Number(request, "rate", false), Number(request, "period", false),
                  Number(request, "capacity", true)};
}

// The config of `kind` for the controls: the bucket takes the capacity; the
// windows are the article's (rate per window, no rollover), aligned to `start_ms`.
json ConfigFor(const char* kind, const Controls& controls, std::int64_t start_ms) {
  json config{{"kind", kind}, {"rate", controls.rate}, {"period", controls.period}};
  if (std::string(kind) == "token bucket") {
    if (!controls.capacity.is_null()) config["capacity"] = controls.capacity;
  } else {
    config["start"] = start_ms;
  }
  return config;
}

// The arrivals: whole milliseconds after the origin, at most kMaxArrivals.
// Their order is the extension's to check (22023).
std::vector<std::int64_t> ReadArrivals(const json& request) {
  auto field = request.find("arrivals");
  std::string what = "an array of 1 to " + std::to_string(kMaxArrivals) + " integers from 0 to " +
                     std::to_string(kMaxOffsetMs) + " (milliseconds)";
  if (field == request.end() || !field->is_array() || field->empty() || field->size() > kMaxArrivals)
    throw FieldError("arrivals", what);
  std::vector<std::int64_t> arrivals;
  for (const json& value : *field) {
    if (!IsIntegerIn(value, 0, kMaxOffsetMs)) throw FieldError("arrivals", what);
    arrivals.push_back(value.get<std::int64_t>());
  }
  return arrivals;
}

// The counts, 1 each when absent; their length and signs are the
// extension's to check (22023).
std::vector<double> ReadCounts(const json& request, std::size_t arrivals) {
  auto field = request.find("counts");
  if (field == request.end() || field->is_null()) return std::vector<double>(arrivals, 1.0);
  if (!field->is_array() || field->size() > kMaxArrivals)
    throw FieldError("counts", "an array of at most " + std::to_string(kMaxArrivals) + " numbers");
  std::vector<double> counts;
  for (const json& value : *field) {
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      throw FieldError("counts", "an array of numbers");
    counts.push_back(value.get<double>());
  }
  return counts;
}

// The page's session: letters, digits, '-' and '_', so that it can go into
// a limit key as it is.
std::string ReadSession(const json& request) {
  auto field = request.find("session");
  std::string what = "1 to " + std::to_string(kMaxSessionBytes) + " letters, digits, '-' or '_'";
  if (field == request.end() || !field->is_string()) throw FieldError("session", what);
  const std::string& session = field->get_ref<const std::string&>();
  if (session.empty() || session.size() > kMaxSessionBytes) throw FieldError("session", what);
  for (char c : session) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) throw FieldError("session", what);
  }
  return session;
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

// Probe times: `samples` evenly spaced over [0, span].
std::vector<std::int64_t> ProbeTimes(std::int64_t samples, std::int64_t span) {
  std::vector<std::int64_t> times;
  for (std::int64_t i = 0; i < samples; ++i)
    times.push_back(samples == 1 ? 0
                                 : static_cast<std::int64_t>(std::llround(double(span) * i / (samples - 1))));
  return times;
}

// The limit's level between arrivals: the arrivals again, with probes of
// count 0 (which take nothing) merged in; the probes' remaining, over time.
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

}  // namespace

Reply Playground::Simulate(const json& request) {
  Controls controls = ReadControls(request);
  std::vector<std::int64_t> arrivals = ReadArrivals(request);
  std::vector<double> counts = ReadCounts(request, arrivals.size());
  std::int64_t samples = request.contains("samples") ? Integer(request, "samples", 0, kMaxSamples) : 0;
  std::int64_t span = samples > 0 ? Integer(request, "span", 1, kMaxOffsetMs) : 0;
  std::vector<std::int64_t> probes = ProbeTimes(samples, span);
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
    return Reply{
        200, json{{"origin", kOriginText}, {"origin_ms", kOriginMs}, {"algorithms", algorithms}}, {}};
  });
}

Reply Playground::Hit(const json& request) {
  std::string session = ReadSession(request);
  std::int64_t origin = Integer(request, "origin", 0, kMaxEpochMs);
  Controls controls = ReadControls(request);
  return InTransactionBadInputIs400(pool_, [&](pqxx::work& tx) {
    json hits = json::array();
    for (const char* kind : kKinds) {
      json config = ConfigFor(kind, controls, origin);
      // One key per page and config: a new config starts from a full limit.
      std::string key = session + " " + std::to_string(origin) + " " + config.dump();
      PlaygroundHit hit = HitPlayground(tx, key, config.dump(), origin);
      hits.push_back({{"kind", kind},
                      {"key", key},
                      {"config", config},
                      {"t", hit.t},
                      {"ok", hit.ok},
                      {"remaining", OptionalJson(hit.remaining)},
                      {"retry_after", OptionalJson(hit.retry_after)}});
    }
    tx.commit();
    return Reply{200, json{{"limit", kPlaygroundLimit}, {"hits", hits}}, {}};
  });
}

void RegisterPlaygroundRoutes(httplib::Server& server, Playground& playground) {
  server.Get("/playground", [](const httplib::Request&, httplib::Response& response) {
    // The browser itself refuses anything from elsewhere: the page's only
    // requests are to this service's JSON endpoints.
    response.set_header("Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                        "connect-src 'self'; img-src 'self' data:");
    response.set_content(kPlaygroundPage, "text/html; charset=utf-8");
  });
  server.Post("/playground/simulate",
              JsonPost([&playground](const json& request) { return playground.Simulate(request); }));
  server.Post("/playground/hit",
              JsonPost([&playground](const json& request) { return playground.Hit(request); }));
}

}  // namespace http_api
