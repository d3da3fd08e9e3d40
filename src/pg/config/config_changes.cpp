// What a change of a limit's effective config (ratelimit_define,
// ratelimit_override, ratelimit_unoverride) does to its stored rows, in the
// changing transaction: the rows are locked (as SELECT ... FOR UPDATE, so
// callers holding them are waited for), then, key by key, reset (deleted)
// when the kind changes, or brought up to now under the old config and
// carried into the new one (the core's CarryRow: tokens stay, capped at the
// new capacity; a row past its idle_at is no row, as everywhere). A change
// of the shard count spreads the key's tokens evenly over the new shards.
#include <algorithm>
#include <cstring>

#include "config/config_changes.h"

#include "policy.h"
#include "shards.h"
#include "storage/row_codec.h"
#include "storage/storage.h"
#include "support/catalog.h"
#include "support/clock.h"

extern "C" {
#include "storage/lmgr.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::RowConfig;
using ratelimit::ShardInput;

// The rows of one key, as locked.
struct KeyRows {
  LimitId id;  // shard 0
  int count;
  int shard[ratelimit::kMaxShards];
  StoredState stored[ratelimit::kMaxShards];
};

// Whether the key's rows must be reset: one was written by another kind.
bool KindChanges(const KeyRows& rows, const LimitConfig* from, const LimitConfig& to) {
  if (from != nullptr && from->kind != to.kind) return true;
  for (int i = 0; i < rows.count; ++i)
    if (!StoredKindFits(rows.stored[i].kind, to.kind)) return true;
  return false;
}

// Same shard count: each row carried over on its own.
void CarryRows(const Storage& storage, const KeyRows& rows, const LimitConfig& from, const LimitConfig& to,
               Micros now) {
  const LimitId& id = rows.id;
  Micros from_origin = ratelimit::WindowOrigin(from, id.name, id.name_len, id.key, id.key_len);
  Micros to_origin = ratelimit::WindowOrigin(to, id.name, id.name_len, id.key, id.key_len);
  for (int i = 0; i < rows.count; ++i) {
    if (rows.shard[i] >= to.shards) continue;  // left over from more shards: never read
    ratelimit::StoredRow carried = ratelimit::CarryRow(RowConfig(from), from_origin, RowConfig(to), to_origin,
                                                       StateForKind(rows.stored[i], from.kind, now), now);
    LimitId shard_id = id;
    shard_id.shard = rows.shard[i];
    storage.update_locked(shard_id, nullptr, TaggedRow(to, carried.state, carried.idle_at));
  }
}

// Another shard count: the key's tokens now (missing shards are full),
// spread evenly over the new shards, each capped at its capacity (the
// core's SpreadRow).
void SpreadRows(const Storage& storage, const KeyRows& rows, const LimitConfig& from, const LimitConfig& to,
                Micros now) {
  const LimitId& id = rows.id;
  auto* inputs = static_cast<ShardInput*>(palloc0(sizeof(ShardInput) * from.shards));
  for (int i = 0; i < from.shards; ++i) inputs[i].shard = i;
  Micros eff = now;
  for (int i = 0; i < rows.count; ++i) {
    if (rows.shard[i] >= from.shards) continue;
    inputs[rows.shard[i]].state = StateForKind(rows.stored[i], from.kind, now);  // an idle row is full
    if (inputs[rows.shard[i]].state.exists) eff = std::max(eff, rows.stored[i].state.ts);
  }
  Micros from_origin = ratelimit::WindowOrigin(from, id.name, id.name_len, id.key, id.key_len);
  Micros to_origin = ratelimit::WindowOrigin(to, id.name, id.name_len, id.key, id.key_len);
  ratelimit::StoredRow spread = ratelimit::SpreadRow(from, from_origin, inputs, to, to_origin, eff, now);
  storage.delete_limit(id);
  if (!spread.state.exists) return;  // full: the same as no rows
  for (int shard = 0; shard < to.shards; ++shard) {
    LimitId shard_id = id;
    shard_id.shard = shard;
    storage.insert(shard_id, TaggedRow(to, spread.state, spread.idle_at));
  }
  pfree(inputs);
}

void ApplyToKey(const Storage& storage, const KeyRows& rows, const LimitSettings* from,
                const LimitSettings& to, Micros now) {
  if (rows.count == 0) return;
  // (Rows of a limit now kept in another storage are never read again.)
  if (KindChanges(rows, from, to) || &StorageFor(to.options) != &storage) {
    storage.delete_limit(rows.id);
  } else if (from == nullptr) {
    return;  // the config they were written under is not known: they stay (read within the new bounds)
  } else if (from->shards == to.shards) {
    CarryRows(storage, rows, *from, to, now);
  } else {
    SpreadRows(storage, rows, *from, to, now);
  }
}

}  // namespace

void LockDefinitionChanges() { LockRelationOid(DefinitionTableOid(), ShareRowExclusiveLock); }

void LockOverrideChanges() { LockRelationOid(RequireOverrideTable(), ShareRowExclusiveLock); }

namespace {

// The change in one storage: its rows locked, then key by key.
void ApplyToStorage(const Storage& storage, text* name, text* key, const LimitSettings* from,
                    const LimitSettings& to) {
  KeyedRow* locked = nullptr;
  int count = storage.lock_rows_for_change(name, key, &locked);
  Micros now = ClockNow();
  auto* rows = static_cast<KeyRows*>(palloc0(sizeof(KeyRows)));
  for (int i = 0; i < count; ++i) {
    const KeyedRow& row = locked[i];
    if (rows->count > 0 && CompareLimitIds(rows->id, row.id) != 0) {
      ApplyToKey(storage, *rows, from, to, now);
      rows->count = 0;
    }
    if (row.id.shard < 0 || row.id.shard >= ratelimit::kMaxShards) continue;
    if (rows->count == 0) {
      rows->id = row.id;
      rows->id.shard = 0;
    }
    if (rows->count > 0 && rows->shard[rows->count - 1] == row.id.shard)
      elog(ERROR, "ratelimit: storage \"%s\" returned a shard twice", storage.name);
    rows->shard[rows->count] = row.id.shard;
    rows->stored[rows->count] = row.stored;
    ++rows->count;
  }
  ApplyToKey(storage, *rows, from, to, now);
  pfree(rows);
  if (locked != nullptr) pfree(locked);
}

}  // namespace

void ApplyConfigChange(text* name, text* key, const LimitSettings* from, const LimitSettings* to) {
  if (to == nullptr || (from != nullptr && SameSettings(*from, *to))) return;
  const Storage* const* storages = nullptr;
  // A storage that does not carry rows over leaves them to be read under
  // the config in force at their next call (Storage::carries_rows_on_change).
  for (int i = 0, n = AllStorages(&storages); i < n; ++i)
    if (storages[i]->carries_rows_on_change) ApplyToStorage(*storages[i], name, key, from, *to);
}

}  // namespace ratelimit_pg
