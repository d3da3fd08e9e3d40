// The bodies of the SQL functions on limits (functions.cpp), run by
// entry_points.cpp's fmgr entry points.
#pragma once

#include "limit_call.h"

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

}  // namespace ratelimit_pg
