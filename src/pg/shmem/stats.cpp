// Decision counters per database and limit name, in shared memory, for the
// ratelimit_stats view: granted, refused, shadow refusals, tokens granted,
// lock waits and memory-full refusals, cumulative like pg_stat_* (a
// decision is counted when it is made, whatever its transaction does later).
//
// Who reads what: the counters are a server's, the names often a tenant's
// (an e-mail address, a customer id), so a role reads only its own
// database's names, as pg_stat_user_tables shows only the current
// database's tables; superusers and pg_read_all_stats members (whom
// pg_stat_statements shows every query) read every database's counters,
// summed per name (the view has no database column: each name one row, as
// 0.6.0 showed it), and the overflow row, which counts names of every
// database.
//
// The names are a dshash table of the shared-memory module
// (shared_tables.h), keyed by the database and the name whole; its header
// holds the reset time and one overflow entry that counts every name past
// ratelimit.stats_max_names. Where the memory comes from is the module's
// (none on 15 without the preload: the view is empty). A name's counters
// change under its entry's spinlock, with the partition lock held shared; a
// new name takes its partition lock exclusively.
//
// Slots: names without a definition may take at most half of them (at
// least one), so calls with inline configs and made-up names cannot crowd
// the owner's defined limits into the overflow row; defined names (the
// call's config was the owner's: a definition or an override) may take any
// free slot. Whether a name is defined is told by the caller (the call's
// owner_config): the counting happens after SPI_finish, where the
// definition cannot be looked up.
//
// Counting under concurrency (issue 27): with the preload, each backend
// has a slot of its own in shared memory (indexed by its PGPROC number,
// compat::MyProcIndex), which only it writes, holding the counters of up to
// kSlotNames names it counted since it started (or since the last reset).
// A name's first decision in a backend goes the old way (the dshash entry,
// which keeps ratelimit.stats_max_names, the slot quota and the overflow
// row as they were) and, if the name has an entry and the slot room, takes
// a place in the slot, keyed by the entry's id (a number given once, never
// reused); its later decisions add to the slot's counters only: no lock, no
// shared cache line written but the backend's own. The backend keeps the
// names of its slot's places in its own memory, to find them.
//
//   Writing a slot: pgstat's st_changecount protocol. The owner adds one to
//   the slot's changecount, writes, adds one again (write barriers between,
//   a critical section around: nothing in it can fail); a reader copies the
//   slot and keeps the copy only if the changecount was even and unchanged.
//
//   Reading (the view): under the fold lock (an LWLock of the header)
//   shared, the entries are copied as before, then every slot of the
//   current period, and each slot place's counters are added to the
//   entry of its id (a place whose entry the reader does not see, another
//   database's, adds nothing: the view's visibility rules are the
//   entries'). A count is in an entry or in one slot, never both: counts
//   move from a slot to an entry only under the fold lock exclusive.
//   Every decision made before the read began is in it; one made during it
//   may or may not be.
//
//   Promptness: a slot is shared memory, read as it is: a decision is
//   visible to every later read the moment its call counted it, whatever
//   its backend does after (idle forever in a pool, for instance).
//
//   Backend exit: a before_shmem_exit callback takes the fold lock
//   exclusive, adds each place's counters to its entry (found by the name
//   the backend kept) and empties the slot. The PGPROC number's next
//   owner finds an empty slot; a slot left full (its owner's fold failed)
//   is emptied, with a LOG, by the next owner (its counts are lost).
//
//   Reset: ratelimit_stats_reset takes the fold lock exclusive, deletes the
//   entries and then adds one to the header's generation. A slot belongs
//   to the generation it was stamped with: readers and the exit fold ignore
//   a slot of an older one, and its owner empties it at its next count
//   (which then finds the name anew). A decision counted while a reset runs
//   is counted in the new period or not at all, never in both: a backend
//   that read the generation before its change and wrote after it wrote
//   into a slot of the old period. The generation changes after the
//   deletions, not before: a backend that read the new generation while
//   entries were still being deleted could find a name's old entry, not yet
//   deleted, and give its id a place in a slot of the new period, where
//   every later count of that name would be added to no entry until the
//   next reset (stats-backends-test.sh's 7th check).
//
//   More names than a slot holds: the names past kSlotNames of a backend
//   (until the next reset) are counted in their entries, as before (exact,
//   contended). A slot's places are never given back while its backend
//   lives: a pooled backend that serves many names counts its first
//   kSlotNames alone and the rest in the entries.
//
//   Without the preload (17's registry segment) there are no slots: every
//   count goes to the entries. A crash empties everything, as before (the
//   server reinitializes shared memory).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "shmem/stats.h"

#include "shmem/shared_tables.h"
#include "shmem/slot_quota.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "catalog/pg_authid.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

struct StatsKey {
  Oid database;  // two databases' limits of one name are counted apart
  int32 name_len;
  char name[kMaxNameBytes];  // name_len bytes; the rest is never read
};

// The key of a name in a database. Only the name's bytes are set: the hash,
// the comparison and the rows read no further (an insert copies the rest,
// unread).
StatsKey KeyOf(Oid database, const char* name, int name_len) {
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
  int64 memory_full;
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

// How many names a backend's slot holds.
constexpr int kSlotNames = 16;

// A place of a slot: an entry's id (0: none) and what the slot's backend
// counted for it.
struct SlotName {
  uint64 entry_id;
  Counters counters;
};

// A backend's slot: only its owner writes it (see the top of the file).
struct BackendSlot {
  uint32 changecount;  // odd while the owner writes
  int owner_pid;       // 0: none
  uint64 generation;   // the period its places were counted in
  int used;            // names[0..used) are taken
  SlotName names[kSlotNames];
};

int stats_max_names = 1000;
bool track_stats = true;  // ratelimit.track_stats

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

bool tranche_named = false;

dshash_table* Table(StatsHeader** header) {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(SharedTable::kStatsNames, &h);
  *header = static_cast<StatsHeader*>(h);
  if (h != nullptr && !tranche_named) {
    LWLockRegisterTranche((*header)->fold_tranche, "ratelimit_stats_fold");
    tranche_named = true;
  }
  return table;
}

enum class Counter { kGranted, kRefused, kShadowRefused, kLockWait, kMemoryFull };

void Add(Counters* counters, Counter counter, double tokens) {
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
    case Counter::kMemoryFull:
      ++counters->memory_full;
      break;
  }
}

void AddToEntry(StatsEntry* entry, Counter counter, double tokens) {
  SpinLockAcquire(&entry->mutex);
  Add(&entry->counters, counter, tokens);
  SpinLockRelease(&entry->mutex);
}

void AddCounters(Counters* to, const Counters& from) {
  to->granted += from.granted;
  to->refused += from.refused;
  to->shadow_refused += from.shadow_refused;
  to->lock_waits += from.lock_waits;
  to->memory_full += from.memory_full;
  to->tokens_granted += from.tokens_granted;
}

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
  char* slots = static_cast<char*>(PerBackendBlocks(SharedTable::kStatsNames, &count, &stride));
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

// Adds one to a counter of the name's entry (or of the overflow row), as
// every count did before the slots; the entry's id, 0 for the overflow row.
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

// Adds one to a counter of the name (and tokens to tokens_granted);
// `defined`: the name's limit is the owner's (a definition or override).
// In this backend's slot when the name has a place there, else in its
// entry (and then a place, if the slot has room).
void Count(const LimitId& id, bool defined, Counter counter, double tokens) {
  if (!track_stats) return;
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return;
  int name_len = std::min(id.name_len, kMaxNameBytes);
  BackendSlot* slot = MySlot();
  uint64 generation = pg_atomic_read_u64(&header->generation);
  uint32 hash = 0;
  if (slot != nullptr) {
    if (slot->generation != generation) EmptySlot(slot, generation);
    hash = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), name_len);
    for (int i = 0; i < slot->used; ++i) {
      const PlaceName& place = place_names[i];
      if (place.hash != hash || place.database != MyDatabaseId || place.len != name_len ||
          std::memcmp(place.name, id.name, name_len) != 0)
        continue;
      BeginSlotWrite(slot);
      Add(&slot->names[i].counters, counter, tokens);
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
  dshash_table* table = Table(&header);
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

// One row of the view.
void PutStatsRow(Tuplestorestate* store, TupleDesc desc, const StatsKey* key, const Counters& counters,
                 TimestampTz reset) {
  // 0.5.0's view has 7 columns, 0.6.0's an 8th: memory_full.
  Datum values[8];
  bool nulls[8] = {key == nullptr, false, false, false, false, false, false, false};
  values[0] = key == nullptr ? 0 : PointerGetDatum(cstring_to_text_with_len(key->name, key->name_len));
  values[1] = Int64GetDatum(counters.granted);
  values[2] = Int64GetDatum(counters.refused);
  values[3] = Int64GetDatum(counters.shadow_refused);
  values[4] = Float8GetDatum(counters.tokens_granted);
  values[5] = Int64GetDatum(counters.lock_waits);
  values[6] = TimestampTzGetDatum(reset);
  values[7] = Int64GetDatum(counters.memory_full);
  tuplestore_putvalues(store, desc, values, nulls);
}

// A name and its counters as copied out of the table.
struct CopiedName {
  StatsKey* key;
  uint64 id;
  Counters counters;
};

// An entry's id and its place in the copied names, to find it by id.
struct CopiedId {
  uint64 id;
  int index;
};

int CompareIds(const void* left, const void* right) {
  uint64 a = static_cast<const CopiedId*>(left)->id;
  uint64 b = static_cast<const CopiedId*>(right)->id;
  return a < b ? -1 : (a > b ? 1 : 0);
}

// Adds every slot's counters of the current period to the copied names of
// their ids (under the fold lock, shared).
void AddSlots(StatsHeader* header, CopiedName* copied, int count) {
  int slots_count = 0;
  size_t stride = 0;
  char* slots = static_cast<char*>(PerBackendBlocks(SharedTable::kStatsNames, &slots_count, &stride));
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

// Whether the caller reads every database's counters and the overflow row:
// superusers and pg_read_all_stats members (see the top of the file).
bool ReadsEveryDatabase() { return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS); }

// By name (the database aside: one name's rows of several databases meet).
int CompareCopied(const void* left, const void* right) {
  const StatsKey* a = static_cast<const CopiedName*>(left)->key;
  const StatsKey* b = static_cast<const CopiedName*>(right)->key;
  return CompareIdentity(a->name, a->name_len, nullptr, -1, b->name, b->name_len, nullptr, -1);
}

// Keeps a name the caller may read: its bytes and its counters (read under
// the entry's spinlock).
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

}  // namespace

Datum StatsRows(FunctionCallInfo fcinfo) {
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return static_cast<Datum>(0);
  bool every_database = ReadsEveryDatabase();  // before any lock: it may read the catalog
  // Copied a partition at a time under its lock (only the names' bytes),
  // formed after; in name order, the overflow row (name NULL) last.
  // The slots' counters are added to them under the fold lock (see the top
  // of the file).
  void* names = nullptr;
  LWLockAcquire(&header->fold_lock, LW_SHARED);
  int count = CopySorted(table, sizeof(CopiedName), CopyName, &every_database, CompareCopied, &names);
  auto* copied = static_cast<CopiedName*>(names);
  AddSlots(header, copied, count);
  SpinLockAcquire(&header->mutex);
  TimestampTz reset = header->stats_reset;
  bool overflowed = header->overflowed;
  Counters overflow = header->overflow;
  SpinLockRelease(&header->mutex);
  LWLockRelease(&header->fold_lock);
  // One row per name: a name's rows of several databases (only a role
  // reading every database gets them) are summed.
  for (int i = 0, next = 0; i < count; i = next) {
    Counters sum = copied[i].counters;
    for (next = i + 1; next < count && CompareCopied(&copied[i], &copied[next]) == 0; ++next)
      AddCounters(&sum, copied[next].counters);
    PutStatsRow(rsinfo->setResult, rsinfo->setDesc, copied[i].key, sum, reset);
    CHECK_FOR_INTERRUPTS();
  }
  if (overflowed && every_database) PutStatsRow(rsinfo->setResult, rsinfo->setDesc, nullptr, overflow, reset);
  return static_cast<Datum>(0);
}

// Deletes every name (a partition at a time) and then starts a new period,
// under the fold lock exclusive: the slots of the old period count no more
// (see the top of the file). A name counted in its entry meanwhile keeps
// what it counted after the reset began. The generation moves only once
// every entry of the old period is gone: a count that reads the new one
// finds only entries of the new period, so no slot of the new period holds
// the id of a deleted entry (whose counts would be added to no entry).
void ResetStats() {
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return;
  LWLockAcquire(&header->fold_lock, LW_EXCLUSIVE);
  SpinLockAcquire(&header->mutex);
  header->stats_reset = GetCurrentTimestamp();
  header->overflowed = false;
  header->overflow = Counters{};
  SpinLockRelease(&header->mutex);
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, true);
  while (auto* entry = static_cast<StatsEntry*>(dshash_seq_next(&scan))) {
    ReleaseSlot(&header->slots, !entry->defined);
    dshash_delete_current(&scan);
  }
  dshash_seq_term(&scan);
  pg_atomic_fetch_add_u64(&header->generation, 1);  // a full barrier: after the deletions
  LWLockRelease(&header->fold_lock);
}

void ForgetStatsOfDatabase(Oid database) {
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return;
  LWLockAcquire(&header->fold_lock, LW_EXCLUSIVE);
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, true);
  while (auto* entry = static_cast<StatsEntry*>(dshash_seq_next(&scan))) {
    if (entry->key.database != database) continue;
    ReleaseSlot(&header->slots, !entry->defined);
    dshash_delete_current(&scan);
  }
  dshash_seq_term(&scan);
  LWLockRelease(&header->fold_lock);
}

// The setting sizes shared memory, so it is set at server start: only with
// shared_preload_libraries. A library loaded later (the registry segment of
// 17 on) shows it read-only, at its default.
void DefineStatsGucs() {
  GucContext context = process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_INTERNAL;
  DefineCustomIntVariable("ratelimit.stats_max_names",
                          "How many limit names ratelimit_stats counts separately; further names are counted "
                          "in one row whose name is NULL.",
                          "Takes effect with shared_preload_libraries = 'ratelimit' only.", &stats_max_names,
                          1000, 1, 1000000, context, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ratelimit.track_stats", "Counts decisions in ratelimit_stats.", nullptr,
                           &track_stats, true, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineSharedTable(SharedTable::kStatsNames,
                    SharedTableSpec{"ratelimit_stats", sizeof(StatsKey), sizeof(StatsEntry), CompareKeys,
                                    HashKey, sizeof(StatsHeader), InitHeader, MaxNames, sizeof(BackendSlot)});
}

void CountDecision(const LimitCall& call, const Decision& decision, bool shadow_refused) {
  if (shadow_refused) {
    Count(call.id, call.owner_config, Counter::kShadowRefused, 0);
  } else if (decision.ok) {
    Count(call.id, call.owner_config, Counter::kGranted, call.request.count);
  } else {
    Count(call.id, call.owner_config, Counter::kRefused, 0);
  }
}

void CountRefund(const LimitCall& call, double amount) {
  Count(call.id, call.owner_config, Counter::kGranted, -amount);
}

void CountLockWait(const LimitCall& call) { Count(call.id, call.owner_config, Counter::kLockWait, 0); }

void CountMemoryFull(const LimitCall& call) { Count(call.id, call.owner_config, Counter::kMemoryFull, 0); }

}  // namespace ratelimit_pg
