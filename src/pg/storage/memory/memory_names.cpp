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

NameKey NameOf(Oid database, const char* bytes, int len) {
  NameKey name;
  name.database = database;
  name.name_len = len;
  std::memcpy(name.name, bytes, len);
  return name;
}

}  // namespace

bool CountMemoryName(Oid database, const char* bytes, int len, int64 most) {
  dshash_table* names = Names();
  NameKey name = NameOf(database, bytes, len);
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

void UncountMemoryName(Oid database, const char* bytes, int len) {
  dshash_table* names = Names();
  NameKey name = NameOf(database, bytes, len);
  auto* entry = static_cast<NameEntry*>(dshash_find(names, &name, true));
  if (entry == nullptr) return;
  if (--entry->entries <= 0) {
    dshash_delete_entry(names, entry);
  } else {
    dshash_release_lock(names, entry);
  }
}

void DefineMemoryNames(int (*max_names)()) {
  DefineSharedTable(SharedTable::kMemoryNames,
                    SharedTableSpec{"ratelimit_memory_names", sizeof(NameKey), sizeof(NameEntry),
                                    CompareNames, HashName, sizeof(NamesHeader), InitNamesHeader, max_names});
}

}  // namespace ratelimit_pg
