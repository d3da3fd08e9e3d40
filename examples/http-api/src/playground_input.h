// The playground's input: what the page's controls send, read and bounded
// here, so that a web client can ask only for configs whose limits go idle
// within the hour and for a page's worth of work. Every error is a
// BadRequest naming the request's field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace http_api {

// Bounds of the controls (README, "Playground"): a limit of at most 1,000
// requests per period, a period from 1 ms to 1 hour, a window start at most
// an hour after the origin.
inline constexpr double kMaxPlaygroundRate = 1000;
inline constexpr double kMaxPlaygroundCapacity = 1000;
inline constexpr double kMinPeriodMs = 1;
inline constexpr double kMaxPeriodMs = 3600000;
inline constexpr double kMaxStartMs = 3600000;
// A page's worth of dots, and offsets whose timestamps stay exact to the
// millisecond; ratelimit_simulate has its own bound (100,000).
inline constexpr std::size_t kMaxArrivals = 2000;
inline constexpr std::int64_t kMaxSamples = 400;
inline constexpr std::int64_t kMaxOffsetMs = 10000000000;   // about 115 days
inline constexpr std::int64_t kMaxEpochMs = 4102444800000;  // 2100-01-01
inline constexpr std::size_t kMaxSessionBytes = 64;

// What the page's controls set, the same for the three kinds.
struct Controls {
  nlohmann::json rate;      // a JSON number, kept as given (2, not 2.0)
  nlohmann::json period;    // as given: milliseconds, or a string such as "10 seconds"
  double period_ms = 0;     // the same in milliseconds
  nlohmann::json capacity;  // null: absent (the bucket's capacity is then its rate)
  double start_ms = 0;      // where the windows start, milliseconds after the origin
};

// Which probes of the limit's level to add to a simulation: `samples` evenly
// over [from, span] (none when samples is 0).
struct ProbeRequest {
  std::int64_t samples = 0;
  std::int64_t from = 0;
  std::int64_t span = 0;
};

// rate, period, capacity and start, within the bounds above.
Controls ReadControls(const nlohmann::json& request);

// The controls as a JSON object in a canonical form (a part of a limit key).
nlohmann::json ControlsJson(const Controls& controls);

// The arrivals: 1 to kMaxArrivals whole milliseconds after the origin.
// Their order is the extension's to check (22023).
std::vector<std::int64_t> ReadArrivals(const nlohmann::json& request);

// The counts, 1 each when absent; their length and signs are the
// extension's to check (22023).
std::vector<double> ReadCounts(const nlohmann::json& request, std::size_t arrivals);

// samples, from and span.
ProbeRequest ReadProbeRequest(const nlohmann::json& request);

// The page's session: 1 to kMaxSessionBytes letters, digits, '-' or '_'.
std::string ReadSession(const nlohmann::json& request);

// The page's origin: milliseconds since 1970, up to 2100.
std::int64_t ReadOrigin(const nlohmann::json& request);

// `epoch_ms` (milliseconds since 1970) as an ISO 8601 UTC timestamp, to the
// microsecond where it has a fraction: "2026-01-01T00:00:02.5Z".
std::string IsoTimestamp(double epoch_ms);

}  // namespace http_api
