// What the state file, redo and the durability worker do with the memory
// storage's tables (memory_recovery.h).
#include <algorithm>
#include <cstring>

#include "storage/memory/memory_recovery.h"

#include "storage/memory/memory_entries.h"
#include "storage/memory/memory_wal.h"
#include "support/clock.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace ratelimit_pg {

using namespace memory;

int64 ForEachMemoryEntry(Micros now, MemoryEntryVisitor visit, void* context) {
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr) return 0;
  // Straight from the tables, a partition at a time under its shared lock
  // (at shutdown: nobody else runs).
  int64 visited = 0;
  for (const Layout* layout : kLayouts) {
    dshash_seq_status scan;
    dshash_seq_init(&scan, tables.For(*layout), false);
    while (void* entry = dshash_seq_next(&scan)) {
      if (!Live(entry, *layout) || IdleAt(entry, *layout, now)) continue;
      if (!visit(RecordOf(entry, *layout), context)) {
        dshash_seq_term(&scan);
        return -1;
      }
      ++visited;
    }
    dshash_seq_term(&scan);
  }
  return visited;
}

int MemoryIdentityBytes() { return kIdentityBytes; }

Micros MemorySweepClock() { return std::min(ClockNow(), RealClockNow()); }

bool RestoreMemoryEntry(const MemoryRecord& record) {
  Tables tables = TablesOrNull();
  IdentityKey key;
  if (tables.of[0] == nullptr || !TryMakeKey(record.database, record.name_len, record.key_len, record.bytes,
                                             record.bytes + std::max(0, record.name_len), &key))
    return false;
  const Layout& layout = LayoutOf(key);
  dshash_table* table = tables.For(layout);
  void* entry = FindOrInsert(table, layout, key);
  if (Live(entry, layout)) {  // twice in one file: the first stands
    dshash_release_lock(table, entry);
    return false;
  }
  return MakeLive(table, layout, entry, NewRowRoom{record.inline_share, 0}, NewIncarnation(), record.row,
                  false) == ModifyResult::kDone;
}

void MemoryTableSeeds(uint64* compact, uint64* long_seed) {
  Tables tables = TablesOrNull();
  *compact = tables.of[0] == nullptr ? 0 : header->seed;
  *long_seed = tables.of[0] == nullptr ? 0 : long_header->seed;
}

void SetMemoryTableSeeds(uint64 compact, uint64 long_seed) {
  if (TablesOrNull().of[0] == nullptr) return;
  Assert(pg_atomic_read_u32(&header->slots.used) == 0);
  // 0 is the hash's unseeded value, which anyone can compute: a file that
  // says 0 gets a seed drawn now.
  header->seed = compact != 0 ? compact : NewTableSeed();
  long_header->seed = long_seed != 0 ? long_seed : NewTableSeed();
}

void ForgetMemoryEntries() {
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr) return;
  SweepIdle(tables, PG_INT64_MAX, InvalidOid);  // every entry is idle at the end of time
  pg_atomic_write_u64(&header->next_idle_at, 0);
  // Nor does a dropped file's header stay: the tables, empty again, take
  // seeds drawn now, as at a start without a file.
  SetMemoryTableSeeds(NewTableSeed(), NewTableSeed());
}

// ---- durability: what memory_redo.cpp and memory_guard.cpp need ----

namespace {

// Whether a new entry of `layout` has room, counted as the load's and a
// call's TakeRoom counts it: redo inserts only then, so that its insert
// stays within the memory reserved for the bounds.
bool RoomForNew(const Layout& layout) {
  if (pg_atomic_read_u32(&header->slots.used) >= static_cast<uint32>(memory_max_keys)) return false;
  return &layout != &kLong || pg_atomic_read_u32(&long_header->slots.used) < static_cast<uint32>(PartMost());
}

// Redo's insert of a new live entry; false without room.
bool InsertForRedo(const Tables& tables, const Layout& layout, const IdentityKey& key,
                   const MemoryRecord& record) {
  dshash_table* table = tables.For(layout);
  if (!RoomForNew(layout)) return false;
  void* entry = FindOrInsert(table, layout, key);
  if (Live(entry, layout)) {  // made meanwhile (a standby's own call)
    Store(entry, layout, record.row);
    dshash_release_lock(table, entry);
    return true;
  }
  return MakeLive(table, layout, entry, NewRowRoom{record.inline_share, 0}, NewIncarnation(), record.row,
                  false) == ModifyResult::kDone;
}

// How many of a standby's own entries one eviction removes: a batch, so that
// a redo that keeps finding no room does not scan the tables per record.
constexpr int kEvictedAtOnce = 64;

// Removes up to kEvictedAtOnce entries a standby's own calls wrote (not
// replayed since); how many.
int EvictStandbyOwn(const Tables& tables) {
  int evicted = 0;
  for (const Layout* layout : kLayouts) {
    dshash_seq_status scan;
    dshash_seq_init(&scan, tables.For(*layout), true);
    while (evicted < kEvictedAtOnce) {
      void* entry = dshash_seq_next(&scan);
      if (entry == nullptr) break;
      if (!Live(entry, *layout) || !StandbyOwn(entry, *layout)) continue;
      ReleaseRoom(entry, *layout);
      dshash_delete_current(&scan);
      ++evicted;
    }
    dshash_seq_term(&scan);
  }
  return evicted;
}

}  // namespace

RedoOutcome ApplyMemoryRecord(const MemoryRecord& record, Micros now) {
  Tables tables = TablesOrNull();
  IdentityKey key;
  if (tables.of[0] == nullptr || !TryMakeKey(record.database, record.name_len, record.key_len, record.bytes,
                                             record.bytes + std::max(0, record.name_len), &key))
    return RedoOutcome::kNoRoom;
  const Layout& layout = LayoutOf(key);
  dshash_table* table = tables.For(layout);
  void* entry = dshash_find(table, &key, true);
  if (now >= record.row.idle_at) {  // the same as no entry
    if (entry != nullptr) DeleteEntry(table, layout, entry);
    return RedoOutcome::kIdle;
  }
  if (entry != nullptr && Live(entry, layout)) {
    Store(entry, layout, record.row);
    FlagsIn(entry, layout)[0] &= kInlineShareBit;  // the primary's now, not the standby's own
    dshash_release_lock(table, entry);
    return RedoOutcome::kApplied;
  }
  if (entry != nullptr) dshash_delete_entry(table, entry);  // a placeholder
  if (InsertForRedo(tables, layout, key, record)) return RedoOutcome::kApplied;
  // Full: idle entries out (as a call's sweep), then a standby's own
  // decisions, which the primary's entries win over; once more after each.
  if (SweepMayFree(now) && SweepIdle(tables, now, InvalidOid) > 0 &&
      InsertForRedo(tables, layout, key, record))
    return RedoOutcome::kApplied;
  if (EvictStandbyOwn(tables) > 0 && InsertForRedo(tables, layout, key, record)) return RedoOutcome::kApplied;
  return RedoOutcome::kNoRoom;
}

bool RemoveMemoryIdentity(const MemoryRecord& identity) {
  Tables tables = TablesOrNull();
  IdentityKey key;
  if (tables.of[0] == nullptr ||
      !TryMakeKey(identity.database, identity.name_len, identity.key_len, identity.bytes,
                  identity.bytes + std::max(0, identity.name_len), &key))
    return false;
  const Layout& layout = LayoutOf(key);
  dshash_table* table = tables.For(layout);
  void* entry = dshash_find(table, &key, true);
  if (entry == nullptr) return false;
  DeleteEntry(table, layout, entry);
  return true;
}

int64 ForgetMemoryDatabase(Oid database, bool log) {
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr || database == InvalidOid) return 0;
  int64 deleted =
      SweepIdle(tables, PG_INT64_MAX, database);  // each of its entries is idle at the end of time
  if (log && LogMemoryWrites()) LogMemoryForgetDatabase(database);
  return deleted;
}

uint32 BeginMemoryLogEpoch() {
  if (TablesOrNull().of[0] == nullptr) return 0;
  return pg_atomic_add_fetch_u32(&header->log_epoch, 1);
}

int64 RelogStaleMemoryEntries(uint32 epoch, Micros now, XLogRecPtr* end) {
  *end = InvalidXLogRecPtr;
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr) return 0;
  int64 logged = 0;
  for (const Layout* layout : kLayouts) {
    dshash_seq_status scan;
    dshash_seq_init(&scan, tables.For(*layout), true);
    while (void* entry = dshash_seq_next(&scan)) {
      uint8* flags = FlagsIn(entry, *layout);
      if (!Live(entry, *layout) || IdleAt(entry, *layout, now) ||
          (flags[0] & ~kInlineShareBit) == EpochBits(epoch))
        continue;
      *end = LogMemoryEntry(RecordOf(entry, *layout));
      flags[0] = static_cast<uint8>((flags[0] & kInlineShareBit) | EpochBits(epoch));
      ++logged;
    }
    dshash_seq_term(&scan);
  }
  return logged;
}

void SetMemoryDurable(bool durable) {
  if (TablesOrNull().of[0] == nullptr) return;
  pg_atomic_write_u32(&header->durable, durable ? 1 : 0);
  ConditionVariableBroadcast(&header->durable_changed);
}

}  // namespace ratelimit_pg
