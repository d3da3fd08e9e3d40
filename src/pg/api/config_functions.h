// The bodies of the limits-as-data SQL functions (config_functions.cpp),
// run by entry_points.cpp's fmgr entry points.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

Datum Define(FunctionCallInfo fcinfo);
Datum Undefine(FunctionCallInfo fcinfo);
Datum Override(FunctionCallInfo fcinfo);
Datum Unoverride(FunctionCallInfo fcinfo);
Datum StatsReset(FunctionCallInfo fcinfo);
// The statement trigger on the definition table.
Datum DefinitionsChanged(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
