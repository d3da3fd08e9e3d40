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
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

struct StatsKey {
  Oid database;  // two databases' limits of one name are counted apart
  int32 name_len;
  char name[kMaxNameBytes];  // name_len bytes; the rest is never read
};

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
  Counters counters;
};

struct StatsHeader {
  uint64 seed;      // of the names' hash
  SlotQuota slots;  // names in the table; the share: names without a definition
  slock_t mutex;    // the fields below
  bool overflowed;  // the overflow counters counted since the reset
  TimestampTz stats_reset;
  Counters overflow;
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
}

dshash_table* Table(StatsHeader** header) {
  void* h = nullptr;
  dshash_table* table = AttachSharedTable(SharedTable::kStatsNames, &h);
  *header = static_cast<StatsHeader*>(h);
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

// Adds one to a counter of the name (and tokens to tokens_granted);
// `defined`: the name's limit is the owner's (a definition or override).
void Count(const LimitId& id, bool defined, Counter counter, double tokens) {
  if (!track_stats) return;
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return;
  // Only the name's bytes are set: the hash, the comparison and the rows read
  // no further (an insert copies the rest, unread).
  StatsKey key;
  key.database = MyDatabaseId;
  key.name_len = std::min(id.name_len, kMaxNameBytes);
  std::memcpy(key.name, id.name, key.name_len);
  if (auto* entry = static_cast<StatsEntry*>(dshash_find(table, &key, false))) {
    AddToEntry(entry, counter, tokens);
    dshash_release_lock(table, entry);
    return;
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
    }
    AddToEntry(entry, counter, tokens);
    dshash_release_lock(table, entry);
    return;
  }
  SpinLockAcquire(&header->mutex);
  Add(&header->overflow, counter, tokens);
  header->overflowed = true;
  SpinLockRelease(&header->mutex);
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
  Counters counters;
};

void AddCounters(Counters* to, const Counters& from) {
  to->granted += from.granted;
  to->refused += from.refused;
  to->shadow_refused += from.shadow_refused;
  to->lock_waits += from.lock_waits;
  to->memory_full += from.memory_full;
  to->tokens_granted += from.tokens_granted;
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
  void* names = nullptr;
  int count = CopySorted(table, sizeof(CopiedName), CopyName, &every_database, CompareCopied, &names);
  auto* copied = static_cast<CopiedName*>(names);
  SpinLockAcquire(&header->mutex);
  TimestampTz reset = header->stats_reset;
  bool overflowed = header->overflowed;
  Counters overflow = header->overflow;
  SpinLockRelease(&header->mutex);
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

// Deletes every name (a partition at a time) and starts a new period; a
// name counted meanwhile keeps what it counted after the reset began.
void ResetStats() {
  StatsHeader* header = nullptr;
  dshash_table* table = Table(&header);
  if (table == nullptr) return;
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
                                    HashKey, sizeof(StatsHeader), InitHeader, MaxNames});
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
