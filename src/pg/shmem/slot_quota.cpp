// The half-share slot quota: counted with atomics, no lock, as the slot is
// taken before the entry is made and given back if the entry is not. The
// rule (quota_rule.h) never counts a slot it does not take.
#include <algorithm>

#include "shmem/quota_rule.h"
#include "shmem/slot_quota.h"

namespace ratelimit_pg {
namespace {

// The callers' share of `most` slots: half, at least one.
uint32 SharedMost(int most) { return static_cast<uint32>(std::max(1, most / 2)); }

// quota_rule.h's operations on PostgreSQL's atomics.
struct PgAtomicOps {
  static uint32 Load(pg_atomic_uint32* counter) { return pg_atomic_read_u32(counter); }
  static bool CompareExchange(pg_atomic_uint32* counter, uint32* expected, uint32 desired) {
    return pg_atomic_compare_exchange_u32(counter, expected, desired);
  }
  static void SubOne(pg_atomic_uint32* counter) { pg_atomic_fetch_sub_u32(counter, 1); }
};

}  // namespace

void InitSlotQuota(SlotQuota* quota) {
  pg_atomic_init_u32(&quota->used, 0);
  pg_atomic_init_u32(&quota->shared_used, 0);
}

bool ReserveSlot(SlotQuota* quota, int most, bool shared) {
  if (most <= 0) return false;
  return ReserveWithin<PgAtomicOps>(&quota->used, &quota->shared_used, static_cast<uint32>(most),
                                    SharedMost(most), shared);
}

void ReleaseSlot(SlotQuota* quota, bool shared) {
  pg_atomic_sub_fetch_u32(&quota->used, 1);
  if (shared) pg_atomic_sub_fetch_u32(&quota->shared_used, 1);
}

}  // namespace ratelimit_pg
