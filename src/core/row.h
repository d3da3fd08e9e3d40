// The public per-row helpers (defined in primitives.cpp, with the internal
// building blocks of primitives.h): a row's size, its deepest deficit and
// the state a never-used row starts in.
#pragma once

#include "types.h"

namespace ratelimit {

// The most a row holds: capacity when given (and the kind takes one), else rate.
double Capacity(const LimitConfig& config) noexcept;

// The deepest deficit a reservation may leave: maxReserved (if given),
// bounded by what refills within the horizon. 0 for a kind that cannot reserve.
double MaxDeficit(const LimitConfig& config) noexcept;

// The state a never-used row starts in at clock `now` (the same as no row).
LimitState InitialState(const LimitConfig& config, Micros now, Micros origin) noexcept;

}  // namespace ratelimit
