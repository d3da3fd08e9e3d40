// Memory limits through PostgreSQL's WAL (memory_wal.cpp): with
// ratelimit.memory_durability = wal, every write of a memory entry (a
// grant, a refund, a reset) is a WAL record of the entry's whole state,
// inserted under the entry's partition lock (so records of one entry are in
// the order of its writes), and replayed into shared memory by the
// resource manager of memory_redo.cpp after a crash and on every standby.
// What keeps an entry last written before a checkpoint is memory_guard.cpp.
// The design and its alternatives: docs/internals.md, "Durable memory limits".
#pragma once

#include "storage/memory/memory_record.h"

extern "C" {
#include "access/xlogdefs.h"
}

namespace ratelimit_pg {

// The resource manager's id: in the range PostgreSQL leaves to extensions
// (128-255, the wiki's CustomWALResourceManagers list), and on that list.
constexpr int kMemoryRmgrId = 200;
// A record's type, in the info byte's rmgr bits.
constexpr uint8 kWalEntries = 0x00;         // entries' states: n × (head, bytes)
constexpr uint8 kWalDelete = 0x10;          // one identity removed (a reset)
constexpr uint8 kWalForgetDatabase = 0x20;  // every entry of a database removed
constexpr uint8 kWalTypeMask = 0xF0;

// The head of a kWalDelete record, before the identity's bytes.
struct WalDeleteHead {
  Oid database;
  int32 name_len;
  int32 key_len;  // -1: the NULL key
};

// ratelimit.memory_durability; in _PG_init.
void DefineMemoryDurabilityGuc();
// The setting is wal (whether this process may write WAL aside).
bool MemoryDurabilityWal();
// Whether this write of a memory entry is to be logged: the setting is
// wal, the library preloaded (its resource manager registered), and this
// server is not in recovery (a standby's own decisions are its own).
bool LogMemoryWrites();
// Logs an entry's state (one record); its end. Under the entry's lock.
XLogRecPtr LogMemoryEntry(const MemoryRecord& record);
// Logs a removed identity; under the entry's lock.
void LogMemoryDelete(const MemoryRecord& identity);
// Logs that every entry of `database` was removed.
void LogMemoryForgetDatabase(Oid database);
// Flushes the WAL inserted so far (the worker's, every look): the records
// no commit flushed, as Insert leaves them to it.
void FlushMemoryWal();

}  // namespace ratelimit_pg
