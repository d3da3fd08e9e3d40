// Where the extension's relations are, and what the state table allows one
// step of a call: lock, then look. A step opens the table with the lock it
// needs (taking it processes the invalidations other sessions' DDL queued),
// then derives from the relcache entry everything that decides how it
// reads or writes: the columns and their types, the unique indexes it
// probes (installed_parts.h), rules, row security and the kind of relation.
//
// The relation's oid is a hint (catalog.h), checked again after the lock
// whenever an invalidation of that relation arrived (as
// RangeVarGetRelidExtended does). What is derived from the locked table
// (its columns, the probe indexes' shape, what the table allows) is kept
// for the state table generation it was derived in: any invalidation of
// the table or the indexes moves it, so the next step derives it again.
#include <initializer_list>

#include "storage/table/state_table.h"

#include "support/catalog.h"
#include "support/errors.h"
#include "support/owner_code.h"

extern "C" {
#include "access/table.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

constexpr const char* kStateTableName = "ratelimit_state";

// The relations the table storage watches (support/catalog.h): [0] the
// table's oid, looked up; [1] the table a shape was derived from; [2], [3]
// that shape's probe indexes. hint_generation: the generation the oid in
// [0] was looked up in.
RelationWatch state_watch{};
bool state_watch_registered = false;
uint64 hint_generation = 0;

RelationWatch& StateWatch() {
  if (!state_watch_registered) {
    RegisterRelationWatch(&state_watch);
    state_watch_registered = true;
  }
  return state_watch;
}

// The relations a shape was derived from: an invalidation of any of them
// moves the generation.
void WatchStateTable(Oid table, Oid keyed, Oid null_key) {
  RelationWatch& watch = StateWatch();
  watch.relids[1] = table;
  watch.relids[2] = keyed;
  watch.relids[3] = null_key;
}

constexpr const char* kKeyedIndexName = "ratelimit_state_name_key_shard";
constexpr const char* kNullKeyIndexName = "ratelimit_state_global";

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

// The state table's probe index, keyed or for the NULL key, if as installed.
Oid CheckedIndex(Relation rel, const char* name, const StateColumns& c, bool null_key) {
  AttrNumber keyed[] = {c.name, c.key, c.shard};
  AttrNumber global[] = {c.name, c.shard};
  const Oid families[] = {TEXT_BTREE_FAM_OID, TEXT_BTREE_FAM_OID, INTEGER_BTREE_FAM_OID};
  const Oid global_families[] = {TEXT_BTREE_FAM_OID, INTEGER_BTREE_FAM_OID};
  return null_key ? InstalledIndex(rel, name, global, global_families, 2, c.key)
                  : InstalledIndex(rel, name, keyed, families, 3, InvalidAttrNumber);
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

Oid StateTableOid() {
  RelationWatch& watch = StateWatch();
  if (OidIsValid(watch.relids[0]) && hint_generation == watch.generation) return watch.relids[0];
  uint64 generation = watch.generation;
  watch.relids[0] = RequireMemberRelation(kStateTableName);
  hint_generation = generation;
  return watch.relids[0];
}

uint64 StateTableGeneration() { return StateWatch().generation; }

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
