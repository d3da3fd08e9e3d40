// The storages a limit can live in, which one a call uses, and their
// settings and hooks.
#include <cstring>

#include "storage/storage.h"

#include "storage/memory/memory_guard.h"
#include "storage/memory/memory_persist.h"
#include "storage/memory/memory_redo.h"
#include "storage/memory/memory_storage.h"
#include "storage/memory/memory_wal.h"
#include "storage/table/table_storage.h"

namespace ratelimit_pg {

void DefineStorages() {
  DefineMemoryStorage();
  DefineMemoryDurabilityGuc();
}

void RegisterStorageHooks() {
  RegisterMemoryPersistence();
  RegisterMemoryRedo();
  RegisterMemoryGuard();
}

namespace {

// Every storage; a config's "storage" is its index here (0, the table, the
// default).
const Storage* const kStorages[] = {&TableStorage(), &MemoryStorage()};
constexpr int kStorageCount = static_cast<int>(sizeof kStorages / sizeof kStorages[0]);

}  // namespace

const Storage& StorageFor(const StorageOptions& options) {
  if (options.storage < 0 || options.storage >= kStorageCount)
    elog(ERROR, "ratelimit: no storage %d", options.storage);
  return *kStorages[options.storage];
}

const Storage& StorageFor(const LimitCall& call) { return StorageFor(call.config.options); }

int StorageIndexNamed(const char* name, int len) {
  for (int i = 0; i < kStorageCount; ++i)
    if (static_cast<int>(std::strlen(kStorages[i]->name)) == len &&
        std::memcmp(kStorages[i]->name, name, len) == 0)
      return i;
  return -1;
}

int AllStorages(const Storage* const** out) {
  *out = kStorages;
  return kStorageCount;
}

}  // namespace ratelimit_pg
