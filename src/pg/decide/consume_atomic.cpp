// The decisions of a storage undone by refunds (consume_atomic.h): the core
// decides under the row's short lock, at the clock read under it (so calls
// on one limit are decided in the order of their clocks, as a table row's
// lock orders them).
#include "decide/consume_atomic.h"

#include "decide/decide.h"
#include "decide/pending_grants.h"
#include "storage/storage.h"
#include "support/clock.h"
#include "support/errors.h"

namespace ratelimit_pg {
namespace {

struct StepContext {
  const LimitCall* call;
  LockedClock clock;
  Micros now;     // read under the lock
  double amount;  // RefundTokensStep's
  Decision decision;
  uint64 incarnation;  // of the entry decided on
};

bool TakeStep(const StoredState& stored, void* context, RowWrite* out) {
  auto* step = static_cast<StepContext*>(context);
  const LimitCall& call = *step->call;
  step->now = step->clock.Read();
  step->incarnation = stored.incarnation;
  step->decision =
      ratelimit::Decide(call.config, LiveFor(call, stored, step->now), step->now, call.origin, call.request);
  if (!step->decision.ok) return false;
  *out = WriteOf(call, step->decision.next, step->decision.full_at);
  return true;
}

bool RefundTokensStep(const StoredState& stored, void* context, RowWrite* out) {
  auto* step = static_cast<StepContext*>(context);
  const LimitCall& call = *step->call;
  step->now = step->clock.Read();
  step->decision =
      ratelimit::Refund(call.config, LiveFor(call, stored, step->now), step->now, call.origin, step->amount);
  if (!stored.state.exists) return false;  // no row is as full as a refund makes it
  *out = WriteOf(call, step->decision.next, step->decision.full_at);
  return true;
}

// The room a new entry of the call's limit may take.
NewRowRoom RoomFor(const LimitCall& call) {
  const StorageOptions& options = call.config.options;
  return NewRowRoom{!call.owner_config, options.has_name_rows ? static_cast<int64>(options.name_rows) : 0};
}

// A call under a config this transaction changed and has not committed:
// the entry would keep what a rollback of the change takes back.
void RequireCommittedConfig(const Storage& storage, const LimitCall& call) {
  if (ConfigChangedHere(call.id)) storage.raise_uncommitted_config(call);
}

}  // namespace

Decision TakeAtomically(const LimitCall& call, bool keep_scoped) {
  const Storage& storage = StorageFor(call);
  RequireCommittedConfig(storage, call);
  bool remember = keep_scoped || !call.config.options.keep_on_rollback;
  int record = remember ? ReservePendingGrant(storage, call) : -1;
  StepContext step{&call, ClockForLock(), 0, 0, {}, 0};
  ModifyResult result = storage.modify(call.id, RoomFor(call), TakeStep, &step);
  if (result != ModifyResult::kDone) {
    if (remember) ForgetPendingGrant(record);
    storage.raise_no_room(call, result);
  }
  if (remember) {
    if (step.decision.ok) {
      RememberGrant(record, step.decision, call.config.options.keep_on_rollback, step.incarnation);
    } else {
      ForgetPendingGrant(record);
    }
  }
  return step.decision;
}

Decision RefundAtomically(const LimitCall& call, double amount) {
  const Storage& storage = StorageFor(call);
  RequireCommittedConfig(storage, call);
  StepContext step{&call, ClockForLock(), 0, amount, {}, 0};
  storage.modify(call.id, RoomFor(call), RefundTokensStep, &step);
  return step.decision;
}

}  // namespace ratelimit_pg
