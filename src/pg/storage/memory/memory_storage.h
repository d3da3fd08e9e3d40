// The memory storage (memory_storage.cpp): limits whose config says
// "storage": "memory", one entry per (name, key) in a dshash table of the
// shared-memory module (shared_tables.h). A grant is seen by every session
// at once, takes no row lock and writes no WAL; PostgreSQL's rollback does
// not undo it (pending_grants.h gives a rolled-back grant back). Its
// entries are kept as memory_entries.h says; a clean shutdown of a
// preloading server keeps them (memory_persist.h), and with
// ratelimit.memory_durability = wal a crash and a failover too
// (memory_wal.h).
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// The GUC ratelimit.memory_max_keys and the table's spec; in _PG_init,
// before RequestSharedTables.
void DefineMemoryStorage();
const Storage& MemoryStorage();

}  // namespace ratelimit_pg
