// The storages a limit can live in, and which one a call uses.
#include "storage_registry.h"

#include "memory_storage.h"
#include "table_storage.h"

namespace ratelimit_pg {

const Storage& StorageFor(const LimitCall& call) {
  return call.config.memory ? MemoryStorage() : TableStorage();
}

int AllStorages(const Storage* const** out) {
  static const Storage* const storages[] = {&TableStorage(), &MemoryStorage()};
  *out = storages;
  return static_cast<int>(sizeof storages / sizeof storages[0]);
}

}  // namespace ratelimit_pg
