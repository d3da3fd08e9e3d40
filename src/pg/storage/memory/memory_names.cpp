// The memory storage's per-name counts (memory_names.h): a dshash table of
// the shared-memory module keyed by (database, name).
#include <cstring>

#include "storage/memory/memory_names.h"

#include "shmem/shared_tables.h"

namespace ratelimit_pg {
namespace {

struct NameKey {
  Oid database;
  int32 name_len;
  char name[kMemoryIdentityBytes];  // name_len bytes; the rest is never read
};

struct NameEntry {
  NameKey key;
  int64 entries;
  bool inline_share;  // the name's slot is of the callers' share
};

struct NamesHeader {
  uint64 seed;      // first: of the keys' hash
  SlotQuota slots;  // names; the share: names made by entries of callers' inline configs
};

int (*names_most)() = nullptr;
// The names' table, as DefineMemoryNames registered it.
SharedTable names_table = kNoSharedTable;

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

void InitNamesHeader(void* memory) {
  auto* header = static_cast<NamesHeader*>(memory);
  header->seed = NewTableSeed();
  InitSlotQuota(&header->slots);
}

dshash_table* Names() {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(names_table, &h);
  names_header = static_cast<NamesHeader*>(h);
  return table;
}

NameKey NameOf(Oid database, const char* bytes, int len) {
  NameKey name;
  name.database = database;
  name.name_len = len;
  std::memcpy(name.name, bytes, len);
  return name;
}

// Deletes a name of no entries (giving its slot back), else releases its lock.
void DropOrRelease(dshash_table* names, NameEntry* entry) {
  if (entry->entries > 0) {
    dshash_release_lock(names, entry);
    return;
  }
  ReleaseSlot(&names_header->slots, entry->inline_share);
  dshash_delete_entry(names, entry);
}

}  // namespace

NameCount CountMemoryName(Oid database, const char* bytes, int len, int64 most, const EntrySlot& slot) {
  dshash_table* names = Names();
  NameKey name = NameOf(database, bytes, len);
  bool found = false;
  auto* entry = static_cast<NameEntry*>(dshash_find_or_insert(names, &name, &found));
  if (!found) {
    entry->entries = 0;
    entry->inline_share = slot.inline_share;
  }
  NameCount counted = NameCount::kCounted;
  if (most > 0 && entry->entries >= most) {
    counted = NameCount::kNameFull;
  } else if (!ReserveSlot(slot.quota, slot.most, slot.inline_share)) {
    counted = NameCount::kEntriesFull;
  } else if (!found && !ReserveSlot(&names_header->slots, names_most(), slot.inline_share)) {
    ReleaseSlot(slot.quota, slot.inline_share);
    counted = NameCount::kNamesFull;
  }
  if (counted != NameCount::kCounted && !found) {
    dshash_delete_entry(names, entry);  // took no slot
    return counted;
  }
  if (counted == NameCount::kCounted) ++entry->entries;
  dshash_release_lock(names, entry);
  return counted;
}

void UncountMemoryName(Oid database, const char* bytes, int len) {
  dshash_table* names = Names();
  NameKey name = NameOf(database, bytes, len);
  auto* entry = static_cast<NameEntry*>(dshash_find(names, &name, true));
  if (entry == nullptr) return;
  --entry->entries;
  DropOrRelease(names, entry);
}

void DefineMemoryNames(int (*max_names)()) {
  names_most = max_names;
  names_table = DefineSharedTable(SharedTableSpec{"ratelimit_memory_names", sizeof(NameKey),
                                                  sizeof(NameEntry), CompareNames, HashName,
                                                  sizeof(NamesHeader), InitNamesHeader, max_names});
}

}  // namespace ratelimit_pg
