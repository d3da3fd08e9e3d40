// Several limits, all or nothing (ratelimit_limit_all): every entry is
// decided from the committed state (a refusal ends there, holding nothing),
// then every row the entries use is locked in canonical order, across
// storages, and decided again in a subtransaction kept only if every entry
// is granted.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "decide/consume_all.h"

#include "config/config_cache.h"
#include "decide/consume.h"
#include "decide/consume_atomic.h"
#include "decide/decide.h"
#include "policy.h"
#include "storage/storage.h"
#include "support/clock.h"
#include "support/errors.h"
#include "support/subtransaction.h"

extern "C" {
#include "miscadmin.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::ShardDecision;
using ratelimit::ShardInput;

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
// a shadow entry's count can never fit: it touches no row; none to lock when
// its storage is undone by refunds: it is taken after every locked entry).
struct EntryRows {
  bool unlocked;  // in a storage undone by refunds: taken atomically, apart
  int count;
  int shard[2];
  int row[2];
};

// (name, key, shard) order: the canonical lock order.
int CompareRows(const void* left, const void* right) {
  const LimitId& a = static_cast<const LockedRow*>(left)->id;
  const LimitId& b = static_cast<const LockedRow*>(right)->id;
  int c = CompareLimitIds(a, b);
  return c != 0 ? c : a.shard - b.shard;
}

// Orders indexes of calls by their limit's (name, key).
int CompareCallIndexes(const void* left, const void* right, void* arg) {
  const LimitCall* calls = static_cast<const LimitCall*>(arg);
  return CompareLimitIds(calls[*static_cast<const int*>(left)].id, calls[*static_cast<const int*>(right)].id);
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
    if (CompareLimitIds(a.id, b.id) != 0 || SameSettings(a.config, b.config)) continue;
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

// The unlocked decision of one entry; picks its candidate shards if sharded.
Decision FastDecision(const LimitCall& call, EntryRows* rows) {
  if (call.never_fits) {
    rows->unlocked = false;
    rows->count = 0;
    return NeverFitsRefusal(call);
  }
  rows->unlocked = StorageFor(call).undo == Undo::kByRefund;
  if (rows->unlocked) {
    rows->count = 0;
    return DecideNow(call, StorageFor(call).read(call.id, ReadMode::kUnlocked));
  }
  if (call.config.shards <= 1) {
    rows->count = 1;
    rows->shard[0] = 0;
    return DecideNow(call, StorageFor(call).read(call.id, ReadMode::kUnlockedForWrite));
  }
  rows->count = 2;
  ratelimit::PickCandidates(call.config.shards, RandomUnit(), RandomUnit(), rows->shard);
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
  if (entry.count == 0) return NeverFitsRefusal(call);  // (unlocked entries are taken apart)
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
  for (int i = 0; i < count; ++i) out[i] = ratelimit::ApplyJitter(calls[i].config, out[i], RandomUnit());
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
    if (step->entries[i].unlocked) continue;
    step->out[i] = DecideEntryLocked(step->calls[i], step->entries[i], rows, now);
    all_ok = all_ok && !Blocks(step->calls[i], step->out[i]);
  }
  if (!all_ok) return false;  // one refused under the locks: consume none
  // Then the entries undone by refunds, taken at once, each given back if
  // a later one refuses (this subtransaction's rollback), whatever their
  // on_rollback says.
  for (int i = 0; i < step->count; ++i) {
    const LimitCall& call = step->calls[i];
    if (!step->entries[i].unlocked) continue;
    step->out[i] = call.never_fits ? NeverFitsRefusal(call) : TakeAtomically(call, true);
    if (Blocks(call, step->out[i])) return false;
  }
  for (int i = 0; i < distinct; ++i)
    if (rows[i].dirty)
      StorageFor(*rows[i].call)
          .update_locked(rows[i].id, &rows[i].stored.version,
                         WriteOf(*rows[i].call, rows[i].current, rows[i].idle_at));
  return true;
}

}  // namespace

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
