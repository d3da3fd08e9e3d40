// The simulator: ratelimit_limit's decisions over a sequence of arrivals,
// the state kept between them instead of stored.
#include "simulate.h"

#include "config.h"
#include "policy.h"

namespace ratelimit {
namespace {

// What a shadow call whose count can never fit answers before its shadow
// grant: refused, with the tokens there are now (the adapter's
// NeverFitsRefusal: a read taking nothing).
Decision NeverFitsRefusal(const LimitConfig& config, const LimitState& live, Micros now,
                          Micros origin) noexcept {
  Decision d = Decide(config, live, now, origin, Request{0, false});
  d.ok = false;
  d.has_retry = false;
  return d;
}

}  // namespace

Status ValidateSimulatedConfig(const LimitConfig& config) noexcept {
  if (config.shards > 1)
    return Invalid("A sharded limit picks its shards at random, so its answers cannot be simulated.",
                   "config field \"shards\" cannot be simulated");
  return Status{};
}

Status ValidateArrivals(const LimitConfig& config, const Arrival* arrivals, std::size_t count,
                        std::size_t* failed) noexcept {
  *failed = 0;
  if (count > kMaxArrivals)
    return Invalid("A simulation takes at most 100000 arrivals.", "too many arrivals: %zu", count);
  for (std::size_t i = 0; i < count; ++i) {
    *failed = i;
    if (i > 0 && arrivals[i].at < arrivals[i - 1].at)
      return Invalid("Each arrival must be at or after the one before it.", "arrivals are not in order");
    Request request{arrivals[i].count, false};
    Status form = ValidateRequestForm(config, request);
    if (!form.ok()) return form;
    if (!(config.shadow && NeverGrantable(config, request))) {
      Status fits = ValidateRequest(config, request);
      if (!fits.ok()) return fits;
    }
  }
  return Status{};
}

void Simulate(const LimitConfig& config, Micros origin, const Arrival* arrivals, std::size_t count,
              Decision* out) noexcept {
  LimitState stored;  // no row yet
  Micros idle_at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    Micros now = arrivals[i].at;
    Request request{arrivals[i].count, false};
    LimitState live = LiveState(stored, true, idle_at, now);
    bool never_fits = config.shadow && NeverGrantable(config, request);
    Decision d =
        never_fits ? NeverFitsRefusal(config, live, now, origin) : Decide(config, live, now, origin, request);
    if (d.ok) {
      stored = d.next;
      idle_at = d.full_at;
    } else if (config.shadow) {
      d = ShadowGrant(d);
    }
    out[i] = d;
  }
}

}  // namespace ratelimit
