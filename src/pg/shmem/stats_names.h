// ratelimit_stats' names (stats_names.cpp): the dshash table of the
// shared-memory module keyed by a database and a name, its header (the
// reset time, the overflow row, the entries' ids, the fold lock and the
// slots' generation) and counting into an entry. Shared by the per-backend
// slots (stats_slots.cpp) and the view (stats.cpp); docs/internals.md,
// "Counting ratelimit_stats per backend", says how they fit together.
#pragma once

#include <cstring>

#include "shmem/shared_tables.h"
#include "shmem/slot_quota.h"
#include "support/limit_call.h"

extern "C" {
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {

struct StatsKey {
  Oid database;  // two databases' limits of one name are counted apart
  int32 name_len;
  char name[kMaxNameBytes];  // name_len bytes; the rest is never read
};

// The key of a name in a database. Only the name's bytes are set: the hash,
// the comparison and the rows read no further (an insert copies the rest,
// unread).
inline StatsKey KeyOf(Oid database, const char* name, int name_len) {
  StatsKey key;
  key.database = database;
  key.name_len = name_len;
  std::memcpy(key.name, name, name_len);
  return key;
}

struct Counters {
  int64 granted;
  int64 refused;
  int64 shadow_refused;
  int64 lock_waits;
  int64 no_room;  // the view's memory_full
  double tokens_granted;
};

struct StatsEntry {
  StatsKey key;
  slock_t mutex;
  bool defined;  // took a slot as a defined name (else of the callers' share)
  uint64 id;     // given at insertion, never reused: the slots' key
  Counters counters;
};

struct StatsHeader {
  uint64 seed;      // of the names' hash
  SlotQuota slots;  // names in the table; the share: names without a definition
  slock_t mutex;    // the fields below
  bool overflowed;  // the overflow counters counted since the reset
  TimestampTz stats_reset;
  Counters overflow;
  uint64 next_id;  // the next entry's id
  int fold_tranche;
  // Shared: reading the entries and the slots; exclusive: moving counts
  // from a slot to the entries (backend exit) and the reset.
  LWLock fold_lock;
  // The generation on a cache line of its own: every count reads it,
  // nothing but a reset writes it.
  char before_generation[PG_CACHE_LINE_SIZE];
  pg_atomic_uint64 generation;  // one more at each reset
  char after_generation[PG_CACHE_LINE_SIZE];
};

// ratelimit.stats_max_names (the setting stats.cpp's DefineStatsGucs defines).
extern int stats_max_names;

// The names' table, registered with the shared-memory module; each backend
// gets per_backend_size bytes of it with the preload (its slot).
void DefineStatsNamesTable(size_t per_backend_size);

// Whether this backend has named the fold lock's tranche (once).
inline bool stats_fold_tranche_named = false;
// The names' table, as DefineStatsNamesTable registered it.
inline SharedTable stats_names_table = kNoSharedTable;

// The names' table attached in this backend and its header; nullptr (and
// *header nullptr) when there is no shared memory. Every count calls it.
inline dshash_table* StatsTable(StatsHeader** header) {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(stats_names_table, &h);
  *header = static_cast<StatsHeader*>(h);
  if (h != nullptr && !stats_fold_tranche_named) {
    LWLockRegisterTranche((*header)->fold_tranche, "ratelimit_stats_fold");
    stats_fold_tranche_named = true;
  }
  return table;
}

enum class Counter { kGranted, kRefused, kShadowRefused, kLockWait, kNoRoom };

// Adds one to `counter` (and tokens to tokens_granted for a grant).
inline void Add(Counters* counters, Counter counter, double tokens) {
  switch (counter) {
    case Counter::kGranted:
      ++counters->granted;
      counters->tokens_granted += tokens;
      break;
    case Counter::kRefused:
      ++counters->refused;
      break;
    case Counter::kShadowRefused:
      ++counters->shadow_refused;
      break;
    case Counter::kLockWait:
      ++counters->lock_waits;
      break;
    case Counter::kNoRoom:
      ++counters->no_room;
      break;
  }
}

inline void AddCounters(Counters* to, const Counters& from) {
  to->granted += from.granted;
  to->refused += from.refused;
  to->shadow_refused += from.shadow_refused;
  to->lock_waits += from.lock_waits;
  to->no_room += from.no_room;
  to->tokens_granted += from.tokens_granted;
}

// Adds one to a counter of the name's entry (or of the overflow row), as
// every count did before the slots; the entry's id, 0 for the overflow row.
uint64 CountInEntry(StatsHeader* header, dshash_table* table, const StatsKey& key, bool defined,
                    Counter counter, double tokens);

// A name and its counters as copied out of the table.
struct CopiedName {
  StatsKey* key;
  uint64 id;
  Counters counters;
};

// CopySorted's copier (shared_tables.h): keeps a name the caller may read
// (arg: a bool, whether it reads every database), its bytes and its
// counters (read under the entry's spinlock).
bool CopyName(void* entry, void* out, void* arg);
// By name (the database aside: one name's rows of several databases meet).
int CompareCopied(const void* left, const void* right);

}  // namespace ratelimit_pg
