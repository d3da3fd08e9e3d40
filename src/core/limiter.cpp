// The rate-limit maths: token bucket, fixed window, approximated sliding window.
#include "limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>

namespace ratelimit {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Below this many tokens per microsecond the refill arithmetic goes subnormal.
constexpr double kMinRatePerMicro = 1e-300;

// Builds an invalid-parameter status with a printf-style message.
__attribute__((format(printf, 2, 3))) Status Invalid(const char* detail, const char* format, ...) {
  Status status;
  status.code = StatusCode::kInvalidParameter;
  va_list args;
  va_start(args, format);
  std::vsnprintf(status.message, sizeof status.message, format, args);
  va_end(args);
  std::snprintf(status.detail, sizeof status.detail, "%s", detail ? detail : "");
  return status;
}

bool IsWindowKind(Kind kind) { return kind != Kind::kTokenBucket; }

// floor((a) / b) for b > 0, correct for negative a.
Micros FloorDiv(Micros a, Micros b) {
  Micros q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The start of the window containing `now` for windows aligned to `origin`.
Micros WindowStartFor(Micros now, Micros origin, Micros period) {
  return origin + FloorDiv(now - origin, period) * period;
}

// The smallest t in [lo, hi] with pred(t) true, for pred monotone (false
// then true). Returns hi when pred(hi) is false too: the answer is clamped.
// Binary search keeps every answer exact to the microsecond (or window).
template <typename Pred>
Micros FirstWhere(Micros lo, Micros hi, Pred pred) {
  if (pred(lo)) return lo;
  while (hi - lo > 1) {
    Micros mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// The latest moment any search may return, keeping timestamps finite.
Micros SearchLimit(Micros from) { return from + 3 * kHorizonMicros; }

double Seconds(Micros micros) { return static_cast<double>(micros) / kMicrosPerSecond; }

// ---- token bucket -------------------------------------------------------

// Tokens after `elapsed` microseconds of refill from `value`, capped.
double RefillTokens(const LimitConfig& config, double value, Micros elapsed) {
  double refill = static_cast<double>(elapsed) * config.rate / static_cast<double>(config.period);
  return std::min(value + refill, Capacity(config));
}

// The first moment from `from` at which a bucket stored as `base` holds
// >= target tokens. Searching from the stored state repeats the exact
// arithmetic a later call will do, so that call is granted at that moment.
Micros TokenBucketTimeFor(const LimitConfig& config, const LimitState& base, Micros from, double target) {
  return FirstWhere(from, SearchLimit(from), [&](Micros t) {
    return RefillTokens(config, base.value, t - base.ts) >= target;
  });
}

Decision DecideTokenBucket(const LimitConfig& config, const LimitState& state, Micros now,
                           const Request& request) {
  Micros eff = state.exists ? std::max(now, state.ts) : now;
  LimitState base = state.exists ? state : LimitState{true, Capacity(config), eff, 0};
  double avail = RefillTokens(config, base.value, eff - base.ts);
  double after = avail - request.count;
  Decision d;
  d.ok = after >= 0 || (request.reserve && -after <= MaxDeficit(config));
  if (d.ok) {
    d.next = LimitState{true, after, eff, 0};
    base = d.next;
    d.remaining = after;
    d.has_retry = after < 0;
    if (d.has_retry) d.retry_at = TokenBucketTimeFor(config, base, eff, 0);
  } else {
    double need = request.reserve ? request.count - MaxDeficit(config) : request.count;
    d.remaining = avail;
    d.has_retry = true;
    d.retry_at = TokenBucketTimeFor(config, base, eff, need);
  }
  Micros full_at = TokenBucketTimeFor(config, base, eff, Capacity(config));
  d.reset_after = Seconds(std::max<Micros>(0, full_at - now));
  return d;
}

// ---- fixed window -------------------------------------------------------

// The state rolled forward to the window containing `eff`.
struct WindowView {
  Micros start;  // start of the current window
  double value;  // fixed: tokens now; sliding: current-window count
  double prev;   // sliding: previous-window count
};

// Rolls a window state forward to the window containing `now`.
WindowView RollWindow(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                      Micros* eff) {
  if (!state.exists) {
    *eff = now;
    double initial = config.kind == Kind::kFixedWindow ? Capacity(config) : 0;
    return WindowView{WindowStartFor(now, origin, config.period), initial, 0};
  }
  *eff = std::max(now, state.ts);
  Micros windows = (*eff - state.ts) / config.period;
  Micros start = state.ts + windows * config.period;
  if (config.kind == Kind::kFixedWindow) {
    double value = std::min(state.value + config.rate * static_cast<double>(windows), Capacity(config));
    return WindowView{start, value, 0};
  }
  if (windows == 0) return WindowView{start, state.value, state.prev};
  if (windows == 1) return WindowView{start, 0, state.value};
  return WindowView{start, 0, 0};
}

// Tokens a fixed window stored as `base` holds `windows` windows later.
double FixedWindowTokens(const LimitConfig& config, const LimitState& base, Micros windows) {
  return std::min(base.value + config.rate * static_cast<double>(windows), Capacity(config));
}

// The start of the first window, from the one at `start`, in which a window
// stored as `base` holds >= target tokens (the same arithmetic a later call does).
Micros FixedWindowTimeFor(const LimitConfig& config, const LimitState& base, Micros start, double target) {
  Micros skipped = (start - base.ts) / config.period;
  Micros max_windows = skipped + SearchLimit(0) / config.period;
  Micros windows = FirstWhere(skipped, max_windows, [&](Micros w) {
    return FixedWindowTokens(config, base, w) >= target;
  });
  return base.ts + windows * config.period;
}

Decision DecideFixedWindow(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                           const Request& request) {
  Micros eff = 0;
  WindowView view = RollWindow(config, state, now, origin, &eff);
  LimitState base = state.exists ? state : LimitState{true, view.value, view.start, 0};
  double after = view.value - request.count;
  Decision d;
  d.ok = after >= 0 || (request.reserve && -after <= MaxDeficit(config));
  if (d.ok) {
    d.next = LimitState{true, after, view.start, 0};
    base = d.next;
    d.remaining = after;
    d.has_retry = after < 0;
    if (d.has_retry) d.retry_at = FixedWindowTimeFor(config, base, view.start, 0);
  } else {
    double need = request.reserve ? request.count - MaxDeficit(config) : request.count;
    d.remaining = view.value;
    d.has_retry = true;
    d.retry_at = FixedWindowTimeFor(config, base, view.start, need);
  }
  Micros full_at = FixedWindowTimeFor(config, base, view.start, Capacity(config));
  d.reset_after = Seconds(std::max<Micros>(0, full_at - now));
  return d;
}

// ---- sliding window -----------------------------------------------------

// The approximated count in the sliding window ending at `t` (t >= start):
// floor(previous * weight) + current, the windows shifted as time passes.
double SlidingUsedAt(const LimitConfig& config, const WindowView& view, Micros t) {
  Micros windows = (t - view.start) / config.period;
  double current = windows == 0 ? view.value : 0;
  double previous = windows == 0 ? view.prev : (windows == 1 ? view.value : 0);
  Micros into = (t - view.start) - windows * config.period;
  double weight = static_cast<double>(config.period - into) / static_cast<double>(config.period);
  return std::floor(previous * weight) + current;
}

// The first moment from `eff` at which `count` more fits under the rate.
Micros SlidingTimeFor(const LimitConfig& config, const WindowView& view, Micros eff, double count) {
  Micros hi = view.start + 2 * config.period;  // both windows have slid out by then
  return FirstWhere(eff, std::max(eff, hi), [&](Micros t) {
    return SlidingUsedAt(config, view, t) + count <= config.rate;
  });
}

Decision DecideSlidingWindow(const LimitConfig& config, const LimitState& state, Micros now,
                             Micros origin, const Request& request) {
  Micros eff = 0;
  WindowView view = RollWindow(config, state, now, origin, &eff);
  double used = SlidingUsedAt(config, view, eff);
  Decision d;
  d.ok = used + request.count <= config.rate;
  if (d.ok) {
    d.next = LimitState{true, view.value + request.count, view.start, view.prev};
    d.remaining = config.rate - used - request.count;
    view.value += request.count;
  } else {
    d.remaining = std::max(0.0, config.rate - used);
    d.has_retry = true;
    d.retry_at = SlidingTimeFor(config, view, eff, request.count);
  }
  Micros full_at = SlidingTimeFor(config, view, eff, config.rate);
  d.reset_after = Seconds(std::max<Micros>(0, full_at - now));
  return d;
}

// Checks a field that must be a finite number with value > floor (or >=).
bool FiniteAtLeast(double value, double floor, bool inclusive) {
  if (!std::isfinite(value)) return false;
  return inclusive ? value >= floor : value > floor;
}

// Rejects fields given for a kind they do not apply to.
Status CheckFieldsApply(const LimitConfig& config) {
  const char* kind = KindName(config.kind);
  if (config.has_start && !IsWindowKind(config.kind))
    return Invalid("Only the window kinds have a start.", "config field \"start\" does not apply to kind \"%s\"", kind);
  if (config.kind == Kind::kSlidingWindow && config.has_capacity)
    return Invalid("A sliding window holds at most rate per period.",
                   "config field \"capacity\" does not apply to kind \"%s\"", kind);
  if (config.kind == Kind::kSlidingWindow && config.has_max_reserved)
    return Invalid("A sliding window cannot reserve.", "config field \"maxReserved\" does not apply to kind \"%s\"",
                   kind);
  return Status{};
}

// Rejects configs whose refill from empty to full takes longer than the horizon.
Status CheckRefillHorizon(const LimitConfig& config) {
  double horizon = static_cast<double>(kHorizonMicros);
  double period = static_cast<double>(config.period);
  double refill_micros = 0;
  if (config.kind == Kind::kTokenBucket) refill_micros = Capacity(config) / config.rate * period;
  if (config.kind == Kind::kFixedWindow) refill_micros = std::ceil(Capacity(config) / config.rate) * period;
  if (config.kind == Kind::kSlidingWindow) refill_micros = 2 * period;
  if (refill_micros <= horizon) return Status{};
  return Invalid("Refilling the limit from empty to full must take at most 100 years.",
                 "config describes a limit that takes longer than 100 years to refill");
}

}  // namespace

bool ParseKind(const char* text, std::size_t len, Kind* kind) noexcept {
  static const struct {
    const char* name;
    Kind kind;
  } kKinds[] = {{"token bucket", Kind::kTokenBucket},
                {"fixed window", Kind::kFixedWindow},
                {"sliding window", Kind::kSlidingWindow}};
  for (const auto& entry : kKinds) {
    if (std::strlen(entry.name) == len && std::memcmp(entry.name, text, len) == 0) {
      *kind = entry.kind;
      return true;
    }
  }
  return false;
}

const char* KindName(Kind kind) noexcept {
  switch (kind) {
    case Kind::kTokenBucket:
      return "token bucket";
    case Kind::kFixedWindow:
      return "fixed window";
    case Kind::kSlidingWindow:
      return "sliding window";
  }
  return "unknown";
}

Status ValidateConfig(const LimitConfig& config) noexcept {
  if (!config.has_kind) return Invalid("Use \"token bucket\", \"fixed window\" or \"sliding window\".", "config field \"kind\" is required");
  if (!config.has_rate) return Invalid("The number of tokens per period.", "config field \"rate\" is required");
  if (!config.has_period)
    return Invalid("Milliseconds as a number, or an interval as a string.", "config field \"period\" is required");
  if (!FiniteAtLeast(config.rate, 0, false))
    return Invalid("Rate must be a finite number greater than zero.", "config field \"rate\" must be a finite number greater than zero");
  if (config.period <= 0 || config.period > kHorizonMicros)
    return Invalid("Period must be at least one microsecond and at most 100 years.",
                   "config field \"period\" is out of range");
  if (config.rate / static_cast<double>(config.period) < kMinRatePerMicro)
    return Invalid("The rate per microsecond is too small to compute with.", "config field \"rate\" is too small");
  if (config.has_capacity && !FiniteAtLeast(config.capacity, 0, true))
    return Invalid("Capacity must be a finite number >= 0.", "config field \"capacity\" must not be negative");
  if (config.has_max_reserved && !FiniteAtLeast(config.max_reserved, 0, true))
    return Invalid("maxReserved must be a finite number >= 0.", "config field \"maxReserved\" must not be negative");
  Status status = CheckFieldsApply(config);
  if (!status.ok()) return status;
  return CheckRefillHorizon(config);
}

Status ValidateRequest(const LimitConfig& config, const Request& request) noexcept {
  if (!FiniteAtLeast(request.count, 0, true))
    return Invalid("Count must be a finite number >= 0.", "count must be a finite number >= 0");
  if (request.reserve && config.kind == Kind::kSlidingWindow)
    return Invalid("Only token bucket and fixed window limits can reserve.",
                   "reserve does not apply to kind \"sliding window\"");
  double most = Capacity(config) + (request.reserve ? MaxDeficit(config) : 0);
  if (request.count > most)
    return Invalid(request.reserve ? "The count exceeds capacity plus maxReserved, so it can never be granted."
                                   : "The count exceeds the limit's capacity, so it can never be granted.",
                   "count %g can never succeed: at most %g fits", request.count, most);
  return Status{};
}

double Capacity(const LimitConfig& config) noexcept {
  if (config.kind == Kind::kSlidingWindow) return config.rate;
  return config.has_capacity ? config.capacity : config.rate;
}

double MaxDeficit(const LimitConfig& config) noexcept {
  double horizon = static_cast<double>(kHorizonMicros);
  double period = static_cast<double>(config.period);
  double refillable = 0;
  if (config.kind == Kind::kTokenBucket) refillable = config.rate * (horizon / period);
  if (config.kind == Kind::kFixedWindow) refillable = config.rate * std::floor(horizon / period);
  double given = config.has_max_reserved ? config.max_reserved : kInfinity;
  return std::min(given, refillable);
}

std::uint64_t LimitHash(const char* name, std::size_t name_len, const char* key, std::size_t key_len) noexcept {
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

Decision Decide(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                const Request& request) noexcept {
  Decision d;
  switch (config.kind) {
    case Kind::kTokenBucket:
      d = DecideTokenBucket(config, state, now, request);
      break;
    case Kind::kFixedWindow:
      d = DecideFixedWindow(config, state, now, origin, request);
      break;
    case Kind::kSlidingWindow:
      d = DecideSlidingWindow(config, state, now, origin, request);
      break;
  }
  if (d.has_retry) d.retry_after = Seconds(d.retry_at - now);
  return d;
}

Reading ValueAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept {
  if (config.kind == Kind::kTokenBucket) {
    if (!state.exists) return Reading{Capacity(config), now};
    Micros eff = std::max(now, state.ts);
    return Reading{RefillTokens(config, state.value, eff - state.ts), eff};
  }
  Micros eff = 0;
  WindowView view = RollWindow(config, state, now, origin, &eff);
  if (config.kind == Kind::kFixedWindow) return Reading{view.value, view.start};
  return Reading{std::max(0.0, config.rate - SlidingUsedAt(config, view, eff)), view.start};
}

}  // namespace ratelimit
