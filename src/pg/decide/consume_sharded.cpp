// A sharded limit: the power of two choices. Two random shards are decided
// on from the committed state (a refusal ends there), then only the shards
// the decision needs are locked, in canonical order, and decided again in a
// subtransaction kept only for a grant.
#include "decide/consume_sharded.h"

#include "storage/storage.h"

#include "config/config_cache.h"
#include "decide/decide.h"
#include "support/clock.h"
#include "support/subtransaction.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::ShardDecision;
using ratelimit::ShardInput;

// Writes the shard rows a granted decision takes from (all locked by us;
// versions[i] is where inputs[i]'s locked version is).
void WriteShards(const LimitCall& call, const ShardInput* inputs, const RowVersion* versions,
                 const ShardDecision& decision) {
  for (int i = 0; i < decision.count; ++i) {
    const ratelimit::ShardWrite& write = decision.writes[i];
    if (write.write)
      StorageFor(call).update_locked(ShardId(call.id, inputs[i].shard), &versions[i],
                                     WriteOf(call, write.next, write.full_at));
  }
}

// Locks one shard row, creating it in its initial state if there is none.
// Without wait, a shard another transaction holds or is creating is busy:
// false, and nobody waits for it. With wait, false means it vanished.
// version receives where the locked version is.
bool LockShard(const LimitCall& call, int shard, bool wait, ShardInput* out, RowVersion* version) {
  StoredState stored;
  LimitId id = ShardId(call.id, shard);
  RowWrite initial = InitialRow(call.config, call.origin);
  bool locked = wait ? LockOrCreateCountingWait(call, id, initial, true, &stored)
                     : StorageFor(call).lock_or_create(id, initial, false, true, &stored);
  out->shard = shard;
  out->state = LiveFor(call, stored, ClockNow());
  *version = stored.version;
  return locked;
}

// Decides with the locked shards (one or two), writes a grant, reports it.
Decision DecideAndWriteShards(const LimitCall& call, const ShardInput* inputs, const RowVersion* versions,
                              int count) {
  ShardDecision decision = DecideShardsNow(call, inputs, count);
  if (decision.summary.ok) WriteShards(call, inputs, versions, decision);
  return decision.summary;
}

// Whether one shard alone grants the request now without reserving: only
// then is the other candidate left alone. A reservation that one shard
// could make by going into deficit is decided on both shards, so it is
// never answered worse (later) than the two together, or than the same
// call without reserve, would answer (as ratelimit_check does).
bool AloneFits(const LimitCall& call, const ShardInput& input) {
  Decision alone = DecideShardsNow(call, &input, 1).summary;
  return alone.ok && !alone.has_retry;
}

// The shard a decision on two shards takes from when it needs only one, or
// -1 when it takes from both.
int SingleShardUsed(const ShardDecision& decision) {
  if (decision.writes[0].write != decision.writes[1].write) return decision.writes[0].write ? 0 : 1;
  return -1;
}

// Both shards are needed and `held` is locked: lock the other one, waiting
// only if it sorts after `held` (canonical order), else only if it is free.
Outcome TakeFromBoth(const LimitCall& call, const ShardInput& held, const RowVersion& held_version,
                     const ShardInput& other_fast, Decision* out) {
  bool may_wait = other_fast.shard > held.shard;
  ShardInput other;
  RowVersion other_version;
  if (!LockShard(call, other_fast.shard, may_wait, &other, &other_version)) {
    if (may_wait) return Outcome::kRestart;  // the row vanished
    ShardInput pair[2] = {held, other_fast};
    Micros now = ClockNow();
    *out = ratelimit::ContendedRefusal(DecideShardsNow(call, pair, 2).summary, now);
    // A refusal reports the tokens there are now, not what a grant would leave.
    out->remaining = ratelimit::EstimatedTotal(ratelimit::ShardConfig(call.config), pair, 2,
                                               call.config.shards, now, call.origin);
    return Outcome::kDone;
  }
  ShardInput pair[2] = {held, other};
  RowVersion versions[2] = {held_version, other_version};
  *out = DecideAndWriteShards(call, pair, versions, 2);
  return Outcome::kDone;
}

// The uncontended sharded grant, as ConsumeRow's: when the plan takes from
// one existing shard that alone grants at once, update that row if it is
// still the version read (no lock is waited for and none taken before the
// write, so no subtransaction is needed: nothing here can refuse). False:
// the locked path decides.
bool TakeFromOneUnchanged(const LimitCall& call, const ShardInput fast[2], const StoredState stored[2],
                          const ShardDecision& planned, Decision* out) {
  int preferred = SingleShardUsed(planned);
  if (preferred < 0 || !stored[preferred].state.exists || !AloneFits(call, fast[preferred])) return false;
  ShardDecision decision = DecideShardsNow(call, &fast[preferred], 1);
  const ratelimit::ShardWrite& write = decision.writes[0];
  if (!decision.summary.ok || !write.write ||
      !StorageFor(call).update_if_unchanged(ShardId(call.id, fast[preferred].shard), stored[preferred],
                                            WriteOf(call, write.next, write.full_at)))
    return false;
  ShardInput after[2] = {ShardInput{fast[preferred].shard, write.next}, fast[1 - preferred]};
  *out = decision.summary;
  out->remaining = ratelimit::EstimatedTotal(ratelimit::ShardConfig(call.config), after, 2,
                                             call.config.shards, ClockNow(), call.origin);
  return true;
}

// Takes from one locked shard if it alone fits now, else from both.
// remaining is estimated from both candidates either way (as a call that
// takes from both reports it), the other one at its committed state.
Outcome TakeFromLocked(const LimitCall& call, const ShardInput& held, const RowVersion& held_version,
                       const ShardInput& other_fast, Decision* out) {
  if (AloneFits(call, held)) {
    ShardDecision decision = DecideShardsNow(call, &held, 1);
    WriteShards(call, &held, &held_version, decision);
    ShardInput after[2] = {ShardInput{held.shard, decision.writes[0].next}, other_fast};
    *out = decision.summary;
    out->remaining = ratelimit::EstimatedTotal(ratelimit::ShardConfig(call.config), after, 2,
                                               call.config.shards, ClockNow(), call.origin);
    return Outcome::kDone;
  }
  return TakeFromBoth(call, held, held_version, other_fast, out);
}

// Locks only the shards the decision needs: the preferred shard without
// waiting, else the other one if it alone would do, else both in canonical
// order. A call never waits for a row that sorts before one it holds.
Outcome ConsumeShardsLocked(const LimitCall& call, const ShardInput fast[2], const ShardDecision& planned,
                            Decision* out) {
  int preferred = SingleShardUsed(planned);
  ShardInput held;
  RowVersion held_version;
  if (preferred >= 0) {
    int other = 1 - preferred;
    if (LockShard(call, fast[preferred].shard, false, &held, &held_version))
      return TakeFromLocked(call, held, held_version, fast[other], out);
    if (AloneFits(call, fast[other]) && LockShard(call, fast[other].shard, false, &held, &held_version))
      return TakeFromLocked(call, held, held_version, fast[preferred], out);
  }
  if (!LockShard(call, fast[0].shard, true, &held, &held_version)) return Outcome::kRestart;
  return TakeFromLocked(call, held, held_version, fast[1], out);
}

// The locked part of a sharded call, in a subtransaction kept only for a
// grant (so a refusal holds no shard's lock). kRestart inside: a shard row
// vanished (decide again from the committed state).
struct ShardedStep {
  LimitCall* call;
  ShardInput fast[2];
  ShardDecision planned;
  Decision decision;
  Outcome outcome;  // of the locking: kRestart when a row vanished
  bool config_changed;
};

bool LockedShardsStep(void* context) {
  auto* step = static_cast<ShardedStep*>(context);
  step->outcome = ConsumeShardsLocked(*step->call, step->fast, step->planned, &step->decision);
  // A change of the config committed while this call waited applies to it.
  if (RefreshConfig(step->call)) {
    step->config_changed = true;
    return false;
  }
  return step->outcome == Outcome::kDone && step->decision.ok;
}

}  // namespace

// The power of two choices: decide on two random shards from the committed
// state (a refusal ends there), then lock and decide again. A shard row
// that does not exist yet is created, in its initial state, only when a
// call locks it (LockShard), so a limit's first use (or its first after
// cleanup) takes from free shards like any other call.
Outcome ConsumeSharded(LimitCall* call, Decision* out) {
  int candidate[2];
  ratelimit::PickCandidates(call->config.shards, RandomUnit(), RandomUnit(), candidate);
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    ShardedStep step{call, {}, {}, {}, Outcome::kDone, false};
    StoredState stored[2];
    ReadShard(*call, candidate[0], &step.fast[0], &stored[0]);
    ReadShard(*call, candidate[1], &step.fast[1], &stored[1]);
    step.planned = DecideShardsNow(*call, step.fast, 2);
    if (!step.planned.summary.ok) {
      *out = step.planned.summary;
      return Outcome::kDone;
    }
    if (RefreshConfig(call)) return Outcome::kRestart;
    if (TakeFromOneUnchanged(*call, step.fast, stored, step.planned, out)) return Outcome::kDone;
    RunInSubtransaction(LockedShardsStep, &step);
    if (step.config_changed) return Outcome::kRestart;
    if (step.outcome == Outcome::kDone) {
      *out = step.decision;
      return Outcome::kDone;
    }
  }
}

}  // namespace ratelimit_pg
