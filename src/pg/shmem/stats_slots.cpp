// ratelimit_stats' per-backend slots (stats_slots.h). A slot is written
// with pgstat's st_changecount protocol and read by copying it until the
// copy is whole; counts move from a slot to the entries only under the
// fold lock exclusive, so a count is in one or the other, never both.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "shmem/stats_slots.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
}

#include "support/compat.h"

namespace ratelimit_pg {

bool track_stats = true;

namespace {

// How many names a backend's slot holds.
constexpr int kSlotNames = 16;

// A place of a slot: an entry's id (0: none) and what the slot's backend
// counted for it.
struct SlotName {
  uint64 entry_id;
  Counters counters;
};

// A backend's slot: only its owner writes it.
struct BackendSlot {
  uint32 changecount;  // odd while the owner writes
  int owner_pid;       // 0: none
  uint64 generation;   // the period its places were counted in
  int used;            // names[0..used) are taken
  SlotName names[kSlotNames];
};

// This backend's slot (nullptr: none, or not looked for yet), and the
// names of its places, in this backend's memory: the database, the name's
// length, its bytes and their hash (to find a place without comparing
// every name).
BackendSlot* my_slot = nullptr;
bool slot_looked_for = false;
struct PlaceName {
  uint32 hash;
  Oid database;
  int len;
  char name[kMaxNameBytes];
};
PlaceName place_names[kSlotNames];
// The place counted last (-1: none): a backend calls one name again and
// again, and comparing its bytes costs less than hashing them.
int last_place = -1;

// The changecount protocol's writer side (pgstat_begin_write_activity):
// nothing between the two can fail.
void BeginSlotWrite(BackendSlot* slot) {
  START_CRIT_SECTION();
  auto* v = static_cast<volatile BackendSlot*>(slot);
  v->changecount = v->changecount + 1;
  pg_write_barrier();
}

void EndSlotWrite(BackendSlot* slot) {
  pg_write_barrier();
  auto* v = static_cast<volatile BackendSlot*>(slot);
  v->changecount = v->changecount + 1;
  END_CRIT_SECTION();
}

// Copies a slot as its owner left it between two writes.
void ReadSlot(const BackendSlot* slot, BackendSlot* out) {
  const auto* v = static_cast<const volatile BackendSlot*>(slot);
  for (;;) {
    uint32 before = v->changecount;
    pg_read_barrier();
    std::memcpy(out, slot, sizeof(BackendSlot));
    pg_read_barrier();
    uint32 after = v->changecount;
    if (before == after && (before & 1) == 0) return;
    CHECK_FOR_INTERRUPTS();
  }
}

// Empties this backend's slot for a period (its places given back).
void EmptySlot(BackendSlot* slot, uint64 generation) {
  BeginSlotWrite(slot);
  slot->used = 0;
  slot->generation = generation;
  EndSlotWrite(slot);
}

void FoldSlot(int, Datum);

// Finds this backend's slot, once: with the preload, the slot of its
// PGPROC number; it registers the exit fold.
BackendSlot* MySlot() {
  if (slot_looked_for) return my_slot;
  slot_looked_for = true;
  int count = 0;
  size_t stride = 0;
  char* slots = static_cast<char*>(PerBackendBlocks(stats_names_table, &count, &stride));
  int index = compat::MyProcIndex();
  if (slots == nullptr || index < 0 || index >= count) return nullptr;
  auto* slot = reinterpret_cast<BackendSlot*>(slots + stride * index);
  if (slot->owner_pid != 0 && slot->used > 0)
    elog(LOG, "ratelimit_stats: the counts of %d names left by process %d in its slot are lost", slot->used,
         slot->owner_pid);
  before_shmem_exit(FoldSlot, 0);
  BeginSlotWrite(slot);
  slot->owner_pid = MyProcPid;
  slot->used = 0;
  slot->generation = 0;  // no period's: the first count stamps it
  EndSlotWrite(slot);
  my_slot = slot;
  return slot;
}

// At backend exit (before_shmem_exit): the slot's counters of the current
// period into their entries, and the slot emptied, under the fold lock
// exclusive. An error raised before (a FATAL) may have left LWLocks held:
// they are released first, as ShutdownPostgres, which runs after this,
// would release them.
void FoldSlot(int, Datum) {
  BackendSlot* slot = my_slot;
  if (slot == nullptr) return;
  LWLockReleaseAll();
  StatsHeader* header = nullptr;
  dshash_table* table = StatsTable(&header);
  if (table == nullptr) return;
  LWLockAcquire(&header->fold_lock, LW_EXCLUSIVE);
  if (slot->generation == pg_atomic_read_u64(&header->generation)) {
    for (int i = 0; i < slot->used; ++i) {
      StatsKey key = KeyOf(place_names[i].database, place_names[i].name, place_names[i].len);
      auto* entry = static_cast<StatsEntry*>(dshash_find(table, &key, false));
      if (entry == nullptr) continue;  // cannot be: a reset would have changed the generation
      if (entry->id == slot->names[i].entry_id) {
        SpinLockAcquire(&entry->mutex);
        AddCounters(&entry->counters, slot->names[i].counters);
        SpinLockRelease(&entry->mutex);
      }
      dshash_release_lock(table, entry);
    }
  }
  BeginSlotWrite(slot);
  slot->used = 0;
  slot->owner_pid = 0;
  EndSlotWrite(slot);
  LWLockRelease(&header->fold_lock);
  my_slot = nullptr;
}

// An entry's id and its place in the copied names, to find it by id.
struct CopiedId {
  uint64 id;
  int index;
};

// Whether a place of this backend's slot is the name's, in this database.
bool PlaceIs(const PlaceName& place, const char* name, int name_len) {
  return place.database == MyDatabaseId && place.len == name_len &&
         std::memcmp(place.name, name, name_len) == 0;
}

int CompareIds(const void* left, const void* right) {
  uint64 a = static_cast<const CopiedId*>(left)->id;
  uint64 b = static_cast<const CopiedId*>(right)->id;
  return a < b ? -1 : (a > b ? 1 : 0);
}

}  // namespace

size_t StatsSlotBytes() { return sizeof(BackendSlot); }

void Count(const LimitId& id, bool defined, Counter counter, double tokens) {
  if (!track_stats) return;
  StatsHeader* header = nullptr;
  dshash_table* table = StatsTable(&header);
  if (table == nullptr) return;
  int name_len = std::min(id.name_len, kMaxNameBytes);
  BackendSlot* slot = MySlot();
  uint64 generation = pg_atomic_read_u64(&header->generation);
  uint32 hash = 0;
  if (slot != nullptr) {
    if (slot->generation != generation) EmptySlot(slot, generation);
    int found = -1;
    if (last_place >= 0 && last_place < slot->used && PlaceIs(place_names[last_place], id.name, name_len)) {
      found = last_place;
    } else {
      hash = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), name_len);
      for (int i = 0; i < slot->used && found < 0; ++i)
        if (place_names[i].hash == hash && PlaceIs(place_names[i], id.name, name_len)) found = i;
    }
    if (found >= 0) {
      last_place = found;
      BeginSlotWrite(slot);
      Add(&slot->names[found].counters, counter, tokens);
      EndSlotWrite(slot);
      return;
    }
  }
  uint64 entry_id =
      CountInEntry(header, table, KeyOf(MyDatabaseId, id.name, name_len), defined, counter, tokens);
  if (slot == nullptr || entry_id == 0 || slot->used == kSlotNames || slot->generation != generation) return;
  int place = slot->used;
  place_names[place].hash = hash;
  place_names[place].database = MyDatabaseId;
  place_names[place].len = name_len;
  std::memcpy(place_names[place].name, id.name, name_len);
  BeginSlotWrite(slot);
  slot->names[place].entry_id = entry_id;
  slot->names[place].counters = Counters{};
  slot->used = place + 1;
  EndSlotWrite(slot);
}

void AddSlots(StatsHeader* header, CopiedName* copied, int count) {
  int slots_count = 0;
  size_t stride = 0;
  char* slots = static_cast<char*>(PerBackendBlocks(stats_names_table, &slots_count, &stride));
  if (slots == nullptr || count == 0) return;
  auto* ids = static_cast<CopiedId*>(palloc(sizeof(CopiedId) * count));
  for (int i = 0; i < count; ++i) ids[i] = CopiedId{copied[i].id, i};
  qsort(ids, count, sizeof(CopiedId), CompareIds);
  uint64 generation = pg_atomic_read_u64(&header->generation);
  auto* slot = static_cast<BackendSlot*>(palloc(sizeof(BackendSlot)));
  for (int b = 0; b < slots_count; ++b) {
    const auto* shared = reinterpret_cast<const BackendSlot*>(slots + stride * b);
    if (static_cast<const volatile BackendSlot*>(shared)->used == 0) continue;  // seen again below if not
    ReadSlot(shared, slot);
    if (slot->owner_pid == 0 || slot->generation != generation) continue;
    for (int i = 0; i < slot->used && i < kSlotNames; ++i) {
      CopiedId wanted{slot->names[i].entry_id, 0};
      auto* found = static_cast<CopiedId*>(bsearch(&wanted, ids, count, sizeof(CopiedId), CompareIds));
      if (found != nullptr) AddCounters(&copied[found->index].counters, slot->names[i].counters);
    }
  }
  pfree(slot);
  pfree(ids);
}

}  // namespace ratelimit_pg
