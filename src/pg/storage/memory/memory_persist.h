// Memory limits across a clean restart (memory_persist.cpp): with
// shared_preload_libraries = 'ratelimit', the postmaster reads the entries
// a clean shutdown saved ($PGDATA/ratelimit_memory.state) while it makes
// shared memory, before any connection, and removes the file; it saves
// every live entry again when it exits after a clean shutdown, once no
// other process runs. A crash or pg_ctl stop -m immediate saves nothing,
// and a damaged file is dropped with one LOG line: every memory limit then
// starts from its initial state. There is no worker process to stop or kill.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// In _PG_init, after RequestSharedTables; only with the preload.
void RegisterMemoryPersistence();

}  // namespace ratelimit_pg
