// The half-share slot quota: counted with atomics, no lock, as the slot is
// taken before the entry is made and given back if the entry is not.
#include <algorithm>

#include "shmem/slot_quota.h"

namespace ratelimit_pg {
namespace {

// The callers' share of `most` slots: half, at least one.
uint32 SharedMost(int most) { return static_cast<uint32>(std::max(1, most / 2)); }

}  // namespace

void InitSlotQuota(SlotQuota* quota) {
  pg_atomic_init_u32(&quota->used, 0);
  pg_atomic_init_u32(&quota->shared_used, 0);
}

bool ReserveSlot(SlotQuota* quota, int most, bool shared) {
  if (pg_atomic_add_fetch_u32(&quota->used, 1) > static_cast<uint32>(most)) {
    pg_atomic_sub_fetch_u32(&quota->used, 1);
    return false;
  }
  if (shared && pg_atomic_add_fetch_u32(&quota->shared_used, 1) > SharedMost(most)) {
    pg_atomic_sub_fetch_u32(&quota->shared_used, 1);
    pg_atomic_sub_fetch_u32(&quota->used, 1);
    return false;
  }
  return true;
}

void ReleaseSlot(SlotQuota* quota, bool shared) {
  pg_atomic_sub_fetch_u32(&quota->used, 1);
  if (shared) pg_atomic_sub_fetch_u32(&quota->shared_used, 1);
}

}  // namespace ratelimit_pg
