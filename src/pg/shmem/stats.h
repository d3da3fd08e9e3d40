// Decision counters in shared memory (stats.cpp): ratelimit_stats.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// The GUCs and the names' table spec; in _PG_init, before RequestSharedTables.
void DefineStatsGucs();
// Each counts under the call's name; a name whose limit is the owner's (a
// definition or an override: call.owner_config) may take a slot of the
// half reserved for those.
void CountDecision(const LimitCall& call, const Decision& decision, bool shadow_refused);
void CountRefund(const LimitCall& call, double amount);
void CountLockWait(const LimitCall& call);
// A new row found no room in its storage (the view's memory_full column).
void CountNoRoom(const LimitCall& call);
// ratelimit_stats_rows' rows (materialized) and ratelimit_stats_reset.
Datum StatsRows(FunctionCallInfo fcinfo);
void ResetStats();
// Deletes the names of `database` (dropped, or its extension dropped). A
// session that counted one of them keeps a place for it in its slot, whose
// counts are lost from then on, as after a reset. Never raises.
void ForgetStatsOfDatabase(Oid database);

}  // namespace ratelimit_pg
