// The memory storage (memory_storage.h) over two dshash tables.
//
// An entry is keyed by its identity whole (the database, and name and key
// bytes, at most kIdentityBytes together): exact, with no collision to
// reason about, and ratelimit_status can show it. Each database has its own
// limits, as it has its own state table. It holds the row a table would hold (a
// RowWrite: state, kind tag, idle_at). A call takes the entry's partition
// lock only (dshash's: one of 128), for as long as the core decides.
//
// Two tables, so that the usual identity costs what it needs: a compact
// entry (112 bytes, 128 with dshash's item header: a DSA size class) holds
// a name and key of up to kMemoryCompactBytes together; a long one (296
// bytes, 320 with the header) up to kIdentityBytes. An identity lives in the
// one its length says, so each is found with one probe.
//
// Bounded: ratelimit.memory_max_keys entries of both tables together, of
// which entries made under callers' inline configs (not the owner's
// definitions or overrides) may take half, so a caller with nothing but
// PUBLIC's grants can never take a slot from the owner's defined limits.
// Long entries and distinct names (memory_names.h) are bounded each by
// PartMost() (1 % of memory_max_keys, at least 10,000 or all of them),
// with the same half for inline configs: with the preload, shared memory is
// reserved for that many long entries and names, not for memory_max_keys.
// An entry idle at now (back in its initial state) is the same as none; when
// a bound is reached a new key sweeps the idle ones out first (a sweep takes
// the partition locks one at a time), and only if they are live is there no
// room.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "storage/memory/memory_storage.h"

#include "storage/memory/memory_errors.h"
#include "storage/memory/memory_names.h"
#include "storage/memory/memory_wal.h"
#include "shmem/shared_tables.h"
#include "shmem/slot_quota.h"
#include "storage/row_codec.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "utils/wait_event.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

constexpr int kIdentityBytes = kMemoryIdentityBytes;
constexpr int kCompactBytes = kMemoryCompactBytes;
constexpr uint8 kNullKey = 0xFF;  // key_len of the NULL key

// An identity as both tables' keys begin: the database, the name's and the
// key's lengths, then the name and key bytes (zero after them). A table's
// key is its first 6 + capacity bytes.
struct IdentityKey {
  Oid database;
  uint8 name_len;
  uint8 key_len;  // kNullKey: the NULL key
  char bytes[kIdentityBytes];
};

// The row of an entry, packed: a RowWrite's values (keep_prev is a flag of
// the entry) and the entry's life.
struct PackedRow {
  double value;
  Micros ts;
  double prev;
  Micros idle_at;
  Micros period;
  uint64 incarnation;  // this life of the entry (StoredState's); 0: a placeholder
};

// An entry is made in two steps under its partition lock: inserted as a
// placeholder (incarnation 0: answers as no entry, counted nowhere, idle
// at once), then made live (counted, given an incarnation) once there is
// room. An error between them (dshash's allocation of the names table) leaves
// only a placeholder, which a sweep deletes: nothing is counted without its
// entry, and no PG_CATCH gives anything back.
template <int Capacity>
struct EntryOf {
  Oid database;
  uint8 name_len;
  uint8 key_len;
  char bytes[Capacity];
  // Bit 0: made under a caller's inline config (a slot of the callers'
  // share). Bits 1-7: the log epoch of the entry's last WAL record
  // (memory_guard.cpp re-logs an entry whose epoch is not the current one).
  uint8 inline_share;
  uint8 keep_prev;  // the RowWrite's
  PackedRow row;
};
using CompactEntry = EntryOf<kCompactBytes>;
using LongEntry = EntryOf<kIdentityBytes>;

static_assert(std::is_trivially_copyable_v<IdentityKey>);
static_assert(offsetof(CompactEntry, bytes) == offsetof(IdentityKey, bytes));
static_assert(offsetof(LongEntry, bytes) == offsetof(IdentityKey, bytes));
// What docs/memory.md says an entry takes: 112 and 296 bytes, with dshash's
// 16-byte item header 128 and 312, in the DSA's size classes 128 and 320
// (scripts/memory-sizing-test.sh measures the whole).
static_assert(sizeof(CompactEntry) == 112);
static_assert(sizeof(LongEntry) == 296);

// What the code needs of a table's entries.
struct Layout {
  SharedTable table;
  int capacity;         // identity bytes
  size_t key_size;      // the first key_size bytes of an entry
  size_t flags_offset;  // inline_share, then keep_prev
  size_t row_offset;
  size_t entry_size;
};

constexpr Layout kCompact = {SharedTable::kMemoryLimits,           kCompactBytes,
                             offsetof(CompactEntry, inline_share), offsetof(CompactEntry, inline_share),
                             offsetof(CompactEntry, row),          sizeof(CompactEntry)};
constexpr Layout kLong = {SharedTable::kMemoryLongLimits,    kIdentityBytes,
                          offsetof(LongEntry, inline_share), offsetof(LongEntry, inline_share),
                          offsetof(LongEntry, row),          sizeof(LongEntry)};
constexpr const Layout* kLayouts[] = {&kCompact, &kLong};

struct MemoryHeader {
  uint64 seed;      // first: of the keys' hash
  SlotQuota slots;  // entries of both tables; the share: entries made under callers' inline configs
  // No entry is idle before next_idle_at (microseconds; a bound, never
  // later than the earliest idle_at): a full table is swept only from then
  // on, or while a sweep runs (sweeps > 0). A sweep sets it to the earliest
  // idle_at it leaves; a write of an earlier one lowers it.
  pg_atomic_uint64 next_idle_at;
  pg_atomic_uint32 sweeps;
  pg_atomic_uint64 incarnations;  // the last one given (of both tables)
  // With ratelimit.memory_durability = wal (memory_wal.h): the log epoch
  // (moved by memory_guard.cpp at each checkpoint it covers), and whether
  // its worker has logged every entry since the server started, without
  // which no write is logged (sleepers on durable_changed).
  pg_atomic_uint32 log_epoch;
  pg_atomic_uint32 durable;
  ConditionVariable durable_changed;
};

struct LongHeader {
  uint64 seed;      // first: of the keys' hash
  SlotQuota slots;  // long entries; the share as MemoryHeader's
};

int memory_max_keys = 10000;

int MaxKeys() { return memory_max_keys; }

// The most long entries, and distinct names: 1 % of memory_max_keys, at
// least 10,000 (or memory_max_keys, if fewer).
int PartMost() { return std::max(std::min(memory_max_keys, 10000), memory_max_keys / 100); }

int UsedBytes(const IdentityKey& key) { return key.name_len + (key.key_len == kNullKey ? 0 : key.key_len); }

const Layout& LayoutOf(const IdentityKey& key) { return UsedBytes(key) <= kCompactBytes ? kCompact : kLong; }

// An entry's parts.
const IdentityKey& KeyIn(const void* entry) { return *static_cast<const IdentityKey*>(entry); }
const char* BytesIn(const void* entry) {
  return static_cast<const char*>(entry) + offsetof(IdentityKey, bytes);
}
uint8* FlagsIn(void* entry, const Layout& layout) { return static_cast<uint8*>(entry) + layout.flags_offset; }
PackedRow* RowIn(void* entry, const Layout& layout) {
  return reinterpret_cast<PackedRow*>(static_cast<char*>(entry) + layout.row_offset);
}
const PackedRow* RowIn(const void* entry, const Layout& layout) {
  return reinterpret_cast<const PackedRow*>(static_cast<const char*>(entry) + layout.row_offset);
}
constexpr uint8 kInlineShareBit = 1;

bool InlineShare(const void* entry, const Layout& layout) {
  return (FlagsIn(const_cast<void*>(entry), layout)[0] & kInlineShareBit) != 0;
}

// An epoch as the entry's flag bits 1-7 hold it.
uint8 EpochBits(uint32 epoch) { return static_cast<uint8>((epoch & 0x7F) << 1); }
int KeyLen(const IdentityKey& key) { return key.key_len == kNullKey ? -1 : key.key_len; }

// The RowWrite an entry holds.
RowWrite RowOf(const void* entry, const Layout& layout) {
  const PackedRow* row = RowIn(entry, layout);
  RowWrite write{};
  write.next.exists = true;
  write.next.value = row->value;
  write.next.ts = row->ts;
  write.next.prev = row->prev;
  write.keep_prev = FlagsIn(const_cast<void*>(entry), layout)[1] != 0;
  write.idle_at = row->idle_at;
  write.period = row->period;
  return write;
}

// The record of an entry (its bytes are the entry's).
MemoryRecord RecordOf(const void* entry, const Layout& layout) {
  const IdentityKey& key = KeyIn(entry);
  MemoryRecord record{};
  record.database = key.database;
  record.name_len = key.name_len;
  record.key_len = KeyLen(key);
  record.bytes = BytesIn(entry);
  record.row = RowOf(entry, layout);
  record.inline_share = InlineShare(entry, layout);
  return record;
}

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

// The tables (both, or neither: nullptr without shared memory).
struct Tables {
  dshash_table* of[2];
  dshash_table* For(const Layout& layout) const { return of[&layout == &kLong ? 1 : 0]; }
};

Tables TablesOrNull() {
  void* h = nullptr;
  void* lh = nullptr;
  Tables tables{{AttachSharedTable(SharedTable::kMemoryLimits, &h),
                 AttachSharedTable(SharedTable::kMemoryLongLimits, &lh)}};
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
      return ModifyResult::kNoRoomForNewName;
    case NameCount::kCounted:
      break;
  }
  if (&layout == &kLong && !ReserveSlot(&long_header->slots, PartMost(), room.inline_share)) {
    ReleaseSlot(&header->slots, room.inline_share);
    UncountMemoryName(key.database, key.bytes, key.name_len);
    return ModifyResult::kNoRoomForLongIdentity;
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

bool Live(const void* entry, const Layout& layout) { return RowIn(entry, layout)->incarnation != 0; }

bool IdleAt(const void* entry, const Layout& layout, Micros now) {
  return now >= RowIn(entry, layout)->idle_at;
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
  XLogRecPtr end = LogMemoryEntry(RecordOf(entry, layout));
  // An abort's refund: no commit of this transaction will ask for the
  // flush, so ask for it as an asynchronous commit does.
  if (!IsTransactionState()) XLogSetAsyncXactLSN(end);
  uint8* flags = FlagsIn(entry, layout);
  flags[0] = static_cast<uint8>((flags[0] & kInlineShareBit) | EpochBits(epoch));
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
  if (log) LogWrite(entry, layout);
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

StoredState Read(const LimitId& id, ReadMode) {
  IdentityKey key = KeyOf(id);
  const Layout& layout = LayoutOf(key);
  dshash_table* table = TablesOrRaise().For(layout);
  void* entry = dshash_find(table, &key, false);
  if (entry == nullptr) return NoStoredRow();
  StoredState stored = StoredOf(entry, layout);
  dshash_release_lock(table, entry);
  return stored;
}

ModifyResult Modify(const LimitId& id, const NewRowRoom& room, ModifyStep step, void* context) {
  IdentityKey key = KeyOf(id);
  const Layout& layout = LayoutOf(key);
  Tables tables = TablesOrRaise();
  dshash_table* table = tables.For(layout);
  bool log = LogMemoryWrites();
  if (log) WaitUntilDurable();
  bool swept = false;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    void* entry = dshash_find(table, &key, true);
    if (entry == nullptr) {
      // No entry: a step that would write nothing to no row needs none.
      RowWrite write;
      if (!step(NoStoredRow(), context, &write)) return ModifyResult::kDone;
      entry = FindOrInsert(table, layout, key);
    }
    RowWrite write;
    if (Live(entry, layout)) {
      if (step(StoredOf(entry, layout), context, &write)) {
        Store(entry, layout, write);
        if (log) LogWrite(entry, layout);
      }
      dshash_release_lock(table, entry);
      return ModifyResult::kDone;
    }
    // A placeholder: the step decides on no entry, under the life it would make.
    StoredState none = NoStoredRow();
    none.incarnation = NewIncarnation();
    if (!step(none, context, &write)) {
      dshash_delete_entry(table, entry);
      return ModifyResult::kDone;
    }
    ModifyResult taken = MakeLive(table, layout, entry, room, none.incarnation, write, log);
    if (taken == ModifyResult::kDone) return taken;
    // Full: sweep the idle entries out (no lock held now), unless none can be
    // idle yet, and those of dropped databases.
    Micros now = MemorySweepClock();
    if (swept) return taken;
    swept = true;
    bool tried = ForgetDroppedDatabases(tables) > 0;
    if (SweepMayFree(now)) {
      SweepIdle(tables, now, InvalidOid);
      tried = true;
    }
    if (!tried) return taken;
  }
}

bool DeleteLimit(const LimitId& id) {
  IdentityKey key;
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr || !TryKeyOf(id, &key)) return false;  // none can be stored
  const Layout& layout = LayoutOf(key);
  dshash_table* table = tables.For(layout);
  bool log = LogMemoryWrites();
  if (log) WaitUntilDurable();
  void* entry = dshash_find(table, &key, true);
  if (entry == nullptr) return false;
  bool live = Live(entry, layout);
  if (live && log) LogMemoryDelete(RecordOf(entry, layout));
  DeleteEntry(table, layout, entry);
  return live;
}

int64 DeleteIdle(Micros now) {
  Tables tables = TablesOrNull();
  return tables.of[0] == nullptr ? 0 : SweepIdle(tables, std::min(now, MemorySweepClock()), MyDatabaseId);
}

// (name, key NULL first) byte order (CompareIdentity), as the table's rows
// are listed; of entries of either table.
int CompareEntries(const void* left, const void* right) {
  const IdentityKey& a = KeyIn(left);
  const IdentityKey& b = KeyIn(right);
  const char* a_bytes = BytesIn(left);
  const char* b_bytes = BytesIn(right);
  return CompareIdentity(a_bytes, a.name_len, a_bytes + a.name_len, KeyLen(a), b_bytes, b.name_len,
                         b_bytes + b.name_len, KeyLen(b));
}

// Keeps a live entry of this database (a placeholder is no entry); arg: its layout.
bool CopyLiveEntry(void* entry, void* out, void* arg) {
  const auto* layout = static_cast<const Layout*>(arg);
  if (!Live(entry, *layout) || KeyIn(entry).database != MyDatabaseId) return false;
  std::memcpy(out, entry, layout->entry_size);
  return true;
}

// Hands one copied entry to the sink as a status row.
void SinkEntry(const void* entry, const Layout& layout, StatusRowSink sink, void* context) {
  const IdentityKey& key = KeyIn(entry);
  const char* bytes = BytesIn(entry);
  KeyedRow row{};
  row.id.name_text = cstring_to_text_with_len(bytes, key.name_len);
  row.id.name = VARDATA_ANY(row.id.name_text);
  row.id.name_len = key.name_len;
  if (key.key_len != kNullKey) {
    row.id.key_text = cstring_to_text_with_len(bytes + key.name_len, key.key_len);
    row.id.key = VARDATA_ANY(row.id.key_text);
    row.id.key_len = key.key_len;
  }
  row.stored = StoredOf(entry, layout);
  sink(row, context);
}

// Both tables' live entries of this database, each table copied and sorted
// on its own, handed over merged in identity order.
void ScanStatus(StatusRowSink sink, void* context) {
  Tables tables = TablesOrNull();
  if (tables.of[0] == nullptr) return;
  void* copied[2];
  int counts[2];
  for (int t = 0; t < 2; ++t)
    counts[t] = CopySorted(tables.of[t], kLayouts[t]->entry_size, CopyLiveEntry,
                           const_cast<Layout*>(kLayouts[t]), CompareEntries, &copied[t]);
  int next[2] = {0, 0};
  while (next[0] < counts[0] || next[1] < counts[1]) {
    CHECK_FOR_INTERRUPTS();
    const void* heads[2];
    for (int t = 0; t < 2; ++t)
      heads[t] =
          next[t] < counts[t] ? static_cast<char*>(copied[t]) + kLayouts[t]->entry_size * next[t] : nullptr;
    int t = heads[1] == nullptr || (heads[0] != nullptr && CompareEntries(heads[0], heads[1]) <= 0) ? 0 : 1;
    SinkEntry(heads[t], *kLayouts[t], sink, context);
    ++next[t];
  }
  pfree(copied[0]);
  pfree(copied[1]);
}

// Storage::forget_database: attaches the tables while the DROP runs, so
// that its commit only deletes and logs, which cannot raise.
void ForgetDroppedDatabase(Oid database, bool at_commit) {
  if (!at_commit) {
    (void)TablesOrNull();
    return;
  }
  (void)ForgetMemoryDatabase(database, true);
}

constexpr Storage kMemoryStorage = {
    .name = "memory",
    .undo = Undo::kByRefund,
    .keeps_shards = false,
    .usable_read_only = true,
    .carries_rows_on_change = false,
    .bounds_name_rows = true,
    .locks_config_tables = false,
    .read = Read,
    .delete_limit = DeleteLimit,
    .delete_idle = DeleteIdle,
    .scan_status = ScanStatus,
    .modify = Modify,
    .raise_no_room = RaiseMemoryNoRoom,
    .raise_uncommitted_config = RaiseMemoryUncommittedConfig,
    .raise_prepare_refused = RaiseMemoryPrepareRefused,
    .forget_database = ForgetDroppedDatabase,
};

}  // namespace

void DefineMemoryStorage() {
  GucContext context = process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP;
  DefineCustomIntVariable(
      "ratelimit.memory_max_keys",
      "How many limits with \"storage\": \"memory\" shared memory holds (name and key pairs).",
      "Half of them may be made under callers' inline configs. Entries whose name and key take more than 56 "
      "bytes together, and distinct names, may each be 1% of it, at least 10000 (or all of it), with the "
      "same "
      "half. With shared_preload_libraries = 'ratelimit' it sizes the shared memory at server start.",
      &memory_max_keys, 10000, 1, 100000000, context, 0, nullptr, nullptr, nullptr);
  DefineSharedTable(SharedTable::kMemoryLimits,
                    SharedTableSpec{"ratelimit_memory", kCompact.key_size, kCompact.entry_size, CompareKeys,
                                    HashKey, sizeof(MemoryHeader), InitHeader, MaxKeys});
  DefineSharedTable(SharedTable::kMemoryLongLimits,
                    SharedTableSpec{"ratelimit_memory_long", kLong.key_size, kLong.entry_size, CompareKeys,
                                    HashKey, sizeof(LongHeader), InitLongHeader, PartMost});
  DefineMemoryNames(PartMost);
}

const Storage& MemoryStorage() { return kMemoryStorage; }

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
    dshash_release_lock(table, entry);
    return RedoOutcome::kApplied;
  }
  if (entry != nullptr) dshash_delete_entry(table, entry);  // a placeholder
  if (InsertForRedo(tables, layout, key, record)) return RedoOutcome::kApplied;
  // Full: idle entries out (as a call's sweep), and once more.
  if (SweepMayFree(now) && SweepIdle(tables, now, InvalidOid) > 0 && InsertForRedo(tables, layout, key, record))
    return RedoOutcome::kApplied;
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
  int64 deleted = SweepIdle(tables, PG_INT64_MAX, database);  // each of its entries is idle at the end of time
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
      if (!Live(entry, *layout) || IdleAt(entry, *layout, now) || (flags[0] & ~kInlineShareBit) == EpochBits(epoch))
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
