// Memory limits across a clean restart (memory_persist.cpp): with
// shared_preload_libraries = 'ratelimit', a background worker reads the
// entries a clean shutdown wrote ($PGDATA/ratelimit_memory.state) back at
// server start and deletes the file, then waits; at shutdown it writes every
// live entry again, as pg_prewarm's autoprewarm does with its block list. A
// crash (or pg_ctl stop -m immediate) writes nothing: every memory limit
// starts from its initial state.
#pragma once

#include "limit_call.h"

extern "C" {
PGDLLEXPORT void ratelimit_memory_persist_main(Datum arg);
}

namespace ratelimit_pg {

// In _PG_init; registers the worker only with the preload.
void RegisterMemoryPersistWorker();

}  // namespace ratelimit_pg
