// How many entries each (database, name) of the memory storage has
// (memory_names.cpp): what a limit's memoryKeys bounds. Counted for every
// entry, bounded or not (a bound set later holds at once); changed when an
// entry is made or deleted, never per call. Its partition lock is taken with
// no other lock held, or inside an entry's (a sweep's, a delete's): never
// the other way round.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// The most bytes of a memory entry's identity (name and key together).
constexpr int kMemoryIdentityBytes = 236;

// At _PG_init (DefineMemoryStorage): the names' shared table, of at most
// max_names() entries.
void DefineMemoryNames(int (*max_names)());
// Counts a new entry of the name; false (nothing counted) when the name has
// `most` entries already (most > 0).
bool CountMemoryName(Oid database, const char* bytes, int len, int64 most);
// An entry of the name is gone.
void UncountMemoryName(Oid database, const char* bytes, int len);

}  // namespace ratelimit_pg
