// ratelimit_simulate (simulation.cpp): the core's simulator over SQL
// arrays, one row per arrival. Touches no storage, no lock, no catalog.
#pragma once

#include "simulate.h"

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// The simulation of ratelimit_simulate's arguments (config, arrivals,
// counts, name, key): the arrivals and their answers, palloc'd in the
// current memory context; returns how many. Raises on bad arguments.
int SimulateFromArgs(FunctionCallInfo fcinfo, ratelimit::Arrival** arrivals, Decision** decisions);
// A row of ratelimit_simulate: at, count, ok, remaining, retry_after (NULL
// unless a retry time, as in ratelimit_result).
constexpr int kSimulatedColumns = 5;
void EncodeSimulated(const ratelimit::Arrival& arrival, const Decision& decision, Datum* values, bool* nulls);

// ratelimit_simulate's body.
Datum SimulateLimit(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
