// The memory storage (memory_storage.h) over a dshash table.
//
// An entry is keyed by its identity whole (the database, and name and key
// bytes, at most kIdentityBytes together): exact, with no collision to
// reason about, and ratelimit_status can show it. Each database has its own
// limits, as it has its own state table. It holds the row a table would hold (a
// RowWrite: state, kind tag, idle_at). A call takes the entry's partition
// lock only (dshash's: one of 128), for as long as the core decides.
//
// Bounded: ratelimit.memory_max_keys entries, of which entries made under
// callers' inline configs (not the owner's definitions or overrides) may
// take half, so a caller with nothing but PUBLIC's grants can never take a
// slot from the owner's defined limits. An entry idle at now (back in its
// initial state) is the same as none; when the table is full a new key
// sweeps the idle ones out first (a sweep takes the partition locks one at
// a time), and only if every entry is live is there no room.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "storage/memory/memory_storage.h"

#include "storage/memory/memory_errors.h"
#include "storage/memory/memory_names.h"
#include "shmem/shared_tables.h"
#include "shmem/slot_quota.h"
#include "storage/row_codec.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/builtins.h"
#include "utils/guc.h"
}

namespace ratelimit_pg {
namespace {

constexpr int kIdentityBytes = kMemoryIdentityBytes;
constexpr uint32 kLayout = 0x524c4d31;  // "RLM1"

struct MemoryKey {
  Oid database;
  int32 name_len;
  int32 key_len;               // -1: the NULL key
  char bytes[kIdentityBytes];  // the name, then the key; zero after them
};

// An entry is made in two steps under its partition lock: inserted as a
// placeholder (incarnation 0: answers as no entry, counted nowhere, idle
// at once), then made live (counted, given an incarnation) once there is
// room. An error between them (dshash's allocation of the names table) leaves
// only a placeholder, which a sweep deletes: nothing is counted without its
// entry, and no PG_CATCH gives anything back.
struct MemoryEntry {
  MemoryKey key;
  RowWrite row;
  uint64 incarnation;  // this life of the entry (StoredState's); 0: a placeholder
  bool inline_share;   // made under a caller's inline config (a slot of the callers' share)
};

struct MemoryHeader {
  uint64 seed;      // of the keys' hash
  SlotQuota slots;  // entries; the share: entries made under callers' inline configs
  // No entry is idle before next_idle_at (microseconds; a bound, never
  // later than the earliest idle_at): a full table is swept only from then
  // on, or while a sweep runs (sweeps > 0). A sweep sets it to the earliest
  // idle_at it leaves; a write of an earlier one lowers it.
  pg_atomic_uint64 next_idle_at;
  pg_atomic_uint32 sweeps;
  pg_atomic_uint64 incarnations;  // the last one given
};

static_assert(std::is_trivially_destructible_v<MemoryKey>);
static_assert(std::is_trivially_copyable_v<MemoryEntry>);
// What docs/memory.md says an entry takes: 320 bytes, and dshash's 16-byte item
// header (scripts/memory-sizing-test.sh measures the whole).
static_assert(sizeof(MemoryEntry) == 320);

int memory_max_keys = 10000;

int MaxKeys() { return memory_max_keys; }

int UsedBytes(const MemoryKey& key) { return key.name_len + std::max(0, key.key_len); }

// The hash of the key's bytes (database, lengths, name and key) under the
// table's seed (arg: the header).
dshash_hash HashKey(const void* v, size_t, void* arg) {
  const auto* key = static_cast<const MemoryKey*>(v);
  return SeededHash(key, static_cast<int>(offsetof(MemoryKey, bytes)) + UsedBytes(*key),
                    static_cast<const MemoryHeader*>(arg)->seed);
}

int CompareKeys(const void* a, const void* b, size_t, void*) {
  const auto* x = static_cast<const MemoryKey*>(a);
  const auto* y = static_cast<const MemoryKey*>(b);
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
}

MemoryHeader* header = nullptr;

// The per-name count of a key's name (memory_names.h).
bool CountNameEntry(const MemoryKey& key, int64 most) {
  return CountMemoryName(key.database, key.bytes, key.name_len, most);
}

void UncountNameEntry(const MemoryKey& key) { UncountMemoryName(key.database, key.bytes, key.name_len); }

// The table, or nullptr without shared memory.
dshash_table* TableOrNull() {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(SharedTable::kMemoryLimits, &h);
  header = static_cast<MemoryHeader*>(h);
  return table;
}

// The table; without shared memory, the error naming the setting.
dshash_table* Table() {
  dshash_table* table = TableOrNull();
  if (table == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("memory limits need ratelimit in shared_preload_libraries on PostgreSQL %d",
                    PG_VERSION_NUM / 10000),
             errdetail("A limit whose config says \"storage\": \"memory\" lives in shared memory, which "
                       "PostgreSQL before 17 gives an extension only at server start."),
             errhint("Add ratelimit to shared_preload_libraries and restart the server, or use "
                     "\"storage\": \"table\".")));
  return table;
}

// The key of (database, name, key) (key_len -1: the NULL key); false when
// the lengths are not an identity an entry can hold.
bool TryMakeKey(Oid database, int name_len, int key_len, const char* name, const char* key, MemoryKey* out) {
  if (name_len < 0 || key_len < -1 || int64{name_len} + std::max(0, key_len) > kIdentityBytes) return false;
  std::memset(out, 0, sizeof(MemoryKey));
  out->database = database;
  out->name_len = name_len;
  out->key_len = key_len;
  std::memcpy(out->bytes, name, name_len);
  if (key_len > 0) std::memcpy(out->bytes + name_len, key, key_len);
  return true;
}

// The key of a limit; false when its identity is longer than an entry holds.
bool TryKeyOf(const LimitId& id, MemoryKey* key) {
  return TryMakeKey(MyDatabaseId, id.name_len, id.key != nullptr ? id.key_len : -1, id.name, id.key, key);
}

MemoryKey KeyOf(const LimitId& id) {
  MemoryKey key;
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
// room.name_rows), then a slot (within memory_max_keys and the inline half).
ModifyResult TakeRoom(const MemoryKey& key, const NewRowRoom& room) {
  if (!CountNameEntry(key, room.name_rows)) return ModifyResult::kNoRoomForName;
  if (ReserveSlot(&header->slots, memory_max_keys, room.inline_share)) return ModifyResult::kDone;
  UncountNameEntry(key);
  return ModifyResult::kNoRoom;
}

// Gives back what TakeRoom took.
void ReleaseRoom(const MemoryKey& key, bool inline_share) {
  ReleaseSlot(&header->slots, inline_share);
  UncountNameEntry(key);
}

bool IdleAt(const MemoryEntry& entry, Micros now) { return now >= entry.row.idle_at; }

uint64 AsBound(Micros at) { return at < 0 ? 0 : static_cast<uint64>(at); }

// Lowers next_idle_at to `at` if it is later.
void LowerNextIdle(Micros at) {
  uint64 bound = AsBound(at);
  uint64 current = pg_atomic_read_u64(&header->next_idle_at);
  while (bound < current && !pg_atomic_compare_exchange_u64(&header->next_idle_at, &current, bound)) {
  }
}

// Stores a row into an entry (its partition lock held exclusively).
void Store(MemoryEntry* entry, const RowWrite& write) {
  entry->row = write;
  LowerNextIdle(write.idle_at);
}

// Whether a sweep may find an idle entry at `now`.
bool SweepMayFree(Micros now) {
  return AsBound(now) >= pg_atomic_read_u64(&header->next_idle_at) || pg_atomic_read_u32(&header->sweeps) > 0;
}

// Deletes every entry idle at `now` (of `database`; InvalidOid: of every
// database, an idle entry being the same as none), a partition at a time;
// how many.
//
// A sweep of every database also moves next_idle_at to the earliest idle_at
// it leaves: raised to "never" as it starts (a concurrent write lowers it
// again; a concurrent full table sweeps too, while sweeps > 0), then
// lowered to what it saw. Nothing in it can raise (dshash's scan and
// deletes, and the names table's find and delete, neither allocate nor
// wait for interrupts), so sweeps always comes back down.
int64 SweepIdle(dshash_table* table, Micros now, Oid database) {
  bool all = database == InvalidOid;
  uint64 earliest = PG_UINT64_MAX;
  if (all) {
    pg_atomic_fetch_add_u32(&header->sweeps, 1);
    pg_atomic_write_u64(&header->next_idle_at, PG_UINT64_MAX);
  }
  int64 deleted = 0;
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, true);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (IdleAt(*entry, now) && (all || entry->key.database == database)) {
      if (entry->incarnation != 0) ReleaseRoom(entry->key, entry->inline_share);
      dshash_delete_current(&scan);
      ++deleted;
    } else {
      earliest = std::min(earliest, AsBound(entry->row.idle_at));
    }
  }
  dshash_seq_term(&scan);
  if (all) {
    LowerNextIdle(static_cast<Micros>(std::min<uint64>(earliest, PG_INT64_MAX)));
    pg_atomic_fetch_sub_u32(&header->sweeps, 1);
  }
  return deleted;
}

// The entry of `key`, found or inserted as a placeholder, its partition
// lock held exclusively. May raise (no memory left in the area) before
// anything is inserted or counted.
MemoryEntry* FindOrInsert(dshash_table* table, const MemoryKey& key) {
  bool found = false;
  auto* entry = static_cast<MemoryEntry*>(dshash_find_or_insert(table, &key, &found));
  if (!found) {
    std::memset(static_cast<void*>(&entry->row), 0, sizeof entry->row);
    entry->row.idle_at = PG_INT64_MIN;  // idle at once: a sweep deletes a placeholder left by an error
    entry->incarnation = 0;
    entry->inline_share = false;
  }
  return entry;
}

uint64 NewIncarnation() { return pg_atomic_add_fetch_u64(&header->incarnations, 1); }

// Makes a placeholder live with `write`, if there is room (taken under its
// lock: its name's count, then a slot); what TakeRoom says. Without room
// the placeholder is deleted (its lock with it).
ModifyResult MakeLive(dshash_table* table, MemoryEntry* entry, const NewRowRoom& room, uint64 incarnation,
                      const RowWrite& write) {
  ModifyResult taken = TakeRoom(entry->key, room);
  if (taken != ModifyResult::kDone) {
    dshash_delete_entry(table, entry);
    return taken;
  }
  entry->incarnation = incarnation;
  entry->inline_share = room.inline_share;
  Store(entry, write);
  dshash_release_lock(table, entry);
  return ModifyResult::kDone;
}

// An entry as a step reads it: a placeholder is no entry.
StoredState StoredOf(const MemoryEntry& entry) {
  if (entry.incarnation == 0) return NoStoredRow();
  StoredState stored = StoredStateOfWrite(entry.row);
  stored.incarnation = entry.incarnation;
  return stored;
}

// Deletes an entry whose partition lock is held, giving back what it counted.
void DeleteEntry(dshash_table* table, MemoryEntry* entry) {
  if (entry->incarnation != 0) ReleaseRoom(entry->key, entry->inline_share);
  dshash_delete_entry(table, entry);
}

StoredState Read(const LimitId& id, ReadMode) {
  MemoryKey key = KeyOf(id);
  dshash_table* table = Table();
  auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, false));
  if (entry == nullptr) return NoStoredRow();
  StoredState stored = StoredOf(*entry);
  dshash_release_lock(table, entry);
  return stored;
}

ModifyResult Modify(const LimitId& id, const NewRowRoom& room, ModifyStep step, void* context) {
  MemoryKey key = KeyOf(id);
  dshash_table* table = Table();
  bool swept = false;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, true));
    if (entry == nullptr) {
      // No entry: a step that would write nothing to no row needs none.
      RowWrite write;
      if (!step(NoStoredRow(), context, &write)) return ModifyResult::kDone;
      entry = FindOrInsert(table, key);
    }
    RowWrite write;
    if (entry->incarnation != 0) {
      if (step(StoredOf(*entry), context, &write)) Store(entry, write);
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
    ModifyResult taken = MakeLive(table, entry, room, none.incarnation, write);
    if (taken == ModifyResult::kDone) return taken;
    // Full: sweep the idle entries out (no lock held now), unless none can be idle yet.
    Micros now = MemorySweepClock();
    if (swept || !SweepMayFree(now)) return taken;
    SweepIdle(table, now, InvalidOid);
    swept = true;
  }
}

bool DeleteLimit(const LimitId& id) {
  MemoryKey key;
  dshash_table* table = TableOrNull();
  if (table == nullptr || !TryKeyOf(id, &key)) return false;  // none can be stored
  auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, true));
  if (entry == nullptr) return false;
  bool live = entry->incarnation != 0;
  DeleteEntry(table, entry);
  return live;
}

int64 DeleteIdle(Micros now) {
  dshash_table* table = TableOrNull();
  return table == nullptr ? 0 : SweepIdle(table, std::min(now, MemorySweepClock()), MyDatabaseId);
}

// (name, key NULL first) byte order (CompareIdentity), as the table's rows
// are listed.
int CompareEntries(const void* left, const void* right) {
  const MemoryKey& a = static_cast<const MemoryEntry*>(left)->key;
  const MemoryKey& b = static_cast<const MemoryEntry*>(right)->key;
  return CompareIdentity(a.bytes, a.name_len, a.bytes + a.name_len, a.key_len, b.bytes, b.name_len,
                         b.bytes + b.name_len, b.key_len);
}

// Keeps a live entry of this database (a placeholder is no entry).
bool CopyLiveEntry(void* entry, void* out, void*) {
  const auto* e = static_cast<const MemoryEntry*>(entry);
  if (e->incarnation == 0 || e->key.database != MyDatabaseId) return false;
  *static_cast<MemoryEntry*>(out) = *e;
  return true;
}

void ScanStatus(StatusRowSink sink, void* context) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return;
  void* copied = nullptr;
  int count = CopySorted(table, sizeof(MemoryEntry), CopyLiveEntry, nullptr, CompareEntries, &copied);
  auto* entries = static_cast<MemoryEntry*>(copied);
  for (int i = 0; i < count; ++i) {
    CHECK_FOR_INTERRUPTS();
    const MemoryKey& key = entries[i].key;
    KeyedRow row{};
    row.id.name_text = cstring_to_text_with_len(key.bytes, key.name_len);
    row.id.name = VARDATA_ANY(row.id.name_text);
    row.id.name_len = key.name_len;
    if (key.key_len >= 0) {
      row.id.key_text = cstring_to_text_with_len(key.bytes + key.name_len, key.key_len);
      row.id.key = VARDATA_ANY(row.id.key_text);
      row.id.key_len = key.key_len;
    }
    row.stored = StoredOf(entries[i]);
    sink(row, context);
  }
  pfree(entries);
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
};

}  // namespace

void DefineMemoryStorage() {
  GucContext context = process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP;
  DefineCustomIntVariable(
      "ratelimit.memory_max_keys",
      "How many limits with \"storage\": \"memory\" shared memory holds (name and key pairs).",
      "Half of them may be made under callers' inline configs. With shared_preload_libraries = 'ratelimit' "
      "it sizes the shared memory at server start.",
      &memory_max_keys, 10000, 1, 100000000, context, 0, nullptr, nullptr, nullptr);
  DefineSharedTable(SharedTable::kMemoryLimits,
                    SharedTableSpec{"ratelimit_memory", sizeof(MemoryKey), sizeof(MemoryEntry), CompareKeys,
                                    HashKey, sizeof(MemoryHeader), InitHeader, MaxKeys});
  DefineMemoryNames(MaxKeys /* at most one name per entry */);
}

const Storage& MemoryStorage() { return kMemoryStorage; }

size_t MemoryEntryBytes() { return sizeof(MemoryEntry) + 16; }

int64 ForEachMemoryEntry(Micros now, MemoryEntryVisitor visit, void* context) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return 0;
  // Straight from the table, a partition at a time under its shared lock
  // (at shutdown: nobody else runs).
  int64 visited = 0;
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (entry->incarnation == 0 || IdleAt(*entry, now)) continue;
    MemoryRecord record{};
    record.database = entry->key.database;
    record.name_len = entry->key.name_len;
    record.key_len = entry->key.key_len;
    record.bytes = entry->key.bytes;
    record.row = entry->row;
    record.inline_share = entry->inline_share;
    if (!visit(record, context)) {
      visited = -1;
      break;
    }
    ++visited;
  }
  dshash_seq_term(&scan);
  return visited;
}

int MemoryIdentityBytes() { return kIdentityBytes; }

Micros MemorySweepClock() { return std::min(ClockNow(), RealClockNow()); }

bool RestoreMemoryEntry(const MemoryRecord& record) {
  dshash_table* table = TableOrNull();
  MemoryKey key;
  if (table == nullptr || !TryMakeKey(record.database, record.name_len, record.key_len, record.bytes,
                                      record.bytes + std::max(0, record.name_len), &key))
    return false;
  MemoryEntry* entry = FindOrInsert(table, key);
  if (entry->incarnation != 0) {  // twice in one file: the first stands
    dshash_release_lock(table, entry);
    return false;
  }
  return MakeLive(table, entry, NewRowRoom{record.inline_share, 0}, NewIncarnation(), record.row) ==
         ModifyResult::kDone;
}

}  // namespace ratelimit_pg
