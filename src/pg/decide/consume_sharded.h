// A sharded limit (consume_sharded.cpp): the power of two choices.
#pragma once

#include "decide/decide.h"

namespace ratelimit_pg {

Outcome ConsumeSharded(LimitCall* call, Decision* out);

}  // namespace ratelimit_pg
