// The storages a limit can live in (storage.cpp): the one place a storage
// is chosen, and the steps of the seam (seam.h) every caller reaches it by.
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// The storage a config's limit lives in (its options' "storage"), and a call's.
const Storage& StorageFor(const StorageOptions& options);
const Storage& StorageFor(const LimitCall& call);
// The index of the storage of that name (a config's "storage"); -1: none.
int StorageIndexNamed(const char* name, int len);
// Every storage, for what spans them all (reset, cleanup, status, config
// changes, the names a config may give): how many, *out the array, in
// index order.
int AllStorages(const Storage* const** out);
// At _PG_init: every storage's settings and the shared tables it needs
// (before the shared memory is requested), then its hooks (after).
void DefineStorages();
void RegisterStorageHooks();

}  // namespace ratelimit_pg
