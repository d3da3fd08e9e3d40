// The paths that read, lock and write state rows: one limit, a sharded
// limit, several limits all-or-nothing, and refunds. The core decides; this
// file only chooses which rows to read or lock, in which order, and stores.
//
// Lock order: rows are locked in (name, key, shard) byte order, and a call
// only ever waits for a row that sorts after every row it already holds, so
// calls of this extension cannot deadlock each other.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "pg_adapter.h"
#include "policy.h"

extern "C" {
#include "miscadmin.h"
}

#include "compat.h"

namespace ratelimit_pg {
namespace {

using ratelimit::ShardDecision;
using ratelimit::ShardInput;

RowWrite WriteOf(const LimitCall& call, const LimitState& next, Micros idle_at) {
  return TaggedRow(call.config, next, idle_at);
}

// Reads a row under its lock (FOR UPDATE). A row another transaction holds
// counts as a lock wait (ratelimit_stats) before this call waits for it.
StoredState LockRowCountingWait(const LimitCall& call) {
  StoredState stored = ReadState(call.id, ReadMode::kLockSkipLocked);
  if (!stored.busy) return stored;
  CountLockWait(call);
  return ReadState(call.id, ReadMode::kLock);
}

// LockOrCreateRow of row `id` of the call's limit, counting a lock wait
// when it has to wait.
bool LockOrCreateCountingWait(const LimitCall& call, const LimitId& id, const RowWrite& initial,
                              bool announce, StoredState* out) {
  if (LockOrCreateRow(id, initial, false, announce, out)) return true;
  CountLockWait(call);
  return LockOrCreateRow(id, initial, true, announce, out);
}

LimitId ShardId(const LimitId& id, int shard) {
  LimitId shard_id = id;
  shard_id.shard = shard;
  return shard_id;
}

// The state a call decides on: StateForKind's, and under a config of the
// owner's no deficit deeper than that config allows. A reservation made
// under a caller's inline config before the owner defined the name (even in
// a transaction still open while the definition was made, whose row the
// definition could not see) never holds the owner's limit longer than the
// owner's bound.
LimitState LiveFor(const LimitCall& call, const StoredState& stored, Micros now) {
  LimitState state = StateForKind(stored, call.config.kind, now);
  if (!call.owner_config) return state;
  return ratelimit::WithinMaxDeficit(
      call.config.shards > 1 ? ratelimit::ShardConfig(call.config) : call.config, state);
}

// ---- one row ------------------------------------------------------------

Decision DecideNow(const LimitCall& call, const StoredState& stored) {
  Micros now = ClockNow();
  return ratelimit::Decide(call.config, LiveFor(call, stored, now), now, call.origin, call.request);
}

// Stores a granted decision: insert for a new row, else update if the row is
// still what was read. False: someone else got there first.
bool WriteIfUnchanged(const LimitCall& call, const StoredState& stored, const Decision& decision) {
  RowWrite row = WriteOf(call, decision.next, decision.full_at);
  if (!stored.state.exists) return InsertState(call.id, row);
  return UpdateStateIfUnchanged(stored, row);
}

// How a step that may have waited ended: decided, or the call's config
// changed meanwhile (it was completed again: the call starts over).
enum class Outcome { kDone, kRestart };

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
      if (InsertState(call.id, row)) return true;
      continue;
    }
    UpdateLockedState(call.id, &stored.tid, row);
    return true;
  }
}

// Decides from the latest committed state: a refusal returns without a lock
// or a write; a grant writes only if the row is unchanged, else the row lock
// path decides again.
Outcome ConsumeRow(LimitCall* call, Decision* out) {
  StoredState stored = ReadState(call->id, ReadMode::kUnlocked);
  *out = DecideNow(*call, stored);
  if (!out->ok) return Outcome::kDone;
  if (RefreshConfig(call)) return Outcome::kRestart;
  if (WriteIfUnchanged(*call, stored, *out)) return Outcome::kDone;
  LockedStep step{call, {}, Outcome::kDone};
  RunInSubtransaction(LockedRowStep, &step);
  *out = step.decision;
  return step.outcome;
}

// ---- sharded limits -----------------------------------------------------

ShardDecision DecideShardsNow(const LimitCall& call, const ShardInput* inputs, int count) {
  return ratelimit::DecideShards(ratelimit::ShardConfig(call.config), inputs, count, ClockNow(), call.origin,
                                 call.request, call.config.shards);
}

// Writes the shard rows a granted decision takes from (all locked by us;
// tids[i] is where inputs[i]'s locked version is).
void WriteShards(const LimitCall& call, const ShardInput* inputs, const ItemPointerData* tids,
                 const ShardDecision& decision) {
  for (int i = 0; i < decision.count; ++i) {
    const ratelimit::ShardWrite& write = decision.writes[i];
    if (write.write)
      UpdateLockedState(ShardId(call.id, inputs[i].shard), &tids[i],
                        WriteOf(call, write.next, write.full_at));
  }
}

// Reads one shard row without a lock (no row: its initial state); stored
// (may be nullptr) receives the row as read.
void ReadShard(const LimitCall& call, int shard, ShardInput* out, StoredState* stored = nullptr) {
  StoredState read = ReadState(ShardId(call.id, shard), ReadMode::kUnlocked);
  out->shard = shard;
  out->state = LiveFor(call, read, ClockNow());
  if (stored != nullptr) *stored = read;
}

// The row a never-used row of `config` is created as: its initial state,
// idle at once (the same as no row at all, so nothing observable is written).
RowWrite InitialRow(const LimitConfig& config, Micros origin) {
  LimitConfig row_config = config.shards > 1 ? ratelimit::ShardConfig(config) : config;
  Micros now = ClockNow();
  return TaggedRow(config, ratelimit::InitialState(row_config, now, origin), now);
}

// Locks one shard row, creating it in its initial state if there is none.
// Without wait, a shard another transaction holds or is creating is busy:
// false, and nobody waits for it. With wait, false means it vanished.
// tid receives where the locked version is.
bool LockShard(const LimitCall& call, int shard, bool wait, ShardInput* out, ItemPointerData* tid) {
  StoredState stored;
  LimitId id = ShardId(call.id, shard);
  RowWrite initial = InitialRow(call.config, call.origin);
  bool locked = wait ? LockOrCreateCountingWait(call, id, initial, true, &stored)
                     : LockOrCreateRow(id, initial, false, true, &stored);
  out->shard = shard;
  out->state = LiveFor(call, stored, ClockNow());
  *tid = stored.tid;
  return locked;
}

// Decides with the locked shards (one or two), writes a grant, reports it.
Decision DecideAndWriteShards(const LimitCall& call, const ShardInput* inputs, const ItemPointerData* tids,
                              int count) {
  ShardDecision decision = DecideShardsNow(call, inputs, count);
  if (decision.summary.ok) WriteShards(call, inputs, tids, decision);
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
Outcome TakeFromBoth(const LimitCall& call, const ShardInput& held, const ItemPointerData& held_tid,
                     const ShardInput& other_fast, Decision* out) {
  bool may_wait = other_fast.shard > held.shard;
  ShardInput other;
  ItemPointerData other_tid;
  if (!LockShard(call, other_fast.shard, may_wait, &other, &other_tid)) {
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
  ItemPointerData tids[2] = {held_tid, other_tid};
  *out = DecideAndWriteShards(call, pair, tids, 2);
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
      !UpdateStateIfUnchanged(stored[preferred], WriteOf(call, write.next, write.full_at)))
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
Outcome TakeFromLocked(const LimitCall& call, const ShardInput& held, const ItemPointerData& held_tid,
                       const ShardInput& other_fast, Decision* out) {
  if (AloneFits(call, held)) {
    ShardDecision decision = DecideShardsNow(call, &held, 1);
    WriteShards(call, &held, &held_tid, decision);
    ShardInput after[2] = {ShardInput{held.shard, decision.writes[0].next}, other_fast};
    *out = decision.summary;
    out->remaining = ratelimit::EstimatedTotal(ratelimit::ShardConfig(call.config), after, 2,
                                               call.config.shards, ClockNow(), call.origin);
    return Outcome::kDone;
  }
  return TakeFromBoth(call, held, held_tid, other_fast, out);
}

// Locks only the shards the decision needs: the preferred shard without
// waiting, else the other one if it alone would do, else both in canonical
// order. A call never waits for a row that sorts before one it holds.
Outcome ConsumeShardsLocked(const LimitCall& call, const ShardInput fast[2], const ShardDecision& planned,
                            Decision* out) {
  int preferred = SingleShardUsed(planned);
  ShardInput held;
  ItemPointerData held_tid;
  if (preferred >= 0) {
    int other = 1 - preferred;
    if (LockShard(call, fast[preferred].shard, false, &held, &held_tid))
      return TakeFromLocked(call, held, held_tid, fast[other], out);
    if (AloneFits(call, fast[other]) && LockShard(call, fast[other].shard, false, &held, &held_tid))
      return TakeFromLocked(call, held, held_tid, fast[preferred], out);
  }
  if (!LockShard(call, fast[0].shard, true, &held, &held_tid)) return Outcome::kRestart;
  return TakeFromLocked(call, held, held_tid, fast[1], out);
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

// The power of two choices: decide on two random shards from the committed
// state (a refusal ends there), then lock and decide again. A shard row
// that does not exist yet is created, in its initial state, only when a
// call locks it (LockShard), so a limit's first use (or its first after
// cleanup) takes from free shards like any other call.
Outcome ConsumeSharded(LimitCall* call, Decision* out) {
  int candidate[2];
  ratelimit::PickCandidates(call->config.shards, compat::RandomUnit(), compat::RandomUnit(), candidate);
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

// Every shard's row (shard i at index i), palloc'd; a row another
// algorithm wrote reads as no row.
ShardInput* ReadDenseShards(const LimitCall& call, bool lock) {
  int shards = call.config.shards;
  auto* stored = static_cast<StoredState*>(palloc(sizeof(StoredState) * shards));
  ReadAllShards(call.id, lock, shards, stored);
  ShardInput* all = static_cast<ShardInput*>(palloc(sizeof(ShardInput) * shards));
  Micros now = ClockNow();
  for (int i = 0; i < shards; ++i) all[i] = ShardInput{i, LiveFor(call, stored[i], now)};
  pfree(stored);
  return all;
}

// ---- several limits, all or nothing --------------------------------------

// One row to lock for ratelimit_limit_all, and its state as entries take from it.
struct LockedRow {
  LimitId id;
  const LimitCall* call;  // the first entry using the row (its config creates the row)
  StoredState stored;     // as locked
  LimitState current;     // as the entries decided so far leave it
  bool dirty;
  Micros idle_at;
};

// The rows one entry uses: its row, or its two candidate shards (none when
// a shadow entry's count can never fit: it touches no row).
struct EntryRows {
  int count;
  int shard[2];
  int row[2];
};

// Byte order of (name, key NULL first): the canonical order of limits.
int CompareIds(const LimitId& a, const LimitId& b) {
  int c = std::memcmp(a.name, b.name, std::min(a.name_len, b.name_len));
  if (c != 0 || a.name_len != b.name_len) return c != 0 ? c : (a.name_len < b.name_len ? -1 : 1);
  if ((a.key == nullptr) != (b.key == nullptr)) return a.key == nullptr ? -1 : 1;
  if (a.key != nullptr) {
    c = std::memcmp(a.key, b.key, std::min(a.key_len, b.key_len));
    if (c != 0 || a.key_len != b.key_len) return c != 0 ? c : (a.key_len < b.key_len ? -1 : 1);
  }
  return 0;
}

// (name, key, shard) order: the canonical lock order.
int CompareRows(const void* left, const void* right) {
  const LimitId& a = static_cast<const LockedRow*>(left)->id;
  const LimitId& b = static_cast<const LockedRow*>(right)->id;
  int c = CompareIds(a, b);
  return c != 0 ? c : a.shard - b.shard;
}

// Orders indexes of calls by their limit's (name, key).
int CompareCallIndexes(const void* left, const void* right, void* arg) {
  const LimitCall* calls = static_cast<const LimitCall*>(arg);
  return CompareIds(calls[*static_cast<const int*>(left)].id, calls[*static_cast<const int*>(right)].id);
}

// One limit has one config in a call: elements naming the same (name, key)
// under different configs are refused with 22023 before anything is read.
void RequireOneConfigPerLimit(const LimitCall* calls, int count) {
  int* order = static_cast<int*>(palloc(sizeof(int) * count));
  for (int i = 0; i < count; ++i) order[i] = i;
  qsort_arg(order, count, sizeof(int), CompareCallIndexes, const_cast<LimitCall*>(calls));
  for (int i = 1; i < count; ++i) {
    const LimitCall& a = calls[order[i - 1]];
    const LimitCall& b = calls[order[i]];
    if (CompareIds(a.id, b.id) != 0 || ratelimit::SameLimit(a.config, b.config)) continue;
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("limits[%d] and limits[%d] use rate limit \"%.*s\" under different configs",
                    std::min(order[i - 1], order[i]), std::max(order[i - 1], order[i]),
                    EchoLength(a.id.name, a.id.name_len), a.id.name),
             errdetail("A limit has one config in a call: elements with the same name and key must pass the "
                       "same config (or none).")));
  }
  pfree(order);
}

// What a shadow entry whose count can never fit answers: refused (then
// shadow-granted by the caller) with the tokens there are now; no row is
// read for a lock or written.
Decision NeverFitsRefusal(const LimitCall& call) {
  LimitCall reading = call;
  reading.request = Request{0, false};
  reading.never_fits = false;
  Decision decision = Check(reading);
  decision.ok = false;
  decision.has_retry = false;
  return decision;
}

// The unlocked decision of one entry; picks its candidate shards if sharded.
Decision FastDecision(const LimitCall& call, EntryRows* rows) {
  if (call.never_fits) {
    rows->count = 0;
    return NeverFitsRefusal(call);
  }
  if (call.config.shards <= 1) {
    rows->count = 1;
    rows->shard[0] = 0;
    return DecideNow(call, ReadState(call.id, ReadMode::kUnlocked));
  }
  rows->count = 2;
  ratelimit::PickCandidates(call.config.shards, compat::RandomUnit(), compat::RandomUnit(), rows->shard);
  ShardInput fast[2];
  ReadShard(call, rows->shard[0], &fast[0]);
  ReadShard(call, rows->shard[1], &fast[1]);
  return DecideShardsNow(call, fast, 2).summary;
}

// Locks one row, creating it in its initial state (the same as no row) if
// it does not exist yet. Only a shard row's creation is announced (its lock
// held to the transaction's end) to callers that skip busy shards; an
// unsharded row is never skipped, and takes no such lock.
void LockEntryRow(LockedRow* row) {
  const LimitCall& call = *row->call;
  if (!LockOrCreateCountingWait(call, row->id, InitialRow(call.config, call.origin), call.config.shards > 1,
                                &row->stored))
    elog(ERROR, "ratelimit: a state row changed under its lock");
}

// Collects, sorts and deduplicates the rows of all entries, then locks them
// in canonical order. Returns the number of distinct rows.
int LockAllRows(const LimitCall* calls, int count, EntryRows* entries, LockedRow** rows_out) {
  int total = 0;
  for (int i = 0; i < count; ++i) total += entries[i].count;
  LockedRow* rows = static_cast<LockedRow*>(palloc0(sizeof(LockedRow) * (total + 1)));
  int n = 0;
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < entries[i].count; ++j) {
      LockedRow& row = rows[n++];
      row.id = ShardId(calls[i].id, entries[i].shard[j]);
      row.call = &calls[i];
    }
  qsort(rows, n, sizeof(LockedRow), CompareRows);
  int distinct = 0;
  for (int i = 0; i < n; ++i)
    if (distinct == 0 || CompareRows(&rows[distinct - 1], &rows[i]) != 0) rows[distinct++] = rows[i];
  for (int i = 0; i < distinct; ++i) LockEntryRow(&rows[i]);
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < entries[i].count; ++j) {
      LockedRow key{};
      key.id = ShardId(calls[i].id, entries[i].shard[j]);
      void* found = std::bsearch(&key, rows, distinct, sizeof(LockedRow), CompareRows);
      entries[i].row[j] = static_cast<int>(static_cast<LockedRow*>(found) - rows);
    }
  *rows_out = rows;
  return distinct;
}

// Decides one entry on its locked rows at `now`, applying a grant to them.
Decision DecideEntryLocked(const LimitCall& call, const EntryRows& entry, LockedRow* rows, Micros now) {
  if (entry.count == 0) return NeverFitsRefusal(call);
  if (entry.count == 1) {
    LockedRow& row = rows[entry.row[0]];
    Decision d = ratelimit::Decide(call.config, row.current, now, call.origin, call.request);
    if (d.ok) {
      row.current = d.next;
      row.dirty = true;
      row.idle_at = d.full_at;
    }
    return d;
  }
  ShardInput inputs[2];
  for (int j = 0; j < 2; ++j) inputs[j] = ShardInput{entry.shard[j], rows[entry.row[j]].current};
  ShardDecision d = ratelimit::DecideShards(ratelimit::ShardConfig(call.config), inputs, 2, now, call.origin,
                                            call.request, call.config.shards);
  for (int j = 0; d.summary.ok && j < 2; ++j) {
    if (!d.writes[j].write) continue;
    LockedRow& row = rows[entry.row[j]];
    row.current = d.writes[j].next;
    row.dirty = true;
    row.idle_at = d.writes[j].full_at;
  }
  return d.summary;
}

// Whether an entry's answer stops the whole call: a refusal, unless its
// limit is in shadow mode (then it is answered as granted and takes nothing;
// a refused entry never changes its rows in DecideEntryLocked).
bool Blocks(const LimitCall& call, const Decision& decision) { return !decision.ok && !call.config.shadow; }

// Spreads the retry times of refused entries (those with jitter configured).
void JitterAll(const LimitCall* calls, int count, Decision* out) {
  for (int i = 0; i < count; ++i)
    out[i] = ratelimit::ApplyJitter(calls[i].config, out[i], compat::RandomUnit());
}

// The locked part of ratelimit_limit_all, in a subtransaction kept only if
// every entry is granted: a refusal under the locks releases them all.
struct AllStep {
  LimitCall* calls;
  int count;
  EntryRows* entries;
  Decision* out;
  bool config_changed;
};

bool LockedAllStep(void* context) {
  auto* step = static_cast<AllStep*>(context);
  LockedRow* rows = nullptr;
  int distinct = LockAllRows(step->calls, step->count, step->entries, &rows);
  for (int i = 0; i < step->count; ++i)
    if (RefreshConfig(&step->calls[i])) step->config_changed = true;
  if (step->config_changed) return false;  // decided again under the configs now in force
  Micros now = ClockNow();
  for (int i = 0; i < distinct; ++i) rows[i].current = LiveFor(*rows[i].call, rows[i].stored, now);
  bool all_ok = true;
  for (int i = 0; i < step->count; ++i) {
    step->out[i] = DecideEntryLocked(step->calls[i], step->entries[i], rows, now);
    all_ok = all_ok && !Blocks(step->calls[i], step->out[i]);
  }
  if (!all_ok) return false;  // one refused under the locks: consume none
  for (int i = 0; i < distinct; ++i)
    if (rows[i].dirty)
      UpdateLockedState(rows[i].id, &rows[i].stored.tid,
                        TaggedRow(rows[i].call->config, rows[i].current, rows[i].idle_at));
  return true;
}

}  // namespace

Decision Consume(LimitCall* call) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (call->never_fits) return NeverFitsRefusal(*call);
    Decision decision;
    Outcome outcome = call->config.shards > 1 ? ConsumeSharded(call, &decision) : ConsumeRow(call, &decision);
    if (outcome == Outcome::kDone)
      return ratelimit::ApplyJitter(call->config, decision, compat::RandomUnit());
  }
}

Decision Check(const LimitCall& call) {
  if (call.never_fits) return NeverFitsRefusal(call);
  Decision decision;
  if (call.config.shards > 1) {
    ShardInput* all = ReadDenseShards(call, false);
    decision = ratelimit::CheckShards(ratelimit::ShardConfig(call.config), all, call.config.shards,
                                      ClockNow(), call.origin, call.request);
  } else {
    decision = DecideNow(call, ReadState(call.id, ReadMode::kUnlocked));
  }
  return ratelimit::ApplyJitter(call.config, decision, compat::RandomUnit());
}

ratelimit::Reading CurrentValue(const LimitCall& call) {
  if (call.config.shards <= 1) {
    Micros now = ClockNow();
    return ratelimit::ValueAt(call.config, LiveFor(call, ReadState(call.id, ReadMode::kUnlocked), now), now,
                              call.origin);
  }
  ShardInput* all = ReadDenseShards(call, false);
  return ratelimit::TotalValueAt(ratelimit::ShardConfig(call.config), all, call.config.shards, ClockNow(),
                                 call.origin);
}

Decision RefundTokens(LimitCall* call, double amount) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (call->config.shards <= 1) {
      StoredState stored = LockRowCountingWait(*call);
      if (RefreshConfig(call)) continue;  // changed while this call waited: the rows are locked anyway
      Micros now = ClockNow();
      Decision decision =
          ratelimit::Refund(call->config, LiveFor(*call, stored, now), now, call->origin, amount);
      if (stored.state.exists)
        UpdateLockedState(call->id, &stored.tid, WriteOf(*call, decision.next, decision.full_at));
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
        UpdateLockedState(ShardId(call->id, i), nullptr, WriteOf(*call, writes[i].next, writes[i].full_at));
    return summary;
  }
}

void ConsumeAll(LimitCall* calls, int count, Decision* out) {
  if (count == 0) return;
  EntryRows* entries = static_cast<EntryRows*>(palloc0(sizeof(EntryRows) * count));
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    RequireOneConfigPerLimit(calls, count);
    bool all_ok = true;
    for (int i = 0; i < count; ++i) {
      out[i] = FastDecision(calls[i], &entries[i]);
      all_ok = all_ok && !Blocks(calls[i], out[i]);
    }
    if (!all_ok) return JitterAll(calls, count, out);  // refused from the committed state: no lock, no write
    AllStep step{calls, count, entries, out, false};
    RunInSubtransaction(LockedAllStep, &step);
    if (!step.config_changed) return JitterAll(calls, count, out);
  }
}

}  // namespace ratelimit_pg
