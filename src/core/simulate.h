// The simulator (simulate.cpp): a limit's decisions over a sequence of
// arrivals, from a row never used, as ratelimit_limit makes them with the
// clock at each arrival, but with the state kept in a local variable:
// nothing stored, nothing locked. Every function is noexcept.
#pragma once

#include "core_guard.h"
#include "limiter.h"

namespace ratelimit {

// The most arrivals one simulation takes (its answers are one row each).
constexpr std::size_t kMaxArrivals = 100000;

// One arrival: a request of `count` tokens (never reserving) at clock `at`.
struct Arrival {
  Micros at = 0;
  double count = 1;
};

// Checks that a valid config can be simulated: a sharded limit in a table
// picks its shards at random, so its answers are not a function of the
// arrivals (a memory limit is decided on one entry: the adapter sets shards
// to 1 for it, as calls do).
Status ValidateSimulatedConfig(const LimitConfig& config) noexcept;

// Checks the arrivals: at most kMaxArrivals, in order (each at or after the
// one before), each count a request ratelimit_limit accepts for `config`
// (a shadow limit's count that can never fit is accepted, as it is by
// calls). On an error *failed is the index of the arrival at fault.
Status ValidateArrivals(const LimitConfig& config, const Arrival* arrivals, std::size_t count,
                        std::size_t* failed) noexcept;

// Decides each arrival in order as ratelimit_limit(count => a.count) does
// at clock a.at on a row of `config` (one row: not sharded) with windows
// aligned to `origin`: a grant's state is kept, a refusal keeps nothing,
// a row idle since its full_at reads as no row, and a shadow limit answers
// its refusals as grants. out[i] is the answer to arrivals[i], without
// jitter (its retry time is the earliest; a call adds a random delay).
// The arrivals must have passed ValidateArrivals.
void Simulate(const LimitConfig& config, Micros origin, const Arrival* arrivals, std::size_t count,
              Decision* out) noexcept;

}  // namespace ratelimit
