// ratelimit_limit_all's argument (limits_json.cpp).
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// Parses the limits array into palloc'd calls (config unresolved); returns
// how many.
int EntriesFromJson(Jsonb* limits, LimitCall** out);

}  // namespace ratelimit_pg
