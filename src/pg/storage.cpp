// The state and definition tables, through SPI plans prepared once per
// backend (SPI_prepare + SPI_keepplan). Every query is schema-qualified and
// parameterised; the schema is the one the called function lives in. Every
// SQL statement runs as the called function's owner with search_path pinned
// (SqlScope).
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "nodes/pg_list.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// Statements on the state table, prepared once per key variant (given / NULL).
enum StateStatement {
  kLock,
  kLockSkipLocked,
  kInsert,
  kMaterialize,
  kUpdateIfUnchanged,
  kUpdateLocked,
  kReadAll,
  kLockAll,
  kRemove,
  kStateStatementCount
};

enum OtherStatement {
  kDefinitionLookup,
  kDefinitionUpsert,
  kDefinitionDelete,
  kCleanup,
  kOtherStatementCount
};

// Parameters: $1 name, $2 key, $3 shard (or shard count), $4..$7 new state
// (value, ts, prev, idle_at), $8..$10 expected state (value, ts, prev).
// In the SQL templates {schema} is the quoted schema, {key_match} the key
// test, {key_value} the key value and {conflict} the conflict target of the
// key variant; {idle_*} write idle_at where the installed schema has it
// (0.1.0 does not: a newer library must work until ALTER EXTENSION UPDATE).
struct StatementSpec {
  int nargs;
  const char* sql;
};

const StatementSpec kStateSpecs[] = {
    // kLock
    {3,
     "SELECT value, ts, prev, ctid FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} AND shard = $3 FOR UPDATE"},
    // kLockSkipLocked
    {3,
     "SELECT value, ts, prev, ctid FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} AND shard = $3 FOR UPDATE SKIP LOCKED"},
    // kInsert
    {7,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " VALUES ($1, {key_value}, $3, $4, $5, $6{idle_vals}) ON CONFLICT {conflict} DO NOTHING"},
    // kMaterialize
    {7,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " SELECT $1, {key_value}, s::smallint, $4, $5, $6{idle_vals}"
     " FROM pg_catalog.generate_series(0, $3 - 1) AS s ORDER BY s ON CONFLICT {conflict} DO NOTHING"},
    // kUpdateIfUnchanged: by ctid (a TID scan, no index descent), if the row
    // is still what was read. Under EvalPlanQual the value/ts/prev equalities
    // are rechecked on the newest version, so a concurrent change (or a
    // delete) makes this update 0 rows.
    {11,
     "UPDATE {schema}.ratelimit_state SET value = $4, ts = $5, prev = $6{idle_set}"
     " WHERE ctid = $11 AND name = $1 AND shard = $3"
     " AND value = $8 AND ts = $9 AND prev IS NOT DISTINCT FROM $10"},
    // kUpdateLocked
    {7,
     "UPDATE {schema}.ratelimit_state SET value = $4, ts = $5, prev = $6{idle_set}"
     " WHERE name = $1 AND {key_match} AND shard = $3"},
    // kReadAll
    {2,
     "SELECT shard, value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} ORDER BY "
     "shard"},
    // kLockAll
    {2,
     "SELECT shard, value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match}"
     " ORDER BY shard FOR UPDATE"},
    // kRemove
    {2, "DELETE FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match}"},
};
static_assert(sizeof kStateSpecs / sizeof kStateSpecs[0] == kStateStatementCount,
              "one statement per enum value");

const StatementSpec kOtherSpecs[] = {
    {1, "SELECT config FROM {schema}.ratelimit_definition WHERE name = $1"},
    {2,
     "INSERT INTO {schema}.ratelimit_definition (name, config) VALUES ($1, $2)"
     " ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config"},
    {1, "DELETE FROM {schema}.ratelimit_definition WHERE name = $1"},
    // Rows a caller holds are skipped; the ones taken are locked, so their
    // ctid is stable until the DELETE (which rechecks idle_at anyway).
    {1,
     "DELETE FROM {schema}.ratelimit_state WHERE ctid = ANY (ARRAY(SELECT ctid FROM {schema}.ratelimit_state"
     " WHERE idle_at <= $1 FOR UPDATE SKIP LOCKED)) AND idle_at <= $1"},
};
static_assert(sizeof kOtherSpecs / sizeof kOtherSpecs[0] == kOtherStatementCount,
              "one statement per enum value");

Oid kStateArgTypes[] = {TEXTOID,        TEXTOID,   INT2OID,        FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID,
                        TIMESTAMPTZOID, FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID, TIDOID};
Oid kDefinitionArgTypes[] = {TEXTOID, JSONBOID};
Oid kCleanupArgTypes[] = {TIMESTAMPTZOID};

SPIPlanPtr state_plans[2][kStateStatementCount];  // [0]: key = $2, [1]: key IS NULL
SPIPlanPtr other_plans[kOtherStatementCount];
Oid prepared_namespace = InvalidOid;
char prepared_schema[NAMEDATALEN] = {0};
// Cleared by relcache invalidations (e.g. ALTER EXTENSION UPDATE adding a
// column) and by schema changes (a rename), so the next call rechecks the
// schema's name and which columns the state table has.
bool schema_checked = false;
// The role SQL statements run as: the called function's owner (SetSqlRole).
Oid sql_role = InvalidOid;

void OnNamespaceInvalidation(Datum arg, int cacheid, uint32 hashvalue) {
  (void)arg;
  (void)cacheid;
  (void)hashvalue;
  schema_checked = false;
}

// What a SECURITY DEFINER function with SET search_path would do, for one
// SQL statement: run it as the function's owner, with search_path pinned so
// the caller's schemas cannot supply its operators or functions. The
// functions themselves are SECURITY INVOKER: their direct table access
// checks no privileges and resolves no names, and a function-level SET
// would save and restore the GUC on every call. After an error, the
// (sub)transaction abort restores the user and the GUC, as for fmgr's
// SECURITY DEFINER wrapper.
struct SqlScope {
  Oid user;
  int sec_context;
  int guc_level;
};

constexpr const char* kPinnedSearchPath = "pg_catalog, pg_temp";

SqlScope EnterSqlScope() {
  SqlScope scope{};
  if (!OidIsValid(sql_role)) elog(ERROR, "ratelimit: storage is not prepared");
  GetUserIdAndSecContext(&scope.user, &scope.sec_context);
  SetUserIdAndSecContext(sql_role, scope.sec_context | SECURITY_LOCAL_USERID_CHANGE);
  scope.guc_level = NewGUCNestLevel();
  (void)set_config_option("search_path", kPinnedSearchPath, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true,
                          0, false);
  return scope;
}

void LeaveSqlScope(const SqlScope& scope) {
  AtEOXact_GUC(true, scope.guc_level);
  SetUserIdAndSecContext(scope.user, scope.sec_context);
}

// The values of a template's placeholders for one schema and key variant.
struct TemplateValues {
  const char* schema;
  bool null_key;
  bool has_idle_at;
};

// Expands a statement template's {placeholders}.
char* ExpandTemplate(const char* sql, const TemplateValues& v) {
  const char* names[] = {"{schema}",    "{key_match}", "{key_value}", "{conflict}",
                         "{idle_cols}", "{idle_vals}", "{idle_set}"};
  const char* values[] = {v.schema,
                          v.null_key ? "key IS NULL" : "key = $2",
                          v.null_key ? "NULL" : "$2",
                          v.null_key ? "(name, shard) WHERE key IS NULL" : "(name, key, shard)",
                          v.has_idle_at ? ", idle_at" : "",
                          v.has_idle_at ? ", $7" : "",
                          v.has_idle_at ? ", idle_at = $7" : ""};
  StringInfoData buf;
  initStringInfo(&buf);
  while (*sql != '\0') {
    int found = -1;
    for (int i = 0; i < 7 && found < 0; ++i)
      if (std::strncmp(sql, names[i], std::strlen(names[i])) == 0) found = i;
    if (found < 0) {
      appendStringInfoChar(&buf, *sql++);
      continue;
    }
    appendStringInfoString(&buf, values[found]);
    sql += std::strlen(names[found]);
  }
  return buf.data;
}

// Prepares one statement from its template and keeps it for the backend's life.
SPIPlanPtr KeepPlan(const StatementSpec& spec, Oid* argtypes, const TemplateValues& values) {
  char* sql = ExpandTemplate(spec.sql, values);
  SPIPlanPtr plan = SPI_prepare(sql, spec.nargs, argtypes);
  if (plan == nullptr) elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) elog(ERROR, "ratelimit: SPI_keepplan failed");
  pfree(sql);
  return plan;
}

// Frees every kept plan (before re-preparing for another schema).
void FreePlans() {
  for (auto& variant : state_plans)
    for (SPIPlanPtr& plan : variant) {
      if (plan != nullptr) SPI_freeplan(plan);
      plan = nullptr;
    }
  for (SPIPlanPtr& plan : other_plans) {
    if (plan != nullptr) SPI_freeplan(plan);
    plan = nullptr;
  }
}

SPIPlanPtr StatePlan(const LimitId& id, StateStatement statement) {
  return state_plans[id.key == nullptr ? 1 : 0][statement];
}

// Fills $1..$3 (name, key, shard).
void FillIdParams(const LimitId& id, int shard, Datum* values, char* nulls) {
  values[0] = PointerGetDatum(id.name_text);
  nulls[0] = ' ';
  values[1] = id.key_text ? PointerGetDatum(id.key_text) : 0;
  nulls[1] = id.key_text ? ' ' : 'n';
  values[2] = Int16GetDatum(static_cast<int16>(shard));
  nulls[2] = ' ';
}

// Fills value, ts and prev parameters from a state.
void FillStateParams(const LimitState& state, bool prev_is_null, Datum* values, char* nulls) {
  values[0] = Float8GetDatum(state.value);
  values[1] = TimestampTzGetDatum(TimestamptzFromUnix(state.ts));
  values[2] = prev_is_null ? 0 : Float8GetDatum(state.prev);
  nulls[0] = nulls[1] = ' ';
  nulls[2] = prev_is_null ? 'n' : ' ';
}

// Fills $1..$7: the row's identity and the state to write.
void FillWriteParams(const LimitId& id, const RowWrite& row, Datum* values, char* nulls) {
  FillIdParams(id, id.shard, values, nulls);
  FillStateParams(row.next, !row.keep_prev, values + 3, nulls + 3);
  values[6] = TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at));
  nulls[6] = ' ';
}

// Runs a kept plan (in the SQL scope) and checks SPI's return code.
void Execute(SPIPlanPtr plan, Datum* values, char* nulls, int expected, long limit) {
  SqlScope scope = EnterSqlScope();
  int rc = SPI_execute_plan(plan, values, nulls, false, limit);
  LeaveSqlScope(scope);
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
}

// Reads (value, ts, prev) starting at column `first` of result row `row`.
// A stored state from three columns (value, ts, prev) of a result row.
StoredState StoredStateFromValues(Datum value, Datum ts, Datum prev, bool prev_is_null) {
  StoredState out{};
  out.state.exists = true;
  out.state.value = DatumGetFloat8(value);
  out.state.ts = UnixFromTimestamptz(DatumGetTimestampTz(ts));
  out.prev_is_null = prev_is_null;
  out.state.prev = prev_is_null ? 0 : DatumGetFloat8(prev);
  return out;
}

// Reads (value, ts, prev[, ctid]) starting at column `first` of SPI result row `row`.
StoredState StoredStateFromRow(uint64 row, int first, bool with_tid) {
  HeapTuple tuple = SPI_tuptable->vals[row];
  TupleDesc desc = SPI_tuptable->tupdesc;
  bool isnull = false;
  bool prev_is_null = false;
  Datum value = SPI_getbinval(tuple, desc, first, &isnull);
  Datum ts = SPI_getbinval(tuple, desc, first + 1, &isnull);
  Datum prev = SPI_getbinval(tuple, desc, first + 2, &prev_is_null);
  StoredState out = StoredStateFromValues(value, ts, prev, prev_is_null);
  if (with_tid)
    ItemPointerCopy(
        reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(tuple, desc, first + 3, &isnull))),
        &out.tid);
  return out;
}

// The state table, its two unique indexes and the columns read directly.
struct StateRelations {
  Oid table;
  Oid keyed_index;     // (name, key, shard)
  Oid null_key_index;  // (name, shard) WHERE key IS NULL
  Oid definition_table;
  AttrNumber name;
  AttrNumber key;
  AttrNumber shard;
  AttrNumber value;
  AttrNumber ts;
  AttrNumber prev;
  AttrNumber idle_at;  // InvalidAttrNumber before 0.2.0
  bool has_idle_at;
  // Only our two indexes and no triggers: a write may go straight to the
  // table (else through SQL, so nobody's index or trigger is bypassed).
  bool direct_writes;
};

StateRelations relations;

// Only our relations' invalidations (or a full reset) matter: a change to
// any other table must not make every call recheck the schema.
void OnRelcacheInvalidation(Datum arg, Oid relid) {
  (void)arg;
  if (relid == InvalidOid || relid == relations.table || relid == relations.keyed_index ||
      relid == relations.null_key_index || relid == relations.definition_table)
    schema_checked = false;
}

Oid RequireRelation(const char* name, Oid extension_namespace) {
  Oid relid = get_relname_relid(name, extension_namespace);
  if (!OidIsValid(relid)) elog(ERROR, "ratelimit: relation %s not found; reinstall the extension", name);
  return relid;
}

AttrNumber RequireColumn(Oid relid, const char* name) {
  AttrNumber attnum = get_attnum(relid, name);
  if (attnum == InvalidAttrNumber) elog(ERROR, "ratelimit: column ratelimit_state.%s not found", name);
  return attnum;
}

// The columns a table has (dropped ones not counted).
int LiveColumns(Relation table) {
  int live = 0;
  for (int i = 0; i < RelationGetNumberOfAttributes(table); ++i)
    if (!TupleDescAttr(RelationGetDescr(table), i)->attisdropped) ++live;
  return live;
}

// Whether the only CHECK constraint is the extension's own (shard >= 0),
// which every write satisfies.
bool OnlyOurCheck(Relation table) {
  TupleConstr* constr = RelationGetDescr(table)->constr;
  if (constr == nullptr || constr->num_check == 0) return true;
  return constr->num_check == 1 && std::strcmp(constr->check[0].ccname, "ratelimit_state_shard_check") == 0;
}

// Whether the state table is exactly as the extension made it: its two
// indexes, its columns, its CHECK, and no triggers, rules or row security.
// Then a direct write maintains everything an SQL UPDATE would; otherwise
// writes go through SQL, so nobody's index, trigger, rule, constraint or
// added column is bypassed.
bool TableAsInstalled(Oid table_oid, bool has_idle_at) {
  Relation table = table_open(table_oid, AccessShareLock);
  List* indexes = RelationGetIndexList(table);
  bool simple = list_length(indexes) == 2 && !table->rd_rel->relhastriggers &&
                !table->rd_rel->relrowsecurity && !table->rd_rel->relhasrules &&
                LiveColumns(table) == (has_idle_at ? 7 : 6) && OnlyOurCheck(table);
  list_free(indexes);
  table_close(table, AccessShareLock);
  return simple;
}

// Looks up the installed state table (its oids change when the extension is
// re-created; idle_at exists from 0.2.0 on).
StateRelations FindStateRelations(Oid extension_namespace) {
  StateRelations found{};
  found.table = RequireRelation("ratelimit_state", extension_namespace);
  found.keyed_index = RequireRelation("ratelimit_state_name_key_shard", extension_namespace);
  found.null_key_index = RequireRelation("ratelimit_state_global", extension_namespace);
  found.definition_table = RequireRelation("ratelimit_definition", extension_namespace);
  found.name = RequireColumn(found.table, "name");
  found.key = RequireColumn(found.table, "key");
  found.shard = RequireColumn(found.table, "shard");
  found.value = RequireColumn(found.table, "value");
  found.ts = RequireColumn(found.table, "ts");
  found.prev = RequireColumn(found.table, "prev");
  found.idle_at = get_attnum(found.table, "idle_at");
  found.has_idle_at = found.idle_at != InvalidAttrNumber;
  found.direct_writes = TableAsInstalled(found.table, found.has_idle_at);
  return found;
}

bool SameRelations(const StateRelations& a, const StateRelations& b) {
  return a.table == b.table && a.keyed_index == b.keyed_index && a.null_key_index == b.null_key_index &&
         a.definition_table == b.definition_table && a.name == b.name && a.key == b.key &&
         a.shard == b.shard && a.value == b.value && a.ts == b.ts && a.prev == b.prev &&
         a.idle_at == b.idle_at && a.has_idle_at == b.has_idle_at && a.direct_writes == b.direct_writes;
}

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

// The state from a heap tuple in a slot, with its tid.
StoredState StoredStateFromSlot(TupleTableSlot* slot) {
  bool isnull = false;
  bool prev_is_null = false;
  Datum value = slot_getattr(slot, relations.value, &isnull);
  Datum ts = slot_getattr(slot, relations.ts, &isnull);
  Datum prev = slot_getattr(slot, relations.prev, &prev_is_null);
  StoredState out = StoredStateFromValues(value, ts, prev, prev_is_null);
  ItemPointerCopy(&slot->tts_tid, &out.tid);
  return out;
}

// Locks the row version at *tid FOR UPDATE, as the executor's LockRows node
// does: in READ COMMITTED it follows the update chain to the newest version
// (waiting for its writer unless skip_locked); under REPEATABLE READ or
// SERIALIZABLE a concurrent update or delete is a serialization failure.
// True: locked, and the slot holds the locked version. False: busy
// (skip_locked), deleted, or changed by the statement calling us; LockRows
// skips such a row, and so do we.
bool LockVersion(Relation table, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot, bool skip_locked) {
  int flags = IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
  TM_FailureData failure;
  TM_Result result =
      table_tuple_lock(table, tid, snapshot, slot, GetCurrentCommandId(true), LockTupleExclusive,
                       skip_locked ? LockWaitSkip : LockWaitBlock, flags, &failure);
  switch (result) {
    case TM_Ok:
      return true;
    case TM_WouldBlock:
    case TM_SelfModified:
      return false;
    case TM_Updated:
    case TM_Deleted:
      if (IsolationUsesXactSnapshot())
        ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                        errmsg("could not serialize access due to concurrent update")));
      if (result == TM_Deleted) return false;
      break;
    default:
      break;
  }
  elog(ERROR, "ratelimit: unexpected table_tuple_lock status %d", static_cast<int>(result));
  return false;
}

// Reads a row through its unique index with a fresh MVCC snapshot, after a
// command counter increment: what an SPI SELECT would see (the latest
// committed state plus this transaction's own writes; SSI predicate locks
// are taken by the index and heap access), without starting an executor.
// With a lock mode it is SELECT ... FOR UPDATE [SKIP LOCKED]: the version
// found is locked (and followed to the newest one); a row that is busy
// (skip-locked) or vanished reads as no row.
StoredState ReadStateDirect(const LimitId& id, ReadMode mode) {
  bool lock = mode != ReadMode::kUnlocked;
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  Relation table = table_open(relations.table, lock ? RowShareLock : AccessShareLock);
  Relation index =
      index_open(id.key_text ? relations.keyed_index : relations.null_key_index, AccessShareLock);
  ScanKeyData keys[3];
  int nkeys = FillIndexKeys(index, id, keys);
  IndexScanDesc scan = index_beginscan(table, index, snapshot, nkeys, 0);
  index_rescan(scan, keys, nkeys, nullptr, 0);
  TupleTableSlot* slot = table_slot_create(table, nullptr);
  StoredState out{};
  out.prev_is_null = true;
  ItemPointerSetInvalid(&out.tid);
  if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
    ItemPointerData tid = slot->tts_tid;
    if (!lock || LockVersion(table, &tid, snapshot, slot, mode == ReadMode::kLockSkipLocked))
      out = StoredStateFromSlot(slot);
  }
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  index_close(index, NoLock);
  table_close(table, NoLock);
  UnregisterSnapshot(snapshot);
  return out;
}

// Puts a full state row (identity and new state) into a virtual slot.
void FillStateSlot(const LimitId& id, const RowWrite& row, TupleTableSlot* slot) {
  ExecClearTuple(slot);
  for (int i = 0; i < slot->tts_tupleDescriptor->natts; ++i) {
    slot->tts_values[i] = 0;
    slot->tts_isnull[i] = true;
  }
  auto set = [slot](AttrNumber attnum, Datum value, bool isnull) {
    slot->tts_values[attnum - 1] = value;
    slot->tts_isnull[attnum - 1] = isnull;
  };
  set(relations.name, PointerGetDatum(id.name_text), false);
  set(relations.key, PointerGetDatum(id.key_text), id.key_text == nullptr);
  set(relations.shard, Int16GetDatum(static_cast<int16>(id.shard)), false);
  set(relations.value, Float8GetDatum(row.next.value), false);
  set(relations.ts, TimestampTzGetDatum(TimestamptzFromUnix(row.next.ts)), false);
  set(relations.prev, Float8GetDatum(row.next.prev), !row.keep_prev);
  if (relations.has_idle_at)
    set(relations.idle_at, TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at)), false);
  ExecStoreVirtualTuple(slot);
}

// Adds one index entry for a new row version (a non-HOT update).
void InsertIndexEntry(Relation table, Oid index_oid, Datum* values, bool* isnull, ItemPointer tid) {
  Relation index = index_open(index_oid, RowExclusiveLock);
  IndexInfo* info = BuildIndexInfo(index);
#if PG_VERSION_NUM >= 140000
  index_insert(index, values, isnull, tid, table, UNIQUE_CHECK_YES, true, info);
#else
  index_insert(index, values, isnull, tid, table, UNIQUE_CHECK_YES, info);
#endif
  index_close(index, NoLock);
}

// Index entries for a new row version: the (name, key, shard) index always,
// the (name, shard) WHERE key IS NULL index for the NULL key.
void InsertIndexEntries(Relation table, const LimitId& id, ItemPointer tid) {
  Datum keyed[3] = {PointerGetDatum(id.name_text), PointerGetDatum(id.key_text),
                    Int16GetDatum(static_cast<int16>(id.shard))};
  bool keyed_null[3] = {false, id.key_text == nullptr, false};
  InsertIndexEntry(table, relations.keyed_index, keyed, keyed_null, tid);
  if (id.key_text != nullptr) return;
  Datum global[2] = {PointerGetDatum(id.name_text), Int16GetDatum(static_cast<int16>(id.shard))};
  bool global_null[2] = {false, false};
  InsertIndexEntry(table, relations.null_key_index, global, global_null, tid);
}

// Updates exactly the row version that was read (at expected.tid), as the
// executor's UPDATE would but without starting one. Returns false if that
// version was updated or deleted meanwhile (after waiting for its writer):
// then the caller decides again under the row lock.
bool UpdateReadVersion(const LimitId& id, const StoredState& expected, const RowWrite& row) {
  Relation table = table_open(relations.table, RowExclusiveLock);
  CheckCmdReplicaIdentity(table, CMD_UPDATE);  // as ExecUpdate: a publication needs a replica identity
  TupleTableSlot* slot = table_slot_create(table, nullptr);
  FillStateSlot(id, row, slot);
  ItemPointerData tid = expected.tid;
  TM_FailureData failure;
  LockTupleMode lockmode;
#if PG_VERSION_NUM >= 160000
  TU_UpdateIndexes update_indexes = TU_None;
#else
  bool update_indexes = false;
#endif
  TM_Result result = table_tuple_update(table, &tid, slot, GetCurrentCommandId(true), GetActiveSnapshot(),
                                        InvalidSnapshot, true, &failure, &lockmode, &update_indexes);
  if (result == TM_Invisible) elog(ERROR, "ratelimit: the state row read is invisible to its update");
  bool updated = result == TM_Ok;
#if PG_VERSION_NUM >= 160000
  if (updated && update_indexes != TU_None) InsertIndexEntries(table, id, &slot->tts_tid);
#else
  if (updated && update_indexes) InsertIndexEntries(table, id, &slot->tts_tid);
#endif
  ExecDropSingleTupleTableSlot(slot);
  table_close(table, NoLock);
  return updated;
}

// Prepares and keeps every statement for one schema (in the SQL scope, so
// the plans are parsed as the owner with the pinned search_path).
void KeepPlans(const char* schema, bool has_idle_at) {
  TemplateValues values{quote_identifier(schema), false, has_idle_at};
  SqlScope scope = EnterSqlScope();
  for (int variant = 0; variant < 2; ++variant) {
    values.null_key = variant == 1;
    for (int s = 0; s < kStateStatementCount; ++s)
      state_plans[variant][s] = KeepPlan(kStateSpecs[s], kStateArgTypes, values);
  }
  values.null_key = false;
  for (int s = 0; s < kCleanup; ++s) other_plans[s] = KeepPlan(kOtherSpecs[s], kDefinitionArgTypes, values);
  if (has_idle_at) other_plans[kCleanup] = KeepPlan(kOtherSpecs[kCleanup], kCleanupArgTypes, values);
  LeaveSqlScope(scope);
}

}  // namespace

Oid SetSqlRole(Oid role) {
  Oid previous = sql_role;
  sql_role = role;
  return previous;
}

void RegisterStorageInvalidation() {
  CacheRegisterRelcacheCallback(OnRelcacheInvalidation, 0);
  CacheRegisterSyscacheCallback(NAMESPACEOID, OnNamespaceInvalidation, 0);
}

void PrepareStorage(Oid extension_namespace) {
  // Checked once, then again only after a relcache or schema invalidation.
  if (schema_checked && extension_namespace == prepared_namespace) return;
  const char* schema = get_namespace_name(extension_namespace);
  if (schema == nullptr) elog(ERROR, "ratelimit: schema %u not found", extension_namespace);
  bool same_schema = extension_namespace == prepared_namespace && std::strcmp(schema, prepared_schema) == 0;
  StateRelations found = FindStateRelations(extension_namespace);
  schema_checked = true;
  if (same_schema && SameRelations(found, relations)) return;
  prepared_namespace = InvalidOid;
  FreePlans();
  KeepPlans(schema, found.has_idle_at);
  strlcpy(prepared_schema, schema, sizeof prepared_schema);
  relations = found;
  WatchDefinitionTable(found.definition_table);
  prepared_namespace = extension_namespace;
}

StoredState ReadState(const LimitId& id, ReadMode mode) {
  // Locks go through SQL when writes do, so the table's extras see the same path.
  if (mode == ReadMode::kUnlocked || relations.direct_writes) return ReadStateDirect(id, mode);
  Datum values[3];
  char nulls[3];
  FillIdParams(id, id.shard, values, nulls);
  Execute(StatePlan(id, mode == ReadMode::kLock ? kLock : kLockSkipLocked), values, nulls, SPI_OK_SELECT, 1);
  StoredState out{};
  out.prev_is_null = true;
  if (SPI_processed == 1) out = StoredStateFromRow(0, 1, true);
  SPI_freetuptable(SPI_tuptable);
  return out;
}

int ReadAllShards(const LimitId& id, bool lock, int shards, ratelimit::ShardInput* out) {
  for (int i = 0; i < shards; ++i) out[i] = ratelimit::ShardInput{i, LimitState{}};
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  Execute(StatePlan(id, lock ? kLockAll : kReadAll), values, nulls, SPI_OK_SELECT, 0);
  int found = 0;
  for (uint64 row = 0; row < SPI_processed; ++row) {
    bool isnull = false;
    int shard = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));
    if (shard >= shards) continue;  // left over from a config with more shards
    out[shard].state = StoredStateFromRow(row, 2, false).state;
    ++found;
  }
  SPI_freetuptable(SPI_tuptable);
  return found;
}

bool InsertState(const LimitId& id, const RowWrite& row) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  Execute(StatePlan(id, kInsert), values, nulls, SPI_OK_INSERT, 0);
  return SPI_processed == 1;
}

void MaterializeShards(const LimitId& id, int shards, const RowWrite& initial) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, initial, values, nulls);
  values[2] = Int16GetDatum(static_cast<int16>(shards));
  Execute(StatePlan(id, kMaterialize), values, nulls, SPI_OK_INSERT, 0);
}

bool UpdateStateIfUnchanged(const LimitId& id, const StoredState& expected, const RowWrite& row) {
  if (relations.direct_writes) return UpdateReadVersion(id, expected, row);
  Datum values[11];
  char nulls[11];
  FillWriteParams(id, row, values, nulls);
  FillStateParams(expected.state, expected.prev_is_null, values + 7, nulls + 7);
  values[10] = PointerGetDatum(&expected.tid);
  nulls[10] = ' ';
  Execute(StatePlan(id, kUpdateIfUnchanged), values, nulls, SPI_OK_UPDATE, 0);
  return SPI_processed == 1;
}

void UpdateLockedState(const LimitId& id, const ItemPointerData* tid, const RowWrite& row) {
  if (relations.direct_writes && tid != nullptr && ItemPointerIsValid(tid)) {
    StoredState locked{};
    locked.tid = *tid;
    if (!UpdateReadVersion(id, locked, row)) elog(ERROR, "ratelimit: a locked state row changed");
    return;
  }
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  Execute(StatePlan(id, kUpdateLocked), values, nulls, SPI_OK_UPDATE, 0);
  if (SPI_processed != 1) elog(ERROR, "ratelimit: a locked state row vanished");
}

bool DeleteStates(const LimitId& id) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  Execute(StatePlan(id, kRemove), values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

int64 DeleteIdleStates(Micros now) {
  if (other_plans[kCleanup] == nullptr) elog(ERROR, "ratelimit: run ALTER EXTENSION ratelimit UPDATE first");
  Datum values[1] = {TimestampTzGetDatum(TimestamptzFromUnix(now))};
  char nulls[1] = {' '};
  Execute(other_plans[kCleanup], values, nulls, SPI_OK_DELETE, 0);
  return static_cast<int64>(SPI_processed);
}

// Every state row with its definition's config, in (name, key, shard) order.
// A cursor fetches a batch at a time, so a big table is never all in memory.
void ScanStatusRows(StatusRowSink sink, void* context) {
  char* sql = psprintf(
      "SELECT s.name, s.key, s.shard, s.value, s.ts, s.prev, s.idle_at, d.config"
      " FROM %s.ratelimit_state s LEFT JOIN %s.ratelimit_definition d ON d.name = s.name"
      " ORDER BY s.name, s.key NULLS FIRST, s.shard",
      quote_identifier(prepared_schema), quote_identifier(prepared_schema));
  SqlScope scope = EnterSqlScope();  // the rows are formed in it too: no caller code runs there
  Portal portal = SPI_cursor_open_with_args(nullptr, sql, 0, nullptr, nullptr, nullptr, true, 0);
  // What one batch detoasts or copies is freed with it.
  MemoryContext batch =
      AllocSetContextCreate(CurrentMemoryContext, "ratelimit status batch", ALLOCSET_DEFAULT_SIZES);
  for (;;) {
    SPI_cursor_fetch(portal, true, 1000);
    if (SPI_processed == 0) break;
    MemoryContext outer = MemoryContextSwitchTo(batch);
    TupleDesc desc = SPI_tuptable->tupdesc;
    for (uint64 row = 0; row < SPI_processed; ++row) {
      HeapTuple tuple = SPI_tuptable->vals[row];
      StatusRow out{};
      bool isnull = false;
      out.id.name_text = DatumGetTextPP(SPI_getbinval(tuple, desc, 1, &isnull));
      out.id.name = VARDATA_ANY(out.id.name_text);
      out.id.name_len = VARSIZE_ANY_EXHDR(out.id.name_text);
      Datum key = SPI_getbinval(tuple, desc, 2, &isnull);
      if (!isnull) {
        out.id.key_text = DatumGetTextPP(key);
        out.id.key = VARDATA_ANY(out.id.key_text);
        out.id.key_len = VARSIZE_ANY_EXHDR(out.id.key_text);
      }
      out.id.shard = DatumGetInt16(SPI_getbinval(tuple, desc, 3, &isnull));
      out.stored = StoredStateFromRow(row, 4, false);
      Datum idle_at = SPI_getbinval(tuple, desc, 7, &isnull);
      out.has_idle_at = !isnull;
      if (!isnull) out.idle_at = UnixFromTimestamptz(DatumGetTimestampTz(idle_at));
      Datum config = SPI_getbinval(tuple, desc, 8, &isnull);
      out.config = isnull ? nullptr : DatumGetJsonbP(config);
      sink(out, context);
    }
    MemoryContextSwitchTo(outer);
    MemoryContextReset(batch);
    SPI_freetuptable(SPI_tuptable);
  }
  MemoryContextDelete(batch);
  SPI_cursor_close(portal);
  LeaveSqlScope(scope);
  pfree(sql);
}

void InvalidateDefinitions() { CacheInvalidateRelcacheByRelid(relations.definition_table); }

bool LookupDefinedConfig(text* name, LimitConfig* config) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(other_plans[kDefinitionLookup], values, nulls, SPI_OK_SELECT, 1);
  if (SPI_processed == 0) return false;
  bool isnull = false;
  Datum stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  ParseConfigJsonb(DatumGetJsonbP(stored), config);
  return true;
}

void UpsertDefinition(text* name, Jsonb* config) {
  Datum values[2] = {PointerGetDatum(name), JsonbPGetDatum(config)};
  char nulls[2] = {' ', ' '};
  Execute(other_plans[kDefinitionUpsert], values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteDefinition(text* name) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(other_plans[kDefinitionDelete], values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

}  // namespace ratelimit_pg
