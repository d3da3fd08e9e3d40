// ratelimit_stats: decisions counted per database and limit name in shared
// memory (granted, refused, shadow refusals, tokens granted, lock waits,
// refusals for want of room in a storage), cumulative like pg_stat_*, and the view's rows. A
// role reads its own database's names; superusers and pg_read_all_stats
// members read every database's, summed per name, and the overflow row.
// The names live in a table of the shared-memory module (stats_names.h),
// counted through each backend's own slot (stats_slots.h): how, and why,
// is docs/internals.md, "Counting ratelimit_stats per backend".
#include "shmem/stats.h"

#include "shmem/stats_names.h"
#include "shmem/stats_slots.h"

extern "C" {
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

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
  values[7] = Int64GetDatum(counters.no_room);
  tuplestore_putvalues(store, desc, values, nulls);
}

// Whether the caller reads every database's counters and the overflow row:
// superusers and pg_read_all_stats members.
bool ReadsEveryDatabase() { return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS); }

}  // namespace

Datum StatsRows(FunctionCallInfo fcinfo) {
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  StatsHeader* header = nullptr;
  dshash_table* table = StatsTable(&header);
  if (table == nullptr) return static_cast<Datum>(0);
  bool every_database = ReadsEveryDatabase();  // before any lock: it may read the catalog
  // Copied a partition at a time under its lock (only the names' bytes),
  // formed after; in name order, the overflow row (name NULL) last.
  // The slots' counters are added to them under the fold lock.
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
// under the fold lock exclusive: the slots of the old period count no more.
// A name counted in its entry meanwhile keeps
// what it counted after the reset began. The generation moves only once
// every entry of the old period is gone: a count that reads the new one
// finds only entries of the new period, so no slot of the new period holds
// the id of a deleted entry (whose counts would be added to no entry).
void ResetStats() {
  StatsHeader* header = nullptr;
  dshash_table* table = StatsTable(&header);
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
  dshash_table* table = StatsTable(&header);
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
  DefineStatsNamesTable(StatsSlotBytes());
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

void CountNoRoom(const LimitCall& call) { Count(call.id, call.owner_config, Counter::kNoRoom, 0); }

}  // namespace ratelimit_pg
