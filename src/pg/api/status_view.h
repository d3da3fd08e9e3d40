// The ratelimit_status view's rows (status_view.cpp), run by
// entry_points.cpp's fmgr entry point.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

Datum StatusRows(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
