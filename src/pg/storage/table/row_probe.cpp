// State rows read and locked without SQL (row_probe.h).
#include "storage/table/row_probe.h"

#include "storage/row_codec.h"
#include "support/catalog.h"
#include "support/clock.h"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

// The equality functions of the index keys, looked up once per backend
// (ScanKeyInit would look them up on every call).
FmgrInfo* EqualityFunction(Oid function) {
  static FmgrInfo text_eq;
  static FmgrInfo int2_eq;
  FmgrInfo* info = function == F_TEXTEQ ? &text_eq : &int2_eq;
  if (info->fn_oid != function) fmgr_info_cxt(function, info, TopMemoryContext);
  return info;
}

// One equality key on index column `column`, with the column's collation
// (ScanKeyInit would use "C"; the columns are "C" today, but the index is
// what decides).
void InitIndexKey(Relation index, ScanKeyData* key, AttrNumber column, Oid function, Datum argument) {
  ScanKeyEntryInitializeWithInfo(key, 0, column, BTEqualStrategyNumber, InvalidOid,
                                 index->rd_indcollation[column - 1], EqualityFunction(function), argument);
}

// Equality keys on the unique index of the id's key variant; returns how many.
int FillIndexKeys(Relation index, const LimitId& id, ScanKeyData* keys) {
  Datum shard = Int16GetDatum(static_cast<int16>(id.shard));
  InitIndexKey(index, &keys[0], 1, F_TEXTEQ, PointerGetDatum(id.name_text));
  if (id.key_text == nullptr) {
    InitIndexKey(index, &keys[1], 2, F_INT2EQ, shard);
    return 2;
  }
  InitIndexKey(index, &keys[1], 2, F_TEXTEQ, PointerGetDatum(id.key_text));
  InitIndexKey(index, &keys[2], 3, F_INT2EQ, shard);
  return 3;
}

// An index scan for one id's row under `snapshot`, in the unique index of
// its key variant.
struct RowScan {
  Relation index;
  IndexScanDesc scan;
  TupleTableSlot* slot;
};

// lockmode: the index's lock, the table's (as the executor opens a result
// relation's index for a scan).
RowScan BeginRowScan(const StateTable& table, const LimitId& id, Snapshot snapshot, LOCKMODE lockmode) {
  RowScan rs{};
  rs.index = index_open(id.key_text ? table.keyed_index : table.null_key_index, lockmode);
  ScanKeyData keys[3];
  int nkeys = FillIndexKeys(rs.index, id, keys);
  rs.scan = compat::BeginIndexScan(table.rel, rs.index, snapshot, nkeys);
  index_rescan(rs.scan, keys, nkeys, nullptr, 0);
  rs.slot = table_slot_create(table.rel, nullptr);
  return rs;
}

void EndRowScan(RowScan* rs) {
  ExecDropSingleTupleTableSlot(rs->slot);
  index_endscan(rs->scan);
  index_close(rs->index, NoLock);
}

// The state from a heap tuple in a slot, with its tid.
StoredState StoredStateFromSlot(TupleTableSlot* slot, const StateColumns& c) {
  bool isnull = false;
  bool prev_is_null = false;
  Datum value = slot_getattr(slot, c.value, &isnull);
  Datum ts = slot_getattr(slot, c.ts, &isnull);
  Datum prev = slot_getattr(slot, c.prev, &prev_is_null);
  StoredState out = StoredStateFromValues(value, ts, prev, prev_is_null, RowKindsTagged());
  if (c.idle_at != InvalidAttrNumber) {
    bool idle_is_null = true;
    Datum idle_at = slot_getattr(slot, c.idle_at, &idle_is_null);
    out.has_idle_at = !idle_is_null;
    if (!idle_is_null) out.idle_at = UnixFromTimestamptz(DatumGetTimestampTz(idle_at));
  }
  out.version = VersionOf(slot->tts_tid);
  return out;
}

}  // namespace

int FillNameKeyIndexKeys(Relation index, const LimitId& id, ScanKeyData* keys) {
  InitIndexKey(index, &keys[0], 1, F_TEXTEQ, PointerGetDatum(id.name_text));
  int nkeys = 1;
  if (id.key_text != nullptr) InitIndexKey(index, &keys[nkeys++], 2, F_TEXTEQ, PointerGetDatum(id.key_text));
  return nkeys;
}

LockResult LockVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                       bool skip_locked, bool follow_updates) {
  int flags = follow_updates && !IsolationUsesXactSnapshot() ? TUPLE_LOCK_FLAG_FIND_LAST_VERSION : 0;
  TM_FailureData failure;
  TM_Result result = table_tuple_lock(rel, tid, snapshot, slot, GetCurrentCommandId(true), LockTupleExclusive,
                                      skip_locked ? LockWaitSkip : LockWaitBlock, flags, &failure);
  switch (result) {
    case TM_Ok:
      return LockResult::kLocked;
    case TM_WouldBlock:
    case TM_SelfModified:
      return LockResult::kBusy;
    case TM_Updated:
    case TM_Deleted:
      if (follow_updates && IsolationUsesXactSnapshot())
        ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                        errmsg("could not serialize access due to concurrent update")));
      return LockResult::kGone;
    default:
      break;
  }
  elog(ERROR, "ratelimit: unexpected table_tuple_lock status %d", static_cast<int>(result));
  return LockResult::kGone;
}

StoredState ProbeState(const StateTable& table, const LimitId& id, ReadMode mode) {
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  bool unlocked = mode == ReadMode::kUnlocked || mode == ReadMode::kUnlockedForWrite;
  RowScan rs = BeginRowScan(table, id, snapshot,
                            mode == ReadMode::kUnlockedForWrite ? RowExclusiveLock : AccessShareLock);
  StoredState out = NoStoredRow();
  if (index_getnext_slot(rs.scan, ForwardScanDirection, rs.slot)) {
    ItemPointerData tid = rs.slot->tts_tid;
    LockResult lock =
        unlocked ? LockResult::kLocked
                 : LockVersion(table.rel, &tid, snapshot, rs.slot, mode == ReadMode::kLockSkipLocked, true);
    if (lock == LockResult::kLocked) out = StoredStateFromSlot(rs.slot, table.columns);
    out.busy = lock == LockResult::kBusy;
  }
  EndRowScan(&rs);
  UnregisterSnapshot(snapshot);
  return out;
}

}  // namespace ratelimit_pg
