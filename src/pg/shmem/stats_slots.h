// ratelimit_stats' per-backend slots (stats_slots.cpp): with the preload, a
// slot of shared memory per PGPROC number that only its backend writes,
// holding the counters of the first names it counted, so that counting a
// known name takes no lock; the view adds the slots to the names' entries,
// and a backend's exit folds its slot into them. docs/internals.md,
// "Counting ratelimit_stats per backend", says how.
#pragma once

#include "shmem/stats_names.h"

namespace ratelimit_pg {

// ratelimit.track_stats (the setting stats.cpp's DefineStatsGucs defines).
extern bool track_stats;

// The bytes of a backend's slot (the names table's per-backend block).
size_t StatsSlotBytes();

// Adds one to a counter of the name (and tokens to tokens_granted);
// `defined`: the name's limit is the owner's (a definition or override).
// In this backend's slot when the name has a place there, else in its
// entry (and then a place, if the slot has room).
void Count(const LimitId& id, bool defined, Counter counter, double tokens);

// Adds every slot's counters of the current period to the copied names of
// their ids (under the fold lock, shared).
void AddSlots(StatsHeader* header, CopiedName* copied, int count);

}  // namespace ratelimit_pg
