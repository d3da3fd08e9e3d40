// The numbers of HTTP rate-limit response headers for one answer: the IETF
// httpapi draft's RateLimit-Policy and RateLimit fields, Retry-After, and
// GitHub's X-RateLimit-* headers. Formatting them as text is the adapter's
// job; every number here is already what a header may carry: a whole,
// non-negative number of at most 15 digits (a structured-field integer).
#pragma once

#include <cstdint>

#include "core_guard.h"
#include "limiter.h"

namespace ratelimit {

// The largest structured-field integer (RFC 8941): 15 decimal digits.
constexpr std::int64_t kMaxHeaderInteger = 999999999999999;

// One ratelimit_result as the headers see it.
struct HeaderAnswer {
  bool ok = false;
  bool has_retry = false;  // retry_after given (refused, or reserved for later)
  double retry_after = 0;  // seconds
  bool has_retry_at = false;
  Micros retry_at = 0;
  double remaining = 0;
  double reset_after = 0;  // seconds until full again
};

struct HeaderNumbers {
  std::int64_t quota = 0;          // RateLimit-Policy q: tokens per window
  std::int64_t window = 0;         // RateLimit-Policy w: seconds
  std::int64_t limit = 0;          // X-RateLimit-Limit: the most a client can hold
  std::int64_t remaining = 0;      // RateLimit r and X-RateLimit-Remaining
  std::int64_t reset_seconds = 0;  // RateLimit t: seconds until more quota
  std::int64_t reset_epoch = 0;    // X-RateLimit-Reset: Unix seconds of that instant
  bool has_retry_after = false;    // Retry-After is sent
  std::int64_t retry_after = 0;    // Retry-After: whole seconds, rounded up
};

// Whether every number of `answer` is finite (so the headers are defined).
bool HeaderAnswerFinite(const HeaderAnswer& answer) noexcept;

// The header numbers for an answer of a limit with a valid `config`, at
// clock `now`. The window is the period in whole seconds (rounded up, and
// widened until it holds at least one token), and the quota the rate scaled
// to that window, rounded down. "More quota" is
// the retry time when the answer has one, else the time the limit is full.
HeaderNumbers ComputeHeaderNumbers(const LimitConfig& config, const HeaderAnswer& answer,
                                   Micros now) noexcept;

}  // namespace ratelimit
