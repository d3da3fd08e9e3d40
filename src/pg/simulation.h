// ratelimit_simulate (simulation.cpp): the core's simulator over SQL
// arrays, one row per arrival. Touches no storage, no lock, no catalog.
#pragma once

#include "limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

Datum SimulateLimit(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
