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

// With ratelimit.memory_durability = wal (memory_wal.h), on a primary: the
// entries a start reads back are kept in $PGDATA/ratelimit_memory.base,
// and read again after a crash, until the worker has logged every entry
// (a checkpoint after the start would otherwise leave them out of the WAL
// a crash recovery replays); so are those a recovery ends with, for the
// end-of-recovery checkpoint, which no worker holds back; and those of a
// worker that stops, for the checkpoints until the next one has run.

// At the end of a recovery an end-of-recovery checkpoint follows (the
// startup process): the entries saved as the base file. Never raises; says
// what it did in one LOG line.
void SaveRecoveredMemoryLimits();
// When the worker stops (memory_guard.cpp), on a primary: every live entry
// saved as the base file, as at a start, since a checkpoint may complete
// while no worker runs (until the next one's first pass removes the file).
// Never raises; says what it did in one LOG line; false if the file could
// not be written and made durable.
bool SaveMemoryBaseAtWorkerExit();
// The worker has logged every entry: the base file goes.
void RemoveMemoryBase();

}  // namespace ratelimit_pg
