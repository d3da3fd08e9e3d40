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

#include "memory_storage.h"

#include "clock.h"
#include "config_cache.h"
#include "errors.h"
#include "row_codec.h"
#include "shared_tables.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/builtins.h"
#include "utils/guc.h"
}

namespace ratelimit_pg {
namespace {

constexpr int kIdentityBytes = 236;
constexpr uint32 kLayout = 0x524c4d31;  // "RLM1"

struct MemoryKey {
  Oid database;
  int32 name_len;
  int32 key_len;               // -1: the NULL key
  char bytes[kIdentityBytes];  // the name, then the key; zero after them
};

struct MemoryEntry {
  MemoryKey key;
  RowWrite row;
  bool inline_share;  // made under a caller's inline config (counted in inline_entries)
};

struct MemoryHeader {
  uint64 seed;  // of the keys' hash
  pg_atomic_uint32 entries;
  pg_atomic_uint32 inline_entries;
  // No entry is idle before next_idle_at (microseconds; a bound, never
  // later than the earliest idle_at): a full table is swept only from then
  // on, or while a sweep runs (sweeps > 0). A sweep sets it to the earliest
  // idle_at it leaves; a write of an earlier one lowers it.
  pg_atomic_uint64 next_idle_at;
  pg_atomic_uint32 sweeps;
};

static_assert(std::is_trivially_destructible_v<MemoryKey>);
static_assert(std::is_trivially_copyable_v<MemoryEntry>);
// What README says an entry takes: 304 bytes, and dshash's 16-byte item
// header: one 320-byte DSA size class.
static_assert(sizeof(MemoryEntry) == 304);

int memory_max_keys = 10000;

int MaxKeys() { return memory_max_keys; }
uint32 InlineMaxKeys() { return static_cast<uint32>(std::max(1, memory_max_keys / 2)); }

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
  pg_atomic_init_u32(&header->entries, 0);
  pg_atomic_init_u32(&header->inline_entries, 0);
  pg_atomic_init_u64(&header->next_idle_at, 0);
  pg_atomic_init_u32(&header->sweeps, 0);
}

MemoryHeader* header = nullptr;

// How many entries each (database, name) has: what a limit's memoryKeys
// bounds. Counted for every entry, bounded or not (a bound set later holds
// at once); changed when an entry is made or deleted, never per call. Its
// partition lock is taken with no other lock held, or inside an entry's
// (a sweep's, a delete's): never the other way round.
struct NameKey {
  Oid database;
  int32 name_len;
  char name[kIdentityBytes];  // name_len bytes; the rest is never read
};

struct NameEntry {
  NameKey key;
  int64 entries;
};

struct NamesHeader {
  uint64 seed;
};

NamesHeader* names_header = nullptr;

dshash_hash HashName(const void* v, size_t, void* arg) {
  const auto* key = static_cast<const NameKey*>(v);
  return SeededHash(key, static_cast<int>(offsetof(NameKey, name)) + key->name_len,
                    static_cast<const NamesHeader*>(arg)->seed);
}

int CompareNames(const void* a, const void* b, size_t, void*) {
  const auto* x = static_cast<const NameKey*>(a);
  const auto* y = static_cast<const NameKey*>(b);
  if (x->database != y->database || x->name_len != y->name_len) return 1;
  return std::memcmp(x->name, y->name, x->name_len) == 0 ? 0 : 1;
}

void InitNamesHeader(void* memory) { static_cast<NamesHeader*>(memory)->seed = NewTableSeed(); }

dshash_table* Names() {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(SharedTable::kMemoryNames, &h);
  names_header = static_cast<NamesHeader*>(h);
  return table;
}

NameKey NameOf(const MemoryKey& key) {
  NameKey name;
  name.database = key.database;
  name.name_len = key.name_len;
  std::memcpy(name.name, key.bytes, key.name_len);
  return name;
}

// Counts a new entry of the key's name; false (nothing counted) when the
// name has `most` entries already (most > 0).
bool CountNameEntry(const MemoryKey& key, int64 most) {
  dshash_table* names = Names();
  NameKey name = NameOf(key);
  bool found = false;
  auto* entry = static_cast<NameEntry*>(dshash_find_or_insert(names, &name, &found));
  if (!found) entry->entries = 0;
  bool room = most <= 0 || entry->entries < most;
  if (room) ++entry->entries;
  bool empty = entry->entries == 0;
  if (empty) {
    dshash_delete_entry(names, entry);
  } else {
    dshash_release_lock(names, entry);
  }
  return room;
}

// An entry of the key's name is gone.
void UncountNameEntry(const MemoryKey& key) {
  dshash_table* names = Names();
  NameKey name = NameOf(key);
  auto* entry = static_cast<NameEntry*>(dshash_find(names, &name, true));
  if (entry == nullptr) return;
  if (--entry->entries <= 0) {
    dshash_delete_entry(names, entry);
  } else {
    dshash_release_lock(names, entry);
  }
}

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

// The key of a limit; false when its identity is longer than an entry holds.
bool TryKeyOf(const LimitId& id, MemoryKey* key) {
  int key_len = id.key != nullptr ? id.key_len : -1;
  if (id.name_len + std::max(0, key_len) > kIdentityBytes) return false;
  std::memset(key, 0, sizeof(MemoryKey));
  key->database = MyDatabaseId;
  key->name_len = id.name_len;
  key->key_len = key_len;
  std::memcpy(key->bytes, id.name, id.name_len);
  if (key_len > 0) std::memcpy(key->bytes + id.name_len, id.key, key_len);
  return true;
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

// Takes a slot for a new entry; false when there is none.
bool ReserveSlot(bool inline_share) {
  if (pg_atomic_add_fetch_u32(&header->entries, 1) > static_cast<uint32>(memory_max_keys)) {
    pg_atomic_sub_fetch_u32(&header->entries, 1);
    return false;
  }
  if (inline_share && pg_atomic_add_fetch_u32(&header->inline_entries, 1) > InlineMaxKeys()) {
    pg_atomic_sub_fetch_u32(&header->inline_entries, 1);
    pg_atomic_sub_fetch_u32(&header->entries, 1);
    return false;
  }
  return true;
}

void ReleaseSlot(bool inline_share) {
  pg_atomic_sub_fetch_u32(&header->entries, 1);
  if (inline_share) pg_atomic_sub_fetch_u32(&header->inline_entries, 1);
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
// lowered to what it saw. An error midway leaves it at "never" with
// sweeps > 0 for good, which only means every full table sweeps.
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
      ReleaseSlot(entry->inline_share);
      UncountNameEntry(entry->key);
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

// Takes room for a new entry of `key`: its name's count (within
// room.name_rows), then a slot (within memory_max_keys and the inline half).
ModifyResult TakeRoom(const MemoryKey& key, const NewRowRoom& room) {
  if (!CountNameEntry(key, room.name_rows)) return ModifyResult::kNoRoomForName;
  if (ReserveSlot(room.inline_share)) return ModifyResult::kDone;
  UncountNameEntry(key);
  return ModifyResult::kNoRoom;
}

// Gives back what TakeRoom took.
void ReleaseRoom(const MemoryKey& key, bool inline_share) {
  ReleaseSlot(inline_share);
  UncountNameEntry(key);
}

// Inserts the entry of `key` for a slot already reserved, its partition
// lock held exclusively on return; nullptr (the slot given back) when it
// exists already. An error (no memory left in the area) gives the slot back
// too: a slot is never counted without its entry.
MemoryEntry* InsertEntry(dshash_table* table, const MemoryKey& key, bool inline_share) {
  bool found = false;
  MemoryEntry* entry = nullptr;
  PG_TRY();
  { entry = static_cast<MemoryEntry*>(dshash_find_or_insert(table, &key, &found)); }
  PG_CATCH();
  {
    ReleaseRoom(key, inline_share);
    PG_RE_THROW();
  }
  PG_END_TRY();
  if (found) {
    dshash_release_lock(table, entry);
    ReleaseRoom(key, inline_share);
    return nullptr;
  }
  entry->inline_share = inline_share;
  return entry;
}

StoredState Read(const LimitId& id, ReadMode) {
  MemoryKey key = KeyOf(id);
  dshash_table* table = Table();
  auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, false));
  if (entry == nullptr) return NoStoredRow();
  StoredState stored = StoredStateOfWrite(entry->row);
  dshash_release_lock(table, entry);
  return stored;
}

ModifyResult Modify(const LimitId& id, const NewRowRoom& room, ModifyStep step, void* context) {
  bool inline_share = room.inline_share;
  MemoryKey key = KeyOf(id);
  dshash_table* table = Table();
  bool swept = false;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, true))) {
      RowWrite write;
      if (step(StoredStateOfWrite(entry->row), context, &write)) Store(entry, write);
      dshash_release_lock(table, entry);
      return ModifyResult::kDone;
    }
    // No entry: a step that would write nothing to no row needs none.
    RowWrite write;
    if (!step(NoStoredRow(), context, &write)) return ModifyResult::kDone;
    ModifyResult taken = TakeRoom(key, room);
    if (taken != ModifyResult::kDone) {
      // Full: sweep the idle entries out, unless none can be idle yet.
      Micros now = ClockNow();
      if (swept || !SweepMayFree(now)) return taken;
      SweepIdle(table, now, InvalidOid);
      swept = true;
      continue;
    }
    MemoryEntry* entry = InsertEntry(table, key, inline_share);
    if (entry == nullptr) continue;  // made meanwhile by another session: decide on it
    if (step(NoStoredRow(), context, &write)) {
      Store(entry, write);
      dshash_release_lock(table, entry);
    } else {
      dshash_delete_entry(table, entry);
      ReleaseRoom(key, inline_share);
    }
    return ModifyResult::kDone;
  }
}

bool DeleteLimit(const LimitId& id) {
  MemoryKey key;
  dshash_table* table = TableOrNull();
  if (table == nullptr || !TryKeyOf(id, &key)) return false;  // none can be stored
  auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, true));
  if (entry == nullptr) return false;
  ReleaseSlot(entry->inline_share);
  UncountNameEntry(entry->key);
  dshash_delete_entry(table, entry);
  return true;
}

int64 DeleteIdle(Micros now) {
  dshash_table* table = TableOrNull();
  return table == nullptr ? 0 : SweepIdle(table, now, MyDatabaseId);
}

// (name, key NULL first) byte order, as the table's rows are listed.
int CompareEntries(const void* left, const void* right) {
  const MemoryKey& a = static_cast<const MemoryEntry*>(left)->key;
  const MemoryKey& b = static_cast<const MemoryEntry*>(right)->key;
  int c = std::memcmp(a.bytes, b.bytes, std::min(a.name_len, b.name_len));
  if (c != 0 || a.name_len != b.name_len) return c != 0 ? c : (a.name_len < b.name_len ? -1 : 1);
  if (a.key_len < 0 || b.key_len < 0) return (a.key_len >= 0) - (b.key_len >= 0);
  c = std::memcmp(a.bytes + a.name_len, b.bytes + b.name_len, std::min(a.key_len, b.key_len));
  return c != 0 ? c : (a.key_len > b.key_len) - (a.key_len < b.key_len);
}

// Copies every entry of `database` (InvalidOid: of every database), each
// partition under its lock in turn; how many.
int CopyEntries(dshash_table* table, Oid database, MemoryEntry** out) {
  int capacity = 64;
  int count = 0;
  auto* entries = static_cast<MemoryEntry*>(palloc(sizeof(MemoryEntry) * capacity));
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (database != InvalidOid && entry->key.database != database) continue;
    if (count == capacity) {
      capacity *= 2;
      entries = static_cast<MemoryEntry*>(repalloc_huge(entries, sizeof(MemoryEntry) * capacity));
    }
    entries[count++] = *entry;
  }
  dshash_seq_term(&scan);
  *out = entries;
  return count;
}

void ScanStatus(StatusRowSink sink, void* context) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return;
  MemoryEntry* entries = nullptr;
  int count = CopyEntries(table, MyDatabaseId, &entries);
  qsort(entries, count, sizeof(MemoryEntry), CompareEntries);
  for (int i = 0; i < count; ++i) {
    CHECK_FOR_INTERRUPTS();
    const MemoryKey& key = entries[i].key;
    StatusRow row{};
    row.id.name_text = cstring_to_text_with_len(key.bytes, key.name_len);
    row.id.name = VARDATA_ANY(row.id.name_text);
    row.id.name_len = key.name_len;
    if (key.key_len >= 0) {
      row.id.key_text = cstring_to_text_with_len(key.bytes + key.name_len, key.key_len);
      row.id.key = VARDATA_ANY(row.id.key_text);
      row.id.key_len = key.key_len;
    }
    row.stored = StoredStateOfWrite(entries[i].row);
    // The config calls apply: the key's override, else the definition.
    row.has_owner_config = OwnerConfigOf(row.id, &row.owner_config);
    sink(row, context);
  }
  pfree(entries);
}

constexpr Storage kMemoryStorage = {
    "memory", false,       Read,       nullptr,    nullptr, nullptr, nullptr,
    nullptr,  DeleteLimit, DeleteIdle, ScanStatus, nullptr, Modify,
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
  DefineSharedTable(
      SharedTable::kMemoryNames,
      SharedTableSpec{"ratelimit_memory_names", sizeof(NameKey), sizeof(NameEntry), CompareNames, HashName,
                      sizeof(NamesHeader), InitNamesHeader, MaxKeys /* at most one name per entry */});
}

const Storage& MemoryStorage() { return kMemoryStorage; }

size_t MemoryEntryBytes() { return sizeof(MemoryEntry) + 16; }

// The file's layout: a version bumped with any change of MemoryEntry's
// fields, and the sizes of its parts.
uint32 MemoryEntryLayout() {
  return kLayout ^
         static_cast<uint32>(sizeof(MemoryEntry) << 20 ^ sizeof(RowWrite) << 10 ^ sizeof(MemoryKey));
}

int64 WriteMemoryEntries(FILE* file, Micros now) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return 0;
  // Written straight from the table, a partition at a time under its shared
  // lock (at shutdown: nobody waits long), each entry field by field into a
  // zeroed record (no padding byte of the file is left unset).
  int64 written = 0;
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (IdleAt(*entry, now)) continue;
    MemoryEntry record;
    std::memset(static_cast<void*>(&record), 0, sizeof record);
    std::memcpy(&record.key, &entry->key, sizeof(MemoryKey));  // zeroed after the identity (KeyOf)
    record.row.next.exists = entry->row.next.exists;
    record.row.next.value = entry->row.next.value;
    record.row.next.ts = entry->row.next.ts;
    record.row.next.prev = entry->row.next.prev;
    record.row.keep_prev = entry->row.keep_prev;
    record.row.idle_at = entry->row.idle_at;
    record.inline_share = entry->inline_share;
    if (fwrite(&record, sizeof(MemoryEntry), 1, file) != 1) {
      written = -1;
      break;
    }
    ++written;
  }
  dshash_seq_term(&scan);
  return written;
}

bool ReadMemoryEntry(FILE* file, bool* stored) {
  *stored = false;
  MemoryEntry record;
  if (fread(&record, sizeof(MemoryEntry), 1, file) != 1) return false;
  const MemoryKey& key = record.key;
  if (key.name_len < 1 || key.key_len < -1 || UsedBytes(key) > kIdentityBytes) return false;
  dshash_table* table = TableOrNull();
  if (table == nullptr || TakeRoom(key, NewRowRoom{record.inline_share, 0}) != ModifyResult::kDone)
    return true;
  MemoryEntry* entry = InsertEntry(table, key, record.inline_share);
  if (entry == nullptr) return true;  // a session made it since the start: its state stands
  Store(entry, record.row);
  dshash_release_lock(table, entry);
  *stored = true;
  return true;
}

}  // namespace ratelimit_pg
