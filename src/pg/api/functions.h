// The bodies of the SQL functions on limits (functions.cpp), run by
// entry_points.cpp's fmgr entry points.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

Datum Limit(FunctionCallInfo fcinfo);
Datum CheckLimit(FunctionCallInfo fcinfo);
Datum Reset(FunctionCallInfo fcinfo);
Datum Value(FunctionCallInfo fcinfo);
Datum LimitAll(FunctionCallInfo fcinfo);
Datum Refund(FunctionCallInfo fcinfo);
Datum Headers(FunctionCallInfo fcinfo);
Datum HeadersForKey(FunctionCallInfo fcinfo);
Datum Cleanup(FunctionCallInfo fcinfo);

// The decisions behind ratelimit_limit / _check (consume: limit) and
// ratelimit_limit_all, before a result is formed (routed_calls.cpp forms
// the router's). A refusal with throws => true raises, as the calls do.
Decision DecideLimitOrCheck(FunctionCallInfo fcinfo, bool consume);
// The elements and their decisions (palloc'd in the caller's context); returns how many.
int DecideLimitAll(FunctionCallInfo fcinfo, LimitCall** calls, Decision** decisions);

}  // namespace ratelimit_pg
