// The partition side of the router (routed_calls.cpp): the calls
// ratelimit_proxy sends, which return an error as data instead of raising
// it, so that PL/Proxy keeps its connection to the partition.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// ratelimit_proxy_limit / _check(name, key, config, count, reserve, throws,
// error_format): ratelimit_limit's / _check's row and the error's fields.
Datum RoutedLimit(FunctionCallInfo fcinfo);
Datum RoutedCheck(FunctionCallInfo fcinfo);
// ratelimit_proxy_limit_all(limits, throws, error_format): ratelimit_limit_all's
// rows with the error's fields (NULL), or one row of NULLs and the error.
Datum RoutedLimitAll(FunctionCallInfo fcinfo);
// ratelimit_proxy_simulate(config, arrivals, counts, name, key):
// ratelimit_simulate's rows with the error's fields (NULL), or one row of
// NULLs and the error.
Datum RoutedSimulate(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
