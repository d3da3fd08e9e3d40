// The memory storage (memory_storage.h) over a dshash table.
//
// An entry is keyed by its identity whole (name and key bytes, at most
// kIdentityBytes together): exact, with no collision to reason about, and
// ratelimit_status can show it. It holds the row a table would hold (a
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
#include "definitions.h"
#include "overrides.h"
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

constexpr int kIdentityBytes = 240;
constexpr uint32 kLayout = 0x524c4d31;  // "RLM1"

struct MemoryKey {
  int32 name_len;
  int32 key_len;  // -1: the NULL key
  char bytes[kIdentityBytes];  // the name, then the key; zero after them
};

struct MemoryEntry {
  MemoryKey key;
  RowWrite row;
  bool inline_share;  // made under a caller's inline config (counted in inline_entries)
};

struct MemoryHeader {
  pg_atomic_uint32 entries;
  pg_atomic_uint32 inline_entries;
};

static_assert(std::is_trivially_destructible_v<MemoryKey>);
static_assert(std::is_trivially_copyable_v<MemoryEntry>);

int memory_max_keys = 10000;

int MaxKeys() { return memory_max_keys; }
uint32 InlineMaxKeys() { return static_cast<uint32>(std::max(1, memory_max_keys / 2)); }

int UsedBytes(const MemoryKey& key) { return key.name_len + std::max(0, key.key_len); }

dshash_hash HashKey(const void* v, size_t, void*) {
  const auto* key = static_cast<const MemoryKey*>(v);
  uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(key->bytes), UsedBytes(*key));
  return hash_combine(h, hash_uint32(static_cast<uint32>(key->name_len) << 16 ^ static_cast<uint32>(key->key_len)));
}

int CompareKeys(const void* a, const void* b, size_t, void*) {
  const auto* x = static_cast<const MemoryKey*>(a);
  const auto* y = static_cast<const MemoryKey*>(b);
  if (x->name_len != y->name_len || x->key_len != y->key_len) return 1;
  return std::memcmp(x->bytes, y->bytes, UsedBytes(*x)) == 0 ? 0 : 1;
}

void InitHeader(void* memory) {
  auto* header = static_cast<MemoryHeader*>(memory);
  pg_atomic_init_u32(&header->entries, 0);
  pg_atomic_init_u32(&header->inline_entries, 0);
}

MemoryHeader* header = nullptr;

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
             errdetail("Rate limit \"%.*s\" and its key take %d bytes.", std::min(id.name_len, 64), id.name,
                       id.name_len + (id.key != nullptr ? id.key_len : 0)),
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

// Deletes every entry idle at `now`, a partition at a time; how many.
int64 SweepIdle(dshash_table* table, Micros now) {
  int64 deleted = 0;
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, true);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (!IdleAt(*entry, now)) continue;
    ReleaseSlot(entry->inline_share);
    dshash_delete_current(&scan);
    ++deleted;
  }
  dshash_seq_term(&scan);
  return deleted;
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

ModifyResult Modify(const LimitId& id, bool inline_share, ModifyStep step, void* context) {
  MemoryKey key = KeyOf(id);
  dshash_table* table = Table();
  bool swept = false;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (auto* entry = static_cast<MemoryEntry*>(dshash_find(table, &key, true))) {
      RowWrite write;
      if (step(StoredStateOfWrite(entry->row), context, &write)) entry->row = write;
      dshash_release_lock(table, entry);
      return ModifyResult::kDone;
    }
    // No entry: a step that would write nothing to no row needs none.
    RowWrite write;
    if (!step(NoStoredRow(), context, &write)) return ModifyResult::kDone;
    if (!ReserveSlot(inline_share)) {
      if (swept) return ModifyResult::kNoRoom;
      SweepIdle(table, ClockNow());
      swept = true;
      continue;
    }
    bool found = false;
    auto* entry = static_cast<MemoryEntry*>(dshash_find_or_insert(table, &key, &found));
    if (found) {  // made meanwhile by another session: decide on it
      ReleaseSlot(inline_share);
      dshash_release_lock(table, entry);
      continue;
    }
    entry->inline_share = inline_share;
    if (step(NoStoredRow(), context, &write)) {
      entry->row = write;
      dshash_release_lock(table, entry);
    } else {
      dshash_delete_entry(table, entry);
      ReleaseSlot(inline_share);
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
  dshash_delete_entry(table, entry);
  return true;
}

int64 DeleteIdle(Micros now) {
  dshash_table* table = TableOrNull();
  return table == nullptr ? 0 : SweepIdle(table, now);
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

// Copies every entry (each partition under its lock in turn); how many.
int CopyEntries(dshash_table* table, MemoryEntry** out) {
  int capacity = 64;
  int count = 0;
  auto* entries = static_cast<MemoryEntry*>(palloc(sizeof(MemoryEntry) * capacity));
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (auto* entry = static_cast<MemoryEntry*>(dshash_seq_next(&scan))) {
    if (count == capacity) {
      capacity *= 2;
      entries = static_cast<MemoryEntry*>(repalloc_huge(entries, sizeof(MemoryEntry) * capacity));
    }
    // Byte for byte, padding too: the keeper writes these to its file.
    std::memcpy(&entries[count++], entry, sizeof(MemoryEntry));
  }
  dshash_seq_term(&scan);
  *out = entries;
  return count;
}

void ScanStatus(StatusRowSink sink, void* context) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return;
  MemoryEntry* entries = nullptr;
  int count = CopyEntries(table, &entries);
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
    row.has_owner_config =
        LookupOverride(row.id, &row.owner_config) || LookupDefinedConfig(row.id.name_text, &row.owner_config);
    sink(row, context);
  }
  pfree(entries);
}

constexpr Storage kMemoryStorage = {
    "memory", false, Read,    nullptr,     nullptr,    nullptr, nullptr, nullptr,
    DeleteLimit, DeleteIdle, ScanStatus, nullptr, Modify,
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
  SharedTableSpec spec{};
  spec.tranche_name = "ratelimit_memory";
  spec.key_size = sizeof(MemoryKey);
  spec.entry_size = sizeof(MemoryEntry);
  spec.compare = CompareKeys;
  spec.hash = HashKey;
  spec.header_size = sizeof(MemoryHeader);
  spec.init_header = InitHeader;
  spec.max_entries = MaxKeys;
  DefineSharedTable(SharedTable::kMemoryLimits, spec);
}

const Storage& MemoryStorage() { return kMemoryStorage; }

size_t MemoryEntryBytes() { return sizeof(MemoryEntry) + 16; }

uint32 MemoryEntryLayout() { return kLayout ^ static_cast<uint32>(sizeof(MemoryEntry)); }

int64 WriteMemoryEntries(FILE* file, Micros now) {
  dshash_table* table = TableOrNull();
  if (table == nullptr) return 0;
  MemoryEntry* entries = nullptr;
  int count = CopyEntries(table, &entries);
  int64 written = 0;
  for (int i = 0; i < count; ++i) {
    if (IdleAt(entries[i], now)) continue;
    if (fwrite(&entries[i], sizeof(MemoryEntry), 1, file) != 1) break;
    ++written;
  }
  pfree(entries);
  return written;
}

bool ReadMemoryEntry(FILE* file, bool* stored) {
  *stored = false;
  MemoryEntry record;
  if (fread(&record, sizeof(MemoryEntry), 1, file) != 1) return false;
  const MemoryKey& key = record.key;
  if (key.name_len < 1 || key.key_len < -1 || UsedBytes(key) > kIdentityBytes) return false;
  dshash_table* table = TableOrNull();
  if (table == nullptr || !ReserveSlot(record.inline_share)) return true;
  bool found = false;
  auto* entry = static_cast<MemoryEntry*>(dshash_find_or_insert(table, &record.key, &found));
  if (found) {
    ReleaseSlot(record.inline_share);
  } else {
    entry->row = record.row;
    entry->inline_share = record.inline_share;
    *stored = true;
  }
  dshash_release_lock(table, entry);
  return true;
}

}  // namespace ratelimit_pg
