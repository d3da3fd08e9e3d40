// The resource manager that replays memory limits' WAL records
// (memory_redo.cpp) into shared memory: in the startup process, after a
// crash and on every standby, before anyone can connect to a crashed
// server. Redo is the most dangerous code of the extension (an error there
// stops the server from starting): it checks every record as the saved
// state's load does (memory_record.h), skips what it cannot apply with one
// LOG line per kind (a damaged or foreign record, no room: a smaller
// ratelimit.memory_max_keys than the records need), never reads the
// catalog, never allocates without bound and never raises.
#pragma once

namespace ratelimit_pg {

// In _PG_init, with the preload only (PostgreSQL registers custom resource
// managers only then): the resource manager "ratelimit_memory".
void RegisterMemoryRedo();

}  // namespace ratelimit_pg
