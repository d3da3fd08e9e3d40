// One unsharded row (consume_row.cpp): decide from the latest committed
// state, write a grant if the row is still what was read, else decide again
// under the row lock in a subtransaction kept only for a grant.
#pragma once

#include "decide.h"

namespace ratelimit_pg {

Outcome ConsumeRow(LimitCall* call, Decision* out);

}  // namespace ratelimit_pg
