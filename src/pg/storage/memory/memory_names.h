// How many entries each (database, name) of the memory storage has
// (memory_names.cpp): what a limit's memoryKeys bounds. Counted for every
// entry, bounded or not (a bound set later holds at once); changed when an
// entry is made or deleted, never per call. Its partition lock is taken with
// no other lock held, or inside an entry's (a sweep's, a delete's): never
// the other way round.
//
// The names table holds at most max_names() names (memory_storage.cpp's
// rule), of which names made by entries of callers' inline configs may take
// half, as for entries (slot_quota.h).
#pragma once

#include "shmem/slot_quota.h"

namespace ratelimit_pg {

// The most bytes of a memory entry's identity (name and key together).
constexpr int kMemoryIdentityBytes = 236;
// The most bytes of an identity a compact entry holds (longer ones take a
// long entry, of which there are fewer: memory_storage.cpp).
constexpr int kMemoryCompactBytes = 56;

// At _PG_init (DefineMemoryStorage): the names' shared table, of at most
// max_names() entries.
void DefineMemoryNames(int (*max_names)());

// The slot of the entry being counted: taken from `quota` (of `most`, in
// the callers' share if inline_share) once its name has room for it.
struct EntrySlot {
  SlotQuota* quota;
  int most;
  bool inline_share;  // also the share a new name takes
};
enum class NameCount {
  kCounted,      // the entry's slot is taken and the entry counted in its name's
  kNameFull,     // the name has `most` entries already: nothing taken
  kEntriesFull,  // no slot for the entry: nothing taken
  kNamesFull,    // a new name, and no room for one (of its share): nothing taken
};
// Counts a new entry of the name and takes its slot, in the order its
// errors are told: the name's bound, the entries', the names'.
NameCount CountMemoryName(Oid database, const char* bytes, int len, int64 most, const EntrySlot& slot);
// An entry of the name is gone.
void UncountMemoryName(Oid database, const char* bytes, int len);

}  // namespace ratelimit_pg
