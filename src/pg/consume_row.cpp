// One unsharded row: decide from the latest committed state, write a grant
// if the row is still what was read, else decide again under the row lock.
#include "consume_row.h"
#include "storage_registry.h"

#include "config_cache.h"
#include "decide.h"
#include "subtransaction.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {
namespace {

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

}  // namespace

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

}  // namespace ratelimit_pg
