// The pure rate-limit core: plain structs in, plain structs out.
//
// No PostgreSQL header may be seen here (see core_guard.h). Time is always an
// argument, in integer microseconds since the Unix epoch; token values are
// doubles. Every function is noexcept: nothing here allocates or throws.
//
// This header is the core's public API; its definitions live in
// primitives.cpp (Capacity, MaxDeficit, InitialState: per-row maths),
// limiter.cpp (single-row decisions), config.cpp (kinds, validation,
// MostGrantable, window origins); sharded decisions are in shards.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core_guard.h"

namespace ratelimit {

using Micros = std::int64_t;

constexpr Micros kMicrosPerMilli = 1000;
constexpr Micros kMicrosPerSecond = 1000000;
// How far ahead any answer may point: reservations and refill times beyond
// this are refused or rejected, so every timestamp stays finite and exact.
constexpr Micros kHorizonMicros = Micros{3155760000} * kMicrosPerSecond;  // 100 Julian years
// The largest rate, capacity, maxReserved or count accepted. Keeping every
// value far below the double range means an overflow to infinity can only
// happen where the true value is far above any capacity, so capping it is exact.
constexpr double kMaxMagnitude = 1e300;

enum class Kind { kTokenBucket, kFixedWindow, kSlidingWindow };

// A limit's configuration as parsed from JSON; has_* says a field was given.
struct LimitConfig {
  bool has_kind = false;
  Kind kind = Kind::kTokenBucket;
  bool has_rate = false;
  double rate = 0;
  bool has_period = false;
  Micros period = 0;
  bool has_capacity = false;
  double capacity = 0;
  bool has_max_reserved = false;
  double max_reserved = 0;
  bool has_start = false;
  Micros start = 0;
  bool has_shards = false;
  int shards = 1;  // 1..kMaxShards rows share the limit
  bool has_jitter = false;
  bool jitter_is_period = false;  // "jitter": true: up to one period
  Micros jitter = 0;              // else the most random delay added to a refusal's retry time
  bool shadow = false;            // "shadow": true: refusals are only counted, the call is granted
};

constexpr int kMaxShards = 1024;

// The stored state of one limit row. For the window kinds ts is the start of
// the window the row was last written in; prev is the sliding window's
// previous-window count (0 for the other kinds).
struct LimitState {
  bool exists = false;
  double value = 0;
  Micros ts = 0;
  double prev = 0;
};

struct Request {
  double count = 1;
  bool reserve = false;
};

// The answer to one request. Times are absolute; the *_after fields are
// seconds measured from the clock the caller passed in.
struct Decision {
  bool ok = false;
  LimitState next;         // the state to store; meaningful only when ok
  bool has_retry = false;  // refused, or ok but reserved for later
  Micros retry_at = 0;
  double retry_after = 0;  // seconds; > 0 whenever has_retry
  double remaining = 0;    // ok: after this call (negative when reserved); refused: now
  double reset_after = 0;  // seconds until the limit is full again, >= 0
  Micros full_at = 0;      // when the stored state is the same as no row at all
};

// What ratelimit_value reports: the tokens available at `ts`.
struct Reading {
  double value = 0;
  Micros ts = 0;
};

enum class StatusCode { kOk, kInvalidParameter };

// An error as plain data; the adapter turns it into ereport(22023).
struct Status {
  StatusCode code = StatusCode::kOk;
  char message[192] = {0};
  char detail[256] = {0};
  bool ok() const noexcept { return code == StatusCode::kOk; }
};

// Parses a config "kind" string ("token bucket", "fixed window", "sliding window").
bool ParseKind(const char* text, std::size_t len, Kind* kind) noexcept;
const char* KindName(Kind kind) noexcept;

// Checks a parsed config: required fields, ranges, fields that do not apply
// to the kind, and that refilling from empty to full fits in the horizon.
Status ValidateConfig(const LimitConfig& config) noexcept;

// Checks an amount of tokens: finite and >= 0.
Status ValidateAmount(double count) noexcept;

// Checks a request against a valid config: count finite and >= 0, reserve
// allowed for the kind, and count able to succeed at all.
Status ValidateRequest(const LimitConfig& config, const Request& request) noexcept;
// ValidateRequest's checks but the last: what a request must be in every
// mode (a shadow limit answers a count that can never succeed instead).
Status ValidateRequestForm(const LimitConfig& config, const Request& request) noexcept;

// The largest count one call can ever be granted (capacity, plus
// maxReserved when reserving); for a sharded limit, what two shards hold.
double MostGrantable(const LimitConfig& config, bool reserve) noexcept;

// The bucket size: capacity when given, else rate.
double Capacity(const LimitConfig& config) noexcept;

// The deepest deficit a reservation may leave: maxReserved (if given),
// bounded by what refills within the horizon. 0 for sliding windows.
double MaxDeficit(const LimitConfig& config) noexcept;

// The origin the windows of one (name, key) are aligned to, in [0, period):
// config start when given, else the stable hash of (name, key) mod period.
// key == nullptr means the NULL (global) key.
Micros WindowOrigin(const LimitConfig& config, const char* name, std::size_t name_len, const char* key,
                    std::size_t key_len) noexcept;

// FNV-1a 64 over name, then (only for a non-NULL key) a zero byte and the key.
std::uint64_t LimitHash(const char* name, std::size_t name_len, const char* key,
                        std::size_t key_len) noexcept;

// Decides one request at clock `now` (the raw clock; the effective now is
// max(now, state.ts)). config and request must have been validated.
Decision Decide(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                const Request& request) noexcept;

// The tokens available at clock `now`, without consuming.
Reading ValueAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept;

// Gives `count` tokens back: capped at capacity, never below the current
// value. ok is always true; next is the state to store.
Decision Refund(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                double count) noexcept;

// Adds a random delay in [0, jitter) to a refused decision's retry time;
// `unit` is a uniform random number in [0, 1). Grants and reservations are
// returned unchanged: their times are exact.
Decision ApplyJitter(const LimitConfig& config, const Decision& decision, double unit) noexcept;

// The state a never-used row starts in at clock `now` (the same as no row).
LimitState InitialState(const LimitConfig& config, Micros now, Micros origin) noexcept;

}  // namespace ratelimit
