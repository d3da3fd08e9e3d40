// ratelimit_stats' names in shared memory (stats_names.h): a name's
// counters change under its entry's spinlock, with the partition lock held
// shared; a new name takes its partition lock exclusively, and a slot of
// ratelimit.stats_max_names (of the callers' half when undefined), else it
// counts in the header's overflow row.
#include <cstring>

#include "shmem/stats_names.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
}

namespace ratelimit_pg {

int stats_max_names = 1000;

namespace {

int MaxNames() { return stats_max_names; }

// The hash of the database and name under the table's seed (arg: the header).
dshash_hash HashKey(const void* v, size_t, void* arg) {
  const auto* key = static_cast<const StatsKey*>(v);
  uint32 name_hash = SeededHash(key->name, key->name_len, static_cast<const StatsHeader*>(arg)->seed);
  return hash_combine(name_hash, murmurhash32(key->database));
}

int CompareKeys(const void* a, const void* b, size_t, void*) {
  const auto* x = static_cast<const StatsKey*>(a);
  const auto* y = static_cast<const StatsKey*>(b);
  if (x->database != y->database || x->name_len != y->name_len) return 1;
  return std::memcmp(x->name, y->name, x->name_len) == 0 ? 0 : 1;
}

void InitHeader(void* memory) {
  auto* header = static_cast<StatsHeader*>(memory);
  header->seed = NewTableSeed();
  InitSlotQuota(&header->slots);
  SpinLockInit(&header->mutex);
  header->overflowed = false;
  header->stats_reset = GetCurrentTimestamp();
  header->overflow = Counters{};
  header->next_id = 1;
  header->fold_tranche = LWLockNewTrancheId();
  LWLockInitialize(&header->fold_lock, header->fold_tranche);
  pg_atomic_init_u64(&header->generation, 1);
}

void AddToEntry(StatsEntry* entry, Counter counter, double tokens) {
  SpinLockAcquire(&entry->mutex);
  Add(&entry->counters, counter, tokens);
  SpinLockRelease(&entry->mutex);
}

}  // namespace

void DefineStatsNamesTable(size_t per_backend_size) {
  stats_names_table = DefineSharedTable(
      SharedTableSpec{"ratelimit_stats", sizeof(StatsKey), sizeof(StatsEntry), CompareKeys, HashKey,
                      sizeof(StatsHeader), InitHeader, MaxNames, per_backend_size});
}

uint64 CountInEntry(StatsHeader* header, dshash_table* table, const StatsKey& key, bool defined,
                    Counter counter, double tokens) {
  if (auto* entry = static_cast<StatsEntry*>(dshash_find(table, &key, false))) {
    AddToEntry(entry, counter, tokens);
    uint64 id = entry->id;
    dshash_release_lock(table, entry);
    return id;
  }
  if (ReserveSlot(&header->slots, stats_max_names, !defined)) {
    bool found = false;
    StatsEntry* entry = nullptr;
    PG_TRY();
    { entry = static_cast<StatsEntry*>(dshash_find_or_insert(table, &key, &found)); }
    PG_CATCH();
    {
      ReleaseSlot(&header->slots, !defined);  // never a slot counted without its entry
      PG_RE_THROW();
    }
    PG_END_TRY();
    if (found) {
      ReleaseSlot(&header->slots, !defined);  // added meanwhile by another session
    } else {
      SpinLockInit(&entry->mutex);
      entry->defined = defined;
      entry->counters = Counters{};
      SpinLockAcquire(&header->mutex);
      entry->id = header->next_id++;
      SpinLockRelease(&header->mutex);
    }
    AddToEntry(entry, counter, tokens);
    uint64 id = entry->id;
    dshash_release_lock(table, entry);
    return id;
  }
  SpinLockAcquire(&header->mutex);
  Add(&header->overflow, counter, tokens);
  header->overflowed = true;
  SpinLockRelease(&header->mutex);
  return 0;
}

bool CopyName(void* entry, void* out, void* arg) {
  auto* e = static_cast<StatsEntry*>(entry);
  bool every_database = *static_cast<bool*>(arg);
  if (!every_database && e->key.database != MyDatabaseId) return false;
  auto* copied = static_cast<CopiedName*>(out);
  copied->key = static_cast<StatsKey*>(palloc(offsetof(StatsKey, name) + e->key.name_len));
  copied->key->database = e->key.database;
  copied->key->name_len = e->key.name_len;
  std::memcpy(copied->key->name, e->key.name, e->key.name_len);
  copied->id = e->id;
  SpinLockAcquire(&e->mutex);
  copied->counters = e->counters;
  SpinLockRelease(&e->mutex);
  return true;
}

int CompareCopied(const void* left, const void* right) {
  const StatsKey* a = static_cast<const CopiedName*>(left)->key;
  const StatsKey* b = static_cast<const CopiedName*>(right)->key;
  return CompareIdentity(a->name, a->name_len, nullptr, -1, b->name, b->name_len, nullptr, -1);
}

}  // namespace ratelimit_pg
