// The storages a limit can live in (storage.cpp): the one place a storage
// is chosen, and the steps of the seam (seam.h) every caller reaches it by.
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// The storage a call's limit lives in.
const Storage& StorageFor(const LimitCall& call);
// Every storage, for what spans them all (reset, cleanup, status, config
// changes): how many, *out the array.
int AllStorages(const Storage* const** out);
// At _PG_init: every storage's settings and the shared tables it needs
// (before the shared memory is requested), then its hooks (after).
void DefineStorages();
void RegisterStorageHooks();

}  // namespace ratelimit_pg
