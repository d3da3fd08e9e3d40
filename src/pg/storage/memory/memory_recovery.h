// What the state file (memory_state_file.cpp), redo (memory_redo.cpp) and the
// durability worker (memory_guard.cpp) do with the memory storage's tables
// (memory_recovery.cpp): outside any call, in the postmaster, the startup
// process or the worker.
#pragma once

#include "storage/memory/memory_record.h"

extern "C" {
#include "access/xlogdefs.h"
}

namespace ratelimit_pg {

using MemoryEntryVisitor = bool (*)(const MemoryRecord& record, void* context);

// For the state file: hands every live entry (not idle at `now`) to
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

// ---- durability (memory_wal.h) ----

// What redo did with a record.
enum class RedoOutcome { kApplied, kIdle, kNoRoom };
// Redo of an entry's logged state: the entry holds it (made if there is
// room, within the same bounds as a call's), or, if the state is idle at
// `now`, is removed. Never raises for want of room.
RedoOutcome ApplyMemoryRecord(const MemoryRecord& record, Micros now);
// Removes the entry of an identity (a logged reset); whether there was one.
bool RemoveMemoryIdentity(const MemoryRecord& identity);
// Removes every entry of `database`, giving back what each counted (a
// dropped database or extension; logged when `log` and writes are logged);
// how many.
int64 ForgetMemoryDatabase(Oid database, bool log);
// The log epoch moves on (memory_guard.cpp, at a checkpoint's redo point);
// the new one.
uint32 BeginMemoryLogEpoch();
// Logs every live entry whose last record is of an earlier epoch, and
// marks it with `epoch`; how many, and in *end the last record's end.
int64 RelogStaleMemoryEntries(uint32 epoch, Micros now, XLogRecPtr* end);
// Whether writes may be logged: set once every entry was logged since the
// start (writes wait until then), cleared when the worker stops.
void SetMemoryDurable(bool durable);

}  // namespace ratelimit_pg
