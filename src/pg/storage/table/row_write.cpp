// State rows written without SQL, through the executor's per-row pieces,
// set up as logical replication's apply worker sets them up for
// ExecSimpleRelationUpdate (execReplication.c): an EState whose one result
// relation is the state table, ExecOpenIndices, ExecConstraints,
// ExecInsertIndexTuples and the row triggers. So every index, trigger,
// constraint and the replica identity of the table as it is now (see
// state_table.cpp) is PostgreSQL's business, not a copy of it. Rows are
// read and locked by row_probe.cpp.
#include <cstring>
#include <initializer_list>

#include "storage/table/row_write.h"

#include "storage/table/row_probe.h"

#include "support/clock.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

// The executor's state for writing one row of the state table, as the apply
// worker's create_edata_for_relation makes it: an EState with the table as
// its one result relation, its indexes opened (ExecOpenIndices) and AFTER
// triggers collected until the write ends. Everything is allocated in the
// EState's memory, freed by EndRowWrite.
struct RowWriter {
  EState* estate;
  ResultRelInfo* rri;
  EPQState epq;
  MemoryContext outer;
  bool indexes_open;
};

// Opens the table's indexes for the write (once).
void OpenIndexes(RowWriter* w, bool speculative) {
  if (w->indexes_open) return;
  ExecOpenIndices(w->rri, speculative);
  w->indexes_open = true;
}

// open_indexes false: the write opens them (OpenIndexes) only if it needs
// them: an update that is not HOT. The step holds the table's ROW
// EXCLUSIVE lock from before the heap update, so no index can be dropped
// or marked dead meanwhile, and an index that becomes ready for inserts in
// between (CREATE INDEX CONCURRENTLY) gets the entry, which its validation
// accepts; the HOT decision and the index list come from one relcache
// entry, as in the executor.
void BeginRowWrite(const StateTable& table, RowWriter* w, bool speculative, bool open_indexes = true) {
  Relation rel = table.rel;
  w->estate = CreateExecutorState();
  w->outer = MemoryContextSwitchTo(w->estate->es_query_cxt);
  // The columns the write sets, as the apply worker marks them after
  // create_edata_for_relation: UPDATE OF triggers and generated columns
  // depend on them.
  Bitmapset* updated = nullptr;
  for (AttrNumber attnum : {table.columns.value, table.columns.ts, table.columns.prev, table.columns.idle_at})
    if (attnum != InvalidAttrNumber)
      updated = bms_add_member(updated, attnum - FirstLowInvalidHeapAttributeNumber);
  compat::InitSingleRangeTable(w->estate, rel, updated);
  w->rri = makeNode(ResultRelInfo);
  InitResultRelInfo(w->rri, rel, 1, nullptr, 0);
  w->estate->es_opened_result_relations = lappend(w->estate->es_opened_result_relations, w->rri);
  w->estate->es_output_cid = GetCurrentCommandId(true);
  w->estate->es_snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : InvalidSnapshot;
  compat::InitEpqState(&w->epq, w->estate);
  if (table.installed_check != nullptr) {
    // What ExecRelCheck would prepare on its first use in this EState.
    ExprState* checks[1] = {table.installed_check};
    compat::SetPreparedChecks(w->rri, checks, 1);
  }
  w->indexes_open = false;
  if (open_indexes) OpenIndexes(w, speculative);
  AfterTriggerBeginQuery();
}

// Fires the AFTER triggers the write queued and frees the executor state
// (the relation stays open: the caller opened it).
void EndRowWrite(RowWriter* w) {
  AfterTriggerEndQuery(w->estate);
  if (w->indexes_open) ExecCloseIndices(w->rri);
  EvalPlanQualEnd(&w->epq);
  ExecResetTupleTable(w->estate->es_tupleTable, false);
  MemoryContextSwitchTo(w->outer);
  FreeExecutorState(w->estate);
}

// The new version of a row: every column of the old version as stored (an
// SQL UPDATE keeps the datums of the columns it does not set, so name, key
// and shard stay byte-identical and the update can be HOT even when they
// are stored compressed), with the new state.
TupleTableSlot* NewVersion(const StateTable& table, TupleTableSlot* old_slot, const RowWrite& row,
                           EState* estate) {
  TupleDesc desc = RelationGetDescr(table.rel);
  TupleTableSlot* slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
  slot_getallattrs(old_slot);
  for (int i = 0; i < desc->natts; ++i) {
    slot->tts_values[i] = old_slot->tts_values[i];
    slot->tts_isnull[i] = old_slot->tts_isnull[i];
  }
  auto set = [slot](AttrNumber attnum, Datum value, bool isnull) {
    slot->tts_values[attnum - 1] = value;
    slot->tts_isnull[attnum - 1] = isnull;
  };
  const StateColumns& c = table.columns;
  set(c.value, Float8GetDatum(row.next.value), false);
  set(c.ts, TimestampTzGetDatum(TimestamptzFromUnix(row.next.ts)), false);
  set(c.prev, Float8GetDatum(row.next.prev), !row.keep_prev);
  if (c.idle_at != InvalidAttrNumber)
    set(c.idle_at, TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at)), false);
  ExecStoreVirtualTuple(slot);
  slot->tts_tableOid = RelationGetRelid(table.rel);  // as ExecInsert sets it (a CHECK may read tableoid)
  return slot;
}

// ExecSimpleRelationUpdate's steps for the version at `tid`, except that
// the update succeeds only if that version is still the newest (false when
// it is not, or when another transaction holds it: this call does not wait
// here, it waits in the row lock path, which counts the wait for
// ratelimit_stats and decides again). It mirrors
// ExecSimpleRelationUpdate, which cannot be called here: its
// simple_table_tuple_update raises "tuple concurrently updated" where this
// call must learn of it and decide again under the row lock, as ExecUpdate
// does through EvalPlanQual. BEFORE ROW UPDATE triggers are not run here:
// with such triggers the version is locked first (as GetTupleForTrigger
// would) and ExecSimpleRelationUpdate itself runs them.
bool UpdateIfNewest(RowWriter* w, ItemPointerData tid, TupleTableSlot* slot) {
  Relation rel = w->rri->ri_RelationDesc;
  CheckCmdReplicaIdentity(rel, CMD_UPDATE);
  if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
    ExecComputeStoredGenerated(w->rri, w->estate, slot, CMD_UPDATE);
  if (rel->rd_att->constr) ExecConstraints(w->rri, slot, w->estate);
  if (rel->rd_rel->relispartition) ExecPartitionCheck(w->rri, slot, w->estate, true);
  TM_FailureData failure;
  LockTupleMode lockmode;
  compat::UpdateIndexes update_indexes{};
  TM_Result result = table_tuple_update(rel, &tid, slot, w->estate->es_output_cid, w->estate->es_snapshot,
                                        InvalidSnapshot, false, &failure, &lockmode, &update_indexes);
  if (result == TM_Updated || result == TM_Deleted || result == TM_BeingModified) return false;
  if (result == TM_SelfModified)
    ereport(ERROR, (errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
                    errmsg("ratelimit: the state row was already modified by the current command"),
                    errhint("A trigger on ratelimit_state must not change the row being written.")));
  if (result != TM_Ok)
    elog(ERROR, "ratelimit: unexpected table_tuple_update status %d", static_cast<int>(result));
  List* recheck = NIL;
  if (compat::NeedsIndexEntries(update_indexes)) {
    OpenIndexes(w, false);
    if (w->rri->ri_NumIndices > 0)
      recheck = compat::InsertIndexEntriesForUpdate(w->rri, slot, w->estate, update_indexes);
  }
  ExecARUpdateTriggers(w->estate, w->rri, nullptr, nullptr, &tid, nullptr, slot, recheck, nullptr, false);
  list_free(recheck);
  return true;
}

// The columns of a new row: the identity and state given, every other
// column its default (as INSERT fills them, and as the apply worker's
// slot_fill_defaults does: build_column_default, run through the planner),
// stored generated columns computed later by ExecComputeStoredGenerated.
TupleTableSlot* NewRow(const StateTable& table, const LimitId& id, const RowWrite& row, EState* estate) {
  TupleDesc desc = RelationGetDescr(table.rel);
  TupleTableSlot* slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
  ExecClearTuple(slot);
  for (int i = 0; i < desc->natts; ++i) {
    slot->tts_values[i] = 0;
    slot->tts_isnull[i] = true;
  }
  auto set = [slot](AttrNumber attnum, Datum value, bool isnull) {
    if (attnum == InvalidAttrNumber) return;
    slot->tts_values[attnum - 1] = value;
    slot->tts_isnull[attnum - 1] = isnull;
  };
  const StateColumns& c = table.columns;
  ExprContext* econtext = GetPerTupleExprContext(estate);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    AttrNumber attnum = att->attnum;
    if (att->attisdropped || att->attgenerated || attnum == c.name || attnum == c.key || attnum == c.shard ||
        attnum == c.value || attnum == c.ts || attnum == c.prev || attnum == c.idle_at)
      continue;
    auto* expr = reinterpret_cast<Expr*>(build_column_default(table.rel, attnum));
    if (expr != nullptr)
      slot->tts_values[i] =
          ExecEvalExpr(ExecInitExpr(expression_planner(expr), nullptr), econtext, &slot->tts_isnull[i]);
  }
  set(c.name, PointerGetDatum(id.name_text), false);
  set(c.key, PointerGetDatum(id.key_text), id.key_text == nullptr);
  set(c.shard, Int16GetDatum(static_cast<int16>(id.shard)), false);
  set(c.value, Float8GetDatum(row.next.value), false);
  set(c.ts, TimestampTzGetDatum(TimestamptzFromUnix(row.next.ts)), false);
  set(c.prev, Float8GetDatum(row.next.prev), !row.keep_prev);
  set(c.idle_at, TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at)), false);
  return ExecStoreVirtualTuple(slot);
}

// ExecCheckTIDVisible and ExecCheckTupleVisible (nodeModifyTable.c, static
// there): under REPEATABLE READ or SERIALIZABLE, a conflicting row the
// transaction's snapshot cannot see is a serialization failure, unless this
// transaction inserted it.
void CheckConflictVisible(RowWriter* w, ItemPointer tid) {
  if (!IsolationUsesXactSnapshot()) return;
  Relation rel = w->rri->ri_RelationDesc;
  TupleTableSlot* existing = table_slot_create(rel, &w->estate->es_tupleTable);
  if (!table_tuple_fetch_row_version(rel, tid, SnapshotAny, existing))
    elog(ERROR, "ratelimit: failed to fetch the conflicting row");
  if (table_tuple_satisfies_snapshot(rel, existing, w->estate->es_snapshot)) return;
  bool isnull = false;
  TransactionId xmin =
      DatumGetTransactionId(slot_getsysattr(existing, MinTransactionIdAttributeNumber, &isnull));
  if (!TransactionIdIsCurrentTransactionId(xmin))
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("could not serialize access due to concurrent update")));
}

// ExecInsert's speculative insertion for ON CONFLICT DO NOTHING
// (nodeModifyTable.c), with the one arbiter index of the row's key variant:
// a row another transaction is inserting is waited for; a conflict found
// after the insert kills our tuple and checks again. False: the row exists.
// ExecInsert cannot be called without a ModifyTable plan node; its
// ExecCheckTIDVisible (static there) is the visibility check below.
bool InsertSpeculatively(RowWriter* w, TupleTableSlot* slot, Oid arbiter) {
  Relation rel = w->rri->ri_RelationDesc;
  List* arbiters = list_make1_oid(arbiter);
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    ItemPointerData conflict_tid;
    if (!compat::CheckArbiterIndexes(w->rri, slot, w->estate, &conflict_tid, arbiters)) {
      CheckConflictVisible(w, &conflict_tid);
      return false;
    }
    uint32 token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
    table_tuple_insert_speculative(rel, slot, w->estate->es_output_cid, 0, nullptr, token);
    bool conflicted = false;
    List* recheck = compat::InsertIndexEntriesSpeculative(w->rri, slot, w->estate, &conflicted, arbiters);
    table_tuple_complete_speculative(rel, slot, token, !conflicted);
    SpeculativeInsertionLockRelease(GetCurrentTransactionId());
    if (!conflicted) {
      ExecARInsertTriggers(w->estate, w->rri, slot, recheck, nullptr);
      list_free(recheck);
      return true;
    }
    list_free(recheck);
  }
}

// Raises 27000 for a write whose BEFORE ROW trigger changed the identity.
[[noreturn]] void RaiseIdentityChanged() {
  ereport(ERROR,
          (errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
           errmsg("ratelimit: a trigger changed the name, key or shard of a state row"),
           errhint("Triggers on ratelimit_state must not change the name, key or shard of its rows.")));
}

// Whether a text column of the slot holds exactly these bytes (nullptr: NULL).
bool TextColumnIs(TupleTableSlot* slot, AttrNumber attnum, const char* bytes, int len) {
  bool isnull = false;
  Datum value = slot_getattr(slot, attnum, &isnull);
  if (isnull || bytes == nullptr) return isnull && bytes == nullptr;
  text* stored = DatumGetTextPP(value);
  return static_cast<int>(VARSIZE_ANY_EXHDR(stored)) == len &&
         std::memcmp(VARDATA_ANY(stored), bytes, len) == 0;
}

// Raises 27000 when a BEFORE ROW trigger changed the name, key or shard of
// the row being written: the call would no longer find the row it stored
// (and would retry forever), so nothing is answered or written.
void RequireSameIdentity(const StateTable& table, TupleTableSlot* slot, const LimitId& id) {
  const StateColumns& c = table.columns;
  bool isnull = false;
  Datum shard = slot_getattr(slot, c.shard, &isnull);
  if (TextColumnIs(slot, c.name, id.name, id.name_len) && TextColumnIs(slot, c.key, id.key, id.key_len) &&
      !isnull && DatumGetInt16(shard) == id.shard)
    return;
  RaiseIdentityChanged();
}

// The same for an update: the new version has the old one's identity.
void RequireUnchangedIdentity(const StateTable& table, TupleTableSlot* old_slot, TupleTableSlot* new_slot) {
  const StateColumns& c = table.columns;
  LimitId id{};
  bool isnull = false;
  text* name = DatumGetTextPP(slot_getattr(old_slot, c.name, &isnull));
  id.name = VARDATA_ANY(name);
  id.name_len = VARSIZE_ANY_EXHDR(name);
  Datum key = slot_getattr(old_slot, c.key, &isnull);
  if (!isnull) {
    text* key_text = DatumGetTextPP(key);
    id.key = VARDATA_ANY(key_text);
    id.key_len = VARSIZE_ANY_EXHDR(key_text);
  }
  id.shard = DatumGetInt16(slot_getattr(old_slot, c.shard, &isnull));
  RequireSameIdentity(table, new_slot, id);
}

bool HasBeforeRowUpdateTriggers(const ResultRelInfo* rri) {
  return rri->ri_TrigDesc != nullptr && rri->ri_TrigDesc->trig_update_before_row;
}

}  // namespace

// Code the owner added to the table (triggers, CHECKs, index expressions,
// defaults) runs here as the calling role, in the caller's settings, as it
// would if the caller wrote the table itself: never as the owner, so the
// caller's temporary schema or settings can redirect it to nothing the
// caller could not do anyway (docs/security.md).
bool UpdateRowDirect(const StateTable& table, const ItemPointerData& tid, const RowWrite& row, bool locked) {
  RowWriter w;
  BeginRowWrite(table, &w, false, false);
  TupleTableSlot* old_slot = table_slot_create(table.rel, &w.estate->es_tupleTable);
  ItemPointerData at = tid;
  bool updated = false;
  if (!locked && HasBeforeRowUpdateTriggers(w.rri)) {
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    // Never waits here: a version another transaction holds sends the call
    // to the row lock path, which waits, looks at the config again (a
    // change committed meanwhile applies) and decides again.
    locked = LockVersion(table.rel, &at, snapshot, old_slot, true, false) == LockResult::kLocked;
    UnregisterSnapshot(snapshot);
    if (!locked) {
      EndRowWrite(&w);
      return false;
    }
  }
  if (table_tuple_fetch_row_version(table.rel, &at, SnapshotAny, old_slot)) {
    TupleTableSlot* new_slot = NewVersion(table, old_slot, row, w.estate);
    if (locked) {
      OpenIndexes(&w, false);
      ExecSimpleRelationUpdate(w.rri, w.estate, &w.epq, old_slot, new_slot);
      // table_tuple_update gives the slot the new version's tid; a BEFORE
      // ROW trigger that returned NULL skipped the update and left none.
      if (!ItemPointerIsValid(&new_slot->tts_tid)) RaiseWriteSkipped();
      if (HasBeforeRowUpdateTriggers(w.rri)) RequireUnchangedIdentity(table, old_slot, new_slot);
      updated = true;
    } else {
      updated = UpdateIfNewest(&w, at, new_slot);
    }
  }
  EndRowWrite(&w);
  return updated;
}

bool InsertRowDirect(const StateTable& table, const LimitId& id, const RowWrite& row) {
  RowWriter w;
  BeginRowWrite(table, &w, true);
  TupleTableSlot* slot = NewRow(table, id, row, w.estate);
  Relation rel = table.rel;
  // ExecInsert's steps before the insertion proper, in its order.
  if (w.rri->ri_TrigDesc != nullptr && w.rri->ri_TrigDesc->trig_insert_before_row) {
    if (!ExecBRInsertTriggers(w.estate, w.rri, slot)) RaiseWriteSkipped();
    RequireSameIdentity(table, slot, id);
  }
  if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
    ExecComputeStoredGenerated(w.rri, w.estate, slot, CMD_INSERT);
  if (rel->rd_att->constr) ExecConstraints(w.rri, slot, w.estate);
  if (rel->rd_rel->relispartition) ExecPartitionCheck(w.rri, slot, w.estate, true);
  bool inserted = InsertSpeculatively(&w, slot, id.key_text ? table.keyed_index : table.null_key_index);
  EndRowWrite(&w);
  return inserted;
}

// Every row of (name, key), through the key variant's unique index (its
// name and key prefix) under a fresh snapshot; each is locked as DELETE
// locks it (LockVersion, following the update chain) and deleted by
// ExecSimpleRelationDelete, which fires the row triggers (as the caller).
int DeleteRowsDirect(const StateTable& table, const LimitId& id) {
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  // The scan lives in the executor state's memory and ends before it is
  // freed (the index AM allocates as it scans).
  RowWriter w;
  BeginRowWrite(table, &w, false);
  Relation index = index_open(id.key_text ? table.keyed_index : table.null_key_index, AccessShareLock);
  ScanKeyData keys[2];
  int nkeys = FillNameKeyIndexKeys(index, id, keys);
  IndexScanDesc scan = compat::BeginIndexScan(table.rel, index, snapshot, nkeys);
  index_rescan(scan, keys, nkeys, nullptr, 0);
  TupleTableSlot* slot = table_slot_create(table.rel, &w.estate->es_tupleTable);
  int deleted = 0;
  while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
    ItemPointerData tid = slot->tts_tid;
    if (LockVersion(table.rel, &tid, snapshot, slot, false, true) != LockResult::kLocked) continue;
    ExecSimpleRelationDelete(w.rri, w.estate, &w.epq, slot);
    ++deleted;
  }
  index_endscan(scan);
  index_close(index, NoLock);
  EndRowWrite(&w);
  UnregisterSnapshot(snapshot);
  return deleted;
}

}  // namespace ratelimit_pg
