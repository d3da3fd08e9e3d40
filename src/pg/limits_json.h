// Identity fields and ratelimit_limit_all's argument (limits_json.cpp).
#pragma once

#include "limit_call.h"

namespace ratelimit_pg {

// Points id fields at a text value's bytes (22023 past kMaxNameBytes).
void SetIdText(text* value, const char* what, text** field, const char** bytes, int* len);
// Parses the limits array into palloc'd calls (config unresolved); returns
// how many.
int EntriesFromJson(Jsonb* limits, LimitCall** out);

}  // namespace ratelimit_pg
