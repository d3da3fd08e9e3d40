// The bodies of the SQL-callable functions, run by entry_points.cpp's
// fmgr entry points: the calls on limits (functions.cpp), the limits as
// data (config_functions.cpp) and the status view (status_view.cpp).
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

Datum Define(FunctionCallInfo fcinfo);
Datum Undefine(FunctionCallInfo fcinfo);
Datum Override(FunctionCallInfo fcinfo);
Datum Unoverride(FunctionCallInfo fcinfo);
Datum StatsReset(FunctionCallInfo fcinfo);
Datum DefinitionsChanged(FunctionCallInfo fcinfo);

Datum StatusRows(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
