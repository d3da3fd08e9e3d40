#include "playground_input.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>

#include "api.h"

namespace http_api {
namespace {

using nlohmann::json;

// The units a period string may use, and their length in milliseconds.
struct Unit {
  const char* name;
  double ms;
};
constexpr Unit kUnits[] = {{"millisecond", 1}, {"milliseconds", 1}, {"second", 1000},  {"seconds", 1000},
                           {"minute", 60000},  {"minutes", 60000},  {"hour", 3600000}, {"hours", 3600000}};

BadRequest FieldError(const char* name, const std::string& what) {
  return BadRequest(std::string("field \"") + name + "\" must be " + what, name);
}

// The field as a finite JSON number, if it is one.
std::optional<double> FiniteNumber(const json& value) {
  if (!value.is_number() || !std::isfinite(value.get<double>())) return std::nullopt;
  return value.get<double>();
}

// A number field within [min, max] (min excluded when `above_min`); nullopt
// when absent or null and `optional`.
std::optional<double> NumberIn(const json& request, const char* name, double min, double max, bool above_min,
                               bool optional, const std::string& what) {
  auto field = request.find(name);
  if (field == request.end() || field->is_null()) {
    if (optional) return std::nullopt;
    throw FieldError(name, what);
  }
  std::optional<double> value = FiniteNumber(*field);
  if (!value || *value > max || *value < min || (above_min && *value == min)) throw FieldError(name, what);
  return value;
}

// A period string, "<decimal> <unit>" such as "10 seconds" or "0.5 hours",
// in milliseconds; nullopt if it is not one. PostgreSQL reads the same
// string as the same interval.
std::optional<double> PeriodStringMs(const std::string& text) {
  std::size_t space = text.find(' ');
  if (space == std::string::npos || space == 0) return std::nullopt;
  std::string number = text.substr(0, space), unit = text.substr(space + 1);
  std::size_t dot = number.find('.');
  if (number.find_first_not_of("0123456789.") != std::string::npos || number.front() == '.' ||
      number.back() == '.' || (dot != std::string::npos && number.find('.', dot + 1) != std::string::npos) ||
      number.size() > 15)
    return std::nullopt;
  for (const Unit& u : kUnits)
    if (unit == u.name) return std::stod(number) * u.ms;
  return std::nullopt;
}

// The period in milliseconds, from a number of milliseconds or a string.
double PeriodMs(const json& request) {
  const std::string what =
      "from 1 millisecond to 1 hour: a number of milliseconds, or a string such as \"10 seconds\" "
      "(milliseconds, seconds, minutes or hours)";
  auto field = request.find("period");
  if (field == request.end()) throw FieldError("period", what);
  std::optional<double> ms =
      field->is_string() ? PeriodStringMs(field->get<std::string>()) : FiniteNumber(*field);
  if (!ms || *ms < kMinPeriodMs || *ms > kMaxPeriodMs) throw FieldError("period", what);
  return *ms;
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

}  // namespace

Controls ReadControls(const json& request) {
  Controls controls;
  NumberIn(request, "rate", 0, kMaxPlaygroundRate, /*above_min=*/true, /*optional=*/false,
           "a number greater than 0 and at most 1000");
  controls.rate = request.at("rate");
  controls.period_ms = PeriodMs(request);
  controls.period = request.at("period");
  if (NumberIn(request, "capacity", 0, kMaxPlaygroundCapacity, false, true, "a number from 0 to 1000"))
    controls.capacity = request.at("capacity");
  controls.start_ms =
      NumberIn(request, "start", 0, kMaxStartMs, false, true, "a number of milliseconds from 0 to 3600000")
          .value_or(0);
  return controls;
}

json ControlsJson(const Controls& controls) {
  return json{{"rate", controls.rate},
              {"period", controls.period},
              {"capacity", controls.capacity},
              {"start", controls.start_ms}};
}

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

std::vector<double> ReadCounts(const json& request, std::size_t arrivals) {
  auto field = request.find("counts");
  if (field == request.end() || field->is_null()) return std::vector<double>(arrivals, 1.0);
  if (!field->is_array() || field->size() > kMaxArrivals)
    throw FieldError("counts", "an array of at most " + std::to_string(kMaxArrivals) + " numbers");
  std::vector<double> counts;
  for (const json& value : *field) {
    std::optional<double> count = FiniteNumber(value);
    if (!count) throw FieldError("counts", "an array of numbers");
    counts.push_back(*count);
  }
  return counts;
}

ProbeRequest ReadProbeRequest(const json& request) {
  ProbeRequest probes;
  if (!request.contains("samples")) return probes;
  probes.samples = Integer(request, "samples", 0, kMaxSamples);
  if (probes.samples == 0) return probes;
  probes.span = Integer(request, "span", 1, kMaxOffsetMs);
  if (request.contains("from")) probes.from = Integer(request, "from", 0, probes.span);
  return probes;
}

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

std::int64_t ReadOrigin(const json& request) { return Integer(request, "origin", 0, kMaxEpochMs); }

std::string IsoTimestamp(double epoch_ms) {
  std::int64_t micros = std::llround(epoch_ms * 1000);
  std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::int64_t fraction = micros % 1000000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::string iso = text;
  if (fraction > 0) {
    char digits[8];
    std::snprintf(digits, sizeof digits, ".%06lld", static_cast<long long>(fraction));
    std::string decimals = digits;
    iso += decimals.substr(0, decimals.find_last_not_of('0') + 1);
  }
  return iso + "Z";
}

}  // namespace http_api
