// The decision API of consume.h over the storage seam: one unsharded row
// (here: decide from the latest committed state, write a grant if the row is
// still what was read, else decide again under the row lock) or a sharded
// limit (consume_sharded.cpp), reads and refunds. The core decides; these
// files only choose which rows to read or lock, in which order, and store.
#include "decide/consume.h"

#include "config/config_cache.h"
#include "decide/consume_atomic.h"
#include "decide/consume_sharded.h"
#include "decide/decide.h"
#include "storage/storage.h"
#include "support/clock.h"
#include "support/subtransaction.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::ShardInput;

// Stores a granted decision: insert for a new row, else update if the row is
// still what was read. False: someone else got there first.
bool WriteIfUnchanged(const LimitCall& call, const StoredState& stored, const Decision& decision) {
  const Storage& storage = StorageFor(call);
  RowWrite row = WriteOf(call, decision.next, decision.full_at);
  if (!stored.state.exists) return storage.insert(call.id, row);
  return storage.update_if_unchanged(call.id, stored, row);
}

// One locked step of a call: its input and what it decided.
struct LockedStep {
  LimitCall* call;
  Decision decision;
  Outcome outcome;
};

// The contended path, in a subtransaction (LockedRowStep): lock the row
// (SELECT ... FOR UPDATE), read the clock after the lock is held, decide
// and write. Loops only if the row appears or vanishes under us (a
// concurrent first insert, reset or cleanup). Keeps the subtransaction only
// for a grant: a refusal leaves no row lock behind, so nobody queues behind
// a refused call's transaction.
bool LockedRowStep(void* context) {
  auto* step = static_cast<LockedStep*>(context);
  LimitCall& call = *step->call;
  const Storage& storage = StorageFor(call);
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    StoredState stored = LockRowCountingWait(call);
    // A change of the config committed while this call waited applies to it.
    if (RefreshConfig(&call)) {
      step->outcome = Outcome::kRestart;
      return false;
    }
    step->decision = DecideNow(call, stored);
    if (!step->decision.ok) return false;
    RowWrite row = WriteOf(call, step->decision.next, step->decision.full_at);
    if (!stored.state.exists) {
      if (storage.insert(call.id, row)) return true;
      continue;
    }
    storage.update_locked(call.id, &stored.version, row);
    return true;
  }
}

// A refusal from the committed state returns without a row lock or a write.
Outcome ConsumeRow(LimitCall* call, Decision* out) {
  StoredState stored = StorageFor(*call).read(call->id, ReadMode::kUnlockedForWrite);
  *out = DecideNow(*call, stored);
  if (!out->ok) return Outcome::kDone;
  if (RefreshConfig(call)) return Outcome::kRestart;
  if (WriteIfUnchanged(*call, stored, *out)) return Outcome::kDone;
  LockedStep step{call, {}, Outcome::kDone};
  RunInSubtransaction(LockedRowStep, &step);
  *out = step.decision;
  return step.outcome;
}

}  // namespace

Decision Consume(LimitCall* call) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (call->never_fits) return NeverFitsRefusal(*call);
    if (StorageFor(*call).undo == Undo::kByRefund)
      return ratelimit::ApplyJitter(call->config, TakeAtomically(*call, false), RandomUnit());
    Decision decision;
    Outcome outcome = call->config.shards > 1 ? ConsumeSharded(call, &decision) : ConsumeRow(call, &decision);
    if (outcome == Outcome::kDone) return ratelimit::ApplyJitter(call->config, decision, RandomUnit());
  }
}

Decision NeverFitsRefusal(const LimitCall& call) {
  LimitCall reading = call;
  reading.request = Request{0, false};
  reading.never_fits = false;
  Decision decision = Check(reading);
  decision.ok = false;
  decision.has_retry = false;
  return decision;
}

Decision Check(const LimitCall& call) {
  if (call.never_fits) return NeverFitsRefusal(call);
  Decision decision;
  if (call.config.shards > 1) {
    ShardInput* all = ReadDenseShards(call, false);
    decision = ratelimit::CheckShards(ratelimit::ShardConfig(call.config), all, call.config.shards,
                                      ClockNow(), call.origin, call.request);
  } else {
    decision = DecideNow(call, StorageFor(call).read(call.id, ReadMode::kUnlocked));
  }
  return ratelimit::ApplyJitter(call.config, decision, RandomUnit());
}

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
    if (storage.undo == Undo::kByRefund) return RefundAtomically(*call, amount);
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
