// The router's routed functions (routing.cpp): every ratelimit_proxy_*
// function of ratelimit_proxy 0.9.0 that reaches the partitions.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// ratelimit_proxy_route: runs the calling function's statement (by its
// name, routing.cpp's list) on the partition of its first argument (a
// hash), on every partition or on any one, and returns its rows as the
// function's declared result.
Datum RouteCall(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
