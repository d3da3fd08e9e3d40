// The memory storage (memory_storage.cpp): limits whose config says
// "storage": "memory", one entry per (name, key) in a dshash table of the
// shared-memory module (shared_tables.h). A grant is seen by every session
// at once, takes no row lock and writes no WAL; PostgreSQL's rollback does
// not undo it (pending_grants.h gives a rolled-back grant back). Not
// durable: a crash loses every entry (an entry back in its initial state is
// the same as none); a clean shutdown of a preloading server keeps them
// (memory_persist.h).
#pragma once

#include <cstdio>

#include "storage.h"

namespace ratelimit_pg {

// The GUC ratelimit.memory_max_keys and the table's spec; in _PG_init,
// before RequestSharedTables.
void DefineMemoryStorage();
const Storage& MemoryStorage();
// The bytes one entry takes in shared memory (its DSA allocation).
size_t MemoryEntryBytes();

// For memory_persist.cpp: every live entry (not idle at `now`) written to
// `file` as fixed-size records; how many. And one record read back (false:
// not a record of this layout, or no room).
int64 WriteMemoryEntries(FILE* file, Micros now);
bool ReadMemoryEntry(FILE* file, bool* stored);
// The layout's version, written in the file's header.
uint32 MemoryEntryLayout();

}  // namespace ratelimit_pg
