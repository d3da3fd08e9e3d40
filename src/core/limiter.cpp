// The rate-limit maths: token bucket, fixed window, approximated sliding window.
#include "limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>

#include "primitives.h"
#include "shards.h"

namespace ratelimit {

using detail::CanEverTake;
using detail::CanTake;
using detail::FirstWhere;
using detail::Fits;
using detail::GiveBack;
using detail::LeaveAt;
using detail::SearchLimit;
using detail::Seconds;
using detail::TakeFrom;
using detail::View;
using detail::ViewAt;
using detail::WhenAvailable;

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

// Token bucket: tokens after `elapsed` microseconds of refill from `value`, capped.
double RefillTokens(const LimitConfig& config, double value, Micros elapsed) {
  // elapsed / period first: this only overflows when the refill is far above any capacity.
  double refill = static_cast<double>(elapsed) / static_cast<double>(config.period) * config.rate;
  return std::min(value + refill, Capacity(config));
}

// Fixed window: tokens a window stored as `base` holds `windows` windows later.
double FixedWindowTokens(const LimitConfig& config, const LimitState& base, Micros windows) {
  return std::min(base.value + config.rate * static_cast<double>(windows), Capacity(config));
}

// Sliding window: floor(previous * weight) + current for the sliding window
// ending at `t`, the stored windows shifted forward as time passes.
double SlidingUsed(const LimitConfig& config, const LimitState& base, Micros t) {
  Micros windows = (t - base.ts) / config.period;
  double current = windows == 0 ? base.value : 0;
  double previous = windows == 0 ? base.prev : (windows == 1 ? base.value : 0);
  Micros into = (t - base.ts) - windows * config.period;
  double weight = static_cast<double>(config.period - into) / static_cast<double>(config.period);
  return std::floor(previous * weight) + current;
}

// Whether a full limit could grant the request at all: the test every
// decision makes, on two full shards for a sharded limit.
bool CanEverGrant(const LimitConfig& config, const Request& request) {
  return config.shards > 1 ? ShardsCanEverGrant(config, request) : CanEverTake(config, request);
}

}  // namespace

LimitState InitialState(const LimitConfig& config, Micros now, Micros origin) noexcept {
  switch (config.kind) {
    case Kind::kTokenBucket:
      return LimitState{true, Capacity(config), now, 0};
    case Kind::kFixedWindow:
      return LimitState{true, Capacity(config), WindowStartFor(now, origin, config.period), 0};
    case Kind::kSlidingWindow:
      break;
  }
  return LimitState{true, 0, WindowStartFor(now, origin, config.period), 0};
}

namespace {

// Fills the window fields of a view: the current window and, for sliding
// windows, the counts shifted into it.
void RollWindows(const LimitConfig& config, View* v) {
  Micros windows = (v->eff - v->base.ts) / config.period;
  v->window_start = v->base.ts + windows * config.period;
  if (config.kind == Kind::kFixedWindow) {
    v->avail = FixedWindowTokens(config, v->base, windows);
    return;
  }
  v->current = windows == 0 ? v->base.value : 0;
  v->previous = windows == 0 ? v->base.prev : (windows == 1 ? v->base.value : 0);
  v->used = SlidingUsed(config, v->base, v->eff);
  v->avail = std::max(0.0, config.rate - v->used);
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
    return Invalid("Only the window kinds have a start.",
                   "config field \"start\" does not apply to kind \"%s\"", kind);
  if (config.kind == Kind::kSlidingWindow && config.has_capacity)
    return Invalid("A sliding window holds at most rate per period.",
                   "config field \"capacity\" does not apply to kind \"%s\"", kind);
  if (config.kind == Kind::kSlidingWindow && config.has_max_reserved)
    return Invalid("A sliding window cannot reserve.",
                   "config field \"maxReserved\" does not apply to kind \"%s\"", kind);
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
  if (!config.has_kind)
    return Invalid("Use \"token bucket\", \"fixed window\" or \"sliding window\".",
                   "config field \"kind\" is required");
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
  Status status = CheckFieldsApply(config);
  if (!status.ok()) return status;
  return CheckRefillHorizon(config);
}

Status ValidateAmount(double count) noexcept {
  if (FiniteAtLeast(count, 0, true) && count <= kMaxMagnitude) return Status{};
  return Invalid("Count must be a number from 0 to 1e300.", "count must be a number between 0 and 1e300");
}

Status ValidateRequest(const LimitConfig& config, const Request& request) noexcept {
  Status amount = ValidateAmount(request.count);
  if (!amount.ok()) return amount;
  if (request.reserve && config.kind == Kind::kSlidingWindow)
    return Invalid("Only token bucket and fixed window limits can reserve.",
                   "reserve does not apply to kind \"sliding window\"");
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

double Capacity(const LimitConfig& config) noexcept {
  if (config.kind == Kind::kSlidingWindow) return config.rate;
  return config.has_capacity ? config.capacity : config.rate;
}

double MaxDeficit(const LimitConfig& config) noexcept {
  double horizon = static_cast<double>(kHorizonMicros);
  double period = static_cast<double>(config.period);
  double refillable = 0;
  if (config.kind == Kind::kTokenBucket) refillable = horizon / period * config.rate;
  if (config.kind == Kind::kFixedWindow) refillable = config.rate * std::floor(horizon / period);
  double given = config.has_max_reserved ? config.max_reserved : kInfinity;
  return std::min({given, refillable, kMaxMagnitude});
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

namespace detail {

View ViewAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept {
  View v;
  v.base = state.exists ? state : InitialState(config, now, origin);
  v.eff = std::max(now, v.base.ts);
  if (config.kind == Kind::kTokenBucket) {
    v.avail = RefillTokens(config, v.base.value, v.eff - v.base.ts);
    v.window_start = v.eff;
    return v;
  }
  RollWindows(config, &v);
  return v;
}

bool CanTake(const LimitConfig& config, const View& view, double count, double deficit) noexcept {
  if (config.kind == Kind::kSlidingWindow) return view.used + count <= config.rate;
  return view.avail - count >= -deficit;
}

bool CanEverTake(const LimitConfig& config, const Request& request) noexcept {
  View full = ViewAt(config, LimitState{}, 0, 0);
  return CanTake(config, full, request.count, request.reserve ? MaxDeficit(config) : 0);
}

LimitState TakeFrom(const LimitConfig& config, const View& view, double take) noexcept {
  switch (config.kind) {
    case Kind::kTokenBucket:
      return LimitState{true, view.avail - take, view.eff, 0};
    case Kind::kFixedWindow:
      return LimitState{true, view.avail - take, view.window_start, 0};
    case Kind::kSlidingWindow:
      break;
  }
  return LimitState{true, view.current + take, view.window_start, view.previous};
}

LimitState LeaveAt(const LimitConfig& config, const View& view, double level) noexcept {
  if (config.kind == Kind::kSlidingWindow) return TakeFrom(config, view, view.avail - level);
  Micros ts = config.kind == Kind::kTokenBucket ? view.eff : view.window_start;
  return LimitState{true, level, ts, 0};
}

LimitState GiveBack(const LimitConfig& config, const View& view, double amount) noexcept {
  if (config.kind == Kind::kSlidingWindow)
    return LimitState{true, std::max(0.0, view.current - amount), view.window_start, view.previous};
  double value = std::max(view.avail, std::min(view.avail + amount, Capacity(config)));
  Micros ts = config.kind == Kind::kTokenBucket ? view.eff : view.window_start;
  return LimitState{true, value, ts, 0};
}

Micros WhenAvailable(const LimitConfig& config, const View& view, double count, double deficit) noexcept {
  const LimitState& base = view.base;
  if (config.kind == Kind::kTokenBucket) {
    return FirstWhere(view.eff, SearchLimit(view.eff), [&](Micros t) {
      return RefillTokens(config, base.value, t - base.ts) - count >= -deficit;
    });
  }
  if (config.kind == Kind::kFixedWindow) {
    Micros first = (view.window_start - base.ts) / config.period;
    Micros windows = FirstWhere(first, first + SearchLimit(0) / config.period, [&](Micros w) {
      return FixedWindowTokens(config, base, w) - count >= -deficit;
    });
    return std::max(view.eff, base.ts + windows * config.period);
  }
  Micros slid_out = view.window_start + 2 * config.period;  // both windows are empty by then
  return FirstWhere(view.eff, std::max(view.eff, slid_out),
                    [&](Micros t) { return SlidingUsed(config, base, t) + count <= config.rate; });
}

}  // namespace detail

Decision Decide(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                const Request& request) noexcept {
  View v = ViewAt(config, state, now, origin);
  bool fits = Fits(config, v, request.count);
  double after = v.avail - request.count;
  Decision d;
  d.ok = fits || (request.reserve && CanTake(config, v, request.count, MaxDeficit(config)));
  if (d.ok) {
    d.next = TakeFrom(config, v, request.count);
    d.remaining = after;
    View stored = ViewAt(config, d.next, v.eff, origin);
    d.has_retry = !fits;
    if (d.has_retry) d.retry_at = WhenAvailable(config, stored, 0);
    d.full_at = WhenAvailable(config, stored, Capacity(config));
  } else {
    d.remaining = v.avail;
    d.has_retry = true;
    d.retry_at = WhenAvailable(config, v, request.count, request.reserve ? MaxDeficit(config) : 0);
    d.full_at = WhenAvailable(config, v, Capacity(config));
  }
  if (d.has_retry) d.retry_after = Seconds(d.retry_at - now);
  d.reset_after = Seconds(std::max<Micros>(0, d.full_at - now));
  return d;
}

Reading ValueAt(const LimitConfig& config, const LimitState& state, Micros now, Micros origin) noexcept {
  View v = ViewAt(config, state, now, origin);
  return Reading{v.avail, v.window_start};
}

Decision Refund(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                double count) noexcept {
  View v = ViewAt(config, state, now, origin);
  Decision d;
  d.ok = true;
  d.next = GiveBack(config, v, count);
  View stored = ViewAt(config, d.next, v.eff, origin);
  d.remaining = stored.avail;
  d.full_at = WhenAvailable(config, stored, Capacity(config));
  d.reset_after = Seconds(std::max<Micros>(0, d.full_at - now));
  return d;
}

Decision ApplyJitter(const LimitConfig& config, const Decision& decision, double unit) noexcept {
  if (!config.has_jitter || decision.ok || !decision.has_retry) return decision;
  Micros span = config.jitter_is_period ? config.period : config.jitter;
  Micros delay = static_cast<Micros>(std::floor(unit * static_cast<double>(span)));
  Decision d = decision;
  d.retry_at += delay;
  d.retry_after += Seconds(delay);
  return d;
}

}  // namespace ratelimit
