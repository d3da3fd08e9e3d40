// Several limits, all or nothing (consume_all.cpp): ratelimit_limit_all.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// Decides every call; out[i] answers calls[i]. Consumes from every limit
// or from none (shadow refusals aside).
void ConsumeAll(LimitCall* calls, int count, Decision* out);

}  // namespace ratelimit_pg
