// Decision counters per limit name, in shared memory, for the
// ratelimit_stats view: granted, refused, shadow refusals, tokens granted
// and lock waits, cumulative like pg_stat_* (a decision is counted when it
// is made, whatever its transaction does later).
//
// Where the memory comes from: with shared_preload_libraries = 'ratelimit'
// a block of the main shared memory, requested at server start; else, from
// PostgreSQL 17, a segment of the dynamic shared memory registry
// (compat::NamedSharedSegment), attached on first use; else (15, 16 without
// the preload) none, and the view is empty. Nothing else depends on it.
//
// Layout: a header (lock, reset time, how many names are used), an
// open-addressing index of 2^k int32 slots (at least twice the names), and
// ratelimit.stats_max_names entries, plus one overflow entry that counts
// every further name. The index is searched under the lock in shared mode;
// a new name takes it exclusively. Each entry's counters have their own
// spinlock.
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include "compat.h"

namespace ratelimit_pg {
namespace {

constexpr const char* kSegmentName = "ratelimit_stats";

struct StatsEntry {
  slock_t mutex;
  uint32 hash;
  int32 name_len;  // -1: the overflow entry (name NULL)
  int64 granted;
  int64 refused;
  int64 shadow_refused;
  int64 lock_waits;
  double tokens_granted;
  char name[kMaxNameBytes];
};

struct StatsShared {
  LWLock lock;
  int tranche_id;
  int capacity;     // entries (ratelimit.stats_max_names)
  int index_mask;   // index slots - 1
  int used;         // entries in use
  bool overflowed;  // the overflow entry counted something since the reset
  TimestampTz stats_reset;
  StatsEntry overflow;
  // followed by int32 index[index_mask + 1], then StatsEntry entries[capacity]
};

int stats_max_names = 1000;
bool track_stats = true;  // ratelimit.track_stats
StatsShared* shared = nullptr;
bool attach_tried = false;
bool tranche_named = false;  // this backend registered the lock's tranche name
shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

int IndexSlots(int capacity) {
  int slots = 16;
  while (slots < capacity * 2) slots *= 2;
  return slots;
}

Size SharedSize() {
  Size size = MAXALIGN(sizeof(StatsShared));
  size = add_size(size, MAXALIGN(mul_size(sizeof(int32), IndexSlots(stats_max_names))));
  return add_size(size, mul_size(sizeof(StatsEntry), stats_max_names));
}

int32* IndexOf(StatsShared* s) {
  return reinterpret_cast<int32*>(reinterpret_cast<char*>(s) + MAXALIGN(sizeof(StatsShared)));
}

StatsEntry* EntriesOf(StatsShared* s) {
  return reinterpret_cast<StatsEntry*>(reinterpret_cast<char*>(IndexOf(s)) +
                                       MAXALIGN(sizeof(int32) * (s->index_mask + 1)));
}

void ClearEntry(StatsEntry* entry, uint32 hash, int32 name_len) {
  entry->hash = hash;
  entry->name_len = name_len;
  entry->granted = entry->refused = entry->shadow_refused = entry->lock_waits = 0;
  entry->tokens_granted = 0;
}

// Empties the index and the counters (the lock held exclusively, or not
// yet shared).
void ResetAll(StatsShared* s) {
  int32* index = IndexOf(s);
  for (int i = 0; i <= s->index_mask; ++i) index[i] = -1;
  s->used = 0;
  s->overflowed = false;
  ClearEntry(&s->overflow, 0, -1);
  s->stats_reset = GetCurrentTimestamp();
}

// Initializes the shared block (once, by whoever creates it).
void InitShared(void* memory) {
  auto* s = static_cast<StatsShared*>(memory);
  s->tranche_id = LWLockNewTrancheId();
  LWLockInitialize(&s->lock, s->tranche_id);
  s->capacity = stats_max_names;
  s->index_mask = IndexSlots(stats_max_names) - 1;
  SpinLockInit(&s->overflow.mutex);
  StatsEntry* entries = EntriesOf(s);
  for (int i = 0; i < s->capacity; ++i) SpinLockInit(&entries[i].mutex);
  ResetAll(s);
}

void RequestShmem() {
  if (previous_request_hook != nullptr) previous_request_hook();
  RequestAddinShmemSpace(SharedSize());
}

void StartupShmem() {
  if (previous_startup_hook != nullptr) previous_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  void* memory = ShmemInitStruct(kSegmentName, SharedSize(), &found);
  if (!found) InitShared(memory);
  LWLockRelease(AddinShmemInitLock);
  shared = static_cast<StatsShared*>(memory);
}

// The shared block, attached on first use from the registry when the
// library was not preloaded (17 on); nullptr when there is none.
StatsShared* Shared() {
  if (shared == nullptr && !attach_tried) {
    attach_tried = true;
    bool found = false;
    shared =
        static_cast<StatsShared*>(compat::NamedSharedSegment(kSegmentName, SharedSize(), InitShared, &found));
  }
  if (shared != nullptr && !tranche_named) {
    LWLockRegisterTranche(shared->tranche_id, kSegmentName);
    tranche_named = true;
  }
  return shared;
}

// The entry of a name under the lock held in shared mode, or nullptr.
StatsEntry* FindEntry(StatsShared* s, const char* name, int len, uint32 hash) {
  int32* index = IndexOf(s);
  StatsEntry* entries = EntriesOf(s);
  for (int i = static_cast<int>(hash) & s->index_mask;; i = (i + 1) & s->index_mask) {
    if (index[i] < 0) return nullptr;
    StatsEntry* entry = &entries[index[i]];
    if (entry->hash == hash && entry->name_len == len && std::memcmp(entry->name, name, len) == 0)
      return entry;
  }
}

// Adds a name (the lock held exclusively); the overflow entry when full.
StatsEntry* AddEntry(StatsShared* s, const char* name, int len, uint32 hash) {
  if (StatsEntry* entry = FindEntry(s, name, len, hash)) return entry;
  if (s->used >= s->capacity) {
    s->overflowed = true;
    return &s->overflow;
  }
  StatsEntry* entry = &EntriesOf(s)[s->used];
  ClearEntry(entry, hash, len);
  std::memcpy(entry->name, name, len);
  int32* index = IndexOf(s);
  int i = static_cast<int>(hash) & s->index_mask;
  while (index[i] >= 0) i = (i + 1) & s->index_mask;
  index[i] = s->used++;
  return entry;
}

enum class Counter { kGranted, kRefused, kShadowRefused, kLockWait };

// Adds one to a counter of the name (and tokens to tokens_granted).
void Count(const LimitId& id, Counter counter, double tokens) {
  if (!track_stats) return;
  StatsShared* s = Shared();
  if (s == nullptr) return;
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), id.name_len);
  LWLockAcquire(&s->lock, LW_SHARED);
  StatsEntry* entry = FindEntry(s, id.name, id.name_len, hash);
  if (entry == nullptr) {
    LWLockRelease(&s->lock);
    LWLockAcquire(&s->lock, LW_EXCLUSIVE);
    entry = AddEntry(s, id.name, id.name_len, hash);
  }
  SpinLockAcquire(&entry->mutex);
  switch (counter) {
    case Counter::kGranted:
      ++entry->granted;
      entry->tokens_granted += tokens;
      break;
    case Counter::kRefused:
      ++entry->refused;
      break;
    case Counter::kShadowRefused:
      ++entry->shadow_refused;
      break;
    case Counter::kLockWait:
      ++entry->lock_waits;
      break;
  }
  SpinLockRelease(&entry->mutex);
  LWLockRelease(&s->lock);
}

// One row of the view from a copy of an entry.
void PutStatsRow(Tuplestorestate* store, TupleDesc desc, const StatsEntry& entry, TimestampTz reset) {
  Datum values[7];
  bool nulls[7] = {entry.name_len < 0, false, false, false, false, false, false};
  values[0] = entry.name_len < 0 ? 0 : PointerGetDatum(cstring_to_text_with_len(entry.name, entry.name_len));
  values[1] = Int64GetDatum(entry.granted);
  values[2] = Int64GetDatum(entry.refused);
  values[3] = Int64GetDatum(entry.shadow_refused);
  values[4] = Float8GetDatum(entry.tokens_granted);
  values[5] = Int64GetDatum(entry.lock_waits);
  values[6] = TimestampTzGetDatum(reset);
  tuplestore_putvalues(store, desc, values, nulls);
}

// A consistent copy of an entry's counters.
StatsEntry CopyEntry(StatsEntry* entry) {
  StatsEntry copy;
  SpinLockAcquire(&entry->mutex);
  copy.hash = entry->hash;
  copy.name_len = entry->name_len;
  copy.granted = entry->granted;
  copy.refused = entry->refused;
  copy.shadow_refused = entry->shadow_refused;
  copy.lock_waits = entry->lock_waits;
  copy.tokens_granted = entry->tokens_granted;
  SpinLockRelease(&entry->mutex);
  if (copy.name_len > 0) std::memcpy(copy.name, entry->name, copy.name_len);
  return copy;
}

}  // namespace

Datum StatsRows(FunctionCallInfo fcinfo) {
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  StatsShared* s = Shared();
  if (s == nullptr) return static_cast<Datum>(0);
  // Copied under the lock, formed after it (forming rows allocates).
  LWLockAcquire(&s->lock, LW_SHARED);
  int used = s->used;
  bool overflowed = s->overflowed;
  TimestampTz reset = s->stats_reset;
  auto* copies = static_cast<StatsEntry*>(palloc(sizeof(StatsEntry) * (used + 1)));
  StatsEntry* entries = EntriesOf(s);
  for (int i = 0; i < used; ++i) copies[i] = CopyEntry(&entries[i]);
  copies[used] = CopyEntry(&s->overflow);
  LWLockRelease(&s->lock);
  for (int i = 0; i < used; ++i) PutStatsRow(rsinfo->setResult, rsinfo->setDesc, copies[i], reset);
  if (overflowed) PutStatsRow(rsinfo->setResult, rsinfo->setDesc, copies[used], reset);
  pfree(copies);
  return static_cast<Datum>(0);
}

void ResetStats() {
  StatsShared* s = Shared();
  if (s == nullptr) return;
  LWLockAcquire(&s->lock, LW_EXCLUSIVE);
  ResetAll(s);
  LWLockRelease(&s->lock);
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
}

void RequestStatsSharedMemory() {
  if (!process_shared_preload_libraries_in_progress) return;
  previous_request_hook = shmem_request_hook;
  shmem_request_hook = RequestShmem;
  previous_startup_hook = shmem_startup_hook;
  shmem_startup_hook = StartupShmem;
}

void CountDecision(const LimitId& id, const Decision& decision, double count, bool shadow_refused) {
  if (shadow_refused) {
    Count(id, Counter::kShadowRefused, 0);
  } else if (decision.ok) {
    Count(id, Counter::kGranted, count);
  } else {
    Count(id, Counter::kRefused, 0);
  }
}

void CountRefund(const LimitId& id, double amount) { Count(id, Counter::kGranted, -amount); }

void CountLockWait(const LimitId& id) { Count(id, Counter::kLockWait, 0); }

}  // namespace ratelimit_pg
