// The PostgreSQL version differences the adapter meets, as named helpers.
// This is the only file of src/pg that tests PG_VERSION_NUM; everything
// else calls these. Include it after the PostgreSQL headers it needs (inside
// the including file's extern "C" block, or after it).
#pragma once

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "executor/executor.h"
#include "lib/dshash.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_foreign_server.h"
#include "nodes/miscnodes.h"
#include "parser/parse_relation.h"
#endif
#include "storage/proc.h"
#if PG_VERSION_NUM >= 170000
#include "storage/dsm_registry.h"
#endif
}

// The majors the extension is built and tested on: 15, 17 and 18
// (debian/pgversions). 16 is not built anywhere: its API is the one the
// ">= 160000" arms expect, but no 16 server has run these tests.
#if PG_VERSION_NUM < 150000
#error "ratelimit needs PostgreSQL 15 or later"
#endif

namespace ratelimit_pg {
namespace compat {

// What table_tuple_update reports about index entries: a bool before 16,
// TU_UpdateIndexes (none / all / summarizing only) from 16 on.
#if PG_VERSION_NUM >= 160000
using UpdateIndexes = TU_UpdateIndexes;
inline bool NeedsIndexEntries(UpdateIndexes u) { return u != TU_None; }
inline bool OnlySummarizing(UpdateIndexes u) { return u == TU_Summarizing; }
#else
using UpdateIndexes = bool;
inline bool NeedsIndexEntries(UpdateIndexes u) { return u; }
inline bool OnlySummarizing(UpdateIndexes) { return false; }
#endif

// index_beginscan (18 added an instrumentation argument).
inline IndexScanDesc BeginIndexScan(Relation table, Relation index, Snapshot snapshot, int nkeys) {
#if PG_VERSION_NUM >= 180000
  return index_beginscan(table, index, snapshot, nullptr, nkeys, 0);
#else
  return index_beginscan(table, index, snapshot, nkeys, 0);
#endif
}

// ExecInsertIndexTuples for the new version of an UPDATE, as ExecUpdate
// calls it (16 added "only summarizing indexes").
inline List* InsertIndexEntriesForUpdate(ResultRelInfo* rri, TupleTableSlot* slot, EState* estate,
                                         UpdateIndexes update_indexes) {
#if PG_VERSION_NUM >= 160000
  return ExecInsertIndexTuples(rri, slot, estate, true, false, nullptr, NIL, OnlySummarizing(update_indexes));
#else
  (void)update_indexes;
  return ExecInsertIndexTuples(rri, slot, estate, true, false, nullptr, NIL);
#endif
}

// ExecInsertIndexTuples for a speculatively inserted row, as ExecInsert
// calls it for INSERT ... ON CONFLICT: a conflict in an arbiter index is
// reported in *conflict instead of raised (16 added "only summarizing").
inline List* InsertIndexEntriesSpeculative(ResultRelInfo* rri, TupleTableSlot* slot, EState* estate,
                                           bool* conflict, List* arbiters) {
#if PG_VERSION_NUM >= 160000
  return ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters, false);
#else
  return ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters);
#endif
}

// ExecCheckIndexConstraints for an INSERT's row (18 added the tuple id of
// a row being updated, which an INSERT has none of).
inline bool CheckArbiterIndexes(ResultRelInfo* rri, TupleTableSlot* slot, EState* estate,
                                ItemPointer conflict, List* arbiters) {
#if PG_VERSION_NUM >= 180000
  return ExecCheckIndexConstraints(rri, slot, estate, conflict, nullptr, arbiters);
#else
  return ExecCheckIndexConstraints(rri, slot, estate, conflict, arbiters);
#endif
}

// An EPQState with no plan, as logical replication's apply worker makes
// for ExecSimpleRelationUpdate (16 added the result relations argument).
inline void InitEpqState(EPQState* epq, EState* estate) {
#if PG_VERSION_NUM >= 160000
  EvalPlanQualInit(epq, estate, nullptr, NIL, -1, NIL);
#else
  EvalPlanQualInit(epq, estate, nullptr, NIL, -1);
#endif
}

// The range table of an EState that writes one relation (as the apply
// worker's create_edata_for_relation builds it), with the columns the write
// sets (offset by FirstLowInvalidHeapAttributeNumber): 16 moved them from
// the entry to its permission info, 18 added the set of unpruned relations.
inline void InitSingleRangeTable(EState* estate, Relation rel, Bitmapset* updated_cols) {
  RangeTblEntry* rte = makeNode(RangeTblEntry);
  rte->rtekind = RTE_RELATION;
  rte->relid = RelationGetRelid(rel);
  rte->relkind = rel->rd_rel->relkind;
  rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
  List* perminfos = NIL;
  RTEPermissionInfo* perminfo = addRTEPermissionInfo(&perminfos, rte);
  perminfo->updatedCols = updated_cols;
#else
  rte->updatedCols = updated_cols;
#endif
#if PG_VERSION_NUM >= 180000
  ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#elif PG_VERSION_NUM >= 160000
  ExecInitRangeTable(estate, list_make1(rte), perminfos);
#else
  ExecInitRangeTable(estate, list_make1(rte));
#endif
}

// Whether an interval is 'infinity' or '-infinity': interval_in accepts
// them from 17 on; before, it refuses them, so no interval is infinite.
inline bool IntervalIsInfinite(const Interval* interval) {
#if PG_VERSION_NUM >= 170000
  return INTERVAL_NOT_FINITE(interval);
#else
  (void)interval;
  return false;
#endif
}

// Hands the executor a result relation's CHECK expressions, prepared, as
// ExecRelCheck would prepare them on first use (18 renamed the field and
// skips NULL entries, so its array is zeroed as it makes it).
inline void SetPreparedChecks(ResultRelInfo* rri, ExprState** checks, int count) {
  auto** array = static_cast<ExprState**>(palloc0(sizeof(ExprState*) * count));
  for (int i = 0; i < count; ++i) array[i] = checks[i];
#if PG_VERSION_NUM >= 180000
  rri->ri_CheckConstraintExprs = array;
#else
  rri->ri_ConstraintExprs = array;
#endif
}

// Whether a CHECK constraint is enforced (18 added NOT ENFORCED ones, which
// ExecRelCheck skips).
inline bool CheckEnforced(const ConstrCheck& check) {
#if PG_VERSION_NUM >= 180000
  return check.ccenforced;
#else
  (void)check;
  return true;
#endif
}

// Whether a table has virtual generated columns (18 added them; a CHECK
// on one is expanded before it is prepared).
inline bool HasVirtualGeneratedColumns(const TupleConstr* constr) {
#if PG_VERSION_NUM >= 180000
  return constr->has_generated_virtual;
#else
  (void)constr;
  return false;
#endif
}

// Calls a type's input function on `text`; false with the error's message
// in *message (palloc'd) if the text is not valid input. From 16 on the
// input reports it as a soft error (DirectInputFunctionCallSafe), so only
// bad input is caught; on 15, which has no soft errors, the error is
// caught and flushed (the input functions used here, timestamptz_in and
// interval_in, touch no shared state before they raise).
inline bool CallInputFunction(PGFunction input, const char* text, Datum* result, char** message) {
#if PG_VERSION_NUM >= 160000
  ErrorSaveContext escontext{};
  escontext.type = T_ErrorSaveContext;
  escontext.details_wanted = true;
  if (DirectInputFunctionCallSafe(input, const_cast<char*>(text), InvalidOid, -1,
                                  reinterpret_cast<Node*>(&escontext), result))
    return true;
  *message = escontext.error_data != nullptr ? escontext.error_data->message : pstrdup("invalid input");
  return false;
#else
  MemoryContext caller = CurrentMemoryContext;
  volatile bool ok = true;
  PG_TRY();
  {
    *result =
        DirectFunctionCall3(input, CStringGetDatum(text), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    *message = error->message;
    ok = false;
  }
  PG_END_TRY();
  return ok;
#endif
}

// Shared memory for a library loaded after server start, by name: the
// dynamic shared memory registry (GetNamedDSMSegment) from 17; nullptr
// before (there, only shared_preload_libraries gets shared memory).
// dshash's copy function for keys, a parameter from 17 on.
inline void SetDshashCopy(dshash_parameters* params) {
#if PG_VERSION_NUM >= 170000
  params->copy_function = dshash_memcpy;
#else
  (void)params;
#endif
}

inline void* NamedSharedSegment(const char* name, size_t size, void (*init)(void*), bool* found) {
#if PG_VERSION_NUM >= 170000
  return GetNamedDSMSegment(name, size, init, found);
#else
  (void)name;
  (void)size;
  (void)init;
  *found = false;
  return nullptr;
#endif
}

// Memory for a GUC check hook's *extra, which the GUC machinery frees:
// malloc before 16 (guc.c free()s it), guc_malloc from 16 on (GUC memory
// is palloc'd there, and freed with pfree). NULL when out of memory.
inline void* AllocGucExtra(size_t size) {
#if PG_VERSION_NUM >= 160000
  return guc_malloc(LOG, size);
#else
  return malloc(size);
#endif
}

// A wait event set that lives until FreeWaitEventSet (17 ties a set to a
// resource owner instead of a memory context: none, for the session).
inline WaitEventSet* NewSessionWaitEventSet(int events) {
#if PG_VERSION_NUM >= 170000
  return CreateWaitEventSet(nullptr, events);
#else
  return CreateWaitEventSet(TopMemoryContext, events);
#endif
}

// This process's index in PostgreSQL's array of PGPROCs (MyProcNumber
// from 17 on, MyProc->pgprocno before); -1 for a process without one.
// Regular backends and background workers have indexes below MaxBackends.
inline int MyProcIndex() {
#if PG_VERSION_NUM >= 170000
  return MyProcNumber == INVALID_PROC_NUMBER ? -1 : static_cast<int>(MyProcNumber);
#else
  return MyProc == nullptr ? -1 : MyProc->pgprocno;
#endif
}

// Gives this process's PGPROC a new local transaction id outside any
// transaction (a background worker that runs none: its virtual transaction
// id is what a checkpoint waits on). 17 moved it into vxid.
inline void SetOwnLocalTransactionId(LocalTransactionId lxid) {
#if PG_VERSION_NUM >= 170000
  MyProc->vxid.lxid = lxid;
#else
  MyProc->lxid = lxid;
#endif
}

// The ACL check of a foreign server (16 made it one call for every object kind).
inline AclResult ForeignServerAclCheck(Oid server, Oid role, AclMode mode) {
#if PG_VERSION_NUM >= 160000
  return object_aclcheck(ForeignServerRelationId, server, role, mode);
#else
  return pg_foreign_server_aclcheck(server, role, mode);
#endif
}

}  // namespace compat
}  // namespace ratelimit_pg
