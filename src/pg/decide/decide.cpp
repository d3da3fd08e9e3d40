// What the decision paths share (decide.h), over the storage seam.
#include "decide/decide.h"

#include "storage/storage.h"

#include "policy.h"
#include "shmem/stats.h"
#include "storage/row_codec.h"
#include "support/clock.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {

using ratelimit::ShardDecision;
using ratelimit::ShardInput;

LimitId ShardId(const LimitId& id, int shard) {
  LimitId shard_id = id;
  shard_id.shard = shard;
  return shard_id;
}

RowWrite WriteOf(const LimitCall& call, const LimitState& next, Micros idle_at) {
  return TaggedRow(call.config, next, idle_at);
}

RowWrite InitialRow(const LimitConfig& config, Micros origin) {
  LimitConfig row_config = ratelimit::RowConfig(config);
  Micros now = ClockNow();
  return TaggedRow(config, ratelimit::InitialState(row_config, now, origin), now);
}

// A reservation made under a caller's inline config before the owner
// defined the name (even in a transaction still open while the definition
// was made, whose row the definition could not see) never holds the
// owner's limit longer than the owner's bound.
LimitState LiveFor(const LimitCall& call, const StoredState& stored, Micros now) {
  LimitState state = ratelimit::Realigned(ratelimit::RowConfig(call.config), call.origin,
                                          StateForKind(stored, call.config.kind, now), stored.period, now);
  if (!call.owner_config) return state;
  return ratelimit::WithinMaxDeficit(ratelimit::RowConfig(call.config), state);
}

Decision DecideNow(const LimitCall& call, const StoredState& stored) {
  Micros now = ClockNow();
  return ratelimit::Decide(call.config, LiveFor(call, stored, now), now, call.origin, call.request);
}

ShardDecision DecideShardsNow(const LimitCall& call, const ShardInput* inputs, int count) {
  return ratelimit::DecideShards(ratelimit::ShardConfig(call.config), inputs, count, ClockNow(), call.origin,
                                 call.request, call.config.shards);
}

StoredState LockRowCountingWait(const LimitCall& call) {
  const Storage& storage = StorageFor(call);
  StoredState stored = storage.read(call.id, ReadMode::kLockSkipLocked);
  if (!stored.busy) return stored;
  CountLockWait(call);
  return storage.read(call.id, ReadMode::kLock);
}

bool LockOrCreateCountingWait(const LimitCall& call, const LimitId& id, const RowWrite& initial,
                              bool announce, StoredState* out) {
  const Storage& storage = StorageFor(call);
  if (storage.lock_or_create(id, initial, false, announce, out)) return true;
  CountLockWait(call);
  return storage.lock_or_create(id, initial, true, announce, out);
}

void ReadShard(const LimitCall& call, int shard, ShardInput* out, StoredState* stored) {
  StoredState read = StorageFor(call).read(ShardId(call.id, shard), ReadMode::kUnlockedForWrite);
  out->shard = shard;
  out->state = LiveFor(call, read, ClockNow());
  if (stored != nullptr) *stored = read;
}

ShardInput* ReadDenseShards(const LimitCall& call, bool lock) {
  int shards = call.config.shards;
  auto* stored = static_cast<StoredState*>(palloc(sizeof(StoredState) * shards));
  StorageFor(call).read_all_shards(call.id, lock, shards, stored);
  ShardInput* all = static_cast<ShardInput*>(palloc(sizeof(ShardInput) * shards));
  Micros now = ClockNow();
  for (int i = 0; i < shards; ++i) all[i] = ShardInput{i, LiveFor(call, stored[i], now)};
  pfree(stored);
  return all;
}

}  // namespace ratelimit_pg
