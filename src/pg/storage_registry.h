// The storages a limit can live in (storage_registry.cpp), and which one a
// call's limit lives in.
#pragma once

#include "storage.h"

namespace ratelimit_pg {

// The storage a call's limit lives in.
const Storage& StorageFor(const LimitCall& call);
// Every storage, for what spans them all (reset, cleanup, status, config
// changes): how many, *out the array.
int AllStorages(const Storage* const** out);

}  // namespace ratelimit_pg
