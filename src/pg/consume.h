// The decisions on stored rows, written against the storage seam
// (storage.h): one row (consume_row.cpp), a sharded limit
// (consume_sharded.cpp), several limits all or nothing (consume_all.cpp).
// A call whose config changes while it waits is completed again
// (RefreshConfig) and decided anew.
#pragma once

#include "limit_call.h"

namespace ratelimit_pg {

Decision Consume(LimitCall* call);
Decision Check(const LimitCall& call);
ratelimit::Reading CurrentValue(const LimitCall& call);
Decision RefundTokens(LimitCall* call, double amount);
void ConsumeAll(LimitCall* calls, int count, Decision* out);

}  // namespace ratelimit_pg
