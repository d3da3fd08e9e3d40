// A limit's configuration: validation of configs and requests
// (a sharded limit is tested on two full shards, as a call decides), the
// largest count a call can be granted, and where the windows of one
// (name, key) are aligned.
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "config.h"
#include "primitives.h"
#include "shards.h"

namespace ratelimit {

using detail::CanEverTake;
using detail::FloorDiv;

Status Invalid(const char* detail, const char* format, ...) noexcept {
  Status status;
  status.code = StatusCode::kInvalidParameter;
  va_list args;
  va_start(args, format);
  std::vsnprintf(status.message, sizeof status.message, format, args);
  va_end(args);
  std::snprintf(status.detail, sizeof status.detail, "%s", detail ? detail : "");
  return status;
}

namespace {

// Below this many tokens per microsecond the refill arithmetic goes subnormal.
constexpr double kMinRatePerMicro = 1e-300;

// Whether a full limit could grant the request at all: the test every
// decision makes, on two full shards for a sharded limit.
bool CanEverGrant(const LimitConfig& config, const Request& request) {
  return config.shards > 1 ? ShardsCanEverGrant(config, request) : CanEverTake(config, request);
}

// Checks a field that must be a finite number with value > floor (or >=).
bool FiniteAtLeast(double value, double floor, bool inclusive) {
  if (!std::isfinite(value)) return false;
  return inclusive ? value >= floor : value > floor;
}

// Rejects fields given for a kind they do not apply to.
Status CheckFieldsApply(const LimitConfig& config) {
  const KindOps& kind = KindOf(config.kind);
  if (config.has_start && !kind.windowed)
    return Invalid("Only the window kinds have a start.",
                   "config field \"start\" does not apply to kind \"%s\"", kind.name);
  if (config.has_capacity && !kind.takes_capacity)
    return Invalid(kind.no_capacity_detail, "config field \"capacity\" does not apply to kind \"%s\"",
                   kind.name);
  if (config.has_max_reserved && !kind.can_reserve)
    return Invalid(kind.no_reserve_detail, "config field \"maxReserved\" does not apply to kind \"%s\"",
                   kind.name);
  return Status{};
}

// Rejects configs whose refill from empty to full takes longer than the horizon.
Status CheckRefillHorizon(const LimitConfig& config) {
  if (KindOf(config.kind).refill_micros(config) <= static_cast<double>(kHorizonMicros)) return Status{};
  return Invalid("Refilling the limit from empty to full must take at most 100 years.",
                 "config describes a limit that takes longer than 100 years to refill");
}

// The detail of a reserve a kind cannot make: which kinds can.
Status ReserveDoesNotApply(const KindOps& kind) {
  char names[160];
  ListKindNames(names, sizeof names, "", " and ", true);
  char detail[200];
  std::snprintf(detail, sizeof detail, "Only %s limits can reserve.", names);
  return Invalid(detail, "reserve does not apply to kind \"%s\"", kind.name);
}

}  // namespace

Status ValidateConfigFields(const LimitConfig& config) noexcept {
  if (!config.has_kind) {
    char choice[200];
    DescribeKindChoice(choice, sizeof choice);
    return Invalid(choice, "config field \"kind\" is required");
  }
  if (!config.has_rate)
    return Invalid("The number of tokens per period.", "config field \"rate\" is required");
  if (!config.has_period)
    return Invalid("Milliseconds as a number, or an interval as a string.",
                   "config field \"period\" is required");
  if (!FiniteAtLeast(config.rate, 0, false) || config.rate > kMaxMagnitude)
    return Invalid("Rate must be greater than zero and at most 1e300.",
                   "config field \"rate\" must be a number greater than zero and at most 1e300");
  if (config.period <= 0 || config.period > kHorizonMicros)
    return Invalid("Period must be at least one microsecond and at most 100 years.",
                   "config field \"period\" is out of range");
  if (config.rate / static_cast<double>(config.period) < kMinRatePerMicro)
    return Invalid("The rate per microsecond is too small to compute with.",
                   "config field \"rate\" is too small");
  if (config.has_capacity && !(FiniteAtLeast(config.capacity, 0, true) && config.capacity <= kMaxMagnitude))
    return Invalid("Capacity must be a number from 0 to 1e300.", "config field \"capacity\" is out of range");
  if (config.has_max_reserved &&
      !(FiniteAtLeast(config.max_reserved, 0, true) && config.max_reserved <= kMaxMagnitude))
    return Invalid("maxReserved must be a number from 0 to 1e300.",
                   "config field \"maxReserved\" is out of range");
  if (config.has_shards && (config.shards < 1 || config.shards > kMaxShards))
    return Invalid("A limit is spread over 1 to 1024 rows.",
                   "config field \"shards\" must be between 1 and %d", kMaxShards);
  if (config.has_jitter && !config.jitter_is_period && (config.jitter <= 0 || config.jitter > kHorizonMicros))
    return Invalid("Use true for up to one period, or a positive duration.",
                   "config field \"jitter\" must be a positive duration");
  return Status{};
}

Status ValidateConfigCombination(const LimitConfig& config) noexcept {
  Status status = CheckFieldsApply(config);
  if (!status.ok()) return status;
  return CheckRefillHorizon(config);
}

Status ValidateConfig(const LimitConfig& config) noexcept {
  Status status = ValidateConfigFields(config);
  if (!status.ok()) return status;
  return ValidateConfigCombination(config);
}

Status ValidateAmount(double count) noexcept {
  if (FiniteAtLeast(count, 0, true) && count <= kMaxMagnitude) return Status{};
  return Invalid("Count must be a number from 0 to 1e300.", "count must be a number between 0 and 1e300");
}

Status ValidateRequestForm(const LimitConfig& config, const Request& request) noexcept {
  Status amount = ValidateAmount(request.count);
  if (!amount.ok()) return amount;
  if (request.reserve && !KindOf(config.kind).can_reserve) return ReserveDoesNotApply(KindOf(config.kind));
  return Status{};
}

Status ValidateRequest(const LimitConfig& config, const Request& request) noexcept {
  Status form = ValidateRequestForm(config, request);
  if (!form.ok()) return form;
  if (!CanEverGrant(config, request)) {
    double most = MostGrantable(config, request.reserve);
    return Invalid(request.reserve
                       ? "The count exceeds capacity plus maxReserved, so it can never be granted."
                       : "The count exceeds the limit's capacity, so it can never be granted.",
                   "count %.17g can never succeed: at most %.17g fits", request.count, most);
  }
  return Status{};
}

double MostGrantable(const LimitConfig& config, bool reserve) noexcept {
  double most = Capacity(config) + (reserve ? MaxDeficit(config) : 0);
  if (config.shards > 1) {
    LimitConfig shard = ShardConfig(config);
    most = 2 * (Capacity(shard) + (reserve ? MaxDeficit(shard) : 0));
  }
  // The sum may round a step above what the decisions accept: step down to
  // the largest count the same test grants, so the number in messages is exact.
  for (int step = 0; step < 16 && most > 0 && !CanEverGrant(config, Request{most, reserve}); ++step)
    most = std::nextafter(most, 0.0);
  return most;
}

std::uint64_t LimitHash(const char* name, std::size_t name_len, const char* key,
                        std::size_t key_len) noexcept {
  std::uint64_t hash = 14695981039346656037ULL;
  auto mix = [&hash](const char* bytes, std::size_t len) {
    for (std::size_t i = 0; i < len; ++i) {
      hash ^= static_cast<unsigned char>(bytes[i]);
      hash *= 1099511628211ULL;
    }
  };
  mix(name, name_len);
  if (key != nullptr) {
    mix("", 1);
    mix(key, key_len);
  }
  return hash;
}

Micros WindowOrigin(const LimitConfig& config, const char* name, std::size_t name_len, const char* key,
                    std::size_t key_len) noexcept {
  if (config.has_start) return config.start - FloorDiv(config.start, config.period) * config.period;
  std::uint64_t hash = LimitHash(name, name_len, key, key_len);
  return static_cast<Micros>(hash % static_cast<std::uint64_t>(config.period));
}

}  // namespace ratelimit
