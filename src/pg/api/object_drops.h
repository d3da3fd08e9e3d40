// What a committed DROP DATABASE or DROP EXTENSION ratelimit forgets
// (object_drops.cpp): the dropped database's rows in every storage outside
// its own tables (the memory limits) and its names in ratelimit_stats, as
// the drop forgets its tables. Seen through PostgreSQL's object access hook
// by every backend that has the library loaded (with the preload, every
// backend), and done when the dropping transaction commits.
#pragma once

namespace ratelimit_pg {

// In _PG_init: the hook and the transaction callbacks.
void RegisterObjectDropHooks();

}  // namespace ratelimit_pg
