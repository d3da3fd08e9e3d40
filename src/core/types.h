// The core's vocabulary: a limit's config, a row's state, a request and
// the decision on it, and errors as values. Plain structs, no behaviour.
//
// No PostgreSQL header may be seen in src/core (see core_guard.h). Time is
// always an argument, in integer microseconds since the Unix epoch; token
// values are doubles.
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

// A kind of limit (an algorithm), by its place in the registry of kinds
// (kinds/registry.h: KindOf(id) is its table of operations). Ids live only
// in memory; rows tag their kind as each kind's table says.
enum class KindId : std::uint8_t {};

// A limit's configuration as parsed from JSON; has_* says a field was given.
struct LimitConfig {
  bool has_kind = false;
  KindId kind{};  // the registry's first kind until "kind" is given
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

// The stored state of one limit row. For a windowed kind ts is the start
// of the window the row was last written in; prev is a kind's second
// figure, where it keeps one (0 for the others; kinds/kind.h's tag).
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

// An error as plain data; the adapter turns it into ereport(22023). The
// texts are NUL-terminated strings: an ok Status, made on every call, writes
// their first bytes only, not all 448.
struct Status {
  StatusCode code = StatusCode::kOk;
  char message[192];
  char detail[256];
  Status() noexcept {
    message[0] = '\0';
    detail[0] = '\0';
  }
  bool ok() const noexcept { return code == StatusCode::kOk; }
};

}  // namespace ratelimit
