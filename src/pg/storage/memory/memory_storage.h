// The memory storage (memory_storage.cpp): limits whose config says
// "storage": "memory", one entry per (name, key) in a dshash table of the
// shared-memory module (shared_tables.h). A grant is seen by every session
// at once, takes no row lock and writes no WAL; PostgreSQL's rollback does
// not undo it (pending_grants.h gives a rolled-back grant back). Not
// durable: a crash loses every entry (an entry back in its initial state is
// the same as none); a clean shutdown of a preloading server keeps them
// (memory_persist.h).
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// The GUC ratelimit.memory_max_keys and the table's spec; in _PG_init,
// before RequestSharedTables.
void DefineMemoryStorage();
const Storage& MemoryStorage();

// One entry as memory_persist.cpp saves and restores it.
struct MemoryRecord {
  Oid database;
  int32 name_len;
  int32 key_len;      // -1: the NULL key
  const char* bytes;  // the name, then the key
  RowWrite row;
  bool inline_share;
};
using MemoryEntryVisitor = bool (*)(const MemoryRecord& record, void* context);

// For memory_persist.cpp: hands every live entry (not idle at `now`) to
// `visit` (false: stop); how many, or -1 if stopped.
int64 ForEachMemoryEntry(Micros now, MemoryEntryVisitor visit, void* context);
// The most bytes of a name and key together.
int MemoryIdentityBytes();
// The clock at which entries are idle for a sweep, ratelimit_cleanup and
// the saved state: the session's, but never later than the real clock (a
// session's test clock set far ahead must not empty every database's
// limits).
Micros MemorySweepClock();
// Makes the entry of a record live; false when it does not fit (an identity
// too long, no room, a duplicate). May raise only as an insert can (no
// memory left in the area).
bool RestoreMemoryEntry(const MemoryRecord& record);
// The hash seeds of the compact and the long table (0 without shared
// memory): the saved state keeps them, and its records are in their order.
void MemoryTableSeeds(uint64* compact, uint64* long_seed);
// Gives the tables the seeds of a saved state, while both are empty (the
// load, in the postmaster before any connection): its records then arrive
// in the tables' own order.
void SetMemoryTableSeeds(uint64 compact, uint64 long_seed);
// Deletes every entry of every database, giving back what each counted, and
// gives the empty tables new seeds: a load's undo when its file proves
// damaged after entries were made or the load fails (it runs in the
// postmaster before any connection, so the entries are the load's).
void ForgetMemoryEntries();

}  // namespace ratelimit_pg
