// The storages a limit can live in, and which one a call uses.
#include "storage_registry.h"

#include "table_storage.h"

namespace ratelimit_pg {

const Storage& StorageFor(const LimitCall& call) {
  (void)call;  // every limit is kept in the table
  return TableStorage();
}

int AllStorages(const Storage* const** out) {
  static const Storage* const storages[] = {&TableStorage()};
  *out = storages;
  return static_cast<int>(sizeof storages / sizeof storages[0]);
}

}  // namespace ratelimit_pg
