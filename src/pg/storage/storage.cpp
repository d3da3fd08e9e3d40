// The storages a limit can live in, which one a call uses, and their
// settings and hooks.
#include "storage/storage.h"

#include "storage/memory/memory_persist.h"
#include "storage/memory/memory_storage.h"
#include "storage/table/table_storage.h"

namespace ratelimit_pg {

const Storage& StorageFor(const LimitCall& call) {
  return call.config.memory ? MemoryStorage() : TableStorage();
}

void DefineStorages() { DefineMemoryStorage(); }

void RegisterStorageHooks() { RegisterMemoryPersistence(); }

int AllStorages(const Storage* const** out) {
  static const Storage* const storages[] = {&TableStorage(), &MemoryStorage()};
  *out = storages;
  return static_cast<int>(sizeof storages / sizeof storages[0]);
}

}  // namespace ratelimit_pg
