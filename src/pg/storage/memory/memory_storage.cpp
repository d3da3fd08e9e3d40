// The memory storage (memory_storage.h): its Storage, over the entries of
// memory_entries.h (which says how they are kept and bounded).
#include <algorithm>
#include <cstring>

#include "storage/memory/memory_storage.h"

#include "storage/memory/memory_entries.h"
#include "storage/memory/memory_errors.h"
#include "storage/memory/memory_recovery.h"
#include "storage/memory/memory_wal.h"
#include "storage/row_codec.h"

extern "C" {
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
}

namespace ratelimit_pg {
namespace {

using namespace memory;

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
        MarkWrite(entry, layout, log);
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
  memory_compact_table =
      DefineSharedTable(SharedTableSpec{"ratelimit_memory", kCompact.key_size, kCompact.entry_size,
                                        CompareKeys, HashKey, sizeof(MemoryHeader), InitHeader, MaxKeys});
  memory_long_table =
      DefineSharedTable(SharedTableSpec{"ratelimit_memory_long", kLong.key_size, kLong.entry_size,
                                        CompareKeys, HashKey, sizeof(LongHeader), InitLongHeader, PartMost});
  DefineMemoryNames(PartMost);
}

const Storage& MemoryStorage() { return kMemoryStorage; }

}  // namespace ratelimit_pg
