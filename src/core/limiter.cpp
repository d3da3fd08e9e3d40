// Single-row decisions: take (Decide), read (ValueAt), refund and jitter
// for a limit stored in one row, built from the per-row primitives.
#include "limiter.h"

#include <algorithm>
#include <cmath>

#include "primitives.h"

namespace ratelimit {

using detail::CanTake;
using detail::Fits;
using detail::GiveBack;
using detail::OutOfDeficitBy;
using detail::Seconds;
using detail::TakeFrom;
using detail::View;
using detail::ViewAt;
using detail::WhenAvailable;

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
    if (!fits) {
      // Never wait longer than the same call without reserve would.
      d.next = OutOfDeficitBy(config, d.next, WhenAvailable(config, v, request.count), origin);
      d.remaining = d.next.value;
    }
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

Decision RefundTaken(const LimitConfig& config, const LimitState& state, Micros now, Micros origin,
                     double count, Micros taken) noexcept {
  if (KindOf(config.kind).windowed && ValueAt(config, state, now, origin).ts != taken) return Decision{};
  return Refund(config, state, now, origin, count);
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
