// The decision API of consume.h over the storage seam: one row
// (consume_row.cpp) or a sharded limit (consume_sharded.cpp), reads and
// refunds. The core decides; these files only choose which rows to read or
// lock, in which order, and store.
#include "consume.h"
#include "storage_registry.h"

#include "clock.h"
#include "config_cache.h"
#include "consume_memory.h"
#include "consume_row.h"
#include "consume_sharded.h"
#include "decide.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {

using ratelimit::ShardInput;

Decision Consume(LimitCall* call) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (call->never_fits) return NeverFitsRefusal(*call);
    if (!StorageFor(*call).row_locks)
      return ratelimit::ApplyJitter(call->config, TakeFromMemory(*call, false), RandomUnit());
    Decision decision;
    Outcome outcome = call->config.shards > 1 ? ConsumeSharded(call, &decision) : ConsumeRow(call, &decision);
    if (outcome == Outcome::kDone) return ratelimit::ApplyJitter(call->config, decision, RandomUnit());
  }
}

Decision Check(const LimitCall& call) { return CheckNow(call); }

ratelimit::Reading CurrentValue(const LimitCall& call) {
  if (call.config.shards <= 1) {
    Micros now = ClockNow();
    StoredState stored = StorageFor(call).read(call.id, ReadMode::kUnlocked);
    return ratelimit::ValueAt(call.config, LiveFor(call, stored, now), now, call.origin);
  }
  ShardInput* all = ReadDenseShards(call, false);
  return ratelimit::TotalValueAt(ratelimit::ShardConfig(call.config), all, call.config.shards, ClockNow(),
                                 call.origin);
}

Decision RefundTokens(LimitCall* call, double amount) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const Storage& storage = StorageFor(*call);
    if (!storage.row_locks) return RefundToMemory(*call, amount);
    if (call->config.shards <= 1) {
      StoredState stored = LockRowCountingWait(*call);
      if (RefreshConfig(call)) continue;  // changed while this call waited: the rows are locked anyway
      Micros now = ClockNow();
      Decision decision =
          ratelimit::Refund(call->config, LiveFor(*call, stored, now), now, call->origin, amount);
      if (stored.state.exists)
        storage.update_locked(call->id, &stored.version, WriteOf(*call, decision.next, decision.full_at));
      return decision;
    }
    ShardInput* all = ReadDenseShards(*call, true);
    if (RefreshConfig(call)) continue;
    int shards = call->config.shards;
    auto* writes = static_cast<ratelimit::ShardWrite*>(palloc0(sizeof(ratelimit::ShardWrite) * shards));
    Decision summary = ratelimit::RefundShards(ratelimit::ShardConfig(call->config), all, shards, ClockNow(),
                                               call->origin, amount, writes);
    for (int i = 0; i < shards; ++i)
      if (writes[i].write && all[i].state.exists)
        storage.update_locked(ShardId(call->id, i), nullptr,
                              WriteOf(*call, writes[i].next, writes[i].full_at));
    return summary;
  }
}

}  // namespace ratelimit_pg
