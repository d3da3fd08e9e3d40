#include "headers.h"

#include <cmath>

namespace ratelimit {
namespace {

// A non-negative real rounded down to a header integer (clamped).
std::int64_t FloorToHeader(double value) noexcept {
  if (!(value > 0)) return 0;  // also NaN
  double floored = std::floor(value);
  if (floored >= static_cast<double>(kMaxHeaderInteger)) return kMaxHeaderInteger;
  return static_cast<std::int64_t>(floored);
}

// A non-negative real rounded up to a header integer (clamped).
std::int64_t CeilToHeader(double value) noexcept {
  if (!(value > 0)) return 0;
  double ceiled = std::ceil(value);
  if (ceiled >= static_cast<double>(kMaxHeaderInteger)) return kMaxHeaderInteger;
  return static_cast<std::int64_t>(ceiled);
}

// Unix microseconds rounded up to whole seconds (never before the epoch).
std::int64_t CeilEpochSeconds(double micros) noexcept {
  return CeilToHeader(micros / static_cast<double>(kMicrosPerSecond));
}

}  // namespace

bool HeaderAnswerFinite(const HeaderAnswer& answer) noexcept {
  return std::isfinite(answer.remaining) && std::isfinite(answer.reset_after) &&
         (!answer.has_retry || std::isfinite(answer.retry_after));
}

HeaderNumbers ComputeHeaderNumbers(const LimitConfig& config, const HeaderAnswer& answer,
                                   Micros now) noexcept {
  HeaderNumbers out;
  double period_seconds = static_cast<double>(config.period) / static_cast<double>(kMicrosPerSecond);
  out.window = CeilToHeader(period_seconds);
  if (out.window < 1) out.window = 1;
  // Exact for whole-second periods; a sub-second or fractional period is
  // described by the rate over its rounded-up window.
  // A rate below one per window would read as "nothing allowed" (q=0):
  // widen the window until it holds one whole token.
  bool under_one = config.rate * static_cast<double>(out.window) < period_seconds;
  if (config.rate > 0 && under_one) out.window = CeilToHeader(period_seconds / config.rate);
  out.quota = config.period > 0 && out.window * kMicrosPerSecond == config.period
                  ? FloorToHeader(config.rate)
                  : FloorToHeader(config.rate * static_cast<double>(out.window) / period_seconds);
  if (config.rate > 0 && out.quota < 1) out.quota = 1;  // rounding below a whole token
  out.limit = FloorToHeader(Capacity(config));
  out.remaining = FloorToHeader(answer.remaining);
  if (out.remaining > out.limit) out.remaining = out.limit;
  double more_after = answer.has_retry ? answer.retry_after : answer.reset_after;
  if (!(more_after > 0)) more_after = 0;
  out.reset_seconds = CeilToHeader(more_after);
  if (answer.has_retry && out.reset_seconds < 1) out.reset_seconds = 1;  // as Retry-After
  double reset_micros = answer.has_retry && answer.has_retry_at
                            ? static_cast<double>(answer.retry_at)
                            : static_cast<double>(now) + more_after * static_cast<double>(kMicrosPerSecond);
  out.reset_epoch = CeilEpochSeconds(reset_micros);
  out.has_retry_after = answer.has_retry;
  if (out.has_retry_after) {
    out.retry_after = CeilToHeader(answer.retry_after);
    if (out.retry_after < 1) out.retry_after = 1;  // a retry is never "now" (RFC 9110 allows 0, clients spin)
  }
  return out;
}

}  // namespace ratelimit
