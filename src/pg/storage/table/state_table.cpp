// Where the extension's relations are, and what the state table allows one
// step of a call: lock, then look. A step opens the table with the lock it
// needs (taking it processes the invalidations other sessions' DDL queued),
// then derives from the relcache entry everything that decides how it
// reads or writes: the columns and their types, the unique indexes it
// probes, rules, row security and the kind of relation.
//
// The relation's oid is a hint (catalog.h), checked again after the lock
// whenever an invalidation of that relation arrived (as
// RangeVarGetRelidExtended does). What is derived from the locked table
// (its columns, the probe indexes' shape, what the table allows) is kept
// for the state table generation it was derived in: any invalidation of
// the table or the indexes moves it, so the next step derives it again.
#include <cstring>
#include <initializer_list>

#include "storage/table/state_table.h"

#include "support/catalog.h"
#include "support/errors.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_cast.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "storage/sinval.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

constexpr const char* kKeyedIndexName = "ratelimit_state_name_key_shard";
constexpr const char* kNullKeyIndexName = "ratelimit_state_global";

// The attribute numbers of the state table's columns, from its descriptor.
StateColumns FindColumns(Relation rel) {
  StateColumns c{};
  struct {
    const char* name;
    AttrNumber* attnum;
  } wanted[] = {{"name", &c.name}, {"key", &c.key},   {"shard", &c.shard},    {"value", &c.value},
                {"ts", &c.ts},     {"prev", &c.prev}, {"idle_at", &c.idle_at}};
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    for (auto& column : wanted)
      if (std::strcmp(NameStr(att->attname), column.name) == 0) *column.attnum = att->attnum;
  }
  return c;
}

bool HasType(Relation rel, AttrNumber attnum, Oid type) {
  return attnum != InvalidAttrNumber && TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid == type;
}

// Whether every column has the type the extension created it with, so
// datums can be read and written as such (an owner's ALTER COLUMN ... TYPE
// sends everything through SQL, which converts).
bool ColumnTypesAsInstalled(Relation rel, const StateColumns& c) {
  return HasType(rel, c.name, TEXTOID) && HasType(rel, c.key, TEXTOID) && HasType(rel, c.shard, INT2OID) &&
         HasType(rel, c.value, FLOAT8OID) && HasType(rel, c.ts, TIMESTAMPTZOID) &&
         HasType(rel, c.prev, FLOAT8OID) &&
         (c.idle_at == InvalidAttrNumber || HasType(rel, c.idle_at, TIMESTAMPTZOID));
}

// Whether an index's predicate is exactly "key IS NULL".
bool PredicateIsNullKey(Relation index, AttrNumber key) {
  List* predicate = RelationGetIndexPredicate(index);
  if (list_length(predicate) != 1 || !IsA(linitial(predicate), NullTest)) return false;
  auto* test = static_cast<NullTest*>(linitial(predicate));
  return test->nulltesttype == IS_NULL && IsA(test->arg, Var) &&
         reinterpret_cast<Var*>(test->arg)->varattno == key;
}

// Whether `index` is a valid, immediately checked unique btree index of
// `rel` (an arbiter ON CONFLICT accepts) on exactly `columns` (text
// columns with the default text opfamily, the shard with the integer one),
// without expressions, with the predicate "key IS NULL" when null_key,
// else none: what the row probe's scan keys assume.
bool IndexAsInstalled(Relation rel, Relation index, const AttrNumber* columns, int ncolumns,
                      const StateColumns& c, bool null_key) {
  Form_pg_index form = index->rd_index;
  if (form->indrelid != RelationGetRelid(rel) || !form->indisunique || !form->indimmediate ||
      !form->indisvalid || !form->indisready || !form->indislive || index->rd_rel->relam != BTREE_AM_OID ||
      form->indnatts != ncolumns || form->indnkeyatts != ncolumns ||
      !heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, nullptr))
    return false;
  for (int i = 0; i < ncolumns; ++i) {
    Oid family = columns[i] == c.shard ? INTEGER_BTREE_FAM_OID : TEXT_BTREE_FAM_OID;
    if (form->indkey.values[i] != columns[i] || index->rd_opfamily[i] != family) return false;
  }
  if (null_key) return PredicateIsNullKey(index, c.key);
  return heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr);
}

// The oid of the index called `name` (found by name, then checked to be
// one of `rel`'s: only the table's owner can index it) if it is as
// installed on `columns`; InvalidOid otherwise.
Oid InstalledIndex(Relation rel, const char* name, const AttrNumber* columns, int ncolumns,
                   const StateColumns& c, bool null_key) {
  Oid relid = get_relname_relid(name, ExtensionNamespace());
  if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_INDEX) return InvalidOid;
  Relation index = index_open(relid, AccessShareLock);
  bool ok = IndexAsInstalled(rel, index, columns, ncolumns, c, null_key);
  index_close(index, NoLock);
  return ok ? relid : InvalidOid;
}

// The state table's probe index, keyed or for the NULL key, if as installed.
Oid CheckedIndex(Relation rel, const char* name, const StateColumns& c, bool null_key) {
  AttrNumber keyed[] = {c.name, c.key, c.shard};
  AttrNumber global[] = {c.name, c.shard};
  return null_key ? InstalledIndex(rel, name, global, 2, c, true)
                  : InstalledIndex(rel, name, keyed, 3, c, false);
}

// Whether the name and key columns compare by their bytes, as the calls'
// canonical order and duplicate detection (ratelimit_limit_all) assume: a
// nondeterministic collation would make two keys one row.
bool DeterministicIdentity(Relation rel, const StateColumns& c) {
  for (AttrNumber attnum : {c.name, c.key}) {
    if (attnum == InvalidAttrNumber) continue;
    Oid collation = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attcollation;
    if (OidIsValid(collation) && !get_collation_isdeterministic(collation)) return false;
  }
  return true;
}

// Whether an UPDATE of the table fires statement-level triggers or fills
// transition tables: ExecSimpleRelationUpdate, a per-row piece, does
// neither (the executor's ModifyTable node does), so such a table is
// written through SQL.
bool HasStatementLevelUpdateTriggers(Relation rel) {
  const TriggerDesc* t = rel->trigdesc;
  return t != nullptr && (t->trig_update_before_statement || t->trig_update_after_statement ||
                          t->trig_update_new_table || t->trig_update_old_table);
}

// The CHECK constraint the extension installs (shard >= 0): no owner code.
constexpr const char* kInstalledShardCheck = "ratelimit_state_shard_check";

// Whether a node is the integer constant 0 (of type int2, int4 or int8).
bool IsZero(const Node* node) {
  if (node == nullptr || !IsA(node, Const)) return false;
  const auto* c = reinterpret_cast<const Const*>(node);
  if (c->constisnull) return false;
  switch (c->consttype) {
    case INT2OID:
      return DatumGetInt16(c->constvalue) == 0;
    case INT4OID:
      return DatumGetInt32(c->constvalue) == 0;
    case INT8OID:
      return DatumGetInt64(c->constvalue) == 0;
    default:
      return false;
  }
}

// Whether an expression is exactly "shard >= 0", as the extension installs
// it: a built-in integer comparison of the shard column with the constant 0.
// Judged by its shape, not by which functions it calls: a built-in such as
// query_to_xml runs any SQL.
bool IsShardAtLeastZero(const Node* node, AttrNumber shard) {
  if (node == nullptr || !IsA(node, OpExpr)) return false;
  const auto* op = reinterpret_cast<const OpExpr*>(node);
  if ((op->opfuncid != F_INT24GE && op->opfuncid != F_INT2GE && op->opfuncid != F_INT28GE) ||
      list_length(op->args) != 2)
    return false;
  const Node* left = static_cast<const Node*>(linitial(op->args));
  return IsA(left, Var) && reinterpret_cast<const Var*>(left)->varattno == shard &&
         IsZero(static_cast<const Node*>(lsecond(op->args)));
}

// Whether a CHECK constraint is the installed shard check: its name and
// the shape "shard >= 0" (an owner may have replaced it under the same
// name). The answer for the last expression seen is kept, by its text, so
// the table as installed does not parse it on every call.
bool IsInstalledShardCheck(const ConstrCheck& check, AttrNumber shard) {
  static char* seen = nullptr;
  static AttrNumber seen_shard = InvalidAttrNumber;
  static bool seen_answer = false;
  if (std::strcmp(check.ccname, kInstalledShardCheck) != 0) return false;
  if (seen != nullptr && seen_shard == shard && std::strcmp(seen, check.ccbin) == 0) return seen_answer;
  bool answer = IsShardAtLeastZero(static_cast<Node*>(stringToNode(check.ccbin)), shard);
  char* copy = MemoryContextStrdup(TopMemoryContext, check.ccbin);
  if (seen != nullptr) pfree(seen);
  seen = copy;
  seen_shard = shard;
  seen_answer = answer;
  return answer;
}

// Whether a column default is the shard's installed one: the constant 0,
// possibly cast to int2 by the built-in int4-to-int2 cast.
bool IsZeroDefault(const Node* node) {
  if (node != nullptr && IsA(node, FuncExpr)) {
    const auto* cast = reinterpret_cast<const FuncExpr*>(node);
    return cast->funcid == F_INT2_INT4 && list_length(cast->args) == 1 &&
           IsZero(static_cast<const Node*>(linitial(cast->args)));
  }
  return IsZero(node);
}

// Whether a state column whose type was changed is converted by the
// owner's cast (the statements read value, ts and prev with casts to their
// installed types, and write them back by assignment).
bool StateCastsRunOwnerCode(Relation rel, const StateColumns& c) {
  const struct {
    AttrNumber attnum;
    Oid installed;
  } columns[] = {{c.name, TEXTOID},          {c.key, TEXTOID},       {c.shard, INT2OID},
                 {c.value, FLOAT8OID},       {c.ts, TIMESTAMPTZOID}, {c.prev, FLOAT8OID},
                 {c.idle_at, TIMESTAMPTZOID}};
  for (const auto& column : columns)
    if (column.attnum != InvalidAttrNumber &&
        CastRunsOwnerCode(TupleDescAttr(RelationGetDescr(rel), column.attnum - 1)->atttypid,
                          column.installed))
      return true;
  return false;
}

}  // namespace

bool CastRunsOwnerCode(Oid from, Oid to) {
  if (from == to) return false;
  for (int direction = 0; direction < 2; ++direction) {
    HeapTuple tuple = SearchSysCache2(CASTSOURCETARGET, ObjectIdGetDatum(direction == 0 ? from : to),
                                      ObjectIdGetDatum(direction == 0 ? to : from));
    if (!HeapTupleIsValid(tuple)) continue;
    Oid function = reinterpret_cast<Form_pg_cast>(GETSTRUCT(tuple))->castfunc;
    ReleaseSysCache(tuple);
    if (function >= FirstNormalObjectId) return true;
  }
  return false;
}

bool ReadRunsOwnerCode(Relation rel, Oid statement_role) {
  Form_pg_class form = rel->rd_rel;
  // Policies apply unless the statement's role owns the table and they are
  // not forced.
  bool policies = form->relrowsecurity && (form->relforcerowsecurity || form->relowner != statement_role);
  if (policies || form->relhassubclass) return true;
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i)
    if (!TupleDescAttr(desc, i)->attisdropped && TupleDescAttr(desc, i)->atttypid >= FirstNormalObjectId)
      return true;
  return false;
}

namespace {

// The parts of a table the extension installed, which run none of the
// owner's code: its unique indexes as installed, and (the state table's)
// the shard column, whose CHECK (shard >= 0) and DEFAULT 0 are installed.
// The config tables' installed statement trigger calls the extension's own
// function (IsInstalledTrigger), on any table.
struct InstalledParts {
  Oid indexes[2];    // InvalidOid: none
  AttrNumber shard;  // InvalidAttrNumber: no installed CHECK or default
};

bool TriggerFiresFor(const Trigger& trigger, CmdType command) {
  switch (command) {
    case CMD_INSERT:
      return TRIGGER_FOR_INSERT(trigger.tgtype);
    case CMD_UPDATE:
      return TRIGGER_FOR_UPDATE(trigger.tgtype);
    case CMD_DELETE:
      return TRIGGER_FOR_DELETE(trigger.tgtype);
    default:
      return false;
  }
}

// Whether a trigger is one the extension installs on its config tables:
// for each statement, without WHEN, calling the extension's own function.
bool IsInstalledTrigger(const Trigger& trigger) {
  return !TRIGGER_FOR_ROW(trigger.tgtype) && trigger.tgqual == nullptr &&
         IsExtensionTriggerFunction(trigger.tgfoid);
}

// Whether the table has a trigger (other than an installed one, internal
// ones such as a foreign key's included) or a rule for `command`.
bool HasTriggerOrRuleFor(Relation rel, CmdType command) {
  const TriggerDesc* t = rel->trigdesc;
  if (t != nullptr)
    for (int i = 0; i < t->numtriggers; ++i)
      if (TriggerFiresFor(t->triggers[i], command) && !IsInstalledTrigger(t->triggers[i])) return true;
  if (rel->rd_rules != nullptr)
    for (int i = 0; i < rel->rd_rules->numLocks; ++i)
      if (rel->rd_rules->rules[i]->event == command) return true;
  return false;
}

// Whether a column default can run the owner's code: one on any column but
// the installed shard, or the shard's if it is not the installed constant 0.
bool DefaultsRunOwnerCode(const TupleConstr* constr, AttrNumber shard) {
  for (int i = 0; i < constr->num_defval; ++i) {
    const AttrDefault& def = constr->defval[i];
    if (shard == InvalidAttrNumber || def.adnum != shard ||
        !IsZeroDefault(static_cast<Node*>(stringToNode(def.adbin))))
      return true;
  }
  return false;
}

// Whether the table has an index other than the installed ones (an index
// replaced under an installed name is not one of them): its expressions,
// predicate and operators are functions.
bool HasOwnerIndexes(Relation rel, const InstalledParts& installed) {
  List* indexes = RelationGetIndexList(rel);
  bool owner_index = false;
  ListCell* cell;
  foreach (cell, indexes) {
    Oid index = lfirst_oid(cell);
    if (index != installed.indexes[0] && index != installed.indexes[1]) owner_index = true;
  }
  list_free(indexes);
  return owner_index;
}

// Whether a CHECK can run the owner's code: all but the installed shard check.
bool ChecksRunOwnerCode(const TupleConstr* constr, AttrNumber shard) {
  if (constr->num_check == 0) return false;
  return shard == InvalidAttrNumber || constr->num_check > 1 ||
         !IsInstalledShardCheck(constr->check[0], shard);
}

// Whether a new row version (insert or update) runs code the owner added:
// a CHECK other than the installed shard check, a column default other
// than the shard's (inserts), a stored generated column, an index other
// than the installed ones, or a partition constraint (the parent's key).
bool NewVersionRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  const TupleConstr* constr = RelationGetDescr(rel)->constr;
  if (rel->rd_rel->relispartition) return true;
  if (constr != nullptr) {
    if (constr->has_generated_stored) return true;
    if (command == CMD_INSERT && DefaultsRunOwnerCode(constr, installed.shard)) return true;
    if (ChecksRunOwnerCode(constr, installed.shard)) return true;
  }
  return HasOwnerIndexes(rel, installed);
}

// What a write (`command` not CMD_SELECT) on the table runs of the owner's
// beyond what a read does: the command's triggers and rules, and for
// inserts and updates what a new row version runs.
bool WriteRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  if (HasTriggerOrRuleFor(rel, command)) return true;
  return command != CMD_DELETE && NewVersionRunsOwnerCode(rel, command, installed);
}

// Whether a config table's column the statements compare or convert
// (name, key as text, config as jsonb) is converted by the owner's cast.
bool ConfigCastsRunOwnerCode(Relation rel) {
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    const char* column = NameStr(att->attname);
    Oid installed = std::strcmp(column, "config") == 0                                    ? JSONBOID
                    : std::strcmp(column, "name") == 0 || std::strcmp(column, "key") == 0 ? TEXTOID
                                                                                          : InvalidOid;
    if (OidIsValid(installed) && CastRunsOwnerCode(att->atttypid, installed)) return true;
  }
  return false;
}

}  // namespace

bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role) {
  Relation rel = table.rel;
  if (ReadRunsOwnerCode(rel, statement_role) || StateCastsRunOwnerCode(rel, table.columns)) return true;
  if (command == CMD_SELECT) return false;
  InstalledParts installed{{table.keyed_index, table.null_key_index}, table.columns.shard};
  return WriteRunsOwnerCode(rel, command, installed);
}

bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role) {
  if (ReadRunsOwnerCode(rel, statement_role) || ConfigCastsRunOwnerCode(rel)) return true;
  if (command == CMD_SELECT) return false;
  // The installed primary key: (name) of the definitions, (name, key) of
  // the overrides, named as PostgreSQL names a table's primary key.
  StateColumns c = FindColumns(rel);
  c.shard = InvalidAttrNumber;  // text columns only
  AttrNumber columns[] = {c.name, c.key};
  char* pkey = psprintf("%s_pkey", RelationGetRelationName(rel));
  InstalledParts installed{{InstalledIndex(rel, pkey, columns, keyed ? 2 : 1, c, false), InvalidOid},
                           InvalidAttrNumber};
  pfree(pkey);
  return WriteRunsOwnerCode(rel, command, installed);
}

namespace {

// Whether an INSERT of the table fires statement-level triggers or fills a
// transition table, which only the executor's ModifyTable node does: such
// a table gets its new rows through SQL.
bool HasStatementLevelInsertTriggers(Relation rel) {
  const TriggerDesc* t = rel->trigdesc;
  return t != nullptr &&
         (t->trig_insert_before_statement || t->trig_insert_after_statement || t->trig_insert_new_table);
}

// The same for a DELETE.
bool HasStatementLevelDeleteTriggers(Relation rel) {
  const TriggerDesc* t = rel->trigdesc;
  return t != nullptr &&
         (t->trig_delete_before_statement || t->trig_delete_after_statement || t->trig_delete_old_table);
}

}  // namespace

namespace {

// What a step derives from the locked table (a StateTable without its
// relation), and the generation (catalog.h) it was derived in.
struct TableShape {
  uint64 generation;  // 0: none
  Oid relid;
  bool deterministic;    // name and key compare by their bytes
  MemoryContext memory;  // holds facts.installed_check
  StateTable facts;
};
TableShape shape{};

// The installed shard check, prepared (as ExecRelCheck prepares a CHECK)
// in the shape's own memory, if it is the table's only CHECK; else nullptr.
ExprState* PrepareInstalledCheck(Relation rel, AttrNumber shard, MemoryContext memory) {
  const TupleConstr* constr = RelationGetDescr(rel)->constr;
  if (constr == nullptr || constr->num_check != 1 || !IsInstalledShardCheck(constr->check[0], shard) ||
      !compat::CheckEnforced(constr->check[0]) || compat::HasVirtualGeneratedColumns(constr))
    return nullptr;
  MemoryContext outer = MemoryContextSwitchTo(memory);
  auto* expr = static_cast<Expr*>(stringToNode(constr->check[0].ccbin));
  ExprState* prepared = ExecInitExpr(expression_planner(expr), nullptr);
  MemoryContextSwitchTo(outer);
  return prepared;
}

TableShape DeriveShape(Relation rel) {
  TableShape found{};
  found.relid = RelationGetRelid(rel);
  StateTable& t = found.facts;
  t.columns = FindColumns(rel);
  t.keyed_index = CheckedIndex(rel, kKeyedIndexName, t.columns, false);
  t.null_key_index = CheckedIndex(rel, kNullKeyIndexName, t.columns, true);
  found.deterministic = DeterministicIdentity(rel, t.columns);
  Form_pg_class form = rel->rd_rel;
  // Row security and inheritance children change what an SQL statement on
  // the table sees; a probe of the table's own index would not.
  t.direct_read = ColumnTypesAsInstalled(rel, t.columns) && OidIsValid(t.keyed_index) &&
                  OidIsValid(t.null_key_index) && !form->relrowsecurity && !form->relhassubclass;
  t.direct_write = t.direct_read && form->relkind == RELKIND_RELATION && rel->rd_rules == nullptr &&
                   !HasStatementLevelUpdateTriggers(rel);
  t.direct_insert = t.direct_write && !HasStatementLevelInsertTriggers(rel);
  t.direct_delete = t.direct_write && !HasStatementLevelDeleteTriggers(rel);
  found.memory =
      AllocSetContextCreate(CacheMemoryContext, "ratelimit state table shape", ALLOCSET_SMALL_SIZES);
  t.installed_check = PrepareInstalledCheck(rel, t.columns.shard, found.memory);
  return found;
}

// The shape of the (locked) table: derived in an earlier step unless an
// invalidation of the table or the probe indexes arrived since.
const TableShape& ShapeOf(Relation rel) {
  uint64 generation = StateTableGeneration();
  if (shape.generation == generation && shape.relid == RelationGetRelid(rel)) return shape;
  TableShape found = DeriveShape(rel);
  WatchStateTable(found.relid, found.facts.keyed_index, found.facts.null_key_index);
  // Opening the indexes may have processed an invalidation: remember the
  // shape only if none arrived meanwhile (the next step derives it again).
  found.generation = StateTableGeneration() == generation ? generation : 0;
  // A write of this transaction may still use the old shape's check (a
  // trigger's nested call derives the shape again while the outer write is
  // under way): its memory goes with the transaction.
  if (shape.memory != nullptr) MemoryContextSetParent(shape.memory, TopTransactionContext);
  shape = found;
  return shape;
}

}  // namespace

StateTable OpenStateTable(LOCKMODE mode) {
  Relation rel = table_open(LockCatalogRelation(StateTableOid, mode), NoLock);
  const TableShape& found = ShapeOf(rel);
  if (!found.deterministic)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ratelimit: the name and key columns of ratelimit_state must use a deterministic "
                           "collation"),
                    errdetail("Limits are told apart by the bytes of their name and key; a nondeterministic "
                              "collation would make two of them one row."),
                    errhint("ALTER TABLE ratelimit_state ALTER COLUMN ... TYPE text COLLATE \"C\".")));
  StateTable table = found.facts;
  table.rel = rel;
  return table;
}

void CloseStateTable(StateTable* table) {
  table_close(table->rel, NoLock);
  table->rel = nullptr;
}

void RaiseWriteSkipped() {
  ereport(ERROR,
          (errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
           errmsg("ratelimit: the write of a locked state row did not happen"),
           errdetail("A trigger, rule or row security policy on ratelimit_state skipped or hid the row."),
           errhint("Triggers on ratelimit_state must return NEW for its rows.")));
  pg_unreachable();
}

// Only a table inheriting from ratelimit_state can hold a second row of one
// limit's shard (the unique indexes cover ratelimit_state's own rows).
void RaiseDuplicateRows(const LimitId& id) {
  ereport(ERROR, (errcode(ERRCODE_CARDINALITY_VIOLATION),
                  errmsg("ratelimit: more than one state row for rate limit \"%.*s\" shard %d",
                         EchoLength(id.name, id.name_len), id.name, id.shard),
                  errdetail("A table inheriting from ratelimit_state holds a row of the same name, key and "
                            "shard as ratelimit_state or another child; a limit has one row per shard."),
                  errhint("Remove the duplicate row, or the inheritance.")));
  pg_unreachable();
}

}  // namespace ratelimit_pg
