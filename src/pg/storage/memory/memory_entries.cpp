// The memory storage's entries (memory_entries.h): the tables, keys, room,
// writes, sweeps and the durability wait every step of the storage uses.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "storage/memory/memory_entries.h"

#include "storage/memory/memory_errors.h"
#include "storage/memory/memory_wal.h"
#include "storage/row_codec.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/wait_event.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace memory {

int memory_max_keys = 10000;

int MaxKeys() { return memory_max_keys; }

// The most long entries, and distinct names: 1 % of memory_max_keys, at
// least 10,000 (or memory_max_keys, if fewer).
int PartMost() { return std::max(std::min(memory_max_keys, 10000), memory_max_keys / 100); }

// The hash of the key's bytes (database, lengths, name and key) under the
// table's seed (arg: its header, which begins with the seed).
dshash_hash HashKey(const void* v, size_t, void* arg) {
  const auto* key = static_cast<const IdentityKey*>(v);
  return SeededHash(key, static_cast<int>(offsetof(IdentityKey, bytes)) + UsedBytes(*key),
                    *static_cast<const uint64*>(arg));
}

int CompareKeys(const void* a, const void* b, size_t, void*) {
  const auto* x = static_cast<const IdentityKey*>(a);
  const auto* y = static_cast<const IdentityKey*>(b);
  if (x->database != y->database || x->name_len != y->name_len || x->key_len != y->key_len) return 1;
  return std::memcmp(x->bytes, y->bytes, UsedBytes(*x)) == 0 ? 0 : 1;
}

void InitHeader(void* memory) {
  auto* header = static_cast<MemoryHeader*>(memory);
  header->seed = NewTableSeed();
  InitSlotQuota(&header->slots);
  pg_atomic_init_u64(&header->next_idle_at, 0);
  pg_atomic_init_u32(&header->sweeps, 0);
  pg_atomic_init_u64(&header->incarnations, 0);
  pg_atomic_init_u32(&header->log_epoch, 0);
  pg_atomic_init_u32(&header->durable, 0);
  ConditionVariableInit(&header->durable_changed);
}

void InitLongHeader(void* memory) {
  auto* header = static_cast<LongHeader*>(memory);
  header->seed = NewTableSeed();
  InitSlotQuota(&header->slots);
}

MemoryHeader* header = nullptr;
LongHeader* long_header = nullptr;

Tables TablesOrNull() {
  void* h = nullptr;
  void* lh = nullptr;
  Tables tables{{AttachSharedTable(memory_compact_table, &h), AttachSharedTable(memory_long_table, &lh)}};
  header = static_cast<MemoryHeader*>(h);
  long_header = static_cast<LongHeader*>(lh);
  if (tables.of[0] == nullptr || tables.of[1] == nullptr) return Tables{{nullptr, nullptr}};
  return tables;
}

// The tables; without shared memory, the error naming the setting.
Tables TablesOrRaise() {
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("memory limits need ratelimit in shared_preload_libraries on PostgreSQL %d",
                    PG_VERSION_NUM / 10000),
             errdetail("A limit whose config says \"storage\": \"memory\" lives in shared memory, which "
                       "PostgreSQL before 17 gives an extension only at server start."),
             errhint("Add ratelimit to shared_preload_libraries and restart the server, or use "
                     "\"storage\": \"table\".")));
  return tables;
}

// The key of (database, name, key) (key_len -1: the NULL key); false when
// the lengths are not an identity an entry can hold.
bool TryMakeKey(Oid database, int name_len, int key_len, const char* name, const char* key,
                IdentityKey* out) {
  if (name_len < 0 || key_len < -1 || int64{name_len} + std::max(0, key_len) > kIdentityBytes) return false;
  std::memset(out, 0, sizeof(IdentityKey));
  out->database = database;
  out->name_len = static_cast<uint8>(name_len);
  out->key_len = key_len < 0 ? kNullKey : static_cast<uint8>(key_len);
  std::memcpy(out->bytes, name, name_len);
  if (key_len > 0) std::memcpy(out->bytes + name_len, key, key_len);
  return true;
}

// The key of a limit; false when its identity is longer than an entry holds.
bool TryKeyOf(const LimitId& id, IdentityKey* key) {
  return TryMakeKey(MyDatabaseId, id.name_len, id.key != nullptr ? id.key_len : -1, id.name, id.key, key);
}

IdentityKey KeyOf(const LimitId& id) {
  IdentityKey key;
  if (!TryKeyOf(id, &key))
    ereport(ERROR,
            (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
             errmsg("the name and key of a memory limit take at most %d bytes together", kIdentityBytes),
             errdetail("Rate limit \"%.*s\" and its key take %d bytes.", EchoLength(id.name, id.name_len),
                       id.name, id.name_len + (id.key != nullptr ? id.key_len : 0)),
             errhint("Pass a digest of a long key (for example md5(key)), or use \"storage\": \"table\".")));
  return key;
}

// Takes room for a new entry of `key`: its name's count (within
// room.name_rows), a slot (within memory_max_keys and the inline half), a
// new name's slot (within PartMost() and its half), and for a long identity
// a long slot (within PartMost() and its half). The parts' bounds (never
// above memory_max_keys) come last: while memory_max_keys is at most 10,000
// they are never what refuses a call.
ModifyResult TakeRoom(const IdentityKey& key, const Layout& layout, const NewRowRoom& room) {
  EntrySlot slot{&header->slots, memory_max_keys, room.inline_share};
  switch (CountMemoryName(key.database, key.bytes, key.name_len, room.name_rows, slot)) {
    case NameCount::kNameFull:
      return ModifyResult::kNoRoomForName;
    case NameCount::kEntriesFull:
      return ModifyResult::kNoRoom;
    case NameCount::kNamesFull:
      return kNoRoomForNewName;
    case NameCount::kCounted:
      break;
  }
  if (&layout == &kLong && !ReserveSlot(&long_header->slots, PartMost(), room.inline_share)) {
    ReleaseSlot(&header->slots, room.inline_share);
    UncountMemoryName(key.database, key.bytes, key.name_len);
    return kNoRoomForLongIdentity;
  }
  return ModifyResult::kDone;
}

// Gives back what TakeRoom took for a live entry.
void ReleaseRoom(const void* entry, const Layout& layout) {
  bool inline_share = InlineShare(entry, layout);
  if (&layout == &kLong) ReleaseSlot(&long_header->slots, inline_share);
  ReleaseSlot(&header->slots, inline_share);
  const IdentityKey& key = KeyIn(entry);
  UncountMemoryName(key.database, BytesIn(entry), key.name_len);
}

uint64 AsBound(Micros at) { return at < 0 ? 0 : static_cast<uint64>(at); }

// Lowers next_idle_at to `at` if it is later.
void LowerNextIdle(Micros at) {
  uint64 bound = AsBound(at);
  uint64 current = pg_atomic_read_u64(&header->next_idle_at);
  while (bound < current && !pg_atomic_compare_exchange_u64(&header->next_idle_at, &current, bound)) {
  }
}

// Stores a row into an entry (its partition lock held exclusively).
void Store(void* entry, const Layout& layout, const RowWrite& write) {
  PackedRow* row = RowIn(entry, layout);
  row->value = write.next.value;
  row->ts = write.next.ts;
  row->prev = write.next.prev;
  row->idle_at = write.idle_at;
  row->period = write.period;
  FlagsIn(entry, layout)[1] = write.keep_prev ? 1 : 0;
  LowerNextIdle(write.idle_at);
}

// Whether a sweep may find an idle entry at `now`.
bool SweepMayFree(Micros now) {
  return AsBound(now) >= pg_atomic_read_u64(&header->next_idle_at) || pg_atomic_read_u32(&header->sweeps) > 0;
}

// Deletes the entries of one table idle at `now` (see SweepIdle); how many.
int64 SweepTable(dshash_table* table, const Layout& layout, Micros now, Oid database, uint64* earliest) {
  bool all = database == InvalidOid;
  int64 deleted = 0;
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, true);
  while (void* entry = dshash_seq_next(&scan)) {
    if (IdleAt(entry, layout, now) && (all || KeyIn(entry).database == database)) {
      if (Live(entry, layout)) ReleaseRoom(entry, layout);
      dshash_delete_current(&scan);
      ++deleted;
    } else {
      *earliest = std::min(*earliest, AsBound(RowIn(entry, layout)->idle_at));
    }
  }
  dshash_seq_term(&scan);
  return deleted;
}

// Deletes every entry idle at `now` (of `database`; InvalidOid: of every
// database, an idle entry being the same as none), of both tables, a
// partition at a time; how many.
//
// A sweep of every database also moves next_idle_at to the earliest idle_at
// it leaves: raised to "never" as it starts (a concurrent write lowers it
// again; a concurrent full table sweeps too, while sweeps > 0), then
// lowered to what it saw. Nothing in it can raise (dshash's scan and
// deletes, and the names table's find and delete, neither allocate nor
// wait for interrupts), so sweeps always comes back down.
int64 SweepIdle(const Tables& tables, Micros now, Oid database) {
  bool all = database == InvalidOid;
  uint64 earliest = PG_UINT64_MAX;
  if (all) {
    pg_atomic_fetch_add_u32(&header->sweeps, 1);
    pg_atomic_write_u64(&header->next_idle_at, PG_UINT64_MAX);
  }
  int64 deleted = 0;
  for (const Layout* layout : kLayouts)
    deleted += SweepTable(tables.For(*layout), *layout, now, database, &earliest);
  if (all) {
    LowerNextIdle(static_cast<Micros>(std::min<uint64>(earliest, PG_INT64_MAX)));
    pg_atomic_fetch_sub_u32(&header->sweeps, 1);
  }
  return deleted;
}

// The databases a sweep looks at for having been dropped, at most.
constexpr int kMostDatabasesChecked = 64;

// Adds the database of each entry of `table` to databases[] (up to the most).
void CollectDatabases(dshash_table* table, Oid* databases, int* count) {
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (void* entry = dshash_seq_next(&scan)) {
    Oid database = KeyIn(entry).database;
    bool known = false;
    for (int i = 0; i < *count && !known; ++i) known = databases[i] == database;
    if (!known && *count < kMostDatabasesChecked) databases[(*count)++] = database;
  }
  dshash_seq_term(&scan);
}

// Without the preload a DROP DATABASE or DROP EXTENSION is seen only by a
// backend that loaded the library (api/object_drops.cpp): a full table
// also forgets the entries of databases that no longer exist (looked up
// with no lock of the tables held). How many it removed.
int64 ForgetDroppedDatabases(const Tables& tables) {
  if (SharedTablesPreloaded() || !IsTransactionState()) return 0;
  Oid databases[kMostDatabasesChecked];
  int count = 0;
  for (const Layout* layout : kLayouts) CollectDatabases(tables.For(*layout), databases, &count);
  int64 forgotten = 0;
  for (int i = 0; i < count; ++i)
    if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(databases[i])))
      forgotten += SweepIdle(tables, PG_INT64_MAX, databases[i]);
  return forgotten;
}

// The entry of `key`, found or inserted as a placeholder, its partition
// lock held exclusively. May raise (no memory left in the area) before
// anything is inserted or counted.
void* FindOrInsert(dshash_table* table, const Layout& layout, const IdentityKey& key) {
  bool found = false;
  void* entry = dshash_find_or_insert(table, &key, &found);
  if (!found) {
    std::memset(FlagsIn(entry, layout), 0, layout.entry_size - layout.flags_offset);
    RowIn(entry, layout)->idle_at =
        PG_INT64_MIN;  // idle at once: a sweep deletes a placeholder left by an error
  }
  return entry;
}

uint64 NewIncarnation() { return pg_atomic_add_fetch_u64(&header->incarnations, 1); }

// Logs an entry's state (its partition lock held exclusively) and marks it
// with the epoch read before the record was inserted: if that is the
// current one, the record is past the redo point of every checkpoint the
// epoch covers (memory_guard.cpp).
void LogWrite(void* entry, const Layout& layout) {
  uint32 epoch = pg_atomic_read_u32(&header->log_epoch);
  XLogRecPtr end = LogMemoryEntry(RecordOf(entry, layout));  // flushed as memory_wal.cpp's Insert says
  // Without the worker (it stopped and its successor has not begun: an
  // abort's refund, or a call that passed WaitUntilDurable as it stopped),
  // nobody would flush it: ask the WAL writer, as an asynchronous commit does.
  if (pg_atomic_read_u32(&header->durable) == 0) XLogSetAsyncXactLSN(end);
  uint8* flags = FlagsIn(entry, layout);
  flags[0] = static_cast<uint8>((flags[0] & kInlineShareBit) | EpochBits(epoch));
}

void MarkWrite(void* entry, const Layout& layout, bool log) {
  if (log) {
    LogWrite(entry, layout);
  } else if (IsUnderPostmaster && !AmStartupProcess() && RecoveryInProgress()) {
    // A standby backend's own call. Not the startup process's redo, nor the
    // postmaster's load of a file (RecoveryInProgress() is true there too):
    // those entries are the primary's, which later records must not evict.
    uint8* flags = FlagsIn(entry, layout);
    flags[0] = static_cast<uint8>((flags[0] & kInlineShareBit) | kStandbyOwn);
  }
}

// How long a write waits for the worker that makes memory limits durable.
constexpr long kDurableWaitMs = 10000;

// With durability on, a write waits until the worker has logged every entry
// since the server started (memory_guard.cpp): until then a checkpoint could
// leave an entry last written before it out of the WAL replayed after it.
// An abort's refund (no transaction state: pending_grants' callbacks) never
// waits nor fails: its grant was logged, so the worker was there.
void WaitUntilDurable() {
  if (pg_atomic_read_u32(&header->durable) != 0 || !IsTransactionState()) return;
  TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kDurableWaitMs);
  ConditionVariablePrepareToSleep(&header->durable_changed);
  while (pg_atomic_read_u32(&header->durable) == 0) {
    long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
    if (left <= 0 || ConditionVariableTimedSleep(&header->durable_changed, left, PG_WAIT_EXTENSION)) break;
  }
  ConditionVariableCancelSleep();
  if (pg_atomic_read_u32(&header->durable) == 0) RaiseMemoryNotDurable();
}

// Makes a placeholder live with `write`, if there is room (taken under its
// lock: its name's count, then slots); what TakeRoom says. Without room
// the placeholder is deleted (its lock with it).
ModifyResult MakeLive(dshash_table* table, const Layout& layout, void* entry, const NewRowRoom& room,
                      uint64 incarnation, const RowWrite& write, bool log) {
  ModifyResult taken = TakeRoom(KeyIn(entry), layout, room);
  if (taken != ModifyResult::kDone) {
    dshash_delete_entry(table, entry);
    return taken;
  }
  RowIn(entry, layout)->incarnation = incarnation;
  FlagsIn(entry, layout)[0] = room.inline_share ? kInlineShareBit : 0;
  Store(entry, layout, write);
  MarkWrite(entry, layout, log);
  dshash_release_lock(table, entry);
  return ModifyResult::kDone;
}

// An entry as a step reads it: a placeholder is no entry.
StoredState StoredOf(const void* entry, const Layout& layout) {
  if (!Live(entry, layout)) return NoStoredRow();
  StoredState stored = StoredStateOfWrite(RowOf(entry, layout));
  stored.incarnation = RowIn(entry, layout)->incarnation;
  return stored;
}

// Deletes an entry whose partition lock is held, giving back what it counted.
void DeleteEntry(dshash_table* table, const Layout& layout, void* entry) {
  if (Live(entry, layout)) ReleaseRoom(entry, layout);
  dshash_delete_entry(table, entry);
}

}  // namespace memory
}  // namespace ratelimit_pg
