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
// every further name. Entries are only appended between resets. The index
// is searched under the lock in shared mode; a new name takes it
// exclusively, but only while it can get a slot: once there is none for it,
// its calls count in the overflow entry under the shared lock. Each entry's
// counters (and the overflowed flag, with the overflow entry's) have their
// own spinlock.
//
// Slots: names without a definition may take at most half of them (at
// least one), so calls with inline configs and made-up names cannot crowd
// the owner's defined limits into the overflow row; defined names (the
// call's config was the owner's: a definition or an override) may take any
// free slot. Whether a name is defined is told by the caller (the call's
// owner_config): the counting happens after SPI_finish, where the
// definition cannot be looked up.
#include <cstring>

#include "stats.h"

#include "clock.h"
#include "errors.h"

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

// The block's name carries its layout's version: a library of another
// layout loaded into the same running server (the registry segment of 17
// on lives until the restart) gets a segment of its own, never this one.
constexpr const char* kSegmentName = "ratelimit_stats_v2";
constexpr const char* kTrancheName = "ratelimit_stats";
// StatsRows copies this many entries per hold of the lock.
constexpr int kCopyBatch = 256;

struct StatsEntry {
  slock_t mutex;
  uint32 hash;
  int32 name_len;  // -1: the overflow entry (name NULL)
  int64 granted;
  int64 refused;
  int64 shadow_refused;
  int64 lock_waits;
  int64 memory_full;
  double tokens_granted;
  char name[kMaxNameBytes];
};

struct StatsShared {
  LWLock lock;
  int tranche_id;
  int capacity;    // entries (ratelimit.stats_max_names)
  int index_mask;  // index slots - 1
  // used and undefined_used change only under the lock held exclusively.
  int used;            // entries in use
  int undefined_used;  // of them, taken by names without a definition
  bool overflowed;     // the overflow entry counted since the reset (its spinlock)
  uint64 resets;       // ResetAll calls since the block was made
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
  entry->granted = entry->refused = entry->shadow_refused = entry->lock_waits = entry->memory_full = 0;
  entry->tokens_granted = 0;
}

// Empties the index and the counters (the lock held exclusively, or not
// yet shared).
void ResetAll(StatsShared* s) {
  int32* index = IndexOf(s);
  for (int i = 0; i <= s->index_mask; ++i) index[i] = -1;
  s->used = 0;
  s->undefined_used = 0;
  s->overflowed = false;
  ClearEntry(&s->overflow, 0, -1);
  ++s->resets;
  s->stats_reset = GetCurrentTimestamp();
}

// Initializes the shared block (once, by whoever creates it).
void InitShared(void* memory) {
  auto* s = static_cast<StatsShared*>(memory);
  s->tranche_id = LWLockNewTrancheId();
  LWLockInitialize(&s->lock, s->tranche_id);
  s->capacity = stats_max_names;
  s->index_mask = IndexSlots(stats_max_names) - 1;
  s->resets = 0;
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
    LWLockRegisterTranche(shared->tranche_id, kTrancheName);
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

// How many slots names without a definition may take: half, rounded
// down, and at least one (with one slot, it goes to the first name).
int UndefinedCapacity(const StatsShared* s) { return s->capacity / 2 > 0 ? s->capacity / 2 : 1; }

// Whether a new name gets no slot, under the lock in either mode (what it
// reads changes only under the lock held exclusively).
bool NoSlotFor(const StatsShared* s, bool defined) {
  if (s->used >= s->capacity) return true;
  return !defined && s->undefined_used >= UndefinedCapacity(s);
}

// Adds a name (the lock held exclusively); the overflow entry when it gets
// no slot.
StatsEntry* AddEntry(StatsShared* s, const char* name, int len, uint32 hash, bool defined) {
  if (StatsEntry* entry = FindEntry(s, name, len, hash)) return entry;
  if (NoSlotFor(s, defined)) return &s->overflow;
  StatsEntry* entry = &EntriesOf(s)[s->used];
  ClearEntry(entry, hash, len);
  std::memcpy(entry->name, name, len);
  int32* index = IndexOf(s);
  int i = static_cast<int>(hash) & s->index_mask;
  while (index[i] >= 0) i = (i + 1) & s->index_mask;
  index[i] = s->used++;
  if (!defined) ++s->undefined_used;
  return entry;
}

// The entry a name counts in, under the lock held shared: its own, or the
// overflow entry when it has none and can get none; nullptr when it has
// none yet but could get one (that needs the lock exclusively).
StatsEntry* EntryUnderSharedLock(StatsShared* s, const char* name, int len, uint32 hash, bool defined) {
  if (StatsEntry* entry = FindEntry(s, name, len, hash)) return entry;
  return NoSlotFor(s, defined) ? &s->overflow : nullptr;
}

enum class Counter { kGranted, kRefused, kShadowRefused, kLockWait, kMemoryFull };

// Adds one to a counter of an entry (and tokens to tokens_granted); the
// overflow entry also marks the overflow row as shown.
void AddToCounter(StatsShared* s, StatsEntry* entry, Counter counter, double tokens) {
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
    case Counter::kMemoryFull:
      ++entry->memory_full;
      break;
  }
  if (entry == &s->overflow) s->overflowed = true;
  SpinLockRelease(&entry->mutex);
}

// Adds one to a counter of the name (and tokens to tokens_granted);
// `defined`: the name's limit is the owner's (a definition or override).
void Count(const LimitId& id, bool defined, Counter counter, double tokens) {
  if (!track_stats) return;
  StatsShared* s = Shared();
  if (s == nullptr) return;
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), id.name_len);
  LWLockAcquire(&s->lock, LW_SHARED);
  StatsEntry* entry = EntryUnderSharedLock(s, id.name, id.name_len, hash, defined);
  if (entry == nullptr) {
    LWLockRelease(&s->lock);
    LWLockAcquire(&s->lock, LW_EXCLUSIVE);
    entry = AddEntry(s, id.name, id.name_len, hash, defined);
  }
  AddToCounter(s, entry, counter, tokens);
  LWLockRelease(&s->lock);
}

// One row of the view from a copy of an entry.
void PutStatsRow(Tuplestorestate* store, TupleDesc desc, const StatsEntry& entry, TimestampTz reset) {
  // 0.5.0's view has 7 columns, 0.6.0's an 8th: memory_full.
  Datum values[8];
  bool nulls[8] = {entry.name_len < 0, false, false, false, false, false, false, false};
  values[0] = entry.name_len < 0 ? 0 : PointerGetDatum(cstring_to_text_with_len(entry.name, entry.name_len));
  values[1] = Int64GetDatum(entry.granted);
  values[2] = Int64GetDatum(entry.refused);
  values[3] = Int64GetDatum(entry.shadow_refused);
  values[4] = Float8GetDatum(entry.tokens_granted);
  values[5] = Int64GetDatum(entry.lock_waits);
  values[6] = TimestampTzGetDatum(reset);
  values[7] = Int64GetDatum(entry.memory_full);
  tuplestore_putvalues(store, desc, values, nulls);
}

// Copies an entry's counters (its spinlock held by the caller).
void CopyCounters(const StatsEntry* from, StatsEntry* to) {
  to->hash = from->hash;
  to->name_len = from->name_len;
  to->granted = from->granted;
  to->refused = from->refused;
  to->shadow_refused = from->shadow_refused;
  to->lock_waits = from->lock_waits;
  to->memory_full = from->memory_full;
  to->tokens_granted = from->tokens_granted;
}

// A consistent copy of an entry's counters and its name (name_len bytes:
// a published name does not change until the reset, which waits for the
// lock the caller holds).
void CopyEntry(StatsEntry* from, StatsEntry* to) {
  SpinLockAcquire(&from->mutex);
  CopyCounters(from, to);
  SpinLockRelease(&from->mutex);
  if (to->name_len > 0) std::memcpy(to->name, from->name, to->name_len);
}

// A copy of the overflow entry; returns whether it counted anything.
bool CopyOverflow(StatsShared* s, StatsEntry* to) {
  SpinLockAcquire(&s->overflow.mutex);
  CopyCounters(&s->overflow, to);
  bool overflowed = s->overflowed;
  SpinLockRelease(&s->overflow.mutex);
  return overflowed;
}

// Which reset the rows belong to: read by the first batch, compared by the
// others.
struct ResetMark {
  uint64 resets;
  TimestampTz at;
};

// What one batch of StatsRows copied under the lock.
struct CopiedBatch {
  int count;         // entries copied
  bool reset_since;  // the counters were reset since the first batch: nothing copied
  bool last;         // the batch reached the last entry in use
  bool overflowed;   // (last only) the overflow entry counted, and was copied
};

// Copies up to kCopyBatch entries from `first` on, and the overflow entry
// with the last batch, under the lock held shared. The first batch (first
// is 0) sets `mark`; a later one finding another reset copies nothing.
CopiedBatch CopyBatch(StatsShared* s, int first, ResetMark* mark, StatsEntry* out, StatsEntry* overflow) {
  CopiedBatch batch{};
  LWLockAcquire(&s->lock, LW_SHARED);
  if (first == 0) *mark = ResetMark{s->resets, s->stats_reset};
  if (s->resets != mark->resets) {
    LWLockRelease(&s->lock);
    batch.reset_since = true;
    return batch;
  }
  batch.count = Min(kCopyBatch, s->used - first);
  StatsEntry* entries = EntriesOf(s);
  for (int i = 0; i < batch.count; ++i) CopyEntry(&entries[first + i], &out[i]);
  batch.last = first + batch.count >= s->used;
  if (batch.last) batch.overflowed = CopyOverflow(s, overflow);
  LWLockRelease(&s->lock);
  return batch;
}

}  // namespace

Datum StatsRows(FunctionCallInfo fcinfo) {
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  StatsShared* s = Shared();
  if (s == nullptr) return static_cast<Datum>(0);
  // Copied under the lock a batch at a time, formed after it (forming rows
  // allocates): one batch's buffer, whatever ratelimit.stats_max_names is.
  // Entries only grow between resets; a reset midway ends the rows there.
  auto* batch = static_cast<StatsEntry*>(palloc(sizeof(StatsEntry) * kCopyBatch));
  StatsEntry overflow;
  ResetMark mark{};
  CopiedBatch copied{};
  for (int first = 0; !copied.last; first += copied.count) {
    copied = CopyBatch(s, first, &mark, batch, &overflow);
    if (copied.reset_since) break;
    for (int i = 0; i < copied.count; ++i) PutStatsRow(rsinfo->setResult, rsinfo->setDesc, batch[i], mark.at);
    if (copied.overflowed) PutStatsRow(rsinfo->setResult, rsinfo->setDesc, overflow, mark.at);
    CHECK_FOR_INTERRUPTS();
  }
  pfree(batch);
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
