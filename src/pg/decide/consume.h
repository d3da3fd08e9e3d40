// The decisions on one limit's stored rows (consume.cpp), written against
// the storage seam (storage.h); several limits at once are consume_all.h's.
// A call whose config changes while it waits is completed again
// (RefreshConfig) and decided anew.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

Decision Consume(LimitCall* call);
// ratelimit_check's decision: from the committed state, without a lock.
Decision Check(const LimitCall& call);
ratelimit::Reading CurrentValue(const LimitCall& call);
// What a shadow call whose count can never fit answers: refused (then
// shadow-granted by the caller) with the tokens there are now; no row is
// read for a lock or written.
Decision NeverFitsRefusal(const LimitCall& call);
Decision RefundTokens(LimitCall* call, double amount);

}  // namespace ratelimit_pg
