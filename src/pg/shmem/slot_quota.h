// A quota of slots in shared memory (slot_quota.cpp) of which a share, the
// callers' (entries made under callers' inline configs, names without a
// definition), may take at most half, so a caller with nothing but PUBLIC's
// grants can never take a slot from the owner's limits. The memory
// storage's entries, its long entries and its names, and ratelimit_stats'
// names are counted by one each.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "port/atomics.h"
}

namespace ratelimit_pg {

// Lives in a shared table's header; set up by InitSlotQuota.
struct SlotQuota {
  pg_atomic_uint32 used;         // slots taken
  pg_atomic_uint32 shared_used;  // of them, by the callers' share
};

void InitSlotQuota(SlotQuota* quota);
// Takes a slot of `most` (shared: within the share, half of them, at least
// one); false, nothing taken, when there is none.
bool ReserveSlot(SlotQuota* quota, int most, bool shared);
// Gives back a slot ReserveSlot took with the same `shared`.
void ReleaseSlot(SlotQuota* quota, bool shared);

}  // namespace ratelimit_pg
